"""End to end: the live predictive delta recorded by a real ``wrtfd run`` (subprocess) while
``wrtfd simulate`` drives four laps of the road course over loopback UDP, ten times faster than
real time (``recorder.clock = "source"``).

The oracle is the simulator's own lap times (its ``--json`` summary), not the daemon's: at each
line crossing the file's ``laps.last_delta`` equals the lap's time minus the best earlier lap's,
and the lap's last frame has ``laps.delta`` (and ``laps.predicted``) within one tick of it.
A second daemon then drives against a lap of the first recording (``reference = FILE:LAP``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.e2e.test_daemon_harness import FOLLOW_SIMULATOR, record_simulation, recordings
from wrtfd.format import Reader

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
ROAD = REPO / "config" / "tracks" / "road.trk"
RATE_HZ = 60
TICK_S = 1 / RATE_HZ
SPEED_SCALE = 10.0


def drive(tmp_path: Path, seed: int, laps: int, extra: str = "") -> tuple[dict[str, Any], np.ndarray]:
    """Record ``laps`` simulated laps through a real daemon; the simulator's summary and the frames'
    lap channels (every session, in order)."""
    summary, out, _ = record_simulation(
        tmp_path,
        "forza",
        *("--track", str(ROAD), "--laps", str(laps), "--seed", str(seed), "--speed-scale", str(SPEED_SCALE)),
        source=f'track = "{ROAD}"\n{extra}',
        recorder=FOLLOW_SIMULATOR,
        rate_hz=RATE_HZ,
    )
    files = recordings(out)
    assert len(files) == 1, files
    with Reader(files[0]) as r:
        assert r.complete
        frames = np.concatenate([r.frames(i)["laps"] for i in range(len(r.sessions))])
    return summary, frames


def completions(laps: np.ndarray) -> dict[int, int]:
    """Lap number -> index of the frame on which it completed (the next lap's first frame)."""
    number = laps["lap_number"].astype(np.int64)
    return {
        int(number[i - 1]): int(i) for i in np.flatnonzero(np.diff(number) == 1) + 1 if number[i - 1] >= 1
    }


@pytest.fixture(scope="module")
def first(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], np.ndarray, Path]:
    tmp_path = tmp_path_factory.mktemp("delta")
    summary, laps = drive(tmp_path, seed=7, laps=4)
    return summary, laps, recordings(tmp_path / "rec")[0]


def test_simulator_laps_gain_and_lose(first: tuple[dict[str, Any], np.ndarray, Path]) -> None:
    """The seed gives laps both faster and slower than the best before them, by more than the
    tolerance (the other tests mean something)."""
    summary, _, _ = first
    times = [lap["time_s"] for lap in summary["laps"]]
    assert [lap["lap"] for lap in summary["laps"]] == [1, 2, 3, 4]
    diffs = [times[n] - min(times[:n]) for n in (1, 2, 3)]
    assert min(abs(x) for x in diffs) > 2 * TICK_S
    assert any(x < 0 for x in diffs) and any(x > 0 for x in diffs)


def test_delta_at_each_crossing_is_the_lap_time_difference(
    first: tuple[dict[str, Any], np.ndarray, Path],
) -> None:
    summary, laps, _ = first
    sim_times = {lap["lap"]: lap["time_s"] for lap in summary["laps"]}
    done = completions(laps)
    assert sorted(done) == [1, 2, 3, 4]
    # lap 1: nothing to compare with
    assert math.isnan(laps["last_delta"][done[1]]) and math.isnan(laps["delta"][done[1] - 1])
    assert np.isnan(laps["delta"][laps["lap_number"] <= 1]).all()
    for n in (2, 3, 4):
        best = min(sim_times[k] for k in range(1, n))
        want = sim_times[n] - best
        i = done[n]
        assert float(laps["last_delta"][i]) == pytest.approx(want, abs=TICK_S), n
        assert float(laps["delta"][i - 1]) == pytest.approx(want, abs=TICK_S), n  # the lap's last frame
        assert float(laps["predicted"][i - 1]) == pytest.approx(sim_times[n], abs=TICK_S), n
        # held until the next crossing
        assert float(laps["last_delta"][i + 10]) == float(laps["last_delta"][i])
        # the new lap starts level with its reference (by distance, at the line)
        assert abs(float(laps["delta"][i])) < TICK_S


def test_delta_sign_follows_the_reference(first: tuple[dict[str, Any], np.ndarray, Path]) -> None:
    """On a lap slower than its reference the delta ends positive (losing), faster negative."""
    summary, laps, _ = first
    sim_times = {lap["lap"]: lap["time_s"] for lap in summary["laps"]}
    done = completions(laps)
    for n in (2, 3, 4):
        best = min(sim_times[k] for k in range(1, n))
        end = float(laps["delta"][done[n] - 1])
        assert (end > 0) == (sim_times[n] > best), (n, end)


def test_file_reference(first: tuple[dict[str, Any], np.ndarray, Path], tmp_path: Path) -> None:
    """Another session against lap 2 of the first recording: every lap's delta is to that lap."""
    summary1, _, file = first
    ref_time = next(lap["time_s"] for lap in summary1["laps"] if lap["lap"] == 2)
    summary, laps = drive(tmp_path, seed=8, laps=2, extra=f'reference = "{file}:2"\n')
    sim_times = {lap["lap"]: lap["time_s"] for lap in summary["laps"]}
    done = completions(laps)
    assert sorted(done) == [1, 2]
    for n in (1, 2):
        want = sim_times[n] - ref_time
        assert float(laps["last_delta"][done[n]]) == pytest.approx(want, abs=TICK_S), n
        assert float(laps["delta"][done[n] - 1]) == pytest.approx(want, abs=TICK_S), n
    # lap 1 already has a delta (the file's lap), the run to the line (lap 0) none
    on_lap1 = laps["lap_number"] == 1
    assert np.isfinite(laps["delta"][on_lap1]).all()
    assert np.isnan(laps["delta"][laps["lap_number"] == 0]).all()
