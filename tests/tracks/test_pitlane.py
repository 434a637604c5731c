"""In-laps and out-laps from pit-lane lines, on the pure timer (docs/circuits.md, "Pit lane").

The car drives a circle of radius 100 m anticlockwise at 20 m/s (10 Hz fixes, no noise); the
start/finish line is the radial segment at angle 0, 30 m long, across the track and the pit
lane. The pit lane runs 10 m inside the track, so a lap through it is *shorter* than one on the
track: were it not left out, an in-lap would be the best lap. Pit lines are radial segments
across the pit lane only (r 87 to 93 m).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from wrtfd.tracks.circuit import Circuit, CircuitLine
from wrtfd.tracks.geodesy import LocalPlane
from wrtfd.tracks.gnsslaps import GnssLapChannels, GnssLapTimer, PlaneLine
from wrtfd.tracks.pitlane import PIT_ENTRY, PIT_EXIT, PitLane

R = 100.0
PIT_R = R - 10.0
SPEED = 20.0
HZ = 10.0


def radial(angle: float, r0: float, r1: float) -> PlaneLine:
    """A line across the circle at ``angle``, ordered so the anticlockwise car crosses it "right"."""
    c, s = math.cos(angle), math.sin(angle)
    return PlaneLine(r1 * c, r1 * s, r0 * c, r0 * s, 1)


START = radial(0.0, R - 15.0, R + 15.0)


def radius(theta: float, pits: list[tuple[float, float]]) -> float:
    """The car's distance from the centre at unwrapped angle ``theta``: in the pit lane between
    the two angles of a pit stretch (smooth ramps of 0.1 rad outside them)."""
    inside = 0.0
    for a, b in pits:
        if a - 0.1 < theta < b + 0.1:
            ramp = min(1.0, (theta - (a - 0.1)) / 0.1, ((b + 0.1) - theta) / 0.1)
            inside = max(inside, ramp)
    return R - (R - PIT_R) * inside


def drive(laps: int, pits: list[tuple[float, float]], stop: tuple[float, float] | None = None) -> np.ndarray:
    """Fixes ``(t, x, y)`` from angle -0.5 rad (before the line) round ``laps`` laps and a bit;
    ``stop``: (angle, seconds) the car stands still there (a pit stop)."""
    out = []
    t, theta = 0.0, -0.5
    stopped = False
    end = 2 * math.pi * laps + 0.5
    while theta < end:
        r = radius(theta, pits)
        out.append((t, r * math.cos(theta), r * math.sin(theta)))
        if stop is not None and not stopped and theta >= stop[0]:
            stopped = True
            for k in range(1, int(stop[1] * HZ) + 1):
                out.append((t + k / HZ, r * math.cos(theta), r * math.sin(theta)))
            t += stop[1]
        t += 1.0 / HZ
        theta += SPEED / HZ / r
    return np.array(out)


def laps_of(fixes: np.ndarray, pit: PitLane | None) -> GnssLapTimer:
    timer = GnssLapTimer(START, pit=pit)
    for t, x, y in fixes:
        timer.update(float(t), float(x), float(y))
    return timer


def pit_lines(entry: float, exit_: float) -> PitLane:
    return PitLane(radial(entry, PIT_R - 3.0, PIT_R + 3.0), radial(exit_, PIT_R - 3.0, PIT_R + 3.0))


TWO_PI = 2 * math.pi


@pytest.mark.parametrize("stop_s", [None, 20.0], ids=["drive-through", "stop"])
def test_pit_exit_after_the_line_in_lap_then_out_lap(stop_s: float | None) -> None:
    """Entry 0.3 rad before the line, exit 0.3 rad after it: the lap that ends in the pit lane is
    the in-lap, the next (it begins there) the out-lap; a drive-through the same as a stop."""
    pits = [(TWO_PI * 2 - 0.3, TWO_PI * 2 + 0.3)]  # at the end of lap 2
    stop = None if stop_s is None else (TWO_PI * 2 + 0.1, stop_s)
    timer = laps_of(drive(4, pits, stop), pit_lines(-0.3, 0.3))
    assert [lap.number for lap in timer.laps] == [1, 2, 3, 4]
    assert [lap.pit for lap in timer.laps] == [None, "in", "out", None]
    # lap 2 through the shorter pit lane is faster than the track laps when driven through
    flying = TWO_PI * R / SPEED
    if stop_s is None:
        assert timer.laps[1].time_s < timer.laps[0].time_s - 0.1
    else:
        assert timer.laps[2].time_s > flying + stop_s - 1.0  # the stop is in the out-lap
    best = timer.best_lap
    assert best is not None and best.pit is None and best.number in (1, 4)
    # the same drive on a circuit without pit lines: the same laps, none flagged (as before)
    plain = laps_of(drive(4, pits, stop), None)
    assert [(lap.number, lap.pit) for lap in plain.laps] == [(n, None) for n in (1, 2, 3, 4)]
    assert [lap.time_s for lap in plain.laps] == pytest.approx([lap.time_s for lap in timer.laps], abs=1e-9)
    # ... where a lap through the shorter pit lane would have been the best
    assert plain.best_lap is not None and plain.best_lap.number in ((2, 3) if stop_s is None else (2,))


@pytest.mark.parametrize("stop_s", [None, 20.0], ids=["drive-through", "stop"])
def test_pit_exit_before_the_line_one_in_out_lap(stop_s: float | None) -> None:
    """Entry 0.5 rad and exit 0.15 rad before the line: the whole stop is inside one lap, which is
    both an in-lap and an out-lap; the lap after it starts on the track and is not flagged."""
    pits = [(TWO_PI * 2 - 0.5, TWO_PI * 2 - 0.15)]
    stop = None if stop_s is None else (TWO_PI * 2 - 0.3, stop_s)
    timer = laps_of(drive(4, pits, stop), pit_lines(-0.5, -0.15))
    assert [lap.pit for lap in timer.laps] == [None, "in-out", None, None]
    best = timer.best_lap
    assert best is not None and best.pit is None


def test_a_line_that_does_not_span_the_pit_lane_makes_one_long_in_out_lap() -> None:
    """The start/finish line across the track only (r 95 to 115 m) and the pit lane beside it:
    the car in the pit lane never crosses it, so one lap runs from the line before the pit lane
    to the line after, two rounds, and holds both the entry and the exit."""
    timer = GnssLapTimer(radial(0.0, R - 5.0, R + 15.0), pit=pit_lines(-0.3, 0.3))
    for t, x, y in drive(4, [(TWO_PI * 2 - 0.3, TWO_PI * 2 + 0.3)]):
        timer.update(float(t), float(x), float(y))
    assert [(lap.number, lap.pit) for lap in timer.laps] == [(1, None), (2, "in-out"), (3, None)]
    assert timer.laps[1].time_s > 1.9 * TWO_PI * R / SPEED


def test_out_lap_straight_back_in_and_a_wrong_way_pit_line() -> None:
    """In at the end of lap 1, out after the line, and back in at the end of lap 2: lap 2 is an
    out-lap and an in-lap. A car crossing a pit line the wrong way does not count."""
    pits = [(TWO_PI - 0.3, TWO_PI + 0.3), (TWO_PI * 2 - 0.3, TWO_PI * 2 + 0.3)]
    timer = laps_of(drive(3, pits), pit_lines(-0.3, 0.3))
    assert [lap.pit for lap in timer.laps] == ["in", "in-out", "out"]
    # the entry line laid the other way round: the car crosses it backwards, never "in"
    c, s = math.cos(-0.3), math.sin(-0.3)
    backwards = PlaneLine((PIT_R - 3) * c, (PIT_R - 3) * s, (PIT_R + 3) * c, (PIT_R + 3) * s, 1)
    timer = laps_of(drive(3, pits[1:]), PitLane(backwards, None))
    assert [lap.pit for lap in timer.laps] == [None, None, None]


def test_a_session_reset_forgets_the_pit_lane() -> None:
    """A session that ends in the pit lane: the next session's first lap is not an out-lap."""
    pit = pit_lines(-0.3, 1.0)  # the exit beyond where the drive ends
    timer = GnssLapTimer(START, pit=pit)
    for t, x, y in drive(2, [(TWO_PI * 2 - 0.3, TWO_PI * 2 + 1.0)]):
        timer.update(float(t), float(x), float(y))
    assert pit.in_pit
    timer.reset()
    assert not pit.in_pit
    for t, x, y in drive(2, []):
        timer.update(float(t), float(x), float(y))
    assert [lap.pit for lap in timer.laps] == [None, None]


