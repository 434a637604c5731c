"""Live predictive timing: the delta to a reference lap by distance along the lap.

Pure code, fed one sample per tick (lap number, lap distance, lap time) by whatever times the
laps: the game lap channels (:mod:`wrtfd.tracks.lapchannels`) or a GNSS lap timer. No I/O except
:meth:`Reference.from_file`, no clock.

The reference lap is a trace of time against distance on a uniform grid (``step_m``, one point
per metre by default), closed at the line with ``(lap length, lap time)``, so the delta at the
end of a lap tends to exactly the lap-time difference. At distance ``d`` and lap time ``t``::

    delta = t - t_ref(d)             (positive: slower than the reference)
    predicted lap time = reference lap time + delta

Details, reasons and the recorded channels are in docs/laps.md.
"""

from __future__ import annotations

import itertools
import math
import re
from array import array
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from wrtfd.errors import TrackError

__all__ = [
    "DEFAULT_MAX_POINTS",
    "DEFAULT_STEP_M",
    "FLEET_PREFIX",
    "PredictiveDelta",
    "Reference",
    "parse_fleet_reference",
    "parse_reference",
]

#: Grid step of a reference trace (metres).
DEFAULT_STEP_M = 1.0
#: Longest trace kept (grid points): 100 km at one point per metre, 800 kB. A longer lap is not
#: kept as a reference.
DEFAULT_MAX_POINTS = 100_000
#: A lap is traced only when its first sample is this close (in lap time) to the line: a lap
#: whose start was not seen cannot be a reference.
MAX_START_GAP_S = 2.0

_NAN = math.nan


