"""Circuit files: the loader's errors name the key; the shipped library loads, lies where
racetrackdb says and is picked by position; a geo-anchored track is a circuit."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from wrtfd.errors import TrackError
from wrtfd.tracks import load_track
from wrtfd.tracks.circuit import (
    circuit_from_dict,
    circuit_from_track,
    circuit_to_dict,
    distance_m,
    load_circuit,
    pick_circuit,
    shipped_circuits,
)
from wrtfd.tracks.geodesy import track_plane
from wrtfd.tracks.geometry import LanePath

REPO = Path(__file__).resolve().parents[2]
TRACKDB = "trackday/trackdb/racetrackdb__racetracks.json"
GOOD = {
    "format": "wrtfd-circuit",
    "name": "Test",
    "start_finish": {"a": [44.9, 2.5], "b": [44.9, 2.5003]},
    "sectors": [{"a": [44.901, 2.5], "b": [44.901, 2.5003]}],
}


def test_round_trip() -> None:
    c = circuit_from_dict(GOOD)
    again = circuit_from_dict(circuit_to_dict(c))
    assert again.start == c.start and again.sectors == c.sectors and again.direction == "right"


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"format": "other"}, "format"),
        ({"name": ""}, "name"),
        ({"start_finish": {"a": [44.9, 2.5]}}, "start_finish"),
        ({"start_finish": {"a": [95.0, 2.5], "b": [44.9, 2.5]}}, "start_finish.a"),
        ({"start_finish": {"a": [44.9, 2.5], "b": [44.9, 2.5]}}, "start_finish"),  # 0 m long
        ({"start_finish": {"a": [44.9, 2.5], "b": [44.95, 2.5]}}, "start_finish"),  # 5.5 km long
        ({"sectors": [{"a": [44.9, 2.5], "b": "x"}]}, "sectors[0].b"),
        ({"sectors": [{"a": [45.9, 2.5], "b": [45.9, 2.5003]}]}, "sectors"),  # 100 km away
        ({"sectors": [GOOD["start_finish"]] * 65}, "sectors"),
        ({"direction": "north"}, "direction"),
        ({"sector": []}, "sector"),
    ],
)
def test_errors_name_the_key(change: dict, key: str) -> None:
    with pytest.raises(TrackError) as err:
        circuit_from_dict({**GOOD, **change}, "c.json")
    assert str(err.value).startswith(f"c.json: {key}:")


def test_hostile_files(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (300 * 1024))
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00")
    for p, words in [
        (big, "larger than"),
        (deep, "not JSON"),
        (binary, "not UTF-8"),
        (tmp_path / "none.json", "cannot read"),
    ]:
        with pytest.raises(TrackError, match=words):
            load_circuit(p)


def test_track_with_anchor_is_a_circuit() -> None:
    track = load_track(REPO / "config" / "tracks" / "road.trk")
    c = circuit_from_track(track)
    plane = track_plane(track.extensions)
    assert plane is not None
    path = LanePath(track)
    # the start line's middle is the lane's start point, 30 m wide; the sector lines at 400, 800 m
    x, _, z = path.point_at(0.0)
    assert distance_m(c.start.middle, plane.to_latlon(x, z)) < 0.01
    assert distance_m(c.start.a, c.start.b) == pytest.approx(30.0, abs=0.01)
    assert len(c.sectors) == 2
    x, _, z = path.point_at(400.0)
    assert distance_m(c.sectors[0].middle, plane.to_latlon(x, z)) < 0.01
    assert load_circuit(REPO / "config" / "tracks" / "road.trk").start == c.start


def test_shipped_library(shared_data: Path) -> None:
    db = json.loads((shared_data / TRACKDB).read_text())
    with_line = {e["name"]: e for e in db if e.get("finishLinePolygon")}
    shipped = {c.name: c for c in shipped_circuits()}
    assert set(shipped) == set(with_line) | {"Hillside"}
    for name, entry in with_line.items():
        c = shipped[name]
        gps = entry["locationGps"]
        # locationGps is the circuit's middle, not its line: Road Atlanta's is 1.36 km off it
        assert distance_m(c.centre, (gps["latitude"], gps["longitude"])) < 1500.0, name
        poly = entry["finishLinePolygon"]
        lat = sum(p["latitude"] for p in poly) / len(poly)
        lon = sum(p["longitude"] for p in poly) / len(poly)
        assert distance_m(c.centre, (lat, lon)) < 1.0, name  # through the polygon's middle
    assert (REPO / "wrtfd" / "circuits" / "LICENSE-racetrackdb.txt").read_text().count(
        "Orcha Software LLC"
    ) == 1


def test_pick_by_position() -> None:
    library = shipped_circuits()
    ra = next(c for c in library if c.name == "Road America")
    lat, lon = ra.centre
    picked = pick_circuit(lat + 0.0018, lon, library)  # 200 m north of the line
    assert picked is not None and picked[0].name == "Road America"
    assert picked[1] == pytest.approx(200.0, abs=1.0)
    hill = pick_circuit(44.9, 2.5, library)
    assert hill is not None and hill[0].name == "Hillside" and hill[1] < 1.0
    assert pick_circuit(0.0, 0.0, library) is None
    assert math.isfinite(distance_m(ra.start.a, ra.start.b))


def test_a_laid_line_in_a_marker_note() -> None:
    """The note the recorder writes when a mark lays a line holds the line to 1 cm (7 decimals),
    fits a marker's 64 bytes even at the longest coordinates (fewer decimals there), and reads
    back as the circuit the plug-in timed against; notes that only look like one are not one."""
    from wrtfd.format.markers import NOTE_BYTES, clean_note
    from wrtfd.tracks.circuit import CircuitLine, laid_circuit, laid_line_note, laid_name

    line = CircuitLine((44.90013512345, 2.49999912345), (44.89986512345, 2.50000112345))
    note = laid_line_note(line)
    assert note == "start/finish line 44.9001351,2.4999991 44.8998651,2.5000011"
    assert clean_note(note) == note  # stored as it is
    back = laid_circuit(["start/finish", note])
    assert back is not None and back.direction == "right" and back.sectors == ()
    assert back.start.a == (44.9001351, 2.4999991) and back.start.b == (44.8998651, 2.5000011)
    assert back.name == laid_name(line) == "start/finish marked at 44.90000, 2.50000"
    worst = CircuitLine((-44.9001351, -179.9999991), (-44.8998651, -179.9999981))
    assert len(laid_line_note(worst).encode()) <= NOTE_BYTES
    assert laid_circuit([laid_line_note(worst)]) is not None
    # the last laid line wins; damaged or impossible ones are skipped
    other = CircuitLine((44.91, 2.5), (44.9102, 2.5))
    picked = laid_circuit([note, laid_line_note(other), "start/finish line 44.9,2.5 44.9,2.5"])
    assert picked is not None and picked.start.a == (44.91, 2.5)
    assert laid_circuit(["start/finish line 44.9,2.5 99.0,2.5", note[:-3] + "x", "note"]) is None
