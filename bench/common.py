"""Helpers the daemon benchmarks share: a free loopback port, a process's CPU time from /proc."""

from __future__ import annotations

import os
import socket
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A port free on 127.0.0.1 now (``kind``: SOCK_STREAM or SOCK_DGRAM)."""
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_s(pid: int) -> float:
    """CPU seconds of process ``pid`` so far, all threads: utime + stime of /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK
