"""The live view in Foxglove against the real daemon, fed by the simulator (issue 16, item 3).

A WebSocket client speaks the Foxglove protocol to ``wrtfd run`` (a subprocess) while ``wrtfd
simulate`` drives a car round the oval: it receives the advertisement, subscribes, decodes and
validates what arrives, and checks it against the file the daemon wrote. A client that never
reads must not slow the recording, and loses the oldest of its messages instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.daemon.foxglove_client import SUBPROTOCOL, Channel, channels_of, message_data, subscribe
from tests.e2e.test_daemon_harness import WAIT_S, Daemon, free_port, recordings, run_cli, udp_source, wait_for
from wrtfd.format import Reader

pytest.importorskip("foxglove", reason="the foxglove extra (foxglove-sdk) is not installed")
ws_sync = pytest.importorskip("websockets.sync.client")

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
OVAL = REPO / "config" / "tracks" / "oval.trk"


def _config(out: Path, udp: int, status: int, foxglove: str, rate_hz: int = 60) -> str:
    return (
        udp_source("forza", "forza", udp)
        + f'[recorder]\noutput_dir = "{out}"\nrate_hz = {rate_hz}\nsession_idle_s = 30\n'
        + "fsync_interval_s = 0.2\n"
        + f'[status]\nport = {status}\n[logging]\nformat = "text"\n[foxglove]\n{foxglove}\n'
    )


class Simulator:
    """``wrtfd simulate`` driving the oval, sending Forza's packets to ``port`` until stopped."""

    def __init__(self, port: int, rate_hz: int = 60) -> None:
        self.proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "wrtfd", "simulate", "--protocol", "forza", "--track", str(OVAL)),
                *("--to", f"127.0.0.1:{port}", "--laps", "20", "--rate", str(rate_hz)),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=REPO,
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)


@pytest.fixture
def ports() -> dict[str, int]:
    return {"udp": free_port(socket.SOCK_DGRAM), "status": free_port(), "foxglove": free_port()}


@pytest.fixture
def start_daemon(tmp_path: Path, ports: dict[str, int]) -> Iterator[Callable[..., Daemon]]:
    """Starts the daemon with ``[foxglove] port`` plus the given keys; killed at the end if still up."""
    started: list[Daemon] = []

    def start(foxglove_keys: str = "", rate_hz: int = 60) -> Daemon:
        keys = f"port = {ports['foxglove']}\n{foxglove_keys}"
        text = _config(tmp_path / "rec", ports["udp"], ports["status"], keys, rate_hz)
        started.append(Daemon(tmp_path, text, status_port=ports["status"]).start())
        return started[-1]

    yield start
    for d in started:
        d.stop()


def _connect(port: int, **kwargs: Any) -> Any:
    return ws_sync.connect(
        f"ws://127.0.0.1:{port}", subprotocols=[SUBPROTOCOL], proxy=None, open_timeout=WAIT_S, **kwargs
    )


def _handshake(ws: Any) -> dict[str, Channel]:
    info = json.loads(ws.recv(timeout=WAIT_S))
    assert info["op"] == "serverInfo" and info["name"] == "wrtfd"
    return channels_of(json.loads(ws.recv(timeout=WAIT_S)))


def _file_frames(out: Path) -> dict[tuple[int, int], tuple[int, np.void]]:
    """The one recording's frames: (session, tick) -> (time in us (N9), frame)."""
    (path,) = recordings(out)
    found = {}
    with Reader(path) as r:
        for s in r.sessions:
            frames = np.array(r.frames(s.index))
            for t_us, f in zip(r.frame_times_us(s.index).tolist(), frames, strict=True):
                found[(s.index, int(f["tick"]))] = (int(t_us), f)
    return found


def _stop(d: Daemon) -> None:
    d.signal(signal.SIGTERM)
    assert d.wait_exit() == 0, d.stderr


