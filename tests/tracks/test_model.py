"""Loading track files into values: every field of format 2.0, extensions kept, type errors with paths."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wrtfd.errors import TrackError
from wrtfd.tracks import load_track, parse_track, validate_track

DATA = Path(__file__).resolve().parent / "data"


def test_mini_track_every_field(mini_path: Path) -> None:
    t = load_track(mini_path)
    assert t.version == "2.0"
    assert t.name == "Mini // not a comment /* nor this */"
    assert t.revision == "7"
    assert t.num_vertices == len(t.vertices) == 19
    assert t.vertices[0] == (30.0, 0.0, 10.0)
    assert t.num_sectors == 4 and t.num_lanes == 1
    e = t.sectors[0].edges
    assert [x.kind for x in e] == ["wall", "exit", "wall", "entry"]  # "Wall"/"ENTRY" folded to lower case
    assert (e[1].neighbor, e[1].neighbor_edge) == (1, 3)
    assert e[0].neighbor is None and e[0].neighbor_edge is None
    assert t.sectors[0].attributes == {"name": "start straight"}
    assert t.sectors[3].extensions == {"acme": {"surface": "gravel"}}
    assert t.extensions == {"gpr-123": {"bar": 1, "baz": [1, 2, 3]}}
    arc = t.lanes[0].segments[1]
    assert (arc.kind, arc.start, arc.end, arc.center, arc.angle_deg, arc.length) == (
        "arc",
        2,
        3,
        0,
        90.0,
        15.708,
    )
    line = t.lanes[0].segments[2]
    assert (line.kind, line.center, line.angle_deg) == ("line", None, None)


def test_revision_is_optional() -> None:
    t = parse_track(
        '{"version":"2.0","name":"n","num-vertices":0,"vertices":[],"num-sectors":0,"sectors":[],'
        '"num-lanes":0,"lanes":[]}'
    )
    assert t.revision is None and t.vertices == () and t.extensions == {}


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("parse-unclosed-comment", r"line 97 column 1: block comment '/\*' is never closed"),
        ("parse-syntax", r"line 12 column 19: Expecting property name"),
        ("parse-wrong-type", r"vertices\[2\]\[1\]: expected a number, got a string"),
        ("parse-unknown-kind", r"sectors\[2\]\.edges\[0\]\.kind: unknown kind 'fence'"),
        ("parse-missing-field", r"lanes\[0\]\.segments\[2\]: missing field 'end'"),
        ("parse-bad-vertex", r"vertices\[18\]: a vertex is 3 numbers"),
        ("parse-version", r"version: track format '3\.0' is not supported"),
    ],
)
def test_unparseable_files_name_the_place(name: str, message: str) -> None:
    path = DATA / "broken" / f"{name}.trk"
    with pytest.raises(TrackError, match=message) as info:
        load_track(path)
    assert str(path) in str(info.value)


def test_not_text_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "bin.trk"
    bad.write_bytes(b"\xff\xfe{}")
    with pytest.raises(TrackError, match="not a text file"):
        load_track(bad)
    with pytest.raises(TrackError, match="cannot read"):
        load_track(tmp_path / "absent.trk")


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("[]", r"\$: expected an object"),
        ('{"version": 2}', "version: expected a string"),
        ('{"version":"2.0","name":"n","num-vertices":1.5}', "missing field|expected an integer"),
        (
            '{"version":"2.0","name":"n","num-vertices":0,"vertices":[[1e400,0,0]],"num-sectors":0,"sectors":[],'
            '"num-lanes":0,"lanes":[]}',
            r"vertices\[0\]\[0\]: number is not finite",
        ),
    ],
)
def test_shape_errors(doc: str, message: str) -> None:
    with pytest.raises(TrackError, match=message):
        parse_track(doc)


@settings(max_examples=150, deadline=None)
@given(cut=st.integers(0, 4000), length=st.integers(1, 40), junk=st.text(max_size=5))
def test_damaged_files_give_track_errors_only(cut: int, length: int, junk: str) -> None:
    """A damaged copy of a good file either still parses or raises TrackError, never anything else."""
    text = (DATA / "mini.trk").read_text()
    cut %= len(text)
    damaged = text[:cut] + junk + text[cut + length :]
    try:
        track = parse_track(damaged)
    except TrackError:
        return
    validate_track(track)  # and the validator copes with whatever parsed
