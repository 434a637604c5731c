"""Lap and sector detection: forward crossings count, reversing over the line does not."""

from __future__ import annotations

import math
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wrtfd.errors import TrackError
from wrtfd.tracks import LanePath, LapDetector, detect_laps, load_track, timing_sectors

DATA = Path(__file__).resolve().parent / "data"
SHIPPED = Path(__file__).resolve().parents[2] / "config" / "tracks"


@pytest.fixture(scope="module")
def mini() -> LanePath:
    return LanePath(load_track(DATA / "mini.trk"))


def drive(path: LanePath, distances: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions along the lane for unwrapped distances sampled every dt seconds."""
    pts = [path.point_at(float(s)) for s in distances]
    t = np.arange(len(distances)) * dt
    return t, np.array([p[0] for p in pts]), np.array([p[2] for p in pts])


def test_three_laps_at_constant_speed(mini: LanePath) -> None:
    speed, dt = 10.0, 0.05
    start = mini.length_m - 20.0  # 20 m behind the line
    s = start + speed * np.arange(0, (20 + 3 * mini.length_m + 15) / speed, dt)
    t, x, z = drive(mini, s, dt)
    laps, states = detect_laps(mini, t, x, z)
    assert [lap.number for lap in laps] == [1, 2, 3]
    # crossing times interpolate exactly on the straight through the line: 2 s to reach it
    assert laps[0].start_s == pytest.approx(2.0, abs=1e-9)
    for lap in laps:
        assert lap.time_s == pytest.approx(mini.length_m / speed, abs=1e-9)
    assert states[0].lap == 0 and states[-1].lap == 4
    assert max(st.lap for st in states) == 4


def test_sector_times_add_up(mini: LanePath) -> None:
    speed, dt = 12.0, 0.1
    s = mini.length_m - 5.0 + speed * np.arange(0, (2 * mini.length_m + 10) / speed, dt)
    t, x, z = drive(mini, s, dt)
    laps, states = detect_laps(mini, t, x, z, sectors_m=(0.0, 30.0, 80.0))
    assert len(laps) == 2
    for lap in laps:
        # sector boundaries at 30 m (end of first straight) and 80 m (on the right side straight)
        assert lap.sector_times_s == pytest.approx(
            (30 / speed, 50 / speed, (mini.length_m - 80) / speed), abs=1e-9
        )
        assert sum(lap.sector_times_s) == pytest.approx(lap.time_s, abs=1e-12)
    assert {st.sector for st in states} == {0, 1, 2}


def test_reversing_across_the_line_is_not_a_lap(mini: LanePath) -> None:
    det = LapDetector(mini)
    L = mini.length_m
    # approach, cross forwards (lap 1 starts), reverse back over it, cross forwards again, twice
    profile = [L - 10, L - 5, L - 1, 1, 4, 2, L - 2, L - 6, L - 1, 2, 6, L - 3, 3, 8]
    states = []
    for i, s in enumerate(profile):
        x, _, z = mini.point_at(s)
        states.append(det.update(float(i), x, z))
    assert [st.lap for st in states] == [0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
    assert det.laps == []
    assert all(st.completed is None for st in states)
    # the lap keeps the time of its first crossing (between samples 2 and 3 at s = L)
    assert states[-1].lap_time_s == pytest.approx(13 - 2.5, abs=1e-9)


def test_reverse_lap_in_the_wrong_direction_counts_nothing(mini: LanePath) -> None:
    # driving the whole loop backwards crosses the line twice but never forwards
    s = 20.0 - 8.0 * np.arange(0, 2 * mini.length_m / 8.0)
    t, x, z = drive(mini, s, 1.0)
    laps, states = detect_laps(mini, t, x, z)
    assert laps == [] and {st.lap for st in states} == {0}


def test_jump_abandons_the_lap(mini: LanePath) -> None:
    det = LapDetector(mini, max_speed_mps=50.0)
    L = mini.length_m
    seq = [(0.0, L - 5), (1.0, 5.0), (2.0, 15.0), (3.0, 80.0), (4.0, 85.0)]  # 65 m in 1 s: a reset
    for t, s in seq:
        x, _, z = mini.point_at(s)
        st = det.update(t, x, z)
    assert st.lap == 1 and det.laps == []
    # the next crossing starts timing again, the one after completes a lap
    t0 = 4.0
    for k, s in enumerate(np.arange(90.0, L + L + 5, 5.0)):
        x, _, z = mini.point_at(float(s))
        det.update(t0 + 0.5 * (k + 1), x, z)
    assert [lap.number for lap in det.laps] == [2]
    assert det.laps[0].time_s == pytest.approx(L / 10.0, abs=1e-9)


def test_timing_sectors_from_the_track() -> None:
    track = load_track(SHIPPED / "road.trk")
    path = LanePath(track)
    assert timing_sectors(track, path) == (0.0, 400.0, 800.0)
    mini_track = load_track(DATA / "mini.trk")
    mp = LanePath(mini_track)
    assert timing_sectors(mini_track, mp) == pytest.approx((0.0, mp.length_m / 3, 2 * mp.length_m / 3))


def test_bad_timing_sectors() -> None:
    from dataclasses import replace

    track = load_track(DATA / "mini.trk")
    bad = replace(track, extensions={"wrtfd": {"timing-sectors": [0, 50, 40]}})
    with pytest.raises(TrackError, match="timing-sectors"):
        timing_sectors(bad, LanePath(bad))


@settings(max_examples=40, deadline=None)
@given(
    start=st.floats(0.0, 0.999),
    steps=st.lists(st.floats(-4.0, 9.0), min_size=20, max_size=300),
)
def test_laps_count_only_new_forward_crossings(start: float, steps: list[float]) -> None:
    path = LanePath(load_track(DATA / "mini.trk"))
    L = path.length_m
    p = start * L
    progress = [p]
    for step in steps:
        p += step * 3.0  # up to 27 m forward or 12 m back per sample
        progress.append(p)
    det = LapDetector(path)
    for i, pr in enumerate(progress):
        x, _, z = path.point_at(pr)
        det.update(float(i), x, z)
    best = max(progress)
    lines = math.floor(best / L) - math.floor(progress[0] / L)
    assert len(det.laps) == max(0, lines - 1)
    # each lap starts where the previous ended
    for a, b in pairwise(det.laps):
        assert a.end_s == b.start_s and b.number == a.number + 1
