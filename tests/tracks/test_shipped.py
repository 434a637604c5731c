"""The track files shipped in config/tracks: valid, with the features they promise."""

from __future__ import annotations

from pathlib import Path

import pytest

from wrtfd.tracks import LanePath, load_track, validate_track
from wrtfd.tracks.build import DESIGNS, build_track, dump_track

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "tracks"


@pytest.mark.parametrize("name", sorted(DESIGNS))
def test_shipped_file_is_valid_and_matches_its_design(name: str) -> None:
    path = SHIPPED / f"{name}.trk"
    track = load_track(path)
    assert validate_track(track) == []
    built, groups = build_track(DESIGNS[name])
    assert path.read_text() == dump_track(built, comment=DESIGNS[name].comment, groups=groups)


def test_at_least_three_tracks() -> None:
    assert len(list(SHIPPED.glob("*.trk"))) >= 3


def test_oval_in_the_style_of_the_original() -> None:
    text = (SHIPPED / "oval.trk").read_text()
    assert text.startswith("/* oval.trk")
    assert "\t/* 0 */" in text and "/* arc-center points */" in text
    t = load_track(SHIPPED / "oval.trk")
    assert len(t.lanes) == 2
    assert all(v == int(v) for vert in t.vertices[:10] for v in vert)  # centres and lanes on whole metres
    assert {seg.angle_deg for lane in t.lanes for seg in lane.segments if seg.kind == "arc"} == {180.0}


def test_road_course_turns_both_ways_with_several_radii_and_elevation() -> None:
    t = load_track(SHIPPED / "road.trk")
    arcs = [seg for seg in t.lanes[0].segments if seg.kind == "arc"]
    assert any((s.angle_deg or 0) < 0 for s in arcs) and any((s.angle_deg or 0) > 0 for s in arcs)
    path = LanePath(t)
    radii = {round(seg.radius_m) for seg in path.segments if seg.kind == "arc"}
    assert len(radii) >= 5
    heights = [v[1] for v in t.vertices]
    assert max(heights) - min(heights) >= 10.0
    assert path.length_m > 1000.0


def test_kart_track_is_short_and_tight() -> None:
    t = load_track(SHIPPED / "kart.trk")
    path = LanePath(t)
    assert path.length_m < 300.0
    assert min(seg.radius_m for seg in path.segments if seg.kind == "arc") < 10.0
