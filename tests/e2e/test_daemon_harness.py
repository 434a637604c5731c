"""Helpers for the daemon's end-to-end tests: a real ``wrtfd run`` subprocess on loopback ports.

(Named ``test_daemon_*`` to sit with the daemon's e2e tests; it defines no tests itself.)
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.priority import as_the_service

OVAL = Path(__file__).resolve().parents[2] / "config" / "tracks" / "oval.trk"
FORZA_FILE = Path("udp/forza_fm2023/fm2023_dash_331B_x1793.bin")
FORZA_SIZE = 331
#: Every wait in these tests is bounded by this (seconds); a hang fails instead of blocking CI.
WAIT_S = 20.0
#: ``[recorder]`` options of a daemon recording an accelerated simulator on the simulator's clock
#: (``clock = "source"``, docs/daemon.md). The timeline holds the jitter window before it runs on
#: without the source: at the default 0.1 s, a simulator stalled 0.2 s by a loaded test machine
#: re-anchors it and a lap comes out 0.1 s long (seen at three workers); half a second rides that out.
FOLLOW_SIMULATOR_JITTER_S = 0.5
FOLLOW_SIMULATOR = f'clock = "source"\njitter_s = {FOLLOW_SIMULATOR_JITTER_S}\n'
#: ``[sources.ubx]`` waits of a daemon setting up the simulated u-blox receiver (``wrtfd simulate
#: --pty``): 3 s for each answer, not the 1 s default: a busy test machine held the simulator's
#: answers up longer (an in-process test saw no MON-VER answer at any baud rate).
UBX_PATIENCE = "ack_timeout_s = 3.0\nprobe_timeout_s = 3.0\n"


#: Options of a ``struct`` source reading :func:`feed_records` (a custom feed with its own clock).
FEED_OPTIONS = """
[sources.options]
endian = "little"
length = 16
magic = "WR"
time_field = "t_ms"
time_unit = "ms"
fields = [
    { name = "magic", type = "char", count = 2, record = false },
    { name = "t_ms", type = "uint32", offset = 4 },
    { name = "rpm", type = "uint16", offset = 8, scale = 0.25 },
    { name = "speed", type = "float32", offset = 12 },
]
"""


def feed_records(n: int = 3000) -> list[bytes]:
    """Records of the ``struct`` feed of :data:`FEED_OPTIONS`, 20 ms apart on their own clock."""
    return [struct.pack("<2s2xIH2xf", b"WR", 20 * i, 4000, 10.0) for i in range(n)]


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def forza_datagrams(shared_data: Path) -> list[bytes]:
    raw = (shared_data / FORZA_FILE).read_bytes()
    return [raw[i : i + FORZA_SIZE] for i in range(0, len(raw) - FORZA_SIZE + 1, FORZA_SIZE)]


def f1_datagrams(shared_data: Path, year: int = 2023) -> list[bytes]:
    out = []
    for line in (shared_data / "udp" / "f1" / f"{year}.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        msg = json.loads(line)["message"]
        data = msg["data"] if isinstance(msg, dict) else msg
        out.append(bytes(data))
    return out


def send_paced(port: int, datagrams: list[bytes], rate_hz: float = 60.0) -> int:
    """Send like a game does: one datagram per 1/rate_hz (absolute schedule, no drift)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        start = time.monotonic()
        for i, d in enumerate(datagrams):
            s.sendto(d, ("127.0.0.1", port))
            delay = start + (i + 1) / rate_hz - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    return len(datagrams)


class BackgroundFeed:
    """Keeps sending ``datagrams`` (cycling) at ``rate_hz`` from a thread until stopped."""

    def __init__(self, port: int, datagrams: list[bytes], rate_hz: float = 60.0) -> None:
        self.port = port
        self.datagrams = datagrams
        self.rate_hz = rate_hz
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            start = time.monotonic()
            while not self._stop.is_set():
                s.sendto(self.datagrams[self.sent % len(self.datagrams)], ("127.0.0.1", self.port))
                self.sent += 1
                self._stop.wait(max(0.0, start + self.sent / self.rate_hz - time.monotonic()))

    def __enter__(self) -> BackgroundFeed:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


#: How often :func:`wait_for` asks (seconds). A daemon's ``/status`` costs it about 1 ms of CPU and
#: the test 0.3 ms: at 20 a second, the suite's waits cost as much CPU as a dozen tests.
POLL_S = 0.1