@dataclass(frozen=True, slots=True, eq=False)
class Reference:
    """A reference lap: ``times_s[k]`` is the lap time at distance ``k * step_m`` for every grid
    point below ``length_m``; the last item is ``lap_time_s`` at ``length_m`` (the line)."""

    times_s: list[float]
    step_m: float
    length_m: float
    lap_time_s: float
    number: int = 0
    origin: str = "session"

    def time_at(self, distance_m: float) -> float:
        """Reference lap time at ``distance_m``, linear between grid points (clamped to the lap)."""
        if distance_m <= 0.0:
            return self.times_s[0]
        if distance_m >= self.length_m:
            return self.lap_time_s
        times = self.times_s
        last = len(times) - 2
        k = int(distance_m / self.step_m)
        if k >= last:  # the closing segment, from the last grid point to the line
            x0 = last * self.step_m
            t0 = times[last]
            return t0 + (distance_m - x0) * (self.lap_time_s - t0) / (self.length_m - x0)
        t0 = times[k]
        return t0 + (distance_m / self.step_m - k) * (times[k + 1] - t0)

    @classmethod
    def from_samples(
        cls,
        distances_m: list[float] | np.ndarray,
        times_s: list[float] | np.ndarray,
        *,
        lap_time_s: float,
        length_m: float,
        number: int = 0,
        origin: str = "session",
        step_m: float = DEFAULT_STEP_M,
        max_points: int = DEFAULT_MAX_POINTS,
    ) -> Reference:
        """The reference of one lap's samples (lap distance and lap time of each tick, in order).

        :raises TrackError: a lap length or time that is not positive, or a lap too long to keep.
        """
        builder = _Trace(step_m, max_points)
        for d, t in zip(distances_m, times_s, strict=True):
            builder.add(float(d), float(t))
        ref = builder.close(length_m, lap_time_s, number, origin)
        if ref is None:
            raise TrackError(
                f"reference lap {number}: cannot be kept (length {length_m} m, lap time {lap_time_s} s;"
                f" at most {max_points} points of {step_m} m)"
            )
        return ref

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        lap: int | None = None,
        *,
        session: int | None = None,
        length_m: float | None = None,
        track_name: str | None = None,
        step_m: float = DEFAULT_STEP_M,
    ) -> Reference:
        """A lap of a WRTF recording with lap channels (``laps.lap_number``, ``laps.lap_distance``,
        ``laps.lap_time``): lap ``lap`` (of ``session`` when lap numbers repeat across sessions),
        or the fastest complete lap of the file.

        ``length_m`` is the lap length (the track's); without it the line is placed where the
        recorded samples either side of it say (the live detector's own interpolation). With
        ``track_name``, a file recorded on another track (its ``Track`` metadata) is refused.

        :raises TrackError: no lap channels, no such lap, an ambiguous lap number, another track.
        :raises FormatError: the file is not a readable WRTF file.
        """
        from wrtfd.format import Reader

        laps: list[_FileLap] = []
        with Reader(path) as r:
            recorded_on = r.metadata.get("Track")
            if track_name is not None and recorded_on is not None and recorded_on != track_name:
                raise TrackError(f"{path}: recorded on track {recorded_on!r}, not {track_name!r}")
            names = r.schema.frame_dtype.names or ()
            sub = r.schema.frame_dtype["laps"].names if "laps" in names else None
            if not sub or not {"lap_number", "lap_distance", "lap_time"} <= set(sub):
                raise TrackError(
                    f"{path}: no lap channels (laps.lap_number, laps.lap_distance, laps.lap_time)"
                )
            if session is not None and session >= len(r.sessions):
                raise TrackError(f"{path}: no session {session} (the file has {len(r.sessions)})")
            for si in range(len(r.sessions)):
                if session is not None and si != session:
                    continue
                frames = r.frames(si)["laps"]
                times = (r.frame_times_us(si) - r.sessions[si].time_base_us) / 1e6
                laps.extend(_complete_laps(si, frames, times))
        if lap is not None:
            found = [x for x in laps if x.number == lap]
            if not found:
                where = f" in session {session}" if session is not None else ""
                have = ", ".join(str(x.number) for x in laps) or "none"
                raise TrackError(f"{path}: no complete lap {lap}{where} (complete laps: {have})")
            if len(found) > 1:
                sessions = ", ".join(str(x.session) for x in found)
                raise TrackError(
                    f"{path}: lap {lap} is in sessions {sessions}; name one as SESSION.LAP"
                    f" (e.g. {found[0].session}.{lap})"
                )
            chosen = found[0]
        else:
            if not laps:
                raise TrackError(f"{path}: no complete lap in the recording")
            chosen = min(laps, key=lambda x: x.lap_time_s)
        length = length_m if length_m is not None else chosen.length_m
        return cls.from_samples(
            chosen.distances_m,
            chosen.times_s,
            lap_time_s=chosen.lap_time_s,
            length_m=length,
            number=chosen.number,
            origin=f"{Path(path).name} session {chosen.session} lap {chosen.number}",
            step_m=step_m,
        )


@dataclass(frozen=True, slots=True)
class _FileLap:
    session: int
    number: int
    distances_m: np.ndarray
    times_s: np.ndarray
    lap_time_s: float
    length_m: float


def _complete_laps(session: int, laps: np.ndarray, times_s: np.ndarray) -> list[_FileLap]:
    """The complete laps of one session's recorded lap channels: lap N is complete when the next
    lap after it is N + 1 and its lap time never went back (a reset abandons a lap)."""
    number = np.asarray(laps["lap_number"], dtype=np.int64)
    dist = np.asarray(laps["lap_distance"], dtype=np.float64)
    lap_t = np.asarray(laps["lap_time"], dtype=np.float64)
    starts = np.flatnonzero(np.diff(number) != 0) + 1
    out: list[_FileLap] = []
    for a, b in itertools.pairwise(starts):
        n = int(number[a])
        if n < 1 or int(number[b]) != n + 1 or np.any(np.diff(lap_t[a:b]) < 0):
            continue
        start = times_s[a] - lap_t[a]
        end = times_s[b] - lap_t[b]
        lap_time = float(end - start)
        # the line between the last sample of the lap and the first of the next, at constant speed
        d_last, t_last, d1, t1 = dist[b - 1], lap_t[b - 1], dist[b], lap_t[b]
        length = float(d_last + d1 * (lap_time - t_last) / t1) if t1 > 0 else float(d_last)
        if lap_time > 0 and length > 0:
            out.append(_FileLap(session, n, dist[a:b], lap_t[a:b], lap_time, length))
    return out


