"""sd_notify end to end: the daemon talks to a real unix datagram socket the test owns.

The watchdog must follow the pipeline: the writer thread is wedged for real through the
``WRTFD_DEBUG_WEDGE_FIFO`` hook (an ``open()`` of a FIFO nobody reads blocks in the kernel, like
a hung disk), and WATCHDOG=1 must stop while it is wedged and come back once it is not.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import time
from pathlib import Path

import pytest

from tests.e2e.test_daemon_harness import (
    BackgroundFeed,
    Daemon,
    forza_datagrams,
    free_port,
    udp_source,
    wait_for,
)

pytestmark = pytest.mark.slow


class NotifyListener:
    """The systemd side: a bound datagram socket collecting every message."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.setblocking(False)
        self.messages: list[str] = []

    def drain(self) -> list[str]:
        new = []
        while True:
            try:
                new.append(self.sock.recv(4096).decode())
            except BlockingIOError:
                break
        self.messages.extend(new)
        return new

    def count(self, key: str) -> int:
        self.drain()
        return sum(1 for m in self.messages for line in m.split("\n") if line.startswith(key))

    def close(self) -> None:
        self.sock.close()


def test_ready_watchdog_status_stopping_and_wedge(tmp_path: Path, shared_data: Path) -> None:
    listener = NotifyListener(tmp_path / "notify.sock")
    forza_port = free_port(socket.SOCK_DGRAM)
    fifo = tmp_path / "wedge.fifo"
    os.mkfifo(fifo)
    # a reader holds the FIFO open: the writer thread's open() returns at once (not wedged)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    status_port = free_port()
    config = (
        udp_source("forza", "forza", forza_port)
        + f'[recorder]\noutput_dir = "{tmp_path / "rec"}"\nfsync_interval_s = 0.2\n'
        + f"[status]\nport = {status_port}\n[daemon]\nstall_after_s = 0.5\n"
    )
    env = {
        "NOTIFY_SOCKET": str(listener.path),
        "WATCHDOG_USEC": "1000000",  # 1 s: the daemon beats every 0.25 s
        "WRTFD_DEBUG_WEDGE_FIFO": str(fifo),
    }
    d = Daemon(tmp_path, config, status_port=status_port, env=env).start()
    readers = [reader]
    try:
        d.wait_ready()
        wait_for(lambda: listener.count("READY=1") == 1, "READY=1")
        ready_msg = next(m for m in listener.messages if "READY=1" in m)
        assert "STATUS=1/1 sources up" in ready_msg
        # the game drives: the writer thread gets a batch every few tens of ms
        with BackgroundFeed(forza_port, forza_datagrams(shared_data)):
            wait_for(lambda: listener.count("WATCHDOG=1") >= 4, "periodic WATCHDOG=1")
            wait_for(lambda: listener.count("STATUS=") >= 2, "STATUS= updates")
            wait_for(lambda: d.status()["recorder"]["frames_written"] > 0, "frames written")
            assert d.status()["recorder"]["state"] == "ok"

            # wedge: nobody reads the FIFO any more, so the next open() in the writer thread blocks
            os.close(readers.pop())
            wait_for(lambda: d.status()["recorder"]["state"] == "stalled", "the recorder to count as stalled")
            code, body = d.get("/healthz")
            assert code == 503 and "recorder stalled" in body
            listener.drain()
            before = listener.count("WATCHDOG=1")
            time.sleep(1.5)  # an observation window: six beats would have pinged by now
            assert listener.count("WATCHDOG=1") == before, "WATCHDOG=1 sent while the writer was wedged"
            assert any("withholding the watchdog" in ln for ln in d.lines)

            # unwedge: a reader appears, the blocked open() returns, the pipeline moves again
            readers.append(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
            wait_for(lambda: listener.count("WATCHDOG=1") > before, "WATCHDOG=1 to resume")
            wait_for(lambda: d.status()["recorder"]["state"] == "ok", "the recorder to be ok again")

        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 0, d.stderr
        assert listener.count("STOPPING=1") == 1
    finally:
        d.stop()
        for fd in readers:
            os.close(fd)
        listener.close()


def test_journal_lines_and_rate_limited_drop_logs(tmp_path: Path) -> None:
    """No NOTIFY_SOCKET (runs anyway); journal-style lines; a flood of bad datagrams logs once."""
    status_port = free_port()
    forza_port = free_port(socket.SOCK_DGRAM)
    config = (
        udp_source("forza", "forza", forza_port)
        + f'[recorder]\noutput_dir = "{tmp_path / "rec"}"\n[status]\nport = {status_port}\n'
        + '[logging]\nformat = "journal"\nrepeat_interval_s = 60\n'
    )
    d = Daemon(tmp_path, config, status_port=status_port).start()
    try:
        d.wait_ready()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for burst in range(3):  # three bursts, seconds apart: three heartbeats see new drops
                for _ in range(20):
                    s.sendto(b"\x00" * 17, ("127.0.0.1", forza_port))
                n = 20 * (burst + 1)
                wait_for(lambda n=n: d.status()["sources"]["forza"]["dropped_total"] == n, "drops counted")  # type: ignore[misc]
                time.sleep(1.2)  # let a heartbeat pass between bursts
        d.signal(signal.SIGINT)
        assert d.wait_exit() == 0
    finally:
        d.stop()
    assert d.lines and all(re.match(r"^<[2-7]>wrtfd[.a-z_]*: ", ln) for ln in d.lines), d.stderr
    assert not any(re.search(r"\d{4}-\d\d-\d\dT", ln) for ln in d.lines)  # journald stamps the time
    drops = [ln for ln in d.lines if "source forza dropped" in ln]
    assert len(drops) == 1 and drops[0].startswith("<4>"), drops
