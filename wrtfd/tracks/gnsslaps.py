"""Lap and sector timing from GNSS fixes against a circuit's lines (pure: no I/O, no clock).

Fixes are projected into the circuit's local plane (metres). When the receiver reports its
velocity (NAV-PVT's velN/velE, NMEA's speed and course), positions are smoothed by a small
Kalman filter that predicts each fix from the previous one and the Doppler velocity: a receiver's
velocity is good to a few cm/s while a single position is off by a metre or more, so the
smoothed path crosses the line within a few milliseconds of the true time even at 20 m/s with
metres of noise. Without velocity the raw fixes are used. Live the filter runs forward, and each
line crossing is timed again ``refine_lag_s`` later from the filter's states over the fixes since,
smoothed backward (fixed-lag smoothing: the lap shown at the line, then its refined time); after
the session :meth:`GnssLapTimer.smooth` runs it both ways over every fix (docs/circuits.md).

A lap is a crossing of the start/finish *segment* in the driving direction, its time interpolated
linearly between the two (smoothed) fixes either side. Rules, as in :mod:`wrtfd.tracks.laps`:

- a crossing counts only after ``min_lap_m`` travelled since the previous one, so noise on the
  line (or a car stopped on it) never counts twice; crossings the wrong way never count;
- a jump (faster than ``max_speed_mps`` between fixes, beyond ``min_jump_m``) or a lost fix
  (no fix for ``max_gap_s``) abandons the lap in progress: it is not timed, and timing restarts
  at the next crossing;
- sector lines count in driving order; a lap whose sector lines were not all crossed in order is
  still timed, without sector times.

Lap distance is the distance travelled since the line (the integral of speed when the receiver
reports it, else the sum of steps between fixes), which is what a predictive delta by distance
needs; each lap's (distance, time) trace is kept for the best and the last lap. The plug-in
(:class:`GnssLapChannels`) records the live delta (:mod:`wrtfd.tracks.delta`) from it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from wrtfd.errors import TrackError
from wrtfd.tracks.circuit import (
    Circuit,
    CircuitLine,
    circuit_metadata,
    circuits_in,
    laid_circuit,
    laid_line_note,
    line_across,
    pick_circuit,
)
from wrtfd.tracks.delta import PredictiveDelta, Reference
from wrtfd.tracks.geodesy import LocalPlane
from wrtfd.tracks.laps import Lap, LapState
from wrtfd.tracks.pitlane import PitLane, racing_laps

__all__ = [
    "DOPPLER_VELOCITY_NOISE_MPS",
    "NO_FIX",
    "REFINE_LAG_S",
    "GnssFields",
    "GnssLapChannels",
    "GnssLapTimer",
    "PlaneLine",
    "find_gnss_source",
    "gnss_session_laps",
    "has_gnss",
    "nearest_circuit",
    "pit_lane",
    "plane_lines",
    "timer_for",
]


@dataclass(frozen=True, slots=True)
class PlaneLine:
    """A timing line in plane metres; ``sign`` +1: the car drives along ``(b - a)`` turned right,
    -1: turned left, 0: learnt from the first crossing."""

    ax: float
    ay: float
    bx: float
    by: float
    sign: int = 1

    def crossing(self, x0: float, y0: float, x1: float, y1: float) -> tuple[float, int] | None:
        """Where the step (x0, y0) -> (x1, y1) crosses the segment: the fraction of the step and
        the crossing's direction (+1 along the driving normal of ``"right"``), or None."""
        dx, dy = self.bx - self.ax, self.by - self.ay
        s0 = dy * (x0 - self.ax) - dx * (y0 - self.ay)  # > 0: right of a -> b
        s1 = dy * (x1 - self.ax) - dx * (y1 - self.ay)
        if (s0 < 0.0) == (s1 < 0.0) or s0 == s1:
            return None
        f = s0 / (s0 - s1)
        qx, qy = x0 + f * (x1 - x0), y0 + f * (y1 - y0)
        w = ((qx - self.ax) * dx + (qy - self.ay) * dy) / (dx * dx + dy * dy)
        if not 0.0 <= w <= 1.0:
            return None
        return f, (1 if s1 > s0 else -1)


#: What a velocity may change between two fixes beyond ``max_accel_mps2`` (the receivers' noise).
VELOCITY_SLACK_MPS = 2.0

#: The fixes' mean disagreement with the filter's prediction (an exponential average over
#: :data:`BIAS_TIME_S`) beyond which the velocity is wrong (a bias, a turned course) and the
#: filter starts again at the fix. Noise averages out of the mean (3 m of white noise at 10 Hz:
#: about 0.5 m). A filter a few metres off along the track still times laps (both lines move
#: alike): the limit is where laps were lost, measured in docs/circuits.md.
BIAS_LIMIT_M = 25.0
BIAS_TIME_S = 2.0
#: After this many such restarts within :data:`WRONG_VELOCITY_WINDOW_S` the receiver's velocity
#: is wrong all the time: it is ignored for the rest of the session (the fixes alone).
WRONG_VELOCITY_RESTARTS = 3
WRONG_VELOCITY_WINDOW_S = 60.0
#: What the plug-in's listeners are told then (the journal: "source gps: circuit NAME ...").
VELOCITY_DROPPED = (
    f"timed from the fixes alone for the rest of the session: the receiver's velocity led the "
    f"filter {BIAS_LIMIT_M:.0f} m from them {WRONG_VELOCITY_RESTARTS} times within "
    f"{WRONG_VELOCITY_WINDOW_S:.0f} s (the lap in progress is not timed)"
)


class _WrongVelocity:
    """Watches the filter's innovations for a velocity that disagrees with the fixes (their
    mean, not their size: noise of any size averages out) and decides when to stop using it.
    The live filter and :meth:`GnssLapTimer.smooth` each keep one, fed alike, so both decide at
    the same fix (docs/circuits.md, "How laps are timed")."""

    __slots__ = ("ignored", "mx", "my", "restarts", "times")

    def __init__(self) -> None:
        self.times: deque[float] = deque()
        self.ignored = False
        self.restarts = 0
        self.mx = self.my = 0.0

    def clear(self) -> None:
        """The filter started again (a jump, a lost fix, a missing velocity): a new average."""
        self.mx = self.my = 0.0

    def wrong(self, t: float, dt: float, ex: float, ey: float) -> bool:
        """Take a linked step's innovation; True: the velocity is wrong, start again at the fix."""
        a = min(1.0, dt / BIAS_TIME_S)
        mx = self.mx = self.mx + a * (ex - self.mx)
        my = self.my = self.my + a * (ey - self.my)
        if mx * mx + my * my <= BIAS_LIMIT_M * BIAS_LIMIT_M:
            return False
        self.clear()  # the filter starts again
        self.restarts += 1
        times = self.times
        times.append(t)
        while times[0] < t - WRONG_VELOCITY_WINDOW_S:
            times.popleft()
        if len(times) >= WRONG_VELOCITY_RESTARTS:
            self.ignored = True
        return True