#: ``reference = "fleet:best"`` or ``"fleet:driver=NAME"``: the team's best lap, fetched by the
#: fleet (wrtfd.fleet.lapref), not a file.
FLEET_PREFIX = "fleet:"


def parse_fleet_reference(spec: str) -> str | bool | None:
    """``"fleet:best"`` as True, ``"fleet:driver=NAME"`` as ``NAME``, anything else (a file) as None.

    :raises ValueError: ``fleet:`` followed by something else, or an empty driver name.
    """
    text = spec.strip()
    if not text.startswith(FLEET_PREFIX):
        return None
    rest = text[len(FLEET_PREFIX) :]
    if rest == "best":
        return True
    if rest.startswith("driver=") and rest[len("driver=") :].strip():
        return rest[len("driver=") :].strip()
    raise ValueError(f"reference {spec!r}: expected fleet:best or fleet:driver=NAME")


_SPEC = re.compile(r"^(?P<path>.+?)(?::(?:(?P<session>\d+)\.)?(?P<lap>\d+))?$")


def parse_reference(spec: str) -> tuple[str, int | None, int | None]:
    """``"FILE[:LAP]"`` or ``"FILE:SESSION.LAP"`` as ``(file, session, lap)``.

    :raises ValueError: an empty file name.
    """
    m = _SPEC.match(spec.strip())
    if m is None or not m["path"]:
        raise ValueError(f"reference {spec!r}: expected FILE, FILE:LAP or FILE:SESSION.LAP")
    session = int(m["session"]) if m["session"] is not None else None
    lap = int(m["lap"]) if m["lap"] is not None else None
    return m["path"], session, lap


class _Trace:
    """Time against distance on a uniform grid, built one sample at a time (bounded memory).

    Grid point 0 is the line at lap time 0; each sample further along than any before fills the
    grid points up to it, linearly from the previous one. Going back (reversing, a held frame)
    adds nothing: the trace keeps the first time each distance was reached.
    """

    __slots__ = ("d_prev", "max_points", "ok", "step_m", "t_prev", "times")

    def __init__(self, step_m: float, max_points: int) -> None:
        self.step_m = step_m
        self.max_points = max_points
        self.times = array("d", [0.0])
        self.d_prev = 0.0
        self.t_prev = 0.0
        self.ok = True

    def add(self, d: float, t: float) -> None:
        if not d > self.d_prev or not self.ok:
            return  # not further than before (or NaN)
        if not t >= self.t_prev:
            self.ok = False  # lap time went back: not one lap
            return
        step = self.step_m
        times = self.times
        k = len(times)
        x = k * step
        if x <= d:
            if d / step >= self.max_points:
                self.ok = False
                return
            slope = (t - self.t_prev) / (d - self.d_prev)
            d0, t0 = self.d_prev, self.t_prev
            while x <= d:
                times.append(t0 + (x - d0) * slope)
                k += 1
                x = k * step
        self.d_prev = d
        self.t_prev = t

    def close(self, length_m: float, lap_time_s: float, number: int, origin: str) -> Reference | None:
        """The finished trace, closed with ``(length_m, lap_time_s)``; None when it cannot be one."""
        if not (self.ok and length_m > 0 and lap_time_s > 0 and math.isfinite(length_m + lap_time_s)):
            return None
        step = self.step_m
        if length_m / step >= self.max_points:
            return None
        below = math.ceil(length_m / step)  # grid points strictly below the line: 0 .. below-1
        if below * step < length_m:
            below += 1
        while (below - 1) * step >= length_m:
            below -= 1
        times = list(self.times[:below])
        if len(times) < below:  # the last samples stop short of the line: on to it
            d0, t0 = self.d_prev, self.t_prev
            slope = (lap_time_s - t0) / (length_m - d0)
            times.extend(t0 + (k * step - d0) * slope for k in range(len(times), below))
        times.append(lap_time_s)
        return Reference(times, step, length_m, lap_time_s, number, origin)


