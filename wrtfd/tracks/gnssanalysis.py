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
from wrtfd.tracks.analysis import SessionLaps
from wrtfd.tracks.circuit import Circuit, recorded_circuit
from wrtfd.tracks.geodesy import LocalPlane
from wrtfd.tracks.gnsslaps import NO_FIX, GnssLapChannels, find_gnss_source, nearest_circuit

__all__ = ["file_circuit", "gnss_map_xy", "gnss_plane", "gnss_session_analysis"]

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
    found, fields, lat, lon, ok = _fixes(frames, source)
    sub = frames[found]
    t = np.asarray(times_s, dtype=np.float64)
    fix_t = np.asarray(sub[fields.time_us], dtype=np.float64) / 1e6 if fields.time_us is not None else None
    ve = vn = None
    if fields.vel_n is not None and fields.vel_e is not None:
        ve, vn = np.asarray(sub[fields.vel_e], np.float64), np.asarray(sub[fields.vel_n], np.float64)
    elif fields.speed is not None and fields.course is not None:
        v = np.asarray(sub[fields.speed], np.float64)
        c = np.radians(np.asarray(sub[fields.course], np.float64))
        ve, vn = v * np.sin(c), v * np.cos(c)
    plug = GnssLapChannels(circuit, source=found, fields=fields)
    n = len(frames)
    lap_number = np.zeros(n, dtype=np.int64)
    lap_distance = np.zeros(n, dtype=np.float64)
    for i in range(n):
        st = plug.feed(
            float(t[i]),
            float(lat[i]),
            float(lon[i]),
            None if fix_t is None else float(fix_t[i]),
            None if ve is None else float(ve[i]),
            None if vn is None else float(vn[i]),
            bool(ok[i]),
        )
        if st is not None:
            lap_number[i] = st.lap
            lap_distance[i] = st.lap_distance_m
    return SessionLaps(list(plug.laps), lap_number, lap_distance, ok, (0.0,), math.nan)


def file_circuit(metadata: Any, frames: np.ndarray, source: str | None, where: str) -> Circuit | None:
    """The recording's own circuit (``CircuitLines``), else the known circuit nearest its first
    fix (the shipped library), else None.

    :raises TrackError: the metadata's circuit is damaged.
    """
    circuit = recorded_circuit(metadata, where)
    if circuit is None:
        circuit = nearest_circuit(frames, source, [])
    return circuit
