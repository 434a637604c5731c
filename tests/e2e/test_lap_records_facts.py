"""Lap validity and conditions in lap records end to end: a real daemon records ``wrtfd simulate
--invalid-lap 2`` (the game's current-lap-invalid flag set from half-way round lap 2) for F1
(sent) and ACC (the broadcasting server the daemon registers with); lap 2's record says
``valid: false``, the others ``true``, and each record's conditions are the weather and
temperatures the file holds over the lap's frames.
"""

from __future__ import annotations

import json
import signal
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_daemon_harness import (
    FOLLOW_SIMULATOR,
    Daemon,
    free_port,
    record_simulation,
    recordings,
    run_cli,
    wait_for,
)
from wrtfd.format import Reader

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
OVAL = REPO / "config" / "tracks" / "oval.trk"
RATE_HZ = 60
WEATHER = ("clear", "light cloud", "overcast", "light rain", "heavy rain", "storm")  # F1 Session spec


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_lap_the_game_marks_invalid_is_recorded_invalid(tmp_path: Path) -> None:
    _, out, log = record_simulation(
        tmp_path,
        "f1",
        *("--track", str(OVAL), "--laps", "3", "--speed-scale", "4", "--seed", "5", "--invalid-lap", "2"),
        source=f'track = "{OVAL}"\n',
        recorder=FOLLOW_SIMULATOR,
        rate_hz=RATE_HZ,
    )
    (path,) = recordings(out)
    records = _lines(out / "laps.jsonl")
    assert [r["lap"] for r in records][:3] == [1, 2, 3]
    # the simulator's truth: lap 2 invalid, every other lap valid (the game said so of each)
    assert [r["valid"] for r in records] == [r["lap"] != 2 for r in records]
    # the journal says so too, of lap 2 only
    said = [line for line in log.splitlines() if "invalid (the game says)" in line]
    assert len(said) == 1 and "lap 2 completed" in said[0], said
    _check_against_file(path, records, "f1")


def _check_against_file(path: Path, records: list[dict[str, Any]], source: str) -> None:
    """Each record's flag and conditions against the frames of its lap in the file."""
    with Reader(path) as r:
        sessions = [r.frames(i).copy() for i in range(len(r.sessions))]
    for rec in records:
        frames = sessions[rec["session"]]
        ticks = frames["tick"]
        rows = frames[source][(ticks >= rec["first_tick"]) & (ticks <= rec["last_tick"])]
        # most of the lap's ticks hold a frame: enough for the means below (a machine busy with the
        # rest of the suite delays some datagrams of the accelerated feed: dropped ticks, as it should)
        assert len(rows) > 0.5 * (rec["last_tick"] - rec["first_tick"] + 1)
        # the flag the file holds: up in lap 2 (from half-way), never up late in the valid laps
        late = rows["current_lap_invalid"][len(rows) // 4 :]
        assert bool(late.any()) is (rec["lap"] == 2)
        if source == "acc":
            want = {
                "air_temp_c": rows["ambient_temp"].mean(),
                "track_temp_c": rows["track_temp"].mean(),
                "clouds": rows["clouds"].mean(),
                "rain": rows["rain_level"].mean(),
                "wetness": rows["wetness"].mean(),
            }
            assert rec["conditions"] == {k: pytest.approx(float(v), abs=0.051) for k, v in want.items()}
            continue
        codes = set(rows["weather"].tolist())
        assert len(codes) == 1
        assert rec["conditions"] == {
            "air_temp_c": pytest.approx(float(rows["air_temperature"].mean()), abs=0.051),
            "track_temp_c": pytest.approx(float(rows["track_temperature"].mean()), abs=0.051),
            "weather": WEATHER[codes.pop()],
        }


def test_acc_a_lap_the_game_marks_invalid_is_recorded_invalid(tmp_path: Path) -> None:
    port, status_port = free_port(socket.SOCK_DGRAM), free_port()
    out = tmp_path / "rec"
    config = (
        f'[[sources]]\nkind = "acc"\nname = "acc"\nhost = "127.0.0.1"\nport = {port}\n'
        + f'password = "pw"\nupdate_interval_ms = 50\ntrack = "{OVAL}"\n'
        + f'[recorder]\noutput_dir = "{out}"\nrate_hz = {RATE_HZ}\n'
        + f'[status]\nport = {status_port}\n[logging]\nformat = "text"\n'
    )
    d = Daemon(tmp_path, config, status_port=status_port).start()
    try:
        d.wait_ready()
        sim = run_cli(
            *("simulate", "--protocol", "acc", "--track", str(OVAL), "--listen", f"127.0.0.1:{port}"),
            *("--password", "pw", "--laps", "3", "--speed-scale", "6", "--invalid-lap", "2", "--wait", "30"),
        )
        assert sim.returncode == 0, sim.stderr
        wait_for(lambda: len(_lines(out / "laps.jsonl")) >= 3, "three lap records")
        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 0, d.stderr
    finally:
        d.stop()
    (path,) = recordings(out)
    records = _lines(out / "laps.jsonl")
    assert [r["lap"] for r in records][:3] == [1, 2, 3]
    assert [r["valid"] for r in records] == [r["lap"] != 2 for r in records]
    _check_against_file(path, records, "acc")
