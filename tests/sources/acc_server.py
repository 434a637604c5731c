"""The simulator's ACC broadcasting server on a loopback socket, in the test's event loop.

It answers registrations (with the password check) and requests at once and, while a client is
registered, plays a simulated session ``speed`` times faster than real time.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from wrtfd.simulate import Simulation, TrackInfo
from wrtfd.simulate.acc import AccBroadcastServer
from wrtfd.simulate.car import CarState
from wrtfd.tracks import LanePath, load_track, timing_sectors

OVAL = Path(__file__).resolve().parents[2] / "config" / "tracks" / "oval.trk"


def oval_session(laps: int = 1, rate_hz: float = 60.0) -> tuple[TrackInfo, list[CarState]]:
    track = load_track(OVAL)
    path = LanePath(track)
    sectors = timing_sectors(track, path)
    sim = Simulation(path, laps=laps, rate_hz=rate_hz, seed=3, sectors_m=sectors)
    return TrackInfo(track.name, path.length_m, sectors, laps), list(sim.states())


@dataclass
class LoopbackAcc:
    password: str
    port: int = 0
    speed: float = 8.0
    laps: int = 1
    first_connection_id: int = 1
    ai_cars: int = 3
    register_times: list[float] = field(default_factory=list)
    received: list[bytes] = field(default_factory=list)
    sock: socket.socket = field(default_factory=lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
    ticks: int = 0
    finished: bool = False

    def __post_init__(self) -> None:
        self.sock.bind(("127.0.0.1", self.port))
        self.sock.setblocking(False)
        self.info, self.states = oval_session(self.laps)
        self.server = AccBroadcastServer(
            self.info,
            password=self.password,
            ai_cars=self.ai_cars,
            first_connection_id=self.first_connection_id,
        )

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.sock.getsockname()
        return str(host), int(port)

    def send(self, data: bytes, addr: Any) -> None:
        try:
            self.sock.sendto(data, addr)
        except OSError:
            pass

    def _drain(self) -> None:
        while True:
            try:
                data, addr = self.sock.recvfrom(4096)
            except (BlockingIOError, OSError):
                return
            self.received.append(data)
            if data[:1] == b"\x01":
                self.register_times.append(time.monotonic())
            for reply in self.server.handle(data, addr):
                self.send(reply, addr)

    async def serve(self, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        period = 1.0 / (60.0 * self.speed)
        next_t: float | None = None
        try:
            while True:
                wait = 0.05 if next_t is None else max(0.0, next_t - time.monotonic())
                with anyio.move_on_after(wait):
                    await anyio.wait_readable(self.sock)
                self._drain()
                if not self.server.clients or self.finished:
                    continue
                now = time.monotonic()
                next_t = now if next_t is None else next_t
                while now >= next_t and not self.finished:
                    last = self.ticks == len(self.states) - 1
                    for data, addr in self.server.tick(self.states[self.ticks], last=last):
                        self.send(data, addr)
                    self.ticks += 1
                    self.finished = last
                    next_t += period
        finally:
            self.sock.close()