def _velocity(
    v_east: float | None, v_north: float | None, max_speed_mps: float
) -> tuple[float, float] | None:
    """A reported velocity, or None when it is missing, not finite, or faster than any car (a
    receiver's glitch or a damaged message, which the filter would carry for half a minute)."""
    if v_east is None or v_north is None or not (math.isfinite(v_east) and math.isfinite(v_north)):
        return None
    if math.hypot(v_east, v_north) > max_speed_mps:
        return None
    return float(v_east), float(v_north)


def _plane_line(circuit: Circuit, line: CircuitLine, plane: LocalPlane) -> PlaneLine:
    ax, ay = plane.to_xy(line.a[0], line.a[1])
    bx, by = plane.to_xy(line.b[0], line.b[1])
    sign = {"right": 1, "left": -1, "either": 0}[circuit.direction]
    return PlaneLine(float(ax), float(ay), float(bx), float(by), sign)


def plane_lines(circuit: Circuit, plane: LocalPlane) -> tuple[PlaneLine, list[PlaneLine]]:
    """The circuit's start/finish and sector lines in ``plane``."""
    return _plane_line(circuit, circuit.start, plane), [
        _plane_line(circuit, s, plane) for s in circuit.sectors
    ]


def pit_lane(circuit: Circuit, plane: LocalPlane) -> PitLane | None:
    """The circuit's pit-entry and pit-exit lines in ``plane`` (None: it has neither)."""
    if circuit.pit_entry is None and circuit.pit_exit is None:
        return None
    return PitLane(
        None if circuit.pit_entry is None else _plane_line(circuit, circuit.pit_entry, plane),
        None if circuit.pit_exit is None else _plane_line(circuit, circuit.pit_exit, plane),
    )


def _rts(
    fx: Sequence[float] | npt.NDArray[np.float64],
    fy: Sequence[float] | npt.NDArray[np.float64],
    p_f: Sequence[float] | npt.NDArray[np.float64],
    px: Sequence[float] | npt.NDArray[np.float64],
    py: Sequence[float] | npt.NDArray[np.float64],
    p_p: Sequence[float] | npt.NDArray[np.float64],
    before: Sequence[int],
) -> tuple[list[float], list[float]]:
    """The Rauch-Tung-Striebel backward pass over a forward run of the filter: ``fx``/``fy``/``p_f``
    filtered positions and variance, ``px``/``py``/``p_p`` predicted, ``before[k]`` the fix that
    fix ``k`` was predicted from (-1: the filter began there). The smoothed positions."""
    sx, sy = [float(v) for v in fx], [float(v) for v in fy]
    for k in range(len(sx) - 1, 0, -1):
        j = before[k]
        if j >= 0:
            c = float(p_f[j]) / float(p_p[k])
            sx[j] = float(fx[j]) + c * (sx[k] - float(px[k]))
            sy[j] = float(fy[j]) + c * (sy[k] - float(py[k]))
    return sx, sy


class _FilterBuffer:
    """The filter's states at the last fixes (bounded by the timer: trimmed after each refinement),
    indexed from ``base`` on for the whole session."""

    __slots__ = ("base", "fx", "fy", "linked", "odo", "p_f", "p_p", "px", "py", "t")

    def __init__(self) -> None:
        self.base = 0
        self.t: list[float] = []
        self.fx: list[float] = []
        self.fy: list[float] = []
        self.px: list[float] = []
        self.py: list[float] = []
        self.p_f: list[float] = []
        self.p_p: list[float] = []
        self.linked: list[bool] = []  # predicted from the fix before it
        self.odo: list[float] = []

    def __len__(self) -> int:
        return len(self.t)

    @property
    def last(self) -> int:
        """The index of the last fix."""
        return self.base + len(self.t) - 1

    def add(
        self,
        t: float,
        fx: float,
        fy: float,
        px: float,
        py: float,
        p_f: float,
        p_p: float,
        linked: bool,
        odo: float,
    ) -> None:
        self.t.append(t)
        self.fx.append(fx)
        self.fy.append(fy)
        self.px.append(px)
        self.py.append(py)
        self.p_f.append(p_f)
        self.p_p.append(p_p)
        self.linked.append(linked)
        self.odo.append(odo)

    def trim(self, keep_from: int | None) -> None:
        """Forget the fixes more than ``_BEFORE`` before index ``keep_from`` (None: the last)."""
        keep = self.last if keep_from is None else keep_from
        drop = keep - _BEFORE - self.base
        if drop <= 0:
            return
        for column in (self.t, self.fx, self.fy, self.px, self.py, self.p_f, self.p_p, self.linked, self.odo):
            del column[:drop]
        self.base += drop
        self.linked[0] = False

    def smoothed(self, first: int) -> tuple[list[float], list[float], list[float], list[float], list[bool]]:
        """Times, smoothed positions, odometer and links of the fixes from ``first`` (a list index)
        on."""
        sl = slice(first, None)
        linked = self.linked[sl]
        before = [k - 1 if link and k > 0 else -1 for k, link in enumerate(linked)]
        sx, sy = _rts(self.fx[sl], self.fy[sl], self.p_f[sl], self.px[sl], self.py[sl], self.p_p[sl], before)
        return self.t[sl], sx, sy, self.odo[sl], linked


#: A refined crossing is looked for this many steps before and after the filtered one.
_BEFORE = 4
_AROUND = (0, -1, 1, -2, 2, -3, 3, -4, 4)


@dataclass(slots=True)
class _Crossing:
    """A line crossing: the line (0 start/finish, then the sectors), the index of the fix before it,
    its time and odometer (as timed at the line: ``t0``/``odo0``; refined: ``t``/``odo``)."""

    line: int
    at: int
    t0: float
    odo0: float
    final: bool
    t: float = 0.0
    odo: float = 0.0

    def __post_init__(self) -> None:
        self.t, self.odo = self.t0, self.odo0


@dataclass(frozen=True, slots=True)
class _PendingLap:
    number: int
    start: _Crossing
    marks: list[_Crossing]
    end: _Crossing
    pit: str | None = None


