"""Laps of a recorded session, re-detected from its positions after the fact.

Works on the numpy frames of a WRTF session (any reader gives them) and needs no recorder:
``wrtfd laps`` and ``wrtfd plot`` use it, and it is what to run when the live detection was off
(wrong track configured, none at all, a lap-line moved in the track file).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from wrtfd.errors import TrackError
from wrtfd.protocols import MotecChannels, all_protocols
from wrtfd.tracks.geometry import LanePath
from wrtfd.tracks.lapchannels import POSITION_FIELDS, PositionFields
from wrtfd.tracks.laps import Lap, LapDetector, timing_sectors
from wrtfd.tracks.model import Track
from wrtfd.tracks.pitlane import racing_laps

__all__ = [
    "SessionLaps",
    "analyse_frames",
    "find_position_fields",
    "position_arrays",
    "recorded_session_laps",
    "recorded_timing_sectors",
    "session_laps",
]


@dataclass(frozen=True, slots=True)
class SessionLaps:
    laps: list[Lap]
    lap_number: npt.NDArray[np.int64]  # per frame (held where the position is missing)
    lap_distance_m: npt.NDArray[np.float64]
    valid: npt.NDArray[np.bool_]  # frames that had a usable position
    sectors_m: tuple[float, ...]
    lap_length_m: float

    @property
    def best(self) -> Lap | None:
        """The fastest lap not through the pit lane."""
        return min(racing_laps(self.laps), key=lambda lap: lap.time_s, default=None)

    @property
    def crossings_s(self) -> list[float]:
        """Times the line was crossed: the starts and ends of the completed laps, in order."""
        return sorted({t for lap in self.laps for t in (lap.start_s, lap.end_s)})

    def lap(self, number: int) -> Lap | None:
        return next((lap for lap in self.laps if lap.number == number), None)


def _by_signature(names: tuple[str, ...]) -> list[PositionFields]:
    """The position of the protocol whose signature fields a source has (the largest signature
    first), before any other: a GT7 file has Forza's position names too, but GT7's ``on_track``."""
    found = [
        (len(info.motec.signature), info.position)
        for info in all_protocols().values()
        if isinstance(info.motec, MotecChannels)
        and isinstance(info.position, PositionFields)
        and info.motec.signature <= set(names)
    ]
    return [pos for _, pos in sorted(found, key=lambda item: -item[0])]


def find_position_fields(dtype: np.dtype, source: str | None = None) -> tuple[str | None, PositionFields]:
    """Find which source struct of a frame dtype holds positions, and under which names.

    :raises TrackError: when none (or, with ``source``, not that one) has known position fields.
    """
    names = dtype.names or ()
    candidates: list[str | None] = [source] if source is not None else [n for n in names if n != "tick"]
    if source is None:
        candidates.append(None)  # a single-source file with the fields at the top level
    for cand in candidates:
        sub = dtype if cand is None else (dtype[cand] if cand in names else None)
        if sub is None or sub.names is None:
            continue
        for pos in _by_signature(sub.names) + list(POSITION_FIELDS.values()):
            if pos.x in sub.names and pos.z in sub.names:
                active = pos.active if pos.active is not None and pos.active in sub.names else None
                return cand, PositionFields(pos.x, pos.z, pos.z_sign, active)
    where = f"source {source!r}" if source else "any source"
    raise TrackError(
        f"no position channels in {where} of this recording (known: {', '.join(sorted(POSITION_FIELDS))})"
    )


def position_arrays(
    frames: np.ndarray, source: str | None, pos: PositionFields
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Track x, z and a validity mask (finite, not the menus' exact zeros, active) for every frame."""
    sub = frames if source is None else frames[source]
    x = np.asarray(sub[pos.x], dtype=np.float64)
    z = np.asarray(sub[pos.z], dtype=np.float64) * pos.z_sign
    ok = np.isfinite(x) & np.isfinite(z) & ~((x == 0.0) & (z == 0.0))
    if pos.active is not None:
        ok &= np.asarray(sub[pos.active]).astype(bool)
    return x, z, ok


