"""Lap records end to end: a real daemon records ``wrtfd simulate`` driving the oval; every line of
``<recordings>/laps.jsonl`` equals a lap that ``wrtfd laps --json --track`` finds in the file
(time, sectors, tick range), each lap once, none missing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_daemon_harness import FOLLOW_SIMULATOR, record_simulation, recordings, run_cli
from wrtfd.format import Reader

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
OVAL = REPO / "config" / "tracks" / "oval.trk"
RATE_HZ = 60


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_every_lap_of_the_file_is_one_record(tmp_path: Path) -> None:
    _, out, _ = record_simulation(
        tmp_path,
        "forza",
        *("--track", str(OVAL), "--laps", "3", "--speed-scale", "4", "--seed", "3"),
        source=f'track = "{OVAL}"\n',
        recorder=f'{FOLLOW_SIMULATOR}[recorder.metadata]\nDriver = "Ada"\n',
        rate_hz=RATE_HZ,
    )
    (path,) = recordings(out)
    records = _lines(out / "laps.jsonl")
    found = json.loads(run_cli("laps", str(path), "--track", str(OVAL), "--json").stdout)
    laps = [(s["session"], lap) for s in found["sessions"] for lap in s["laps"]]
    assert len(laps) >= 2
    assert [r["lap"] for r in records] == [lap["lap"] for _, lap in laps]
    assert len({r["id"] for r in records}) == len(records)
    with Reader(path) as r:
        starts = [s.time_base_us for s in r.sessions]
    for rec, (session, lap) in zip(records, laps, strict=True):
        assert rec["file"] == path.name and rec["session"] == session
        assert rec["session_start_us"] == starts[session]
        assert rec["time_s"] == pytest.approx(lap["time_s"], abs=1e-4)
        assert rec["start_s"] == pytest.approx(lap["start_s"], abs=1e-4)
        assert rec["sectors_s"] == pytest.approx(lap["sectors_s"], abs=1e-4)
        # the tick range: the first frame at or after the crossing, the last before the next
        assert rec["first_tick"] / RATE_HZ >= lap["start_s"] - 1e-6
        assert (rec["first_tick"] - 1) / RATE_HZ < lap["start_s"]
        assert (
            rec["last_tick"] / RATE_HZ < lap["end_s"]
            and (rec["last_tick"] + 1) / RATE_HZ >= lap["end_s"] - 1e-6
        )
        assert (rec["driver"], rec["track"]) == ("Ada", found["track"])
        assert rec["rig"] and rec["wrtfd"]