class GnssLapTimer:
    """Stateful lap and sector timer over fixes ``(t, x, y[, v_east, v_north])`` in plane metres.

    Times are whatever clock the fixes carry (seconds); laps come out on the same clock.
    """

    def __init__(
        self,
        start: PlaneLine,
        sectors: Sequence[PlaneLine] = (),
        *,
        max_speed_mps: float = 120.0,
        min_jump_m: float = 30.0,
        max_gap_s: float = 2.0,
        min_lap_m: float = 100.0,
        position_noise_m: float = 1.0,
        velocity_noise_mps: float = 0.5,
        pit: PitLane | None = None,
        refine_lag_s: float | None = None,
        max_refine_fixes: int = 10_000,
        max_accel_mps2: float = 100.0,
    ) -> None:
        if refine_lag_s is not None and not 0.0 <= refine_lag_s <= 3600.0:
            raise ValueError(f"refine_lag_s must be 0 to 3600 s, not {refine_lag_s}")
        self.start = start
        self.sector_lines = list(sectors)
        #: The pit-lane lines: laps through the pit lane are flagged (``Lap.pit``).
        self.pit = pit
        self.max_speed_mps = max_speed_mps
        self.min_jump_m = min_jump_m
        self.max_accel_mps2 = max_accel_mps2
        self.max_gap_s = max_gap_s
        self.min_lap_m = min_lap_m
        self.r = position_noise_m**2
        self.sigma_v = velocity_noise_mps
        #: Seconds of fixes after a line crossing before it is timed again from positions smoothed
        #: both ways over them (None: laps are final at the line).
        self.refine_lag_s = refine_lag_s
        self.max_refine_fixes = max_refine_fixes
        self.laps: list[Lap] = []
        self.lap_distances_m: dict[int, float] = {}
        #: The laps refined (or final as timed at the line), in order, and their lengths.
        self.refined: list[Lap] = []
        self.refined_distances_m: dict[int, float] = {}
        self.resets = 0
        self.reset()

    def reset(self) -> None:
        """Forget everything (a new session)."""
        self.laps = []
        self.lap_distances_m = {}
        self.refined = []
        self.refined_distances_m = {}
        self._traces: dict[int, tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]] = {}
        self._signs = [self.start.sign] + [s.sign for s in self.sector_lines]
        self._lap = 0
        self._session_t0: float | None = None
        if self.pit is not None:
            self.pit.reset()
        self._buf = _FilterBuffer()
        self._shifts: dict[int, tuple[float, float]] = {}  # refined lap: (time, distance) shift
        self._wrong_velocity = _WrongVelocity()
        #: Where :meth:`smooth` stopped using the velocity (the fix's time), for :meth:`update`
        #: with estimates; whether the lap in progress there has been abandoned.
        self._dropped_at: float | None = None
        self._velocity_dropped = False
        self._crossings: list[_Crossing] = []  # waiting for their refinement, oldest first
        self._pending: list[_PendingLap] = []  # timed at the line, waiting for their end crossing
        self._restart()

    def _restart(self) -> None:
        """After a jump or a gap: the lap in progress is abandoned, the filter starts again (the
        crossings before it are refined with the fixes there are: the chain ends here)."""
        self.finish()
        self._t: float | None = None
        self._raw = (0.0, 0.0)
        self._est = (0.0, 0.0)
        self._vel: tuple[float, float] | None = None
        self._p = self.r
        self._wrong_velocity.clear()
        self._odo = 0.0
        self._lap_start_t: float | None = None
        self._lap_start_odo = 0.0
        self._last_start_odo: float | None = None
        self._state_t0 = 0.0
        self._marks: list[float] = []
        self._start_crossing: _Crossing | None = None
        self._mark_crossings: list[_Crossing] = []
        self._next_sector = 0
        self._trace_d: list[float] = []
        self._trace_t: list[float] = []

    # --- feeding ------------------------------------------------------------------------------------

    def update(
        self,
        t: float,
        x: float,
        y: float,
        v_east: float | None = None,
        v_north: float | None = None,
        *,
        estimate: bool = False,
    ) -> LapState:
        """Feed one fix (times increasing; an equal or earlier time only gives the state).

        ``estimate``: the position is already an estimate (:meth:`smooth`), not filtered again.
        """
        dropped = self._wrong_velocity.ignored or (self._dropped_at is not None and t > self._dropped_at)
        vel = None if dropped else _velocity(v_east, v_north, self.max_speed_mps)
        if self._session_t0 is None:
            self._session_t0 = t
        completed: Lap | None = None
        if self._t is None:
            self._begin(t, x, y, vel)
        elif t > self._t:
            dt = t - self._t
            # the fix after the velocity was found wrong all the time: the lap in progress was
            # timed from a filter led astray, and is abandoned as after a jump
            drop_now = dropped and not self._velocity_dropped
            if drop_now or self._restarts(t, dt, x, y, self._raw):
                self._velocity_dropped |= drop_now
                self.resets += 1
                self._restart()
                self._begin(t, x, y, vel)
            else:
                completed = self._step(t, dt, x, y, vel, estimate)
        if self._crossings:
            self._refine_due(t)
        elif len(self._buf) > 64:
            self._buf.trim(None)  # nothing waits for a refinement
        return self._state(t, completed)

    def _restarts(self, t: float, dt: float, x: float, y: float, raw: tuple[float, float]) -> bool:
        """Whether a fix ``dt`` after the one at ``raw`` is a jump or follows a lost fix."""
        jump = math.hypot(x - raw[0], y - raw[1])
        return dt > self.max_gap_s or jump > max(self.min_jump_m, self.max_speed_mps * dt)

    def _steady(self, va: tuple[float, float], vb: tuple[float, float], dt: float) -> bool:
        """Whether velocity ``vb`` could follow ``va`` after ``dt``: no car changes its velocity
        faster than ``max_accel_mps2`` (the real logs in ``../shared/data``: 54 m/s2 at most,
        noise included). Across a step where one did, one of the two is wrong, and the step is
        taken as without a velocity (the filter starts again at the fix)."""
        return math.hypot(vb[0] - va[0], vb[1] - va[1]) <= self.max_accel_mps2 * dt + VELOCITY_SLACK_MPS

    def _begin(self, t: float, x: float, y: float, vel: tuple[float, float] | None) -> None:
        self._t = t
        self._raw = (x, y)
        self._est = (x, y)
        self._vel = vel
        self._p = self.r
        self._state_t0 = t
        self._buf.add(t, x, y, x, y, self.r, self.r, False, self._odo)

    def _step(
        self, t: float, dt: float, x: float, y: float, vel: tuple[float, float] | None, estimate: bool
    ) -> Lap | None:
        x0, y0 = self._est
        linked = False
        px, py, p = x, y, self.r
        va, vb = self._vel, vel
        if va is not None and vb is not None and not self._steady(va, vb, dt):
            va = vb = None  # one of them is wrong: the step is taken as without a velocity
        if estimate:
            x1, y1 = x, y
            if va is not None and vb is not None:
                step = 0.5 * (math.hypot(*va) + math.hypot(*vb)) * dt
            else:
                step = math.hypot(x1 - x0, y1 - y0)
        elif va is not None and vb is not None:
            # predict with the mean velocity over the step, correct with the fix
            px = x0 + 0.5 * (va[0] + vb[0]) * dt
            py = y0 + 0.5 * (va[1] + vb[1]) * dt
            p = self._p + (self.sigma_v * dt) ** 2
            ex, ey = x - px, y - py
            if not self._wrong_velocity.wrong(t, dt, ex, ey):
                k = p / (p + self.r)
                x1, y1 = px + k * ex, py + k * ey
                self._p = (1.0 - k) * p
                linked = True
            else:  # the velocity is wrong: the filter starts again at the fix
                px, py, p = x, y, self.r
                x1, y1 = x, y
                self._p = self.r
        else:
            x1, y1 = x, y
            self._p = self.r
            self._wrong_velocity.clear()
        if linked:
            assert va is not None and vb is not None
            step = 0.5 * (math.hypot(*va) + math.hypot(*vb)) * dt
        elif not estimate:
            step = math.hypot(x1 - x0, y1 - y0)
        t0 = self._t
        assert t0 is not None
        events: list[tuple[float, int, int]] = []  # (fraction, line index, direction)
        for i, line in enumerate([self.start, *self.sector_lines]):
            hit = line.crossing(x0, y0, x1, y1)
            if hit is not None:
                events.append((hit[0], i, hit[1]))
        if self.pit is not None:
            events += self.pit.events(x0, y0, x1, y1)
        completed: Lap | None = None
        # the crossings are refined later when the filter ran here (an estimate is final)
        final = not linked or self.refine_lag_s is None
        at = self._buf.last
        for f, i, direction in sorted(events):
            if i < 0 and self.pit is not None:
                self.pit.cross(i)  # a pit line: flags the lap, times nothing
                continue
            sign = self._signs[i]
            if sign == 0:
                self._signs[i] = sign = direction  # "either": the first crossing decides
            if direction != sign:
                continue
            tc = t0 + f * dt
            odo = self._odo + f * step
            if i == 0:
                done = self._cross_start(tc, odo, at, final)
                completed = done or completed
            elif self._lap_start_t is not None and i - 1 == self._next_sector:
                self._marks.append(tc)
                self._mark_crossings.append(self._crossing(i, at, tc, odo, final))
                self._next_sector += 1
        self._odo += step
        self._buf.add(t, x1, y1, px, py, self._p, p, linked, self._odo)
        self._t, self._raw, self._est, self._vel = t, (x, y), (x1, y1), vel
        if self._lap_start_t is not None:
            self._trace_d.append(self._odo - self._lap_start_odo)
            self._trace_t.append(t - self._lap_start_t)
        return completed

    def _crossing(self, line: int, at: int, tc: float, odo: float, final: bool) -> _Crossing:
        c = _Crossing(line, at, tc, odo, final)
        if not final:
            if not self._crossings:
                self._buf.trim(at)  # kept from a few fixes before the oldest crossing waiting
            self._crossings.append(c)
        return c

    def _cross_start(self, tc: float, odo: float, at: int, final: bool) -> Lap | None:
        if self._last_start_odo is not None and odo - self._last_start_odo < self.min_lap_m:
            return None  # noise on the line, or a car stopped across it
        done: Lap | None = None
        crossing = self._crossing(0, at, tc, odo, final)
        if self._lap_start_t is not None:
            n = len(self.sector_lines)
            times = [self._lap_start_t, *self._marks, tc]
            sectors = tuple(b - a for a, b in pairwise(times)) if len(self._marks) == n and n else ()
            done = Lap(self._lap, self._lap_start_t, tc, sectors, self.pit.lap_flag() if self.pit else None)
            self.laps.append(done)
            self.lap_distances_m[self._lap] = odo - self._lap_start_odo
            assert self._start_crossing is not None
            marks = self._mark_crossings if sectors else []
            self._pending.append(_PendingLap(self._lap, self._start_crossing, marks, crossing, done.pit))
            self._keep_trace(done, odo)
            self._settle_laps()
        if self.pit is not None:
            self.pit.new_lap()
        self._lap += 1
        self._lap_start_t = tc
        self._lap_start_odo = odo
        self._last_start_odo = odo
        self._start_crossing = crossing
        self._mark_crossings = []
        self._marks = []
        self._next_sector = 0
        self._trace_d = [0.0]
        self._trace_t = [0.0]
        return done

    def _keep_trace(self, lap: Lap, odo: float) -> None:
        d = np.array([*self._trace_d, odo - self._lap_start_odo], dtype=np.float64)
        tt = np.array([*self._trace_t, lap.time_s], dtype=np.float64)
        self._traces[lap.number] = (d, tt)
        self._prune_traces()

    def _prune_traces(self) -> None:
        """Keep the traces of the last and the best lap, of the laps waiting for their refinement
        and of the best refined lap (a session reference is rebuilt from it)."""
        keep = {p.number for p in self._pending}
        for best in (self.best_lap, min(racing_laps(self.refined), key=lambda lap: lap.time_s, default=None)):
            if best is not None:
                keep.add(best.number)
        if self.laps:
            keep.add(self.laps[-1].number)
        for number in list(self._traces):
            if number not in keep:
                del self._traces[number]

    # --- fixed-lag refinement -------------------------------------------------------------------

    def finish(self) -> None:
        """Refine every crossing still waiting with the fixes there are (the session's end, a
        restart of the filter)."""
        if self._crossings:
            self._refine(len(self._crossings))
        self._buf.trim(None)

    def _refine_due(self, now: float) -> None:
        """Refine the crossings ``refine_lag_s`` old (all of them when the buffer is full)."""
        lag = self.refine_lag_s
        assert lag is not None
        cs = self._crossings
        n = 0
        while n < len(cs) and cs[n].t + lag <= now:
            n += 1
        if len(self._buf) > self.max_refine_fixes:
            n = len(cs)
        if n:
            self._refine(n)

    def _refine(self, n: int) -> None:
        """The first ``n`` waiting crossings timed again from the buffered filter states smoothed
        backward (the same pass as :meth:`smooth`), each between the smoothed fixes either side."""
        cs, self._crossings = self._crossings[:n], self._crossings[n:]
        buf = self._buf
        first = max(0, cs[0].at - buf.base - _BEFORE)
        ts, sx, sy, odo, linked = buf.smoothed(first)
        lines = [self.start, *self.sector_lines]
        for c in cs:
            k = c.at - buf.base - first
            line, sign = lines[c.line], self._signs[c.line]
            # the smoothed path may cross a step before or after the filtered one
            for dj in _AROUND:
                j = k + dj
                if not (0 <= j < len(ts) - 1 and linked[j + 1]):
                    continue  # not a step of the filter (its start, a restart)
                hit = line.crossing(sx[j], sy[j], sx[j + 1], sy[j + 1])
                if hit is not None and hit[1] == sign:
                    f = hit[0]
                    c.t = ts[j] + f * (ts[j + 1] - ts[j])
                    c.odo = odo[j] + f * (odo[j + 1] - odo[j])
                    break
            c.final = True
        buf.trim(self._crossings[0].at if self._crossings else None)
        self._settle_laps()

    def _settle_laps(self) -> None:
        """The laps whose crossings are all final, to :attr:`refined`."""
        while self._pending and self._pending[0].end.final:
            p = self._pending.pop(0)
            times = [p.start.t, *(m.t for m in p.marks), p.end.t]
            sectors = tuple(b - a for a, b in pairwise(times)) if p.marks else ()
            self.refined.append(Lap(p.number, p.start.t, p.end.t, sectors, p.pit))
            self.refined_distances_m[p.number] = p.end.odo - p.start.odo
            self._shifts[p.number] = (p.start.t0 - p.start.t, p.start.odo0 - p.start.odo)
            self._prune_traces()
        for number in list(self._shifts):
            if number not in self._traces:
                del self._shifts[number]

    def refined_trace(self, number: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]] | None:
        """Refined lap ``number``'s (lap distance m, lap time s) from its refined crossing, at the
        fixes inside the lap (not the line's own points); kept for the best refined lap (and the
        last lap). None when it is not kept."""
        trace = self._traces.get(number)
        shift = self._shifts.get(number)
        if trace is None or shift is None:
            return None
        d, t = trace
        return d[1:-1] + shift[1], t[1:-1] + shift[0]

    def _state(self, t: float, completed: Lap | None) -> LapState:
        if self._lap_start_t is not None:
            return LapState(
                self._lap,
                self._odo - self._lap_start_odo,
                self._next_sector,
                t - self._lap_start_t,
                completed,
            )
        return LapState(self._lap, self._odo, 0, t - self._state_t0, completed)

    def smooth(
        self,
        t: npt.ArrayLike,
        x: npt.ArrayLike,
        y: npt.ArrayLike,
        v_east: npt.ArrayLike | None = None,
        v_north: npt.ArrayLike | None = None,
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """A whole session's fixes smoothed both ways (for after the session; feed the result to
        :meth:`update` with ``estimate=True``).

        The live filter, run forward, then a Rauch-Tung-Striebel pass backward: each position
        also learns from the fixes after it, which halves the variance where the filter has
        averaged long (docs/circuits.md, "How good it is"). The filter starts again where
        :meth:`update` would (a jump, a lost fix, a missing velocity); a fix not later than the
        one before is left as it is (:meth:`update` ignores it).
        """
        ts = np.asarray(t, dtype=np.float64)
        xs = np.array(x, dtype=np.float64)
        ys = np.array(y, dtype=np.float64)
        n = len(ts)
        ve = np.full(n, np.nan) if v_east is None else np.asarray(v_east, dtype=np.float64)
        vn = np.full(n, np.nan) if v_north is None else np.asarray(v_north, dtype=np.float64)
        fx, fy = xs.copy(), ys.copy()  # filtered
        px, py = xs.copy(), ys.copy()  # predicted
        p_f = np.full(n, self.r)  # filtered variance
        p_p = np.full(n, self.r)  # predicted variance
        before = np.full(n, -1)  # the fix each one was predicted from (-1: the filter began there)
        last = -1
        wrong = _WrongVelocity()  # as the live filter's
        self._dropped_at = None
        for k in range(n):
            if last >= 0 and ts[k] <= ts[last]:
                continue
            prev, last = last, k
            if prev < 0:
                continue
            dt = ts[k] - ts[prev]
            top = self.max_speed_mps
            va, vb = _velocity(ve[prev], vn[prev], top), _velocity(ve[k], vn[k], top)
            if wrong.ignored or va is None or vb is None or not self._steady(va, vb, dt):
                wrong.clear()
                continue
            if self._restarts(ts[k], dt, xs[k], ys[k], (xs[prev], ys[prev])):
                wrong.clear()
                continue
            x_p = fx[prev] + 0.5 * (va[0] + vb[0]) * dt
            y_p = fy[prev] + 0.5 * (va[1] + vb[1]) * dt
            p = p_f[prev] + (self.sigma_v * dt) ** 2
            ex, ey = xs[k] - x_p, ys[k] - y_p
            if wrong.wrong(float(ts[k]), float(dt), float(ex), float(ey)):
                if wrong.ignored:  # from the next fix on, as :meth:`update` will
                    self._dropped_at = float(ts[k])
                continue  # the velocity is wrong: the filter begins again at this fix
            g = p / (p + self.r)
            fx[k], fy[k], p_f[k] = x_p + g * ex, y_p + g * ey, (1.0 - g) * p
            px[k], py[k], p_p[k] = x_p, y_p, p
            before[k] = prev
        sx, sy = _rts(fx, fy, p_f, px, py, p_p, before.tolist())
        return np.asarray(sx, dtype=np.float64), np.asarray(sy, dtype=np.float64)

    # --- results ----------------------------------------------------------------------------------

    @property
    def velocity_ignored(self) -> bool:
        """The receiver's velocity disagreed with its fixes again and again: this session's
        laps are timed from the fixes alone (found by the live filter, or by :meth:`smooth`)."""
        return self._wrong_velocity.ignored or self._dropped_at is not None

    @property
    def velocity_restarts(self) -> int:
        """Restarts of the live filter on a velocity that disagreed with the fixes, this session."""
        return self._wrong_velocity.restarts

    @property
    def best_lap(self) -> Lap | None:
        """The fastest lap not through the pit lane."""
        return min(racing_laps(self.laps), key=lambda lap: lap.time_s, default=None)

    def trace(self, number: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]] | None:
        """Lap ``number``'s (lap distance m, lap time s) at every fix, line to line; kept for the
        best and the last completed lap (None for the others)."""
        return self._traces.get(number)