def analyse_frames(
    frames: np.ndarray,
    times_s: npt.ArrayLike,
    track: Track,
    *,
    source: str | None = None,
    position: PositionFields | None = None,
    lane: int = 0,
    max_speed_mps: float = 150.0,
) -> SessionLaps:
    """Detect laps and timing sectors in one session's frames.

    :raises TrackError: no position channels, or times and frames of different lengths.
    """
    t = np.asarray(times_s, dtype=np.float64)
    if len(t) != len(frames):
        raise TrackError(f"{len(frames)} frames but {len(t)} times")
    if position is None:
        source, position = find_position_fields(frames.dtype, source)
    path = LanePath(track, lane)
    sectors_m = timing_sectors(track, path)
    x, z, ok = position_arrays(frames, source, position)
    n = len(frames)
    lap_number = np.zeros(n, dtype=np.int64)
    lap_distance = np.zeros(n, dtype=np.float64)
    det = LapDetector(path, sectors_m=sectors_m, max_speed_mps=max_speed_mps)
    if ok.any():
        idx = np.flatnonzero(ok)
        s_all, _, _ = path.project_many(x[idx], z[idx])
        lap, dist = 0, 0.0
        j = 0
        for i in range(n):
            if ok[i]:
                st = det.update_distance(float(t[i]), float(s_all[j]))
                j += 1
                lap, dist = st.lap, st.lap_distance_m
            lap_number[i] = lap
            lap_distance[i] = dist
    return SessionLaps(list(det.laps), lap_number, lap_distance, ok, sectors_m, path.length_m)


def recorded_timing_sectors(
    metadata: Mapping[str, str], name: str = "laps"
) -> tuple[tuple[float, ...], float] | None:
    """The timing sectors and lap length the lap channels were computed with (their file
    metadata, ``laps.timing_sectors_m`` and ``laps.lap_length_m``); None when the file has none
    or they make no sense (a file is untrusted input)."""
    try:
        marks = json.loads(metadata[f"{name}.timing_sectors_m"])
        length = float(json.loads(metadata[f"{name}.lap_length_m"]))
    except (KeyError, ValueError, TypeError):
        return None
    if (
        not isinstance(marks, list)
        or not 1 <= len(marks) <= 255
        or not all(isinstance(m, int | float) and not isinstance(m, bool) for m in marks)
        or not math.isfinite(length)
    ):
        return None
    out = tuple(float(m) for m in marks)
    if out[0] != 0.0 or any(b <= a for a, b in itertools.pairwise(out)) or out[-1] >= length:
        return None
    return out, length


def recorded_session_laps(
    frames: np.ndarray,
    times_s: npt.ArrayLike,
    *,
    sectors: tuple[tuple[float, ...], float] | None = None,
) -> SessionLaps:
    """Laps from the lap channels the recorder added live (``laps.*``).

    A lap is complete when both its first frame and the next lap's are in the session; its
    start is the frame time minus the recorded lap time at its first frame (the crossing
    itself, interpolated by the live detector). Its sector times are the live detector's:
    each timing sector's start is crossed between two position updates (frames where the lap
    distance or lap time changed; frames without a position repeat them), at the time
    interpolated by distance, as the detector does. ``sectors``: the timing sectors and lap
    length (:func:`recorded_timing_sectors`); without them (a file recorded before they were
    stored) each sector start is placed between the furthest distance recorded before it and
    the nearest after it, which is close (well within a frame's time).

    :raises TrackError: the recording has no lap channels.
    """
    if frames.dtype.names is None or "laps" not in frames.dtype.names:
        raise TrackError("this recording has no lap channels; give --track to detect laps from positions")
    t = np.asarray(times_s, dtype=np.float64)
    lap_no = np.asarray(frames["laps"]["lap_number"], dtype=np.int64)
    lap_t = np.asarray(frames["laps"]["lap_time"], dtype=np.float64)
    dist = np.asarray(frames["laps"]["lap_distance"], dtype=np.float64)
    # an import of another logger's laps may have no sector channel (.ibt): no sector times then
    has_sector = "sector" in (frames["laps"].dtype.names or ())
    sector = np.asarray(frames["laps"]["sector"] if has_sector else np.zeros(len(frames)), dtype=np.int64)
    starts = np.flatnonzero(np.diff(lap_no) > 0) + 1
    crossings = [(int(lap_no[i]), float(t[i] - lap_t[i])) for i in starts]
    length = float(np.nanmax(dist)) if len(dist) else 0.0
    # position updates: the first frame of each run of equal (lap, distance, lap time)
    update = np.ones(len(frames), dtype=bool)
    update[1:] = (np.diff(lap_no) != 0) | (np.diff(dist) != 0) | (np.diff(lap_t) != 0)
    upd = np.flatnonzero(update)
    if sectors is not None:
        marks, length = sectors
    else:
        marks = _marks_from_sector_channel(dist[upd], sector[upd], lap_no[upd])
    laps = [
        Lap(num, t0, t1, _sector_times(num, t0, t1, marks, length, upd, t, dist, lap_no))
        for (num, t0), (nxt, t1) in itertools.pairwise(crossings)
        if nxt == num + 1 and num >= 1
    ]
    sectors_m = marks if marks else (0.0,)
    return SessionLaps(laps, lap_no, dist, np.ones(len(frames), dtype=bool), sectors_m, length)


