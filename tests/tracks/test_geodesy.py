"""The local plane against geodesics computed independently (pyproj's Geod, Karney's algorithm)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import REPO
from wrtfd.errors import TrackError
from wrtfd.tracks.geodesy import LocalPlane, track_plane
from wrtfd.tracks.model import load_track

pyproj = pytest.importorskip("pyproj")
GEOD = pyproj.Geod(ellps="WGS84")


@settings(max_examples=60, deadline=None)
@given(
    lat0=st.floats(-70, 70),
    lon0=st.floats(-179, 179),
    azimuth=st.floats(0, 360),
    distance=st.floats(0, 5000),
)
def test_distance_and_bearing_from_the_origin_are_the_geodesic_ones(
    lat0: float, lon0: float, azimuth: float, distance: float
) -> None:
    lon, lat, _ = GEOD.fwd(lon0, lat0, azimuth, distance)
    plane = LocalPlane(lat0, lon0)
    x, y = plane.to_xy(lat, lon)
    # within a millimetre (PROJ takes an origin within ~1e-10 rad of the equator as on it)
    assert math.hypot(x, y) == pytest.approx(distance, abs=1e-3)
    if distance > 1:  # the bearing, to within a millimetre across at that distance
        bearing = math.degrees(math.atan2(x, y)) % 360
        off = min(abs(bearing - azimuth % 360), 360 - abs(bearing - azimuth % 360))
        assert math.radians(off) * distance < 1e-3
    back_lat, back_lon = plane.to_latlon(x, y)
    assert back_lat == pytest.approx(lat, abs=1e-8)
    assert back_lon == pytest.approx(lon, abs=1e-8)


def test_arrays_give_the_scalars_values() -> None:
    plane = LocalPlane(43.7347, 7.4206)
    lat = np.array([43.7350, 43.7360, 43.7340])
    lon = np.array([7.4210, 7.4190, 7.4230])
    xs, ys = plane.to_xy(lat, lon)
    for i in range(3):
        x, y = plane.to_xy(float(lat[i]), float(lon[i]))
        assert (xs[i], ys[i]) == (x, y)


def test_an_origin_off_the_globe_is_refused() -> None:
    with pytest.raises(ValueError, match="out of range"):
        LocalPlane(91.0, 0.0)


def test_a_track_file_anchor_lays_the_track_on_the_globe() -> None:
    track = load_track(REPO / "config" / "tracks" / "road.trk")
    plane = track_plane(track.extensions)
    assert plane is not None
    assert (plane.lat0, plane.lon0) == (44.9, 2.5)
    # 1 km north of the origin is about 0.009 degrees of latitude, the same longitude
    lat, lon = plane.to_latlon(0.0, 1000.0)
    assert lat == pytest.approx(44.9 + 1000 / 111_132, abs=2e-4)
    assert lon == pytest.approx(2.5, abs=1e-12)


def test_tracks_without_an_anchor_and_bad_anchors() -> None:
    assert track_plane({}) is None
    assert track_plane({"wrtfd": {"timing-sectors": [0.0]}}) is None
    for bad in ({"lat": "44"}, {"lat": 44.0}, [1, 2], {"lat": 100.0, "lon": 0.0}, {"lat": True, "lon": 1}):
        with pytest.raises(TrackError, match='"geo"'):
            track_plane({"wrtfd": {"geo": bad}})