def wait_for(predicate: Callable[[], Any], what: str, timeout_s: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(POLL_S)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def udp_source(name: str, protocol: str, port: int, extra: str = "") -> str:
    return (
        f'[[sources]]\nkind = "udp"\nname = "{name}"\nprotocol = "{protocol}"\n'
        f'host = "127.0.0.1"\nport = {port}\n{extra}\n'
    )


class Daemon:
    """``python -m wrtfd run --config FILE`` as a subprocess; stderr collected line by line."""

    def __init__(
        self,
        tmp_path: Path,
        config_text: str | None,
        *,
        status_port: int | None,
        env: dict[str, str] | None = None,
        python: str = sys.executable,
        as_service: bool = False,
    ) -> None:
        """``config_text`` None: run without ``--config`` (the built-in default).

        ``python``: the interpreter that runs ``-m wrtfd`` (another venv's, for an install test).
        ``as_service``: at the unit's niceness (tests/priority.py), for a bound that holds on time.
        """
        self.as_service = as_service
        self.tmp_path = tmp_path
        self.python = python
        self.config_path = tmp_path / "wrtfd.toml"
        self.args = ["run"]
        if config_text is not None:
            self.config_path.write_text(config_text)
            self.args += ["--config", str(self.config_path)]
        self.status_port = status_port
        self.env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM")
        }
        self.env.update(env or {})
        self.lines: list[str] = []
        self.proc: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> Daemon:
        self.proc = subprocess.Popen(
            [self.python, "-m", "wrtfd", *self.args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
            cwd=self.tmp_path,
            preexec_fn=as_the_service if self.as_service else None,
        )
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        return self

    def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    @property
    def stderr(self) -> str:
        return "\n".join(self.lines)

    def wait_ready(self) -> dict[str, Any]:
        def ready() -> dict[str, Any] | None:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"daemon exited with {self.proc.returncode}: {self.stderr}")
            if not any("ready:" in ln for ln in self.lines):
                return None
            return self.status()

        return wait_for(ready, "the daemon to be ready")

    def get(self, path: str) -> tuple[int, str]:
        assert self.status_port is not None
        conn = http.client.HTTPConnection("127.0.0.1", self.status_port, timeout=5)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read().decode()
        finally:
            conn.close()

    def status(self) -> dict[str, Any]:
        code, body = self.get("/status")
        assert code == 200, body
        return dict(json.loads(body))

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def wait_exit(self, timeout_s: float = WAIT_S) -> int:
        assert self.proc is not None
        rc = self.proc.wait(timeout=timeout_s)
        if self._reader is not None:
            self._reader.join(timeout=5)
        return rc

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)


@dataclass(frozen=True)
class ForzaAndFeed:
    """A daemon's config and loopback ports: a Forza source (for ``wrtfd simulate``) and the
    ``struct`` feed of :data:`FEED_OPTIONS` (for :class:`BackgroundFeed`), recording to ``out``."""

    tmp_path: Path
    forza_port: int
    feed_port: int
    status_port: int
    out: Path
    config: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.status_port}"

    def daemon(self) -> Daemon:
        return Daemon(self.tmp_path, self.config, status_port=self.status_port)


def forza_and_feed(
    tmp_path: Path,
    *,
    forza: str,
    feed: str,
    recorder: str = "",
    status: str = "",
    log_format: str = "text",
    more: str = "",
) -> ForzaAndFeed:
    """The two-source setup of the status, mark and journal tests: ``forza`` and ``feed`` are each
    source's own options, ``recorder`` and ``status`` options added to those tables (after
    ``output_dir`` and ``port``), ``more`` tables after the rest."""
    forza_port, feed_port, status_port = (
        free_port(socket.SOCK_DGRAM),
        free_port(socket.SOCK_DGRAM),
        free_port(),
    )
    out = tmp_path / "rec"
    config = (
        udp_source("forza", "forza", forza_port, forza)
        + udp_source("feed", "struct", feed_port, feed)
        + FEED_OPTIONS
        + f'[recorder]\noutput_dir = "{out}"\n{recorder}'
        + f"[status]\nport = {status_port}\n{status}"
        + f'[logging]\nformat = "{log_format}"\n'
        + more
    )
    return ForzaAndFeed(tmp_path, forza_port, feed_port, status_port, out, config)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "wrtfd", *args], capture_output=True, text=True, timeout=60)


def record_simulation(
    tmp_path: Path,
    protocol: str,
    *simulate_args: str,
    source: str = "",
    recorder: str = "",
    more: str = "",
    rate_hz: int = 60,
) -> tuple[dict[str, Any], Path, str]:
    """A real daemon records ``wrtfd simulate --protocol PROTOCOL SIMULATE_ARGS --json`` over
    loopback UDP until it has read every datagram, then stops on SIGTERM.

    ``source`` and ``recorder`` are options added to those tables, ``more`` tables after the rest.
    Returns the simulator's summary, the recording directory and the daemon's log (stderr).
    """
    port, status_port = free_port(socket.SOCK_DGRAM), free_port()
    out = tmp_path / "rec"
    config = (
        udp_source(protocol, protocol, port, f"rcvbuf_bytes = 4194304\n{source}")
        + f'[recorder]\noutput_dir = "{out}"\nrate_hz = {rate_hz}\n{recorder}'
        + f'[status]\nport = {status_port}\n[logging]\nformat = "text"\n'
        + more
    )
    d = Daemon(tmp_path, config, status_port=status_port).start()
    try:
        d.wait_ready()
        sim = run_cli(
            "simulate", "--protocol", protocol, "--to", f"127.0.0.1:{port}", *simulate_args, "--json"
        )
        assert sim.returncode == 0, sim.stderr
        summary: dict[str, Any] = json.loads(sim.stdout)
        assert summary["send_errors"] == 0
        wait_for(
            lambda: d.status()["sources"][protocol]["received"] == summary["datagrams"],
            "every datagram read by the daemon",
        )
        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 0, d.stderr
    finally:
        d.stop()
    return summary, out, d.stderr


def recordings(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.wrtf"))


def sessions_of(path: Path) -> list[dict[str, Any]]:
    """Per session: frames, ticks, dropped ticks and per-source footer counters (plain values)."""
    from wrtfd.format import Reader

    out = []
    with Reader(path) as r:
        for i, s in enumerate(r.sessions):
            frames = r.frames(i)
            entry: dict[str, Any] = {
                "frame_count": int(s.frame_count),
                "frames_read": len(frames),
                "first_tick": int(s.first_tick) if s.first_tick is not None else None,
                "last_tick": int(s.last_tick) if s.last_tick is not None else None,
                "dropped_ticks": int(s.dropped_ticks),
                "sources": {},
            }
            if s.footer is not None:
                src = s.footer["sources"]
                for name in src.dtype.names:
                    entry["sources"][name] = {k: int(src[name][k]) for k in src[name].dtype.names}
            out.append(entry)
    return out
