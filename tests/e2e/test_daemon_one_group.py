"""Two games' UDP feeds recorded into one group by the real daemon (``wrtfd run``), both sending
at once (``wrtfd simulate``, Forza and F1). The daemon reads each socket every 0.2 s at the same
step, so a step's intake holds 0.2 s of one source and then 0.2 s of the other. Taken as they
came, the first source's later samples closed the ticks of the other's earlier ones: 11 % of
Forza's and 29 % of F1's samples were dropped as late (bench/bench_daemon.py's config). The
scheduler now takes a batch in arrival order (docs/timing.md)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_daemon_harness import Daemon, free_port, udp_source, wait_for

OVAL = Path(__file__).resolve().parents[2] / "config" / "tracks" / "oval.trk"
SIMULATE = [sys.executable, "-m", "wrtfd", "simulate", "--track", str(OVAL), "--laps", "1"]


@pytest.mark.slow
def test_two_udp_sources_of_one_group_lose_no_sample(tmp_path: Path) -> None:
    forza_port, f1_port, status_port = free_port(socket.SOCK_DGRAM), free_port(socket.SOCK_DGRAM), free_port()
    config = (
        udp_source("forza", "forza", forza_port, 'group = "rig"\n')
        + udp_source("f1", "f1", f1_port, 'group = "rig"\n')
        + f'[recorder]\noutput_dir = "{tmp_path / "rec"}"\n'
        + f'[status]\nport = {status_port}\n[logging]\nformat = "text"\n'
    )
    d = Daemon(tmp_path, config, status_port=status_port, as_service=True).start()  # as the unit runs it
    try:
        d.wait_ready()
        sims = [
            subprocess.Popen(
                [*SIMULATE, "--protocol", name, "--to", f"127.0.0.1:{port}"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name, port in (("forza", forza_port), ("f1", f1_port))
        ]
        for sim in sims:
            _, stderr = sim.communicate(timeout=180)
            assert sim.returncode == 0, stderr
        wait_for(lambda: d.status()["sources"]["f1"]["samples"] > 0, "F1 samples")
        counters = d.status()["recorder"]["per_source"]
        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 0, d.stderr
    finally:
        d.stop()
    for name in ("forza", "f1"):
        c = counters[name]
        # A starved daemon may still find a few samples late (the tick window is 0.1 s); the
        # defect dropped a tenth of Forza's and a third of F1's.
        assert c["samples"] > 1000 and c["late"] <= c["samples"] // 100, (name, c)
