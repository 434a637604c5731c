"""The laps of a recorded file's sessions, chosen as ``wrtfd laps FILE`` chooses them.

One place for the choice, so that ``wrtfd laps`` and ``wrtfd dataset`` time a file alike: a
track file given re-detects laps from the positions; else a circuit given, or the start/finish
line a mark laid while the file was recorded (its marker), or the circuit the file keeps in its
metadata, or the shipped circuit nearest its first GNSS fix, times GNSS laps; else the lap
channels the recorder added live are read back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from wrtfd.errors import TrackError
from wrtfd.format.reader import Reader
from wrtfd.tracks.analysis import recorded_timing_sectors, session_laps
from wrtfd.tracks.circuit import Circuit, recorded_circuit
from wrtfd.tracks.gnssanalysis import laid_circuit_in
from wrtfd.tracks.gnsslaps import gnss_session_laps, has_gnss, nearest_circuit
from wrtfd.tracks.laps import Lap
from wrtfd.tracks.model import Track

__all__ = ["FileTiming", "TimedSession", "file_timing", "time_session"]


@dataclass(frozen=True, slots=True)
class FileTiming:
    """How a file's laps are timed: re-detected on ``track``, GNSS laps on ``circuit``, or (both
    None) read back from the recorded lap channels with the file's timing ``sectors``."""

    track: Track | None
    circuit: Circuit | None
    sectors: tuple[tuple[float, ...], float] | None
    source: str | None = None
    lane: int = 0


@dataclass(frozen=True, slots=True)
class TimedSession:
    laps: list[Lap]
    #: Per frame of ``reader.frames(i)``: the lap number (0 before the first crossing) and the
    #: distance from the line, m; None for GNSS laps unless asked (``per_frame``).
    lap_number: npt.NDArray[np.int64] | None
    lap_distance_m: npt.NDArray[np.float64] | None
    #: GNSS laps timed from the fixes alone after the receiver's velocity was found wrong all
    #: the time (:attr:`~wrtfd.tracks.gnsslaps.GnssLapTimer.velocity_ignored`).
    velocity_ignored: bool = False


def file_timing(
    reader: Reader,
    *,
    track: Track | None = None,
    circuit: Circuit | None = None,
    source: str | None = None,
    lane: int = 0,
    circuit_dirs: Sequence[Path] = (),
) -> FileTiming:
    """The timing of ``reader``'s file (see the module docstring).

    :raises TrackError: the file's recorded circuit is not a valid circuit file.
    """
    if circuit is None and track is None:
        circuit = laid_circuit_in(reader) or recorded_circuit(reader.metadata, str(reader.path))
    if circuit is None and track is None and reader.sessions:
        circuit = nearest_circuit(reader.frames(0), source, list(circuit_dirs))
    return FileTiming(track, circuit, recorded_timing_sectors(reader.metadata), source, lane)


def time_session(reader: Reader, i: int, timing: FileTiming, *, per_frame: bool = False) -> TimedSession:
    """The completed laps of session ``i`` and each frame's lap and distance (for GNSS laps only
    ``per_frame``: they take a second pass over the fixes).

    :raises TrackError: nothing to time the laps with (no positions, lap channels or fixes).
    """
    frames = reader.frames(i)
    times = (reader.frame_times_us(i) - reader.sessions[i].time_base_us) / 1e6
    if timing.circuit is not None:
        laps, plug = gnss_session_laps(frames, times, timing.circuit, source=timing.source)
        ignored = plug.velocity_ignored
        if not per_frame:
            return TimedSession(list(laps), None, None, ignored)
        from wrtfd.tracks.gnssanalysis import gnss_session_analysis

        each = gnss_session_analysis(frames, times, timing.circuit, source=timing.source)
        return TimedSession(list(laps), each.lap_number, each.lap_distance_m, ignored)
    if timing.track is None and "laps" not in (frames.dtype.names or ()) and has_gnss(frames, timing.source):
        raise TrackError(
            "this GNSS recording has no lap channels and no known circuit near its first fix;"
            " give --circuit FILE (docs/circuits.md)"
        )
    found = session_laps(
        frames, times, timing.track, source=timing.source, lane=timing.lane, sectors=timing.sectors
    )
    return TimedSession(found.laps, found.lap_number, found.lap_distance_m)