def timer_for(
    circuit: Circuit, *, plane: LocalPlane | None = None, **options: Any
) -> tuple[GnssLapTimer, LocalPlane]:
    """A timer for ``circuit`` and the plane its fixes must be projected into."""
    plane = plane or circuit.plane()
    start, sectors = plane_lines(circuit, plane)
    return GnssLapTimer(start, sectors, pit=pit_lane(circuit, plane), **options), plane


#: The timer's velocity noise when the frame has the receiver's velocity components (u-blox
#: NAV-PVT ``vel_n_mps``/``vel_e_mps``, its Doppler solution, good to a few cm/s) rather than
#: NMEA's speed and course, which receivers smooth (the timer's default, 0.5 m/s).
DOPPLER_VELOCITY_NOISE_MPS = 0.03

#: Seconds of fixes after a line before its crossing is timed again, smoothed both ways over them
#: (the plug-in's ``refine_lag_s``; measured in docs/circuits.md, "How good it is").
REFINE_LAG_S = 60.0

#: ``gps_fix_mode`` value of "no fix" (nmea and ubx definitions).
NO_FIX = 1


@dataclass(frozen=True, slots=True)
class GnssFields:
    """Where a GNSS source's frame keeps the fix (names of ``wrtfd/schemas`` nmea and ubx)."""

    lat: str = "lat_deg"
    lon: str = "lon_deg"
    time_us: str | None = "fix_time_utc_us"
    speed: str | None = "speed_mps"
    course: str | None = "course_deg"
    vel_n: str | None = "vel_n_mps"
    vel_e: str | None = "vel_e_mps"
    #: The fix dimension (nmea and ubx ``gps_fix_mode``): a frame saying 1 (no fix) is no fix.
    fix_mode: str | None = "fix_mode"

    def present(self, names: Sequence[str]) -> GnssFields:
        """These fields, the optional ones dropped where ``names`` (a frame's fields) lacks them."""
        have = set(names)

        def opt(name: str | None) -> str | None:
            return name if name is not None and name in have else None

        return GnssFields(
            self.lat,
            self.lon,
            opt(self.time_us),
            opt(self.speed),
            opt(self.course),
            opt(self.vel_n),
            opt(self.vel_e),
            opt(self.fix_mode),
        )


