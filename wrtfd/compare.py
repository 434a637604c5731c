"""Lap against lap: traces aligned by lap distance, and the time delta along the lap.

Pure numpy (no plotting, no I/O): ``wrtfd compare`` reads the laps and draws them with
:func:`wrtfd.plot.plot_comparison`. Two laps of the same track align by lap distance whatever
recorded them (two games, two files, two drivers): distance along the track's lane is the one
axis they share. The delta at distance d is ``time_b(d) - time_a(d)``, the time each lap took
to get there (positive: B is behind); it is interpolated linearly between frames, from (0, 0)
at the line to (lap length, lap time) at the next crossing, so it ends at the lap-time
difference and is exactly zero for a lap against itself.

Each lap's distance is taken as a fraction of its own length: a lap from recorded lap channels
knows its length only as the furthest distance its frames recorded, which differs between two
files by up to a frame's travel (60 Hz against 50 Hz: 0.2 m of 205 m). Compared at the same
fraction, both laps reach their lines together and the delta ends at the lap-time difference
(compared at the same metre, the longer estimate would not have reached its end yet).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from wrtfd.driver_channels import driver_channels
from wrtfd.errors import TrackError
from wrtfd.tracks.analysis import SessionLaps, find_position_fields, position_arrays
from wrtfd.tracks.geodesy import LocalPlane
from wrtfd.tracks.laps import Lap

__all__ = ["LapTrace", "lap_trace", "map_positions", "pick_lap", "time_delta"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class LapTrace:
    """One lap's frames: distance from the line, time since the line, driver channels, map."""

    label: str
    lap: Lap
    length_m: float
    distance_m: FloatArray
    time_s: FloatArray
    speed_kmh: FloatArray
    throttle: FloatArray
    brake: FloatArray
    gear: FloatArray
    x: FloatArray
    z: FloatArray

    def time_at(self, distance_m: npt.ArrayLike) -> FloatArray:
        """Time since the line at each distance: (0, 0) at the line, (length, lap time) at the end."""
        d = np.concatenate(([0.0], np.maximum.accumulate(self.distance_m), [self.length_m]))
        t = np.concatenate(([0.0], self.time_s, [self.lap.time_s]))
        return np.interp(np.asarray(distance_m, dtype=np.float64), d, t)


def map_positions(
    frames: np.ndarray, source: str | None, plane: LocalPlane | None = None
) -> tuple[str | None, FloatArray, FloatArray, npt.NDArray[np.bool_]]:
    """The source with positions and its map x, z and validity per frame: a game's track
    coordinates, else a GNSS source's fixes projected into ``plane`` (default: the first fix's).

    :raises TrackError: neither.
    """
    from wrtfd.tracks.gnsslaps import find_gnss_source, has_gnss

    try:
        src, pos = find_position_fields(frames.dtype, source)
    except TrackError:
        if not has_gnss(frames, source):
            raise
        from wrtfd.tracks.gnssanalysis import gnss_map_xy, gnss_plane

        found = find_gnss_source(frames, source)[0]
        x, z, ok = gnss_map_xy(frames, plane or gnss_plane(frames, found), found)
        return found, x, z, ok
    x, z, ok = position_arrays(frames, src, pos)
    return src, x, z, ok


def pick_lap(laps: SessionLaps, number: int | None) -> Lap:
    """Lap ``number`` (default: the best) among the completed laps.

    :raises TrackError: no completed lap, or not that one.
    """
    if not laps.laps:
        raise TrackError("no completed lap in this session")
    if number is None:
        return min(laps.laps, key=lambda lap: lap.time_s)
    found = laps.lap(number)
    if found is None:
        have = ", ".join(str(lap.number) for lap in laps.laps)
        raise TrackError(f"no completed lap {number} (completed: {have})")
    return found


def lap_trace(
    frames: np.ndarray,
    times_s: npt.ArrayLike,
    laps: SessionLaps,
    lap: Lap,
    *,
    source: str | None = None,
    label: str = "",
    plane: LocalPlane | None = None,
) -> LapTrace:
    """The frames of ``lap`` with their lap distance and time since the line. A GNSS recording
    (latitude and longitude, no game positions) is mapped in ``plane`` (default: its first fix's;
    :mod:`wrtfd.tracks.gnssanalysis`).

    :raises TrackError: no positions or speed channel in ``source``.
    """
    t = np.asarray(times_s, dtype=np.float64)
    src, x, z, ok = map_positions(frames, source, plane)
    inside = (laps.lap_number == lap.number) & laps.valid & ok & (t >= lap.start_s) & (t <= lap.end_s)
    if not inside.any():
        raise TrackError(f"lap {lap.number} has no frames with a position")
    ch = driver_channels(frames, src)
    idx = np.flatnonzero(inside)
    length = laps.lap_length_m
    if not np.isfinite(length) or length <= 0.0:
        length = float(np.max(laps.lap_distance_m[idx]))
    return LapTrace(
        label=label,
        lap=lap,
        length_m=float(length),
        distance_m=laps.lap_distance_m[idx].astype(np.float64),
        time_s=t[idx] - lap.start_s,
        speed_kmh=ch.speed_kmh[idx],
        throttle=ch.throttle[idx],
        brake=ch.brake[idx],
        gear=ch.gear[idx],
        x=x[idx],
        z=z[idx],
    )


def time_delta(a: LapTrace, b: LapTrace, points: int = 2000) -> tuple[FloatArray, FloatArray]:
    """(distance grid over the shorter of the two lap lengths, time of B minus time of A at the
    same fraction of each lap's own length): it ends at the lap-time difference."""
    length = min(a.length_m, b.length_m)
    grid = np.linspace(0.0, length, points)
    fraction = grid / length if length > 0.0 else np.zeros_like(grid)
    return grid, b.time_at(fraction * b.length_m) - a.time_at(fraction * a.length_m)
