"""End to end: one ``wrtfd run`` (a real daemon subprocess) records three ``wrtfd simulate``
subprocesses at once, each driving one lap of the oval over loopback UDP: Gran Turismo 7,
Project CARS 2 and Project CARS 1, each in its own recording group with lap channels from the
track file. GT7 runs through the heartbeat: the simulator plays a console that knows A, B and ~
(not C), and the daemon's source has to find the richest variant it answers. The recorded lap
agrees with the simulator's: within 3 ticks for GT7 (its packet id is the clock), within 0.25 s
for Project CARS (placed by arrival, which the sender's stalls on a busy machine move).
"""

from __future__ import annotations

import json
import select
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.e2e.test_daemon_harness import WAIT_S, Daemon, free_port, recordings, udp_source, wait_for
from wrtfd.format import Reader

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
OVAL = REPO / "config" / "tracks" / "oval.trk"
TICK_S = 1 / 60
GAMES = ("gt7", "pcars2", "pcars")


def simulator(protocol: str, *where: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "wrtfd", "simulate", "--protocol", protocol, "--track", str(OVAL), *where,
         "--laps", "1", "--seed", "6", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip


def console_listening(sim: subprocess.Popen[str]) -> None:
    """Wait (bounded) until the simulated console says it waits for heartbeats."""
    assert sim.stderr is not None
    ready, _, _ = select.select([sim.stderr], [], [], WAIT_S)
    assert ready, "the simulated console did not start"
    line = sim.stderr.readline()
    assert "waiting for a heartbeat" in line, line


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict[str, Any], Path, dict]]:
    """Per game: the simulator's summary, the one file of its group and its source's status."""
    tmp_path = tmp_path_factory.mktemp("gt7_pcars")
    console_port, receive_port, pc2_port, pc1_port = (free_port(socket.SOCK_DGRAM) for _ in range(4))
    status_port = free_port()
    out = tmp_path / "rec"
    sources = (
        f'[[sources]]\nkind = "gt7"\nname = "gt7"\nconsole = "127.0.0.1"\nconsole_port = {console_port}\n'
        f'host = "127.0.0.1"\nport = {receive_port}\nprobe_s = 1.0\nheartbeat_interval_s = 0.5\n'
        f'track = "{OVAL}"\nrcvbuf_bytes = 4194304\ngroup = "gt7"\n'
    )
    for name, port in (("pcars2", pc2_port), ("pcars", pc1_port)):
        sources += udp_source(
            name, name, port, f'track = "{OVAL}"\nrcvbuf_bytes = 4194304\ngroup = "{name}"\n'
        )
    config = (
        sources
        + f'[recorder]\noutput_dir = "{out}"\nrate_hz = 60\n'
        + f'[status]\nport = {status_port}\n[logging]\nformat = "text"\n'
    )
    # the console first: it must hear the daemon's first heartbeat (a C it does not know)
    sims = {"gt7": simulator("gt7", "--listen", f"127.0.0.1:{console_port}", "--gt7-variants", "AB~")}
    console_listening(sims["gt7"])
    d = Daemon(tmp_path, config, status_port=status_port).start()
    try:
        d.wait_ready()
        # the senders after the daemon: it must hear their first datagram
        sims["pcars2"] = simulator("pcars2", "--to", f"127.0.0.1:{pc2_port}")
        sims["pcars"] = simulator("pcars", "--to", f"127.0.0.1:{pc1_port}")
        summaries = {}
        for name, sim in sims.items():
            stdout, stderr = sim.communicate(timeout=120)
            assert sim.returncode == 0, stderr
            summaries[name] = json.loads(stdout)
            assert summaries[name]["send_errors"] == 0
        for name in GAMES:

            def all_read(n: str = name) -> bool:
                return bool(d.status()["sources"][n]["received"] >= summaries[n]["datagrams"])

            wait_for(all_read, f"every {name} datagram read")
        status = d.status()["sources"]
        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 0, d.stderr
    finally:
        d.stop()
        for sim in sims.values():
            if sim.poll() is None:
                sim.kill()
    files = {name: [f for f in recordings(out) if f"_{name}_" in f.name] for name in GAMES}
    assert all(len(found) == 1 for found in files.values()), files
    return {name: (summaries[name], files[name][0], status[name]) for name in GAMES}


def check_lap(path: Path, name: str, summary: dict[str, Any], tolerance_s: float) -> np.ndarray:
    """One timed lap in the file's lap channels and session footer, at the simulator's time."""
    (ref,) = summary["laps"]
    with Reader(path) as r:
        assert r.complete and r.metadata["Track"] == "Small oval track"
        frames = np.concatenate([r.frames(i) for i in range(len(r.sessions))])
        footers = [s.footer["laps"] for s in r.sessions if s.footer is not None]
    laps = frames["laps"]
    on_lap = np.flatnonzero(laps["lap_number"] == 1)
    assert len(on_lap) > 0 and np.all(np.diff(on_lap) == 1)
    assert float(laps["lap_time"][on_lap[-1]]) == pytest.approx(ref["time_s"], abs=tolerance_s)
    timed = [f for f in footers if int(f["lap_count"]) > 0]
    assert len(timed) == 1 and int(timed[0]["lap_count"]) == 1
    assert int(timed[0]["best_lap_ms"]) == pytest.approx(ref["time_s"] * 1000, abs=1000 * tolerance_s)
    return frames[name]


def test_gt7_heartbeat_source_finds_the_variant_and_records_the_lap(
    recorded: dict[str, tuple[dict[str, Any], Path, dict]],
) -> None:
    summary, path, status = recorded["gt7"]
    assert summary["streams"] == ["~"] and summary["ignored_heartbeats"] >= 1  # C was tried first
    assert status["dropped_total"] == 0 and status["samples"] == summary["datagrams"]
    assert "the console sends '~'" in status["detail"]
    block = check_lap(path, "gt7", summary, 3 * TICK_S)
    assert set(np.unique(block["packet_size"]).tolist()) == {344}
    assert bool(block["on_track"].any()) and float(block["speed"].max()) > 10.0


@pytest.mark.parametrize("protocol", ["pcars2", "pcars"])
def test_project_cars_records_the_lap(
    recorded: dict[str, tuple[dict[str, Any], Path, dict]], protocol: str
) -> None:
    summary, path, status = recorded[protocol]
    assert status["dropped_total"] == 0
    block = check_lap(path, protocol, summary, 0.25)
    assert float(np.nanmax(block["speed"])) > 10.0 and int(block["all_race_position"][:, 0].max()) == 1
    with Reader(path) as r:
        cars = {bytes(s.header["car"]).rstrip(b"\x00").decode() for s in r.sessions}
        tracks = {bytes(s.header["track"]).rstrip(b"\x00").decode() for s in r.sessions}
    assert "Simulated GT" in cars
    # the game's own track name (race definition / strings packet), in every session's header
    assert tracks == {"Small oval track"}