def test_the_plug_in_never_makes_a_pit_lap_the_best_or_the_reference() -> None:
    """Through the recorder's plug-in, on the globe: the circle's lines as a circuit file's (in a
    plane 44.9 N 2.5 E), a drive-through at the end of lap 2. Laps 2 and 3 are the fastest (the
    pit lane is shorter) and flagged; the best lap, the footer's and the delta's session
    reference are a lap on the track; the page's last lap says when it was an in-lap."""
    globe = LocalPlane(44.9, 2.5)

    def on_globe(line: PlaneLine) -> CircuitLine:
        a, b = globe.to_latlon(line.ax, line.ay), globe.to_latlon(line.bx, line.by)
        return CircuitLine((float(a[0]), float(a[1])), (float(b[0]), float(b[1])))

    pit = pit_lines(-0.3, 0.3)
    entry, exit_ = pit.lines[PIT_ENTRY], pit.lines[PIT_EXIT]
    circuit = Circuit("Circle", on_globe(START), pit_entry=on_globe(entry), pit_exit=on_globe(exit_))
    plug = GnssLapChannels(circuit, source="gps")
    fixes = drive(4, [(TWO_PI * 2 - 0.3, TWO_PI * 2 + 0.3)])
    lat, lon = globe.to_latlon(fixes[:, 1], fixes[:, 2])
    shown = {}
    for (t, _, _), la, lo in zip(fixes, lat, lon, strict=True):
        st = plug.feed(float(t), float(la), float(lo))
        if st is not None and st.completed is not None:
            shown[st.completed.number] = plug.live()["last"]
    assert [(lap.number, lap.pit) for lap in plug.laps] == [(1, None), (2, "in"), (3, "out"), (4, None)]
    fastest = min(plug.laps, key=lambda lap: lap.time_s)
    assert fastest.pit is not None  # were they not left out, a pit lap would be the best
    assert plug.best_lap is not None and plug.best_lap.number in (1, 4)
    assert plug.summary()["best_lap_number"] == plug.best_lap.number
    ref = plug.delta.reference
    assert ref is not None and ref.number in (1, 4)
    assert [shown[n].get("pit") for n in (1, 2, 3, 4)] == [None, "in", "out", None]
