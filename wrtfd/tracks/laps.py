"""Lap and timing-sector detection from positions, live (one sample at a time) or after the fact.

The detector follows the car's *progress*: lap distance unwrapped across the start line, so a lap
is counted when progress passes the next multiple of the lap length beyond the furthest line
crossed so far. Consequences, all on purpose:

- a car that reverses back over the line and crosses it again forwards does not start a new lap;
- a car that starts just behind the line completes nothing until it crosses it (lap 0 is the
  out-lap before the first crossing);
- a jump further than plausible between two samples (reset to the pits, teleport, position
  glitch) abandons the lap in progress: it is not timed, and timing restarts at the next crossing.

Crossing times are interpolated linearly between the two samples on either side of the line, so
lap times do not depend on the sample rate beyond the path's curvature between samples.

Timing sectors are lap distances (the first is 0, the line): the track's ``"wrtfd"`` extension
``"timing-sectors"`` gives them, otherwise the lap is split in three equal parts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import numpy.typing as npt

from wrtfd.errors import TrackError
from wrtfd.tracks.geometry import LanePath
from wrtfd.tracks.model import Track

__all__ = [
    "Lap",
    "LapDetector",
    "LapState",
    "detect_laps",
    "format_lap_time",
    "lap_table_rows",
    "timing_sectors",
]


def format_lap_time(seconds: float) -> str:
    """``1:23.456`` from 83.456 s; ``42.100`` under a minute."""
    ms = round(seconds * 1000)
    minutes, rest = divmod(ms, 60_000)
    return f"{minutes}:{rest / 1000:06.3f}" if minutes else f"{rest / 1000:.3f}"


@dataclass(frozen=True, slots=True)
class Lap:
    """A completed, timed lap (1 = the lap after the first crossing of the line).

    ``pit``: for GNSS laps on a circuit with pit lines, ``"in"``, ``"out"`` or ``"in-out"``
    (:mod:`wrtfd.tracks.pitlane`); None for a lap on the track.
    """

    number: int
    start_s: float
    end_s: float
    sector_times_s: tuple[float, ...]
    pit: str | None = None

    @property
    def time_s(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True, slots=True)
class LapState:
    """What the detector says about one sample."""

    lap: int  # 0 before the first crossing, then 1, 2, ...
    lap_distance_m: float
    sector: int  # timing sector index, 0-based
    lap_time_s: float  # time since this lap started (since the first sample on lap 0 or after a reset)
    completed: Lap | None = None  # the lap that ended at this sample, if any


def timing_sectors(track: Track, path: LanePath) -> tuple[float, ...]:
    """Start distances of the timing sectors (first 0.0), from the track or thirds of the lap.

    :raises TrackError: when the extension's list is not increasing distances inside the lap.
    """
    ext = track.extensions.get("wrtfd")
    raw = ext.get("timing-sectors") if isinstance(ext, dict) else None
    if raw is None:
        return (0.0, path.length_m / 3.0, 2.0 * path.length_m / 3.0)
    if not isinstance(raw, list) or not raw or not all(isinstance(v, int | float) for v in raw):
        raise TrackError(f"{track.source}: wrtfd.timing-sectors must be a list of lap distances")
    marks = tuple(float(v) for v in raw)
    if marks[0] != 0.0 or any(b <= a for a, b in pairwise(marks)) or marks[-1] >= path.length_m:
        raise TrackError(
            f"{track.source}: wrtfd.timing-sectors must start at 0 and increase below the lap length"
            f" {path.length_m:.1f}"
        )
    return marks


class LapDetector:
    """Stateful lap detector over (time, x, z) samples in track coordinates.

    ``max_speed_mps`` bounds plausible motion between samples; anything faster is a reset.
    """

    def __init__(
        self,
        path: LanePath,
        *,
        sectors_m: Sequence[float] = (0.0,),
        max_speed_mps: float = 150.0,
        min_jump_m: float = 30.0,
    ) -> None:
        if not sectors_m or sectors_m[0] != 0.0:
            raise TrackError("timing sectors must start at lap distance 0")
        self.path = path
        self.length_m = path.length_m
        self.sectors_m = tuple(sectors_m)
        self.max_speed_mps = max_speed_mps
        self.min_jump_m = min_jump_m
        self.laps: list[Lap] = []
        self.reset()

    def reset(self) -> None:
        """Forget everything (a new session)."""
        self.laps = []
        self._lap = 0
        self._t_prev: float | None = None
        self._s_prev = 0.0
        self._p_prev = 0.0
        self._lap_start_t: float | None = None  # None: not timing (before the first crossing)
        self._state_start_t = 0.0
        self._next_mark = 0  # global index of the next mark (k * nsec + j)
        self._mark_times: list[float] = []  # crossing times of the current lap's marks
        self._max_mark = -1

    # marks: progress values k * L + sectors_m[j]; index m = k * nsec + j
    def _mark_p(self, m: int) -> float:
        n = len(self.sectors_m)
        k, j = divmod(m, n)
        return k * self.length_m + self.sectors_m[j]

    def _first_mark_after(self, p: float) -> int:
        n = len(self.sectors_m)
        k = math.floor(p / self.length_m)
        m = k * n
        while self._mark_p(m) <= p:
            m += 1
        return m

    def update(self, t_s: float, x: float, z: float) -> LapState:
        """Feed one sample (time strictly increasing is expected; equal or earlier times are ignored
        for timing but still give a state)."""
        near = self._s_prev if self._t_prev is not None else None
        s = self.path.project(x, z, near_m=near).distance_m
        return self.update_distance(t_s, s)

    def update_distance(self, t_s: float, s: float) -> LapState:
        """Feed one sample already projected to lap distance ``s``."""
        completed: Lap | None = None
        if self._t_prev is None:
            self._start_tracking(t_s, s)
        else:
            dt = t_s - self._t_prev
            delta = (s - self._s_prev + self.length_m / 2.0) % self.length_m - self.length_m / 2.0
            limit = max(self.min_jump_m, self.max_speed_mps * max(dt, 0.0))
            if dt <= 0.0:
                pass  # duplicate or out-of-order time: no timing decisions on it
            elif abs(delta) > limit:
                self._start_tracking(t_s, s)  # reset: the lap in progress is abandoned
                self._lap_start_t = None
            else:
                p = self._p_prev + delta
                while self._mark_p(self._next_mark) <= p:
                    mp = self._mark_p(self._next_mark)
                    t_cross = self._t_prev + (mp - self._p_prev) / (p - self._p_prev) * dt
                    done = self._cross_mark(self._next_mark, t_cross)
                    completed = done or completed
                    self._next_mark += 1
                self._p_prev = p
        self._t_prev = t_s if self._t_prev is None or t_s > self._t_prev else self._t_prev
        self._s_prev = s
        start = self._lap_start_t if self._lap_start_t is not None else self._state_start_t
        return LapState(self._lap, s, self._sector_of(s), t_s - start, completed)

    def _start_tracking(self, t_s: float, s: float) -> None:
        self._t_prev = t_s
        self._p_prev = s
        self._state_start_t = t_s
        self._next_mark = self._first_mark_after(s)
        self._mark_times = []

    def _cross_mark(self, m: int, t_cross: float) -> Lap | None:
        n = len(self.sectors_m)
        j = m % n
        if j != 0:
            if self._lap_start_t is not None:
                self._mark_times.append(t_cross)
            return None
        done: Lap | None = None
        if self._lap_start_t is not None and len(self._mark_times) == n - 1:
            times = [self._lap_start_t, *self._mark_times, t_cross]
            sectors = tuple(b - a for a, b in pairwise(times))
            done = Lap(self._lap, self._lap_start_t, t_cross, sectors)
            self.laps.append(done)
        self._lap += 1
        self._lap_start_t = t_cross
        self._mark_times = []
        return done

    def _sector_of(self, s: float) -> int:
        j = 0
        for i, start in enumerate(self.sectors_m):
            if s >= start:
                j = i
        return j

    @property
    def best_lap(self) -> Lap | None:
        return min(self.laps, key=lambda lap: lap.time_s, default=None)


def detect_laps(
    path: LanePath,
    times_s: npt.ArrayLike,
    xs: npt.ArrayLike,
    zs: npt.ArrayLike,
    *,
    sectors_m: Sequence[float] = (0.0,),
    max_speed_mps: float = 150.0,
) -> tuple[list[Lap], list[LapState]]:
    """Run a detector over whole arrays (after the fact): completed laps and per-sample states."""
    t = np.asarray(times_s, dtype=np.float64).reshape(-1)
    x = np.asarray(xs, dtype=np.float64).reshape(-1)
    z = np.asarray(zs, dtype=np.float64).reshape(-1)
    if not (len(t) == len(x) == len(z)):
        raise TrackError("times and positions have different lengths")
    det = LapDetector(path, sectors_m=sectors_m, max_speed_mps=max_speed_mps)
    states: list[LapState] = []
    if len(t) == 0:
        return [], states
    s_all, _, _ = path.project_many(x, z)
    ok = np.isfinite(x) & np.isfinite(z) & np.isfinite(t)
    for i in range(len(t)):
        if ok[i]:
            states.append(det.update_distance(float(t[i]), float(s_all[i])))
    return det.laps, states


def lap_table_rows(laps: Iterable[Lap]) -> list[tuple[int, float, tuple[float, ...]]]:
    return [(lap.number, lap.time_s, lap.sector_times_s) for lap in laps]
