"""End to end: ``wrtfd run`` (a real daemon subprocess) with ``track =`` on its Forza source records
the lap channels live while ``wrtfd simulate`` (another subprocess) drives two laps of the oval
over loopback UDP; the file's channels, its session footer and ``wrtfd laps`` agree with the
simulator's own lap times within one tick.

This is the real-time path, kept on purpose: the daemon's default clock (``arrival``) and the
game's own pace are what users get. The oval is the shortest shipped track (two laps take about
30 s). The accelerated tests (``test_simulate_laps.py``, ``test_daemon_journal.py``) run on the
game's clock (``recorder.clock = "source"``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.e2e.test_daemon_harness import record_simulation, recordings, run_cli
from wrtfd.format import Reader

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
OVAL = REPO / "config" / "tracks" / "oval.trk"
RATE_HZ = 60
TICK_S = 1 / RATE_HZ


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    tmp_path = tmp_path_factory.mktemp("daemon_laps")
    summary, out, _ = record_simulation(
        tmp_path,
        "forza",
        "--track",
        str(OVAL),
        "--laps",
        "2",
        "--seed",
        "5",
        source=f'track = "{OVAL}"\n',
        rate_hz=RATE_HZ,
    )
    files = recordings(out)
    assert len(files) == 1, files
    return summary, files[0]


def test_simulator_drove_two_laps(recorded: tuple[dict[str, Any], Path]) -> None:
    summary, _ = recorded
    assert [lap["lap"] for lap in summary["laps"]] == [1, 2]
    assert summary["best_lap_s"] == min(lap["time_s"] for lap in summary["laps"])


def test_lap_channels_recorded_live(recorded: tuple[dict[str, Any], Path]) -> None:
    summary, path = recorded
    with Reader(path) as r:
        assert r.complete
        assert r.metadata["Track"] == "Small oval track"
        assert set(r.schema.frame_dtype["laps"].names or ()) >= {
            "lap_number",
            "lap_distance",
            "sector",
            "lap_time",
        }
        frames = np.concatenate([r.frames(i) for i in range(len(r.sessions))])
    laps = frames["laps"]
    # lap 0 is the run to the line, 1 and 2 are timed, 3 starts when lap 2 ends
    assert set(np.unique(laps["lap_number"]).tolist()) == {0, 1, 2, 3}
    assert set(np.unique(laps["sector"]).tolist()) == {0, 1, 2}
    assert float(laps["lap_distance"].max()) <= summary["lap_length_m"]
    assert float(laps["lap_distance"].max()) > 0.95 * summary["lap_length_m"]
    # on the last frame of laps 1 and 2 the lap time is the simulator's lap time less the part of
    # a tick before the line (one tick), plus arrival jitter on this shared machine
    for ref in summary["laps"]:
        on_lap = np.flatnonzero(laps["lap_number"] == ref["lap"])
        assert np.all(np.diff(on_lap) == 1)  # one contiguous stretch per lap
        assert float(laps["lap_time"][on_lap[-1]]) == pytest.approx(ref["time_s"], abs=2 * TICK_S)
        assert float(laps["lap_time"][on_lap[0]]) < 2 * TICK_S


def test_session_footer_lap_count_and_best_lap(recorded: tuple[dict[str, Any], Path]) -> None:
    summary, path = recorded
    with Reader(path) as r:
        footers = [s.footer["laps"] for s in r.sessions if s.footer is not None]
    assert len(footers) == len(r.sessions)
    timed = [f for f in footers if int(f["lap_count"]) > 0]
    assert len(timed) == 1, footers  # every lap in one session (others: the menu before the start)
    best = min(summary["laps"], key=lambda lap: lap["time_s"])
    assert int(timed[0]["lap_count"]) == 2
    assert int(timed[0]["best_lap_ms"]) == pytest.approx(best["time_s"] * 1000, abs=1000 * TICK_S)
    assert int(timed[0]["best_lap_number"]) == best["lap"]


def test_wrtfd_laps_reads_the_recorded_channels(recorded: tuple[dict[str, Any], Path]) -> None:
    summary, path = recorded
    r = run_cli("laps", str(path), "--json")  # no --track: the live lap channels
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    laps = [lap for s in result["sessions"] for lap in s["laps"]]
    assert [lap["lap"] for lap in laps] == [1, 2]
    assert [lap["time_s"] for lap in laps] == pytest.approx(
        [lap["time_s"] for lap in summary["laps"]], abs=TICK_S
    )
    best = [s for s in result["sessions"] if s["best_lap"] is not None]
    assert len(best) == 1 and best[0]["best_lap_s"] == pytest.approx(summary["best_lap_s"], abs=TICK_S)