class GnssLapChannels:
    """Lap channels from a GNSS source's fixes. Implements ``wrtfd.recorder.derived.DerivedChannels``
    with the channels, footer fields and ``live()`` of :class:`~wrtfd.tracks.lapchannels.LapChannels`
    (``track_sector`` is -1 and ``offset`` 0: a circuit has no lane).

    A new fix is a frame whose fix time (else position) differs from the previous one; frames in
    between hold the lap distance and advance the lap time. Fix times are the receiver's (UTC);
    laps are reported on the session clock (fix time plus the smallest frame-minus-fix offset seen).

    The delta to the reference lap (``reference``, else the session's best) is computed at each
    fix, from the fix's own lap distance and lap time, and held between fixes; each timed lap
    closes the trace with its own length (GNSS laps differ by a few decimetres).

    ``refine_lag_s`` (default :data:`REFINE_LAG_S`; None or 0: off): a lap in :attr:`laps` is
    replaced by its refined time once its crossings are refined; :attr:`final_laps` gets each lap
    once, refined (what the recorder hands to lap records), and :meth:`end_session` refines the
    laps still waiting.
    """

    def __init__(
        self,
        circuit: Circuit | None,
        *,
        source: str,
        fields: GnssFields | None = None,
        name: str = "laps",
        candidates: Sequence[Circuit] = (),
        pick_m: float = 3000.0,
        on_pick: Callable[[Circuit, str], None] | None = None,
        reference: Reference | None = None,
        **options: Any,
    ) -> None:
        from wrtfd.tracks.lapchannels import LAP_FIELDS

        self.name = name
        self.source = source
        self.fields = fields or GnssFields()
        self._resolved = False
        self.options = options
        self.candidates = list(candidates)
        self.pick_m = pick_m
        #: Called with a circuit taken while recording and how: ``"picked, 0.2 km from the first
        #: fix"`` or ``"laid across the car's heading by a mark"``; and once a session when the
        #: receiver's velocity is dropped (:attr:`GnssLapTimer.velocity_ignored`).
        self.pick_listeners: list[Callable[[Circuit, str], None]] = [on_pick] if on_pick else []
        self._line_request: float | None = None
        #: Markers to write into the recording, ``(session time s, note)``: a laid line
        #: (:meth:`take_marks`, asked by the recorder after each frame block).
        self._marks: list[tuple[float, str]] = []
        self._prev_fix: tuple[float, float, float, float | None, float | None] | None = None
        self.circuit: Circuit | None = None
        self.timer: GnssLapTimer | None = None
        self.plane: LocalPlane | None = None
        self._next_pick_t = -math.inf
        self.delta = PredictiveDelta(reference=reference)
        if circuit is not None:
            self.use(circuit)
        self.definition: Mapping[str, Any] = {"fields": [dict(f) for f in LAP_FIELDS]}
        self.footer_fields: Mapping[str, Any] = {
            "lap_count": "uint16",
            "best_lap_ms": "uint32",
            "best_lap_number": "uint16",
        }
        self.start_session()

    def use(self, circuit: Circuit) -> None:
        """Time laps against ``circuit`` from now on (the laps so far are kept; the delta's
        session reference is not: it was driven to another line)."""
        self.circuit = circuit
        options = dict(self.options)
        if self.fields.vel_n is not None and self.fields.vel_e is not None:
            options.setdefault("velocity_noise_mps", DOPPLER_VELOCITY_NOISE_MPS)
        options["refine_lag_s"] = options.get("refine_lag_s", REFINE_LAG_S) or None  # 0: off
        self.end_session()  # the laps to the old line: final with the fixes there are
        self.timer, self.plane = timer_for(circuit, **options)
        self._refined_seen = 0
        self.delta.reset()

    def _pick(self, time_s: float, lat: float, lon: float) -> bool:
        """With no circuit yet: the nearest candidate within ``pick_m`` of this fix (tried again
        every 10 s of session time while none is near)."""
        if time_s < self._next_pick_t:
            return False
        self._next_pick_t = time_s + 10.0
        found = pick_circuit(lat, lon, self.candidates, max_m=self.pick_m)
        if found is None:
            return False
        self.use(found[0])
        self._tell(found[0], f"picked, {found[1] / 1000:.1f} km from the first fix")
        return True

    def _tell(self, circuit: Circuit, how: str) -> None:
        for listener in self.pick_listeners:
            listener(circuit, how)

    def request_line(self, width_m: float = 30.0) -> None:
        """Lay the start/finish line where the car is (``wrtfd mark --start-finish``): at the
        next fix, across the car's path between the previous fix and it. Safe to call from any
        thread (the recorder's thread acts on it)."""
        if not 1.0 <= width_m <= 500.0:
            raise ValueError("a start/finish line is 1 to 500 m wide")
        self._line_request = width_m

    def take_marks(self) -> list[tuple[float, str]]:
        """The markers asked for since the last call, ``(session time s, note)``: the recorder
        writes them into the frames (a laid line, so the file being recorded keeps it)."""
        out, self._marks = self._marks, []
        return out

    def _lay_line(self, lat: float, lon: float, time_s: float) -> bool:
        """The line between the previous fix and this one, across the step; timing starts again
        against it with the crossing between the two fixes (lap 1 begins there). The line goes
        into the recording as a marker at ``time_s`` (docs/circuits.md, "The circuit in the
        file")."""
        width = self._line_request
        prev = self._prev_fix
        if width is None or prev is None:
            return False
        plane = LocalPlane(lat, lon)
        px, py = plane.to_xy(prev[1], prev[2])
        hx, hy = -float(px), -float(py)
        if math.hypot(hx, hy) < 0.5:
            return False  # not moving: wait for a fix that tells the heading
        self._line_request = None
        note = laid_line_note(line_across(plane, float(px) / 2.0, float(py) / 2.0, hx, hy, width))
        # the line as the file keeps it (its marker's rounded ends): the same name and the same
        # laps live as `wrtfd laps` finds afterwards (unrounded, a name's last digit could differ)
        circuit = laid_circuit([note])
        assert circuit is not None  # a note of a line just laid always reads back
        self.use(circuit)
        self._marks.append((time_s, note))
        assert self.timer is not None and self.plane is not None
        x0, y0 = self.plane.to_xy(prev[1], prev[2])
        self.timer.update(prev[0], float(x0), float(y0), prev[3], prev[4])
        self._tell(circuit, "laid across the car's heading by a mark")
        return True

    def file_metadata(self) -> dict[str, str]:
        """The circuit for the file's metadata (empty until one is known)."""
        return circuit_metadata(self.circuit) if self.circuit is not None else {}

    @property
    def awaits_metadata(self) -> bool:
        """Whether a new session's header (and so its file) should wait for the circuit: picking
        one by position, none picked yet (the recorder waits at most ``info_wait_s``)."""
        return self.circuit is None and bool(self.candidates)

    def start_session(self) -> None:
        if self.timer is not None:
            self.timer.reset()
        self.delta.reset()
        #: The laps as the page shows them: each as timed at the line, then replaced by its
        #: refinement (``refine_lag_s`` of fixes later).
        self.laps: list[Lap] = []
        #: The laps as timed at the line (never replaced: for measurements).
        self.provisional: list[Lap] = []
        #: The refined laps, in order (what the lap records and the journal get, once each).
        self.final_laps: list[Lap] = []
        self._refined_seen = 0
        self._waiting: dict[int, tuple[int, float]] = {}  # lap number: (index in laps, offset)
        self._velocity_told = False
        self._last: LapState | None = None
        self._last_key: tuple[float, float, float] | None = None
        self._offset: float | None = None
        self._fix_session_t = 0.0
        self._prev_fix = None

    def feed(
        self,
        time_s: float,
        lat: float,
        lon: float,
        fix_time_s: float | None = None,
        v_east: float | None = None,
        v_north: float | None = None,
        has_fix: bool = True,
        *,
        estimate: tuple[float, float] | None = None,
    ) -> LapState | None:
        """One frame's values (session time ``time_s``); returns the state, None while no fix.

        ``estimate``: the fix's position in the circuit's plane already smoothed
        (:meth:`GnssLapTimer.smooth`, after the session), timed as it is.
        """
        t_fix = self._new_fix(time_s, lat, lon, fix_time_s, has_fix)
        if t_fix is None:
            return self._last
        if self._line_request is not None:
            self._lay_line(lat, lon, time_s)
        self._prev_fix = (t_fix, lat, lon, v_east, v_north)
        if self.timer is None and not self._pick(time_s, lat, lon):
            return self._last
        assert self.timer is not None and self.plane is not None
        off = time_s - t_fix
        if self._offset is None or off < self._offset or off - self._offset > 2.0:
            self._offset = off
        x, y = self.plane.to_xy(lat, lon) if estimate is None else estimate
        timer = self.timer
        st = timer.update(t_fix, float(x), float(y), v_east, v_north, estimate=estimate is not None)
        if timer.velocity_ignored and not self._velocity_told and self.circuit is not None:
            self._velocity_told = True
            self._tell(self.circuit, VELOCITY_DROPPED)
        if st.completed is not None:
            lap = st.completed
            shown = replace(lap, start_s=lap.start_s + self._offset, end_s=lap.end_s + self._offset)
            self._waiting[lap.number] = (len(self.laps), self._offset)
            self.laps.append(shown)
            self.provisional.append(shown)
            st = LapState(st.lap, st.lap_distance_m, st.sector, st.lap_time_s, shown)
            self.delta.complete(
                lap.number, lap.time_s, timer.lap_distances_m.get(lap.number), reference=lap.pit is None
            )
        if len(timer.refined) > self._refined_seen:
            self._take_refined()
        self.delta.update(st.lap, st.lap_distance_m, st.lap_time_s)
        self._last = st
        self._fix_session_t = t_fix + self._offset
        return st

    def end_session(self) -> None:
        """The session ends (before its footer): the laps waiting for their refinement are refined
        with the fixes there are."""
        if self.timer is not None:
            self.timer.finish()
            if len(self.timer.refined) > self._refined_seen:
                self._take_refined()

    def _take_refined(self) -> None:
        """The timer's newly refined laps replace the ones shown at the line; the session's
        reference lap follows the best refined lap."""
        timer = self.timer
        assert timer is not None
        new = timer.refined[self._refined_seen :]
        self._refined_seen = len(timer.refined)
        for lap in new:
            i, off = self._waiting.pop(lap.number, (-1, self._offset or 0.0))
            final = replace(lap, start_s=lap.start_s + off, end_s=lap.end_s + off)
            if 0 <= i < len(self.laps) and self.laps[i].number == lap.number:
                self.laps[i] = final
            self.final_laps.append(final)
        self._refine_reference(timer)

    def _refine_reference(self, timer: GnssLapTimer) -> None:
        """With the session's best lap as the reference: the best refined lap, with its refined
        time and trace, once it is refined (or once a refined lap beats the one set at the line)."""
        d = self.delta
        ref = d.reference
        if d.fixed is not None or ref is None or ref.origin != "session":
            return
        best = min(racing_laps(timer.refined), key=lambda lap: lap.time_s, default=None)
        if best is None or (ref.number == best.number and ref.lap_time_s == best.time_s):
            return
        if ref.number not in timer.refined_distances_m and best.time_s >= ref.lap_time_s:
            return  # the reference is still as timed at the line, and faster
        trace = timer.refined_trace(best.number)
        if trace is None:
            return
        dd, tt = trace
        ok = (dd > 0.0) & (tt > 0.0)
        try:
            d.reference = Reference.from_samples(
                dd[ok],
                tt[ok],
                lap_time_s=best.time_s,
                length_m=timer.refined_distances_m[best.number],
                number=best.number,
                origin="session",
                step_m=d.step_m,
                max_points=d.max_points,
            )
        except TrackError:
            return

    def _new_fix(
        self, time_s: float, lat: float, lon: float, fix_time_s: float | None, has_fix: bool
    ) -> float | None:
        """The fix time of a frame that brings a new fix; None for no fix or the previous one."""
        if not has_fix or not (math.isfinite(lat) and math.isfinite(lon)) or (lat == 0.0 and lon == 0.0):
            return None
        t_fix = fix_time_s if fix_time_s is not None and fix_time_s > 0.0 else time_s
        key = (t_fix, lat, lon) if fix_time_s is None else (t_fix, 0.0, 0.0)
        if key == self._last_key:
            return None
        self._last_key = key
        return t_fix

    def _velocity(self, src: np.void) -> tuple[float | None, float | None]:
        f = self.fields
        if f.vel_n is not None and f.vel_e is not None:
            vn, ve = float(src[f.vel_n]), float(src[f.vel_e])
            if math.isfinite(vn) and math.isfinite(ve):
                return ve, vn
        if f.speed is not None and f.course is not None:
            v, c = float(src[f.speed]), float(src[f.course])
            if math.isfinite(v) and math.isfinite(c):
                rad = math.radians(c)
                return v * math.sin(rad), v * math.cos(rad)
        return None, None

    def compute(self, row: np.void, time_s: float) -> None:
        src = row[self.source]
        if not self._resolved:  # the optional fields this frame has (the wiring has checked lat/lon)
            self.fields = self.fields.present(src.dtype.names or ())
            self._resolved = True
            if self.circuit is not None and self.timer is not None and not self.timer.laps:
                self.use(self.circuit)  # the filter's velocity noise follows the fields found
        f = self.fields
        fix_t = float(src[f.time_us]) / 1e6 if f.time_us is not None else None
        ve, vn = self._velocity(src)
        has_fix = f.fix_mode is None or int(src[f.fix_mode]) != NO_FIX
        st = self.feed(time_s, float(src[f.lat]), float(src[f.lon]), fix_t, ve, vn, has_fix)
        d = self.delta
        # one assignment of the whole struct, in LAP_FIELDS order (as LapChannels does)
        if st is None:
            row[self.name] = (0, 0.0, 0, 0.0, -1, 0.0, d.delta_s, d.predicted_s, d.last_delta_s)
        else:
            row[self.name] = (
                min(st.lap, 65535),
                st.lap_distance_m,
                min(st.sector, 255),
                st.lap_time_s + max(0.0, time_s - self._fix_session_t),
                -1,
                0.0,
                d.delta_s,
                d.predicted_s,
                d.last_delta_s,
            )

    @property
    def best_lap(self) -> Lap | None:
        """The fastest lap not through the pit lane (an in- or out-lap is never the best)."""
        return min(racing_laps(self.laps), key=lambda lap: lap.time_s, default=None)

    @property
    def velocity_ignored(self) -> bool:
        """This session's laps are timed from the fixes alone (:attr:`GnssLapTimer.velocity_ignored`)."""
        return self.timer is not None and self.timer.velocity_ignored

    def live(self) -> dict[str, Any]:
        """The last and the best completed lap with sector times (for the live page); ``pit``
        on a lap through the pit lane (``"in"``, ``"out"``, ``"in-out"``)."""

        def lap(one: Lap | None) -> dict[str, Any] | None:
            if one is None:
                return None
            out: dict[str, Any] = {
                "number": one.number,
                "time_s": round(one.time_s, 3),
                "sectors_s": [round(s, 3) for s in one.sector_times_s],
                # False: as timed at the line, its refinement to come (docs/circuits.md)
                "final": one.number not in self._waiting,
            }
            if one.pit is not None:
                out["pit"] = one.pit
            return out

        ref = self.delta.reference
        return {
            "lap_count": len(self.laps),
            "last": lap(self.laps[-1] if self.laps else None),
            "best": lap(self.best_lap),
            "circuit": self.circuit.name if self.circuit is not None else None,
            "velocity_ignored": self.velocity_ignored,
            "reference": None
            if ref is None
            else {"number": ref.number, "time_s": round(ref.lap_time_s, 3), "origin": ref.origin},
        }

    def summary(self) -> Mapping[str, Any]:
        best = self.best_lap
        return {
            "lap_count": min(len(self.laps), 65535),
            "best_lap_ms": round(best.time_s * 1000) if best is not None else 0,
            "best_lap_number": best.number if best is not None else 0,
        }


