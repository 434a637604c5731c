"""End to end: one real daemon (``wrtfd run`` subprocess) records ACC broadcasting and EA SPORTS
WRC over loopback at the same time, each game in its own recording group with lap channels from
the oval's track file, while two ``wrtfd simulate`` subprocesses play the games:

* ACC: the simulator is the game's broadcasting server (``--listen``): the daemon's ``acc`` source
  registers with the password, gets the entry list and (late, on purpose) the track data and
  records the session; a second ``acc`` source with a wrong password is refused (counted, shown
  in status).
* WRC: the simulator sends ``session_update`` packets of the shipped structure for one stage.

The feeds run at twice real time (the games' own clocks carry simulated time, which is what the
lap and stage times are checked against).
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.e2e.test_daemon_harness import Daemon, free_port, run_cli, sessions_of, wait_for
from wrtfd.format import Reader

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
OVAL = REPO / "config" / "tracks" / "oval.trk"
SPEED = "2"
#: The simulated game answers the track data request this long (simulated seconds: 1 s of real
#: time) after the registration, well after the session's first frames (its tick grid is fixed
#: 0.5 s after its first sample): the session starts before its track is known, every time.
TRACK_DATA_DELAY = "2"
#: The recorder's wait for the track: long enough for a loaded machine (the header must have
#: the track whatever the order; docs/daemon.md, ACC).
INFO_WAIT_S = 20


def simulator(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "wrtfd", "simulate", "--track", str(OVAL), "--speed-scale", SPEED,
         "--json", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip


def text(raw: Any) -> str:
    return bytes(np.asarray(raw, dtype=np.uint8)).split(b"\x00", 1)[0].decode()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp_path = tmp_path_factory.mktemp("acc_wrc")
    acc_port, wrc_port = free_port(socket.SOCK_DGRAM), free_port(socket.SOCK_DGRAM)
    status_port = free_port()
    out = tmp_path / "rec"
    config = f"""
[[sources]]
kind = "acc"
name = "acc"
host = "127.0.0.1"
port = {acc_port}
password = "s3cret"
update_interval_ms = 50
track = "{OVAL}"
group = "acc"

[[sources]]
kind = "acc"
name = "acc_guest"
host = "127.0.0.1"
port = {acc_port}
password = "guess"
group = "guest"

[[sources]]
kind = "udp"
name = "wrc"
protocol = "wrc"
host = "127.0.0.1"
port = {wrc_port}
options = {{ structure = "wrc.json", packet = "session_update" }}
track = "{OVAL}"
group = "wrc"

