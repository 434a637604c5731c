"""The car model: deterministic, grip-limited in arcs, brakes before them, sensible gears and rpm."""

from __future__ import annotations

import math
from itertools import pairwise
from pathlib import Path

import pytest

from wrtfd.simulate import CarSpec, Simulation
from wrtfd.tracks import LanePath, load_track, timing_sectors

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "tracks"


@pytest.fixture(scope="module")
def road() -> LanePath:
    return LanePath(load_track(SHIPPED / "road.trk"))


@pytest.fixture(scope="module")
def run(road: LanePath) -> tuple[Simulation, list]:
    track = load_track(SHIPPED / "road.trk")
    sim = Simulation(road, laps=2, rate_hz=60.0, seed=3, sectors_m=timing_sectors(track, road))
    return sim, list(sim.states())


def test_same_seed_same_run(road: LanePath, run: tuple[Simulation, list]) -> None:
    sim, states = run
    again = Simulation(road, laps=2, rate_hz=60.0, seed=3, sectors_m=sim.sectors_m)
    assert list(again.states()) == states
    other = Simulation(road, laps=2, rate_hz=60.0, seed=4, sectors_m=sim.sectors_m)
    list(other.states())
    assert [lap.time_s for lap in other.laps] != [lap.time_s for lap in sim.laps]


def test_laps_and_session_shape(run: tuple[Simulation, list]) -> None:
    sim, states = run
    assert [lap.number for lap in sim.laps] == [1, 2]
    for lap in sim.laps:
        assert 30.0 < lap.time_s < 60.0
        assert len(lap.sector_times_s) == 3 and sum(lap.sector_times_s) == pytest.approx(lap.time_s)
    assert not states[0].racing and not states[-1].racing  # menus before and after
    racing = [s for s in states if s.racing]
    assert racing[0].speed_mps < 1.0  # standing start
    assert racing[0].progress_m < 0  # behind the line
    assert all(b.progress_m >= a.progress_m for a, b in pairwise(racing))
    ticks = [b.t_s - a.t_s for a, b in pairwise(states)]
    assert max(ticks) == pytest.approx(1 / 60) and min(ticks) == pytest.approx(1 / 60)
    assert states[-1].best_lap_s == min(lap.time_s for lap in sim.laps)


def test_speed_limited_by_grip_in_arcs(road: LanePath, run: tuple[Simulation, list]) -> None:
    _, states = run
    spec = CarSpec()
    for s in states:
        k = abs(road.curvature_at(s.progress_m))
        if s.racing and k > 0:
            assert s.speed_mps <= math.sqrt(spec.max_lat_accel_mps2 * 1.011 / k) + 0.5
    # somewhere the car is faster than the tightest arc allows: it must brake before arcs
    assert max(s.brake for s in states) > 0.8
    tight = min(seg.radius_m for seg in road.segments if seg.kind == "arc")
    assert max(s.speed_mps for s in states) > 2 * math.sqrt(spec.max_lat_accel_mps2 * tight)


def test_braking_happens_before_each_arc(road: LanePath, run: tuple[Simulation, list]) -> None:
    _, states = run
    lap2 = [s for s in states if s.racing and s.lap == 2]
    for seg in road.segments:
        if seg.kind != "arc":
            continue
        before = [s for s in lap2 if seg.s0_m - 80.0 <= s.lap_distance_m < seg.s0_m]
        entry = min((s for s in lap2 if s.lap_distance_m >= seg.s0_m), key=lambda s: s.lap_distance_m)
        limit = math.sqrt(CarSpec().max_lat_accel_mps2 * 1.011 * seg.radius_m)
        assert entry.speed_mps <= limit + 0.5
        if before and max(s.speed_mps for s in before) > limit + 5:
            assert any(s.brake > 0.3 for s in before)


def test_gears_and_rpm_make_sense(run: tuple[Simulation, list]) -> None:
    _, states = run
    spec = CarSpec()
    racing = [s for s in states if s.racing and s.speed_mps > 5]
    assert {s.gear for s in racing} >= {1, 2, 3, 4}
    for s in racing:
        expected = (
            s.speed_mps
            / (2 * math.pi * spec.wheel_radius_m)
            * 60
            * spec.gear_ratios[s.gear - 1]
            * spec.final_drive
        )
        assert s.rpm == pytest.approx(min(spec.max_rpm, max(spec.idle_rpm, expected)), rel=1e-9)
        assert spec.idle_rpm <= s.rpm <= spec.max_rpm
        assert not (s.throttle > 0 and s.brake > 0)
    # faster means a higher (or equal) gear on average
    by_gear: dict[int, list[float]] = {}
    for s in racing:
        by_gear.setdefault(s.gear, []).append(s.speed_mps)
    means = [sum(v) / len(v) for _, v in sorted(by_gear.items())]
    assert means == sorted(means)


def test_invalid_arguments(road: LanePath) -> None:
    with pytest.raises(ValueError):
        Simulation(road, laps=0)
    with pytest.raises(ValueError):
        Simulation(road, rate_hz=0)


def test_a_track_the_car_cannot_climb_still_ends() -> None:
    from dataclasses import replace

    from wrtfd.tracks.build import DESIGNS, Straight, Turn, build_track

    # an oval whose 30 m straights climb and fall 300 m: a wall the car cannot drive up
    steep = replace(
        DESIGNS["oval"],
        pieces=(Straight(30.0, 300.0), Turn(18.0, 180.0), Straight(30.0, -300.0), Turn(18.0, 180.0)),
    )
    track, _ = build_track(steep)
    sim = Simulation(LanePath(track), laps=1, rate_hz=20.0)
    states = list(sim.states())
    assert sim.laps == [] and not states[-1].racing
    assert states[-1].t_s < 1000.0