def _marks_from_sector_channel(
    dist: npt.NDArray[np.float64], sector: npt.NDArray[np.int64], lap_no: npt.NDArray[np.int64]
) -> tuple[float, ...]:
    """Sector starts estimated from where ``laps.sector`` steps up between two updates of one
    lap: between the furthest distance still in the sector before and the nearest in the one
    after, over every lap of the session."""
    if len(sector) == 0:
        return ()
    n = int(sector.max()) + 1
    marks = [0.0]
    for j in range(1, n):
        step = np.flatnonzero((sector[1:] == j) & (sector[:-1] == j - 1) & (lap_no[1:] == lap_no[:-1])) + 1
        if len(step) == 0:
            return ()
        lo, hi = float(np.max(dist[step - 1])), float(np.min(dist[step]))
        marks.append((lo + hi) / 2.0 if lo <= hi else hi)
    return tuple(marks)


def _sector_times(
    num: int,
    t0: float,
    t1: float,
    marks: Sequence[float],
    length: float,
    upd: npt.NDArray[np.intp],
    t: npt.NDArray[np.float64],
    dist: npt.NDArray[np.float64],
    lap_no: npt.NDArray[np.int64],
) -> tuple[float, ...]:
    """The sector times of lap ``num`` (from ``t0`` to ``t1``), or () when a crossing is missing."""
    if len(marks) < 2:
        return ()
    mine = np.flatnonzero(lap_no[upd] == num)
    if len(mine) == 0:
        return ()
    times = [t0]
    for mark in marks[1:]:
        after = mine[dist[upd[mine]] >= mark]
        if len(after) == 0 or after[0] == 0:
            return ()
        cur, prev = upd[after[0]], upd[after[0] - 1]
        s_prev = dist[prev] - (length if lap_no[prev] < num else 0.0)  # before the line: unwrapped
        if dist[cur] <= s_prev:
            return ()
        times.append(float(t[prev] + (mark - s_prev) / (dist[cur] - s_prev) * (t[cur] - t[prev])))
    times.append(t1)
    return tuple(b - a for a, b in itertools.pairwise(times))


def session_laps(
    frames: np.ndarray,
    times_s: npt.ArrayLike,
    track: Track | None = None,
    *,
    source: str | None = None,
    lane: int = 0,
    sectors: tuple[tuple[float, ...], float] | None = None,
) -> SessionLaps:
    """Laps of one session: re-detected from positions with ``track``, else the recorded ones
    (``sectors``: the file's :func:`recorded_timing_sectors`).

    :raises TrackError: no positions (with a track) or no lap channels (without).
    """
    if track is not None:
        return analyse_frames(frames, times_s, track, source=source, lane=lane)
    return recorded_session_laps(frames, times_s, sectors=sectors)
