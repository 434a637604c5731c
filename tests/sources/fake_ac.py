"""A fake Assetto Corsa remote-telemetry server for the AC source tests (loopback UDP)."""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass, field

import anyio
import anyio.abc
import anyio.lowlevel


def _utf16(text: str) -> bytes:
    return (text + "\x00junk").encode("utf-16-le").ljust(100, b"\x00")[:100]


def response(car: str, track: str) -> bytes:
    return struct.pack(
        "<100s100sii100s100s", _utf16(car), _utf16("Test Driver"), 4242, 1, _utf16(track), _utf16("")
    )


@dataclass
class FakeAC:
    """Answers the handshake after ``ignore_first`` attempts; streams ``bursts`` of packets, one
    burst per subscription, then goes quiet (like a session ending)."""

    bursts: list[list[bytes]]
    tracks: list[str]
    ignore_first: int = 2
    pace_hz: float | None = None  # None: as fast as the loop allows
    ops: list[int] = field(default_factory=list)
    bad_requests: int = 0
    sock: socket.socket = field(default_factory=lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))

    def drain(self) -> None:
        """Read what the client sent while the server task was being cancelled, then close."""
        while True:
            try:
                data = self.sock.recv(64)
            except BlockingIOError:
                break
            self.ops.append(struct.unpack("<iii", data)[2])
        self.close()

    def close(self) -> None:
        self.sock.close()

    def __post_init__(self) -> None:
        self.sock.bind(("127.0.0.1", 0))
        self.sock.setblocking(False)

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    async def serve(self, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        handshakes = 0
        shaken: set[tuple[str, int]] = set()
        while True:
            await anyio.wait_readable(self.sock)
            data, client = self.sock.recvfrom(64)
            if len(data) != 12:
                self.bad_requests += 1
                continue
            _ident, version, op = struct.unpack("<iii", data)
            self.ops.append(op)
            if version != 1:
                self.bad_requests += 1
            elif op == 0:
                handshakes += 1
                if handshakes > self.ignore_first:
                    track = self.tracks[min(self.ops.count(1), len(self.tracks) - 1)]
                    self.sock.sendto(response("ks_audi_r8_lms", track), client)
                    shaken.add(client)
            elif op == 1 and client in shaken:
                shaken.discard(client)  # a new handshake is needed for the next subscription
                if self.bursts:
                    await self._stream(self.bursts.pop(0), client)

    async def _stream(self, burst: list[bytes], client: tuple[str, int]) -> None:
        t0 = time.monotonic()
        for i, packet in enumerate(burst):
            if self.pace_hz is None:
                await anyio.lowlevel.checkpoint()
            else:
                await anyio.sleep(max(0.0, t0 + i / self.pace_hz - time.monotonic()))
            self.sock.sendto(packet, client)