def find_gnss_source(
    frames: np.ndarray, source: str | None = None, fields: GnssFields | None = None
) -> tuple[str, GnssFields]:
    """The source of a frame with latitude/longitude channels, and its fix fields.

    :raises TrackError: none (or, with ``source``, not that one) has them.
    """
    base = fields or GnssFields()
    names = frames.dtype.names or ()
    candidates = [source] if source is not None else [n for n in names if n != "tick"]
    for cand in candidates:
        kind = frames.dtype[cand] if cand in names else None
        if kind is not None and kind.names is not None and base.lat in kind.names and base.lon in kind.names:
            return cand, base.present(kind.names)
    where = f"source {source!r}" if source else "any source"
    raise TrackError(f"no {base.lat}/{base.lon} channels in {where} of this recording")


def has_gnss(frames: np.ndarray, source: str | None = None) -> bool:
    """Whether a frame has a source with latitude/longitude channels."""
    try:
        find_gnss_source(frames, source)
    except TrackError:
        return False
    return True


def gnss_session_laps(
    frames: np.ndarray,
    times_s: npt.ArrayLike,
    circuit: Circuit,
    *,
    source: str | None = None,
    fields: GnssFields | None = None,
    smooth: bool = True,
    on_frame: Callable[[int, LapState | None], None] | None = None,
    **options: Any,
) -> tuple[list[Lap], GnssLapChannels]:
    """Laps of one recorded session from its fixes, through the same plug-in as live, the fixes
    smoothed both ways first (:meth:`GnssLapTimer.smooth`: after the session every fix can learn
    from the ones after it; ``smooth=False`` times them as live). ``on_frame`` is told each
    frame's index and state (None before the first fix).

    :raises TrackError: no source of the frame has latitude and longitude channels.
    """
    found, use = find_gnss_source(frames, source, fields)
    sub = frames[found]
    plug = GnssLapChannels(circuit, source=found, fields=use, **options)
    t = np.asarray(times_s, dtype=np.float64)
    lat = np.asarray(sub[use.lat], dtype=np.float64)
    lon = np.asarray(sub[use.lon], dtype=np.float64)
    fix_t = np.asarray(sub[use.time_us], dtype=np.float64) / 1e6 if use.time_us is not None else None
    ve = vn = None
    if use.vel_n is not None and use.vel_e is not None:
        ve, vn = np.asarray(sub[use.vel_e], np.float64), np.asarray(sub[use.vel_n], np.float64)
    elif use.speed is not None and use.course is not None:
        v = np.asarray(sub[use.speed], np.float64)
        c = np.radians(np.asarray(sub[use.course], np.float64))
        ve, vn = v * np.sin(c), v * np.cos(c)
    fix_mode = np.asarray(sub[use.fix_mode], dtype=np.int64) if use.fix_mode is not None else None

    def frame(i: int) -> tuple[float, float, float, float | None, float | None, float | None, bool]:
        return (
            float(t[i]),
            float(lat[i]),
            float(lon[i]),
            None if fix_t is None else float(fix_t[i]),
            None if ve is None else float(ve[i]),
            None if vn is None else float(vn[i]),
            fix_mode is None or int(fix_mode[i]) != NO_FIX,
        )

    estimates: dict[int, tuple[float, float]] = {}
    if smooth and plug.timer is not None and plug.plane is not None:
        # the frames that bring a new fix (as the plug-in picks them), smoothed as one track
        probe = GnssLapChannels(None, source=found, fields=use)
        rows = []
        for i in range(len(t)):
            time_s, la, lo, fix_s, _, _, has_fix = frame(i)
            if probe._new_fix(time_s, la, lo, fix_s, has_fix) is not None:
                rows.append(i)
        if rows:
            xs, ys = plug.plane.to_xy(lat[rows], lon[rows])
            ft = t[rows] if fix_t is None else np.where(fix_t[rows] > 0.0, fix_t[rows], t[rows])
            sx, sy = plug.timer.smooth(
                ft, xs, ys, None if ve is None else ve[rows], None if vn is None else vn[rows]
            )
            estimates = {i: (float(a), float(b)) for i, a, b in zip(rows, sx, sy, strict=True)}
    for i in range(len(t)):
        st = plug.feed(*frame(i), estimate=estimates.get(i))
        if on_frame is not None:
            on_frame(i, st)
    plug.end_session()
    return plug.laps, plug


def nearest_circuit(
    frames: Any, source: str | None, dirs: Sequence[Path], *, max_m: float = 3000.0
) -> Circuit | None:
    """For a recording's frames with GNSS fixes: the circuit nearest the first fix (None when the
    frames have no fix, or no circuit is that near)."""
    try:
        found, fields = find_gnss_source(frames, source)
    except TrackError:
        return None
    lat = np.asarray(frames[found][fields.lat], dtype=np.float64)
    lon = np.asarray(frames[found][fields.lon], dtype=np.float64)
    ok = np.flatnonzero(np.isfinite(lat) & np.isfinite(lon) & ~((lat == 0.0) & (lon == 0.0)))
    if len(ok) == 0:
        return None
    candidates, _ = circuits_in(list(dirs))
    picked = pick_circuit(float(lat[ok[0]]), float(lon[ok[0]]), candidates, max_m=max_m)
    return None if picked is None else picked[0]