def test_a_foxglove_client_sees_the_simulated_car_live(
    start_daemon: Callable[..., Daemon], ports: dict[str, int], tmp_path: Path
) -> None:
    d = start_daemon("")
    fox = d.wait_ready()["foxglove"]
    assert fox["state"] == "listening" and fox["url"] == f"ws://127.0.0.1:{ports['foxglove']}"
    received: dict[int, list[tuple[int, dict[str, Any]]]] = {1: [], 2: []}
    with _connect(ports["foxglove"]) as ws:
        channels = _handshake(ws)
        assert channels["/forza"].schema_name == "wrtfd.forza"
        assert channels["/wrtfd/log"].schema_name == "foxglove.Log"
        subs = {1: channels["/forza"], 2: channels["/wrtfd/log"]}
        ws.send(subscribe(subs))
        wait_for(lambda: d.status()["foxglove"]["subscribed_clients"] == 1, "the subscription")
        sim = Simulator(ports["udp"])
        try:
            deadline = time.monotonic() + WAIT_S * 2
            while len(received[1]) < 80 and time.monotonic() < deadline:  # 4 s of frames at 20 Hz
                raw = ws.recv(timeout=WAIT_S)
                if isinstance(raw, bytes):
                    sub, t_ns, body = message_data(raw)
                    subs[sub].validator.validate(body)  # JSON per the advertised schema
                    received[sub].append((t_ns, body))
            offered = d.status()["foxglove"]["clients"]
        finally:
            sim.stop()
    assert len(received[1]) >= 80, f"only {len(received[1])} /forza messages"
    (client,) = offered.values()
    assert client["topics"] == ["/forza", "/wrtfd/log"] and client["messages_offered"] >= 80
    assert received[2][0][1]["message"] == "main: session 0 started (first)"

    speeds = np.array([b["speed"] for _, b in received[1]], dtype=np.float32)
    assert float(speeds.max() - speeds.min()) > 1.0, "the car's speed does not move"
    times = np.array([t for t, _ in received[1]], dtype=np.int64)
    assert np.all(np.diff(times) > 0)
    assert abs(float(np.median(np.diff(times))) - 50e6) < 20e3  # [foxglove] rate_hz: 20 Hz of frame time

    _stop(d)
    recorded = _file_frames(tmp_path / "rec")
    for t_ns, body in received[1]:
        # Every live message is a frame of the file (the simulator's game session changes after
        # its first second: a second session), with the frame's time (N9) and values.
        t_us, frame = recorded[(body["session"], body["tick"])]
        assert t_ns == t_us * 1000
        assert np.float32(body["speed"]) == frame["forza"]["speed"]
        assert body["gear"] == int(frame["forza"]["gear"])
    sessions = [m["message"].split(" (")[0] for _, m in received[2]]
    assert sessions[:2] == ["main: session 0 started", "main: session 0 ended"]


def _tcp_send_buffer_max() -> int:
    """The most the kernel buffers for one TCP sender (the server's socket grows to it)."""
    return int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2])


