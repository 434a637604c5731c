"""A GNSS recording's laps and map after the fact, for ``wrtfd compare`` and ``wrtfd plot``.

Positions come from latitude/longitude projected into a local plane (:mod:`wrtfd.tracks.geodesy`):
the circuit's (the middle of its start/finish line), so two recordings of one circuit share a
map, else the first fix's. The map's second coordinate is *south* (minus north): the plots draw
track coordinates with that axis down, so north is up. Lap distance is the distance travelled
since the line, as the live GNSS timing measures it (the integral of the receiver's speed).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from wrtfd.errors import TrackError
from wrtfd.format.markers import markers_in
from wrtfd.tracks.analysis import SessionLaps
from wrtfd.tracks.circuit import Circuit, laid_circuit, recorded_circuit
from wrtfd.tracks.geodesy import LocalPlane
from wrtfd.tracks.gnsslaps import NO_FIX, find_gnss_source, gnss_session_laps, has_gnss, nearest_circuit
from wrtfd.tracks.laps import LapState

__all__ = ["file_circuit", "gnss_map_xy", "gnss_plane", "gnss_session_analysis", "laid_circuit_in"]

FloatArray = npt.NDArray[np.float64]


def _fixes(
    frames: np.ndarray, source: str | None
) -> tuple[str, Any, FloatArray, FloatArray, npt.NDArray[np.bool_]]:
    found, fields = find_gnss_source(frames, source)
    sub = frames[found]
    lat = np.asarray(sub[fields.lat], dtype=np.float64)
    lon = np.asarray(sub[fields.lon], dtype=np.float64)
    ok = np.isfinite(lat) & np.isfinite(lon) & ~((lat == 0.0) & (lon == 0.0))
    if fields.fix_mode is not None:
        ok &= np.asarray(sub[fields.fix_mode], dtype=np.int64) != NO_FIX
    return found, fields, lat, lon, ok


def gnss_plane(frames: np.ndarray, source: str | None = None, circuit: Circuit | None = None) -> LocalPlane:
    """The circuit's plane, else the first fix's.

    :raises TrackError: no GNSS source, or not one fix.
    """
    if circuit is not None:
        return circuit.plane()
    _, _, lat, lon, ok = _fixes(frames, source)
    if not ok.any():
        raise TrackError("no GNSS fix in this session")
    i = int(np.flatnonzero(ok)[0])
    return LocalPlane(float(lat[i]), float(lon[i]))


def gnss_map_xy(
    frames: np.ndarray, plane: LocalPlane, source: str | None = None
) -> tuple[FloatArray, FloatArray, npt.NDArray[np.bool_]]:
    """Map x (east) and z (south), metres in ``plane``, and which frames have a fix.

    :raises TrackError: no GNSS source.
    """
    _, _, lat, lon, ok = _fixes(frames, source)
    x = np.full(len(frames), np.nan)
    z = np.full(len(frames), np.nan)
    if ok.any():
        px, py = plane.to_xy(lat[ok], lon[ok])
        x[ok] = px
        z[ok] = -np.asarray(py, dtype=np.float64)
    return x, z, ok


def gnss_session_analysis(
    frames: np.ndarray, times_s: npt.ArrayLike, circuit: Circuit, *, source: str | None = None
) -> SessionLaps:
    """Laps timed from the fixes against ``circuit`` (as ``wrtfd laps`` times them), with each
    frame's lap number and lap distance (distance travelled since the line).

    :raises TrackError: no GNSS source.
    """
    found, fields, _, _, ok = _fixes(frames, source)
    n = len(frames)
    lap_number = np.zeros(n, dtype=np.int64)
    lap_distance = np.zeros(n, dtype=np.float64)

    def keep(i: int, st: LapState | None) -> None:
        if st is not None:
            lap_number[i] = st.lap
            lap_distance[i] = st.lap_distance_m

    laps, _ = gnss_session_laps(frames, times_s, circuit, source=found, fields=fields, on_frame=keep)
    return SessionLaps(list(laps), lap_number, lap_distance, ok, (0.0,), math.nan)


def laid_circuit_in(reader: Any) -> Circuit | None:
    """The start/finish line last laid by a mark while ``reader``'s file was recorded (its
    marker, :data:`~wrtfd.tracks.circuit.LAID_LINE_PREFIX`), None if none was. Markers whose
    note was cut short (a torn end) are not read."""
    notes = []
    for i in range(len(reader.sessions)):
        frames = reader.frames(i)
        if has_gnss(frames):  # a game recording's note that looks like one is not one
            notes += [m.note for m in markers_in(frames) if m.complete]
    return laid_circuit(notes)


def file_circuit(
    metadata: Any, frames: np.ndarray, source: str | None, where: str, reader: Any = None
) -> Circuit | None:
    """The line a mark laid while the recording was made (its marker, in ``reader``'s file, else
    in ``frames``), else the recording's own circuit (``CircuitLines``), else the known circuit
    nearest its first fix (the shipped library), else None.

    :raises TrackError: the metadata's circuit is damaged.
    """
    circuit = (
        laid_circuit_in(reader)
        if reader is not None
        else laid_circuit(m.note for m in markers_in(frames) if m.complete)
    )
    if circuit is None:
        circuit = recorded_circuit(metadata, where)
    if circuit is None:
        circuit = nearest_circuit(frames, source, [])
    return circuit