[recorder]
output_dir = "{out}"
info_wait_s = {INFO_WAIT_S}
[status]
port = {status_port}
[logging]
format = "text"
"""
    acc_sim = simulator("--protocol", "acc", "--listen", f"127.0.0.1:{acc_port}", "--password", "s3cret",
                        "--laps", "1", "--wait", "60", "--track-data-delay", TRACK_DATA_DELAY)  # fmt: skip
    d = Daemon(tmp_path, config, status_port=status_port).start()
    try:
        d.wait_ready()
        wrc_sim = simulator("--protocol", "wrc", "--to", f"127.0.0.1:{wrc_port}")
        acc_out, acc_err = acc_sim.communicate(timeout=120)
        wrc_out, wrc_err = wrc_sim.communicate(timeout=120)
        assert acc_sim.returncode == 0, acc_err
        assert wrc_sim.returncode == 0, wrc_err
        acc, wrc = json.loads(acc_out), json.loads(wrc_out)
        wait_for(lambda: d.status()["sources"]["wrc"]["received"] == wrc["datagrams"], "every WRC datagram")
        status = wait_for(
            # everything the simulator sent but the refusals (those went to the guest)
            lambda: (
                (s := d.status())["sources"]["acc"]["received"]
                >= acc["datagrams"] - acc["registrations_refused"]
                and s
            ),
            "the ACC session received",
        )
        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 0, d.stderr
    finally:
        d.stop()
        acc_sim.kill()
    files = {}
    for path in sorted(out.glob("*.wrtf")):
        with Reader(path) as r:
            files[r.metadata["wrtfd.sources"]] = path
    return {"acc": acc, "wrc": wrc, "status": status, "files": files, "stderr": d.stderr}


def test_one_file_per_game_and_none_for_the_refused_client(recorded: dict[str, Any]) -> None:
    assert set(recorded["files"]) == {"acc", "wrc"}
    for path in recorded["files"].values():
        check = run_cli("validate", str(path))
        assert check.returncode == 0, check.stdout + check.stderr


def test_the_wrong_password_is_refused_and_shown(recorded: dict[str, Any]) -> None:
    assert recorded["acc"]["registrations_refused"] >= 1
    guest = recorded["status"]["sources"]["acc_guest"]
    assert guest["dropped"]["registration_refused"] >= 1 and guest["samples"] == 0
    assert "registration refused: Wrong connection password" in guest["detail"]
    assert "the game refused the registration" in recorded["stderr"]


def test_acc_session_entry_list_laps_and_events(recorded: dict[str, Any]) -> None:
    summary = recorded["acc"]
    assert summary["clients"] == 1  # the daemon's source; the guest was refused
    assert recorded["status"]["sources"]["acc"]["dropped_total"] == 0
    with Reader(recorded["files"]["acc"]) as r:
        assert len(r.sessions) == 1
        header = r.sessions[0].header
        assert text(header["track"]) == "Small oval track"
        assert text(header["session_type"]) == "race"
        # the simulator's car model 31 by its name, its driver from the entry list car message
        assert text(header["car"]) == "Audi R8 LMS GT3 Evo II #88"
        assert text(header["driver"]) == "Sim Driver"
        assert r.metadata["Track"] == "Small oval track"
        assert (r.metadata["Car"], r.metadata["Driver"]) == ("Audi R8 LMS GT3 Evo II #88", "Sim Driver")
        frames = r.frames(0)
        acc = frames["acc"]
        last = acc[-1]
        assert sorted(int(c) for c in last["all_car_index"][:4]) == [3, 7, 12, 25]
        assert int(last["all_car_index"][4]) == 0xFFFF
        lap_ms = round(summary["laps"][0]["time_s"] * 1000)
        assert abs(int(last["last_lap_ms"]) - lap_ms) <= 1
        assert abs(int(last["best_session_lap_ms"]) - lap_ms) <= 1  # the simulated car is fastest
        assert int(last["laps"]) == 1 and int(last["position"]) == 1
        sectors = [round(s * 1000) for s in summary["laps"][0]["sectors_s"]]
        assert abs(int(last["last_split1_ms"]) - sectors[0]) <= 1
        assert abs(int(last["last_split2_ms"]) - sectors[0] - sectors[1]) <= 1
        counts = [int(c) for c in last["event_counts"]]
        assert counts[1] == 1 and counts[2] == 1  # green flag, session over
        assert counts[5] >= 1 and counts[6] >= 1 and counts[7] >= 1  # lap completed, bests
        assert int(last["event_count"]) == len(summary["events"])
        # lap channels from the focused car's world positions and the oval's track file
        assert int(frames["laps"]["lap_number"].max()) == 2
        footer = r.sessions[0].footer
        assert footer is not None and int(footer["laps"]["lap_count"]) == 1


def test_wrc_stage_recorded(recorded: dict[str, Any]) -> None:
    summary = recorded["wrc"]
    assert summary["send_errors"] == 0
    assert recorded["status"]["sources"]["wrc"]["dropped_total"] == 0
    with Reader(recorded["files"]["wrc"]) as r:
        assert len(r.sessions) == 1
        header = r.sessions[0].header
        assert text(header["track"]) == "location 5 route 12" and text(header["car"]) == "vehicle 42"
        frames = r.frames(0)
        wrc = frames["wrc"]
        progress = wrc["stage_progress"]
        assert progress[0] == pytest.approx(0.0, abs=1e-3) and progress[-1] == 1.0
        assert np.all(np.diff(progress) >= 0)
        stage_s = summary["laps"][0]["end_s"] - 1.0  # the car launches 1 s into the run
        assert float(wrc["stage_result_time"][-1]) == pytest.approx(stage_s, abs=1e-3)
        assert int(wrc["stage_split_count"][-1]) == len(summary["laps"][0]["sectors_s"]) - 1
        assert int(frames["laps"]["lap_number"].max()) == 2
    # every datagram is in the file: a frame of its own, or sharing its tick (two a tick at twice
    # real time), none late or dropped
    (counters,) = [s["sources"]["wrc"] for s in sessions_of(recorded["files"]["wrc"])]
    assert counters["samples"] == summary["datagrams"]
    assert counters["ticks_emitted"] + counters["superseded"] == summary["datagrams"]
    assert counters["late"] == counters["dropped"] == 0
    assert counters["ticks_emitted"] >= 0.45 * summary["datagrams"]
