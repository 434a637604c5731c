"""A local plane around a point on the globe, for circuits and tracks laid on the map.

Lap timing works in metres: a circuit's lines and a receiver's fixes are projected into an
azimuthal equidistant plane centred on the circuit (x east, y north, metres), where distances and
bearings from the centre are exact on the WGS84 ellipsoid and a few kilometres around it are
distorted by far less than a receiver's noise. The projection is PROJ's (pyproj), not ours.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from wrtfd._optional import require
from wrtfd.errors import TrackError

__all__ = ["LocalPlane", "track_plane"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class LocalPlane:
    """x east and y north in metres around ``(lat0, lon0)`` (degrees, WGS84)."""

    lat0: float
    lon0: float
    _forward: Any = field(init=False, repr=False, compare=False)
    _inverse: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not (-90.0 <= self.lat0 <= 90.0 and -180.0 <= self.lon0 <= 180.0):
            raise ValueError(f"origin out of range: lat {self.lat0}, lon {self.lon0}")
        pyproj = require("pyproj", extra="gnss", purpose="lap timing on the globe")
        plane = f"+proj=aeqd +lat_0={self.lat0:.12f} +lon_0={self.lon0:.12f} +ellps=WGS84 +units=m +no_defs"
        object.__setattr__(self, "_forward", pyproj.Transformer.from_crs("EPSG:4326", plane, always_xy=True))
        object.__setattr__(self, "_inverse", pyproj.Transformer.from_crs(plane, "EPSG:4326", always_xy=True))

    @overload
    def to_xy(self, lat: float, lon: float) -> tuple[float, float]: ...
    @overload
    def to_xy(self, lat: FloatArray, lon: FloatArray) -> tuple[FloatArray, FloatArray]: ...
    def to_xy(self, lat: Any, lon: Any) -> tuple[Any, Any]:
        """Degrees to metres east and north of the origin (scalars or arrays)."""
        x, y = self._forward.transform(lon, lat)
        return x, y

    @overload
    def to_latlon(self, x: float, y: float) -> tuple[float, float]: ...
    @overload
    def to_latlon(self, x: FloatArray, y: FloatArray) -> tuple[FloatArray, FloatArray]: ...
    def to_latlon(self, x: Any, y: Any) -> tuple[Any, Any]:
        """Metres east and north of the origin to degrees ``(lat, lon)``."""
        lon, lat = self._inverse.transform(x, y)
        return lat, lon


def track_plane(extensions: Mapping[str, Any]) -> LocalPlane | None:
    """The plane a track file is laid on: its ``"wrtfd": {"geo": {"lat": .., "lon": ..}}`` anchor.

    The anchor is the geodetic position of the track's origin; track x points east and track z
    north (y is up), so ``LocalPlane.to_latlon(x, z)`` puts a track point on the globe. ``None``
    when the file has no anchor.

    :raises TrackError: when the anchor is there but not two finite numbers in range.
    """
    ext = extensions.get("wrtfd")
    geo = ext.get("geo") if isinstance(ext, Mapping) else None
    if geo is None:
        return None
    if not isinstance(geo, Mapping):
        raise TrackError('"wrtfd"."geo": expected an object {"lat": degrees, "lon": degrees}')
    lat, lon = geo.get("lat"), geo.get("lon")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (lat, lon)):
        raise TrackError('"wrtfd"."geo": "lat" and "lon" must be numbers (degrees)')
    try:
        return LocalPlane(float(lat), float(lon))  # type: ignore[arg-type]
    except ValueError as exc:
        raise TrackError(f'"wrtfd"."geo": {exc}') from exc