def test_a_client_that_never_reads_does_not_stall_recording(
    start_daemon: Callable[..., Daemon], ports: dict[str, int], tmp_path: Path
) -> None:
    """A client that stops reading: the recording goes on at its rate, the other client gets every
    frame, and the stalled one loses frames (the server drops its oldest queued messages) once the
    kernel's buffers for its connection are full."""
    rate = 480  # 480 Hz frames, all sent (no decimation): the kernel's buffers fill in seconds
    backlog = 512  # above the largest burst (a session's first half second arrives at once)
    d = start_daemon(f"rate_hz = {rate}\nclient_backlog = {backlog}", rate_hz=rate)
    d.wait_ready()
    stop = threading.Event()
    reader_ticks: list[tuple[int, int]] = []
    sizes: list[int] = []

    # The stalled client: a small receive buffer, and it stops reading the socket after two frames.
    raw_sock = socket.socket()
    raw_sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw_sock.settimeout(WAIT_S)
    raw_sock.connect(("127.0.0.1", ports["foxglove"]))
    with (
        _connect(ports["foxglove"]) as reader,
        _connect(ports["foxglove"], sock=raw_sock, max_queue=(2, 1)) as stalled,
    ):
        forza_r = _handshake(reader)["/forza"]
        forza_s = _handshake(stalled)["/forza"]
        reader.send(subscribe({1: forza_r}))
        stalled.send(subscribe({1: forza_s}))
        wait_for(lambda: d.status()["foxglove"]["subscribed_clients"] == 2, "two subscribed clients")

        def read() -> None:
            while not stop.is_set():
                try:
                    raw = reader.recv(timeout=0.5)
                except TimeoutError:
                    continue
                if isinstance(raw, bytes):
                    body = message_data(raw)[2]
                    reader_ticks.append((body["session"], body["tick"]))
                    sizes.append(len(raw))

        thread = threading.Thread(target=read, name="reading-client")
        thread.start()
        sim = Simulator(ports["udp"], rate)
        try:
            wait_for(lambda: d.status()["recorder"]["frames_written"] > 0 and sizes, "frames written")
            first = d.status()
            # Stall until the stalled client was offered well over what its connection can hold.
            holds = _tcp_send_buffer_max() + backlog * max(sizes)

            def offered_bytes() -> int:
                clients = d.status()["foxglove"]["clients"]
                return max(c["messages_offered"] for c in clients.values()) * (sum(sizes) // len(sizes))

            wait_for(lambda: offered_bytes() > 1.3 * holds, "the stalled client's buffers to fill", 90)
            last = d.status()
            written = last["recorder"]["frames_written"] - first["recorder"]["frames_written"]
            fps = written / (last["uptime_s"] - first["uptime_s"])
            assert fps > rate / 4, f"recording slowed to {fps:.1f} frames/s with a stalled client"
            offered = max(c["messages_offered"] for c in last["foxglove"]["clients"].values())
        finally:
            sim.stop()
            stop.set()
            thread.join(timeout=WAIT_S)
        # Now the stalled client reads what reached it.
        stalled_ticks: list[tuple[int, int]] = []
        with contextlib.suppress(TimeoutError):
            while True:
                raw = stalled.recv(timeout=2)
                if isinstance(raw, bytes):
                    body = message_data(raw)[2]
                    stalled_ticks.append((body["session"], body["tick"]))
    _stop(d)
    recorded = sorted(_file_frames(tmp_path / "rec"))  # (session, tick)
    # The reading client got every frame that was recorded while it read.
    lo, hi = reader_ticks[0], reader_ticks[-1]
    assert reader_ticks == [t for t in recorded if lo <= t <= hi]
    # The stalled one: fewer than it was offered, and a gap where its oldest queued ones were dropped.
    assert 0 < len(stalled_ticks) < offered
    window = [t for t in recorded if stalled_ticks[0] <= t <= stalled_ticks[-1]]
    missed = len(window) - len(set(stalled_ticks))
    assert missed > 0, f"no frames dropped for the stalled client ({len(stalled_ticks)} received)"
    assert stalled_ticks == sorted(stalled_ticks)  # what it gets stays in order


def test_foxglove_configured_without_the_extra_fails_at_config_time(tmp_path: Path) -> None:
    """``wrtfd run`` and ``wrtfd config check`` say which extra to install, in one line, exit 2."""
    hide = tmp_path / "no-foxglove"
    (hide / "foxglove").mkdir(parents=True)
    (hide / "foxglove" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'foxglove'\", name='foxglove')\n"
    )
    out = tmp_path / "rec"
    config = tmp_path / "wrtfd.toml"
    config.write_text(_config(out, free_port(socket.SOCK_DGRAM), free_port(), "port = 8765\n"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hide), str(REPO)])}
    for args in (["run", "--config", str(config)], ["config", "check", str(config)]):
        proc = subprocess.run(
            [sys.executable, "-m", "wrtfd", *args], capture_output=True, text=True, timeout=60, env=env
        )
        assert proc.returncode == 2, proc.stderr
        errors = [ln for ln in proc.stderr.splitlines() if "error" in ln.lower()]
        assert errors == [
            "wrtfd: error: [foxglove] (the live Foxglove server) needs foxglove: install wrtfd[foxglove]"
        ], proc.stderr
    assert not out.exists()  # nothing was created
    assert run_cli("config", "check", str(config)).returncode == 0  # with the extra: fine
