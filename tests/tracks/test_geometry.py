"""Lane geometry with exact expectations on the hand-made mini track, and properties on shipped ones."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wrtfd.errors import TrackError
from wrtfd.tracks import LanePath, SectorMap, load_track

DATA = Path(__file__).resolve().parent / "data"
SHIPPED = Path(__file__).resolve().parents[2] / "config" / "tracks"
QUARTER = 10 * math.pi / 2  # the mini arc: radius 10, 90 degrees


@pytest.fixture(scope="module")
def mini() -> LanePath:
    return LanePath(load_track(DATA / "mini.trk"))


def test_length_comes_from_geometry(mini: LanePath) -> None:
    assert mini.length_m == pytest.approx(30 + QUARTER + 30 + 40 + 40, abs=1e-12)


@pytest.mark.parametrize(
    ("x", "z", "distance", "offset"),
    [
        (0.0, 0.0, 0.0, 0.0),  # the start line
        (15.0, 0.0, 15.0, 0.0),  # on the first line
        (15.0, 3.0, 15.0, 3.0),  # travelling +x, +z is to the right
        (15.0, -2.5, 15.0, -2.5),
        (40.0, 25.0, 30 + QUARTER + 15, 0.0),  # down the right side
        (20.0, 40.0, 30 + QUARTER + 30 + 20, 0.0),  # bottom, travelling -x
        (20.0, 42.0, 30 + QUARTER + 30 + 20, -2.0),  # +z is now to the left
        (0.0, 10.0, 30 + QUARTER + 30 + 40 + 30, 0.0),
    ],
)
def test_points_on_lines(mini: LanePath, x: float, z: float, distance: float, offset: float) -> None:
    p = mini.project(x, z)
    assert p.distance_m == pytest.approx(distance, abs=1e-9)
    assert p.offset_m == pytest.approx(offset, abs=1e-9)


@pytest.mark.parametrize("radius", [8.0, 10.0, 12.0])
@pytest.mark.parametrize("deg", [0.0, 30.0, 45.0, 89.0])
def test_points_on_the_arc(mini: LanePath, radius: float, deg: float) -> None:
    # centre (30, 10); the arc starts straight "above" it (angle -90 deg) and turns right (clockwise)
    phi = math.radians(-90.0 + deg)
    x, z = 30 + radius * math.cos(phi), 10 + radius * math.sin(phi)
    p = mini.project(x, z)
    assert p.distance_m == pytest.approx(30 + 10 * math.radians(deg), abs=1e-9)
    assert p.offset_m == pytest.approx(10 - radius, abs=1e-9)  # towards the centre = right on a right turn


def test_point_at_inverts_projection(mini: LanePath) -> None:
    for s in np.linspace(0, mini.length_m, 57, endpoint=False):
        x, y, z = mini.point_at(float(s))
        assert y == 0.0
        assert mini.project(x, z).distance_m == pytest.approx(s, abs=1e-9)
    assert mini.point_at(30 + QUARTER) == pytest.approx((40.0, 0.0, 10.0))
    assert mini.heading_at(5.0) == pytest.approx((1.0, 0.0))
    assert mini.heading_at(30 + QUARTER / 2) == pytest.approx((math.sqrt(0.5), math.sqrt(0.5)))
    assert mini.curvature_at(31.0) == pytest.approx(0.1)


def test_project_many_matches_project(mini: LanePath) -> None:
    rng = np.random.default_rng(7)
    xs, zs = rng.uniform(-5, 45, 300), rng.uniform(-5, 45, 300)
    s, off, gap = mini.project_many(xs, zs)
    for i in range(0, 300, 13):
        p = mini.project(float(xs[i]), float(zs[i]))
        assert s[i] == pytest.approx(p.distance_m, abs=1e-9)
        assert off[i] == pytest.approx(p.offset_m, abs=1e-9)
        assert gap[i] == pytest.approx(p.gap_m, abs=1e-9)


def test_sector_lookup() -> None:
    sm = SectorMap(load_track(DATA / "mini.trk"))
    assert sm.sector_at(20.0, 0.0) == 0
    assert sm.sector_at(40.0, 20.0) == 1
    assert sm.sector_at(20.0, 40.0) == 2
    assert sm.sector_at(0.0, 20.0) == 3
    assert sm.sector_at(20.0, 20.0) is None  # the infield
    assert sm.sector_at(60.0, 60.0) is None
    assert sm.sector_at(40.0, 20.0, hint=0) == 1  # via the neighbor of the hint


def test_bad_lane_index(mini: LanePath) -> None:
    with pytest.raises(TrackError, match="lane 3 does not exist"):
        LanePath(load_track(DATA / "mini.trk"), 3)


@pytest.mark.parametrize("name", ["oval", "road", "kart"])
@settings(max_examples=60, deadline=None)
@given(frac=st.floats(0.0, 0.999999), offset=st.floats(-1.0, 1.0))
def test_shipped_tracks_round_trip(name: str, frac: float, offset: float) -> None:
    track = load_track(SHIPPED / f"{name}.trk")
    for lane in range(len(track.lanes)):
        path = LanePath(track, lane)
        s = frac * path.length_m
        x, _, z = path.point_at(s)
        fx, fz = path.heading_at(s)
        px, pz = x - fz * offset, z + fx * offset  # right of travel is (-fz, fx)
        p = path.project(px, pz, near_m=s)
        # shipped vertices are stored to the millimetre, so arcs meet lines within ~1 mm; a point
        # off the lane within a centimetre or so of such a joint may snap to the joint itself
        assert p.offset_m == pytest.approx(offset, abs=2e-3)
        d = (p.distance_m - s + path.length_m / 2) % path.length_m - path.length_m / 2
        assert abs(d) < 0.05
        # every lane point lies in some sector
        assert SectorMap(track).sector_at(x, z) is not None


@pytest.mark.parametrize("name", ["road", "kart"])
def test_project_near_agrees_with_the_full_search(name: str) -> None:
    path = LanePath(load_track(SHIPPED / f"{name}.trk"))
    rng = np.random.default_rng(3)
    seg = path.project(*path.point_at(0.0)[::2]).segment
    for s in np.arange(0.0, 2 * path.length_m, 1.7):
        x, _, z = path.point_at(float(s))
        fx, fz = path.heading_at(float(s))
        off = float(rng.uniform(-3, 3))
        px, pz = x - fz * off, z + fx * off
        fast = path.project_near(px, pz, seg)
        full = path.project(px, pz)
        # at joints the two may pick neighbouring segments, which meet within the mm rounding
        assert fast.distance_m == pytest.approx(full.distance_m, abs=2e-3)
        assert fast.offset_m == pytest.approx(full.offset_m, abs=2e-3)
        seg = fast.segment
    # far from the hint it falls back to the full search
    far = path.project_near(*path.point_at(path.length_m / 2)[::2], 0)
    assert far.distance_m == pytest.approx(path.length_m / 2, abs=1e-6)