class PredictiveDelta:
    """The live delta of the lap in progress to a reference lap.

    Feed :meth:`update` every tick and :meth:`complete` when a lap is timed (before the first
    ``update`` of the next lap). ``reference`` (a file's lap) stays for every session; without
    one the reference is the session's best lap so far. Lap 0 (before the first crossing) has no
    delta. The values (NaN when there is none) are the attributes ``delta_s``, ``predicted_s``
    (the predicted lap time) and ``last_delta_s`` (the last timed lap minus its reference).
    """

    def __init__(
        self,
        *,
        length_m: float | None = None,
        reference: Reference | None = None,
        step_m: float = DEFAULT_STEP_M,
        max_points: int = DEFAULT_MAX_POINTS,
    ) -> None:
        if not step_m > 0:
            raise ValueError(f"step_m must be positive, not {step_m}")
        self.length_m = length_m
        self.fixed = reference
        #: A reference handed over by another thread (the fleet's), taken at the next lap start.
        self.offered: Reference | None = None
        self.step_m = step_m
        self.max_points = max_points
        self.reset()

    def reset(self) -> None:
        """A new session: the session's laps are forgotten (a file's reference stays)."""
        self._take_offered()
        self.reference: Reference | None = self.fixed
        self.delta_s = _NAN
        self.predicted_s = _NAN
        self.last_delta_s = _NAN
        self._lap = -1
        self._t_prev = 0.0
        self._d_prev = 0.0
        self._trace: _Trace | None = None
        self._broken = False

    def offer(self, reference: Reference) -> None:
        """A new fixed reference from another thread: used from the next lap on (or the next
        session); the laps of the session no longer replace it."""
        self.offered = reference

    def _take_offered(self) -> None:
        ref = self.offered
        if ref is not None:
            self.offered = None
            self.fixed = ref

    def update(self, lap_number: int, lap_distance_m: float, lap_time_s: float) -> float:
        """One tick of the lap in progress; the delta (NaN without a reference)."""
        length = self.length_m
        if lap_number != self._lap:
            if self.offered is not None:  # a lap is driven against one reference, start to end
                self._take_offered()
                self.reference = self.fixed
            self._lap = lap_number
            self._broken = False
            timed = lap_number > 0 and 0.0 <= lap_time_s <= MAX_START_GAP_S
            self._trace = _Trace(self.step_m, self.max_points) if timed else None
            if length is not None and lap_distance_m > 0.5 * length and timed:
                lap_distance_m -= length  # a hair before the line by rounding: the lap's start
        elif lap_time_s < self._t_prev:
            self._broken = True  # the lap time restarted: the timer abandoned this lap
            self._trace = None
        elif length is not None and lap_distance_m < self._d_prev - 0.5 * length:
            lap_distance_m += length  # past the line by rounding, the lap not yet counted: its end
        self._t_prev = lap_time_s
        self._d_prev = lap_distance_m
        trace = self._trace
        if trace is not None:
            trace.add(lap_distance_m, lap_time_s)
        ref = self.reference
        if ref is None or lap_number <= 0 or self._broken:
            self.delta_s = self.predicted_s = _NAN
        else:
            self.delta_s = lap_time_s - ref.time_at(lap_distance_m)
            self.predicted_s = ref.lap_time_s + self.delta_s
        return self.delta_s

    def complete(
        self, lap_number: int, lap_time_s: float, length_m: float | None = None, *, reference: bool = True
    ) -> float:
        """Lap ``lap_number`` was timed at ``lap_time_s`` (``length_m``: its length, when it is
        not the constructor's; ``reference=False``: it may not become the session's reference, a
        lap through the pit lane). Returns its delta to the reference it was driven against."""
        ref = self.reference
        self.last_delta_s = lap_time_s - ref.lap_time_s if ref is not None else _NAN
        trace = self._trace if self._lap == lap_number and not self._broken and reference else None
        self._trace = None
        if trace is not None and self.fixed is None and (ref is None or lap_time_s < ref.lap_time_s):
            length = length_m if length_m is not None else self.length_m
            if length is None:
                length = trace.d_prev  # the furthest sample: the best guess without a length
            new = trace.close(length, lap_time_s, lap_number, "session")
            if new is not None:
                self.reference = new
        return self.last_delta_s
