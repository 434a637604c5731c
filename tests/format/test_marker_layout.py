"""The marker layout inside frames: records spread over frames decode back exactly (docs/markers.md)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from wrtfd.format.markers import (
    CHUNK_BYTES,
    NOTE_BYTES,
    Marker,
    clean_note,
    encode_record,
    has_markers,
    markers_in,
)
from wrtfd.format.schema import Schema

DEF = {
    "version": "1.0",
    "session": {
        "description": "s",
        "header": {"description": "h", "fields": [{"name": "t", "type": "uint64", "description": "t"}]},
    },
    "types": {
        "wrtfd__marker": {
            "type": "struct",
            "description": "m",
            "fields": [
                {"name": "id", "type": "uint8", "description": "i"},
                {"name": "offset", "type": "uint8", "description": "o"},
                {"name": "chunk", "type": "uint8", "dimensions": CHUNK_BYTES, "description": "c"},
            ],
        }
    },
    "frame": {
        "description": "f",
        "fields": [
            {"name": "speed", "type": "float32", "description": "s"},
            {"name": "marker", "type": "wrtfd__marker", "description": "m"},
        ],
    },
}


def frames_with(records: list[tuple[int, bytes]], n: int = 200) -> np.ndarray:
    """Frames whose marker field carries ``records`` (start row, bytes), as the stamper lays them."""
    frames = np.zeros(n, dtype=Schema.from_dict(DEF).frame_dtype)
    frames["tick"] = np.arange(n) * 2  # every other tick dropped: ticks are not rows
    for number, (row, rec) in enumerate(records, start=1):
        for k, off in enumerate(range(0, len(rec), CHUNK_BYTES)):
            piece = rec[off : off + CHUNK_BYTES]
            frames["marker"]["id"][row + k] = number
            frames["marker"]["offset"][row + k] = off
            frames["marker"]["chunk"][row + k, : len(piece)] = np.frombuffer(piece, np.uint8)
    return frames


def test_the_marker_struct_is_twelve_bytes_without_padding() -> None:
    dt = Schema.from_dict(DEF).frame_dtype
    assert dt["marker"].itemsize == 12 and has_markers(dt)
    assert dt.fields is not None and dt.fields["marker"][1] == 12  # right after the float32 at 8


def test_two_markers_back_to_back_with_a_delay() -> None:
    a = encode_record(1_700_000_000_000_000, 0, "brake test")
    b = encode_record(1_700_000_000_500_000, 2, "ünï")  # its record starts 2 ticks after its tick
    frames = frames_with([(10, a), (10 + -(-len(a) // CHUNK_BYTES), b)])
    found = markers_in(frames)
    assert found == [
        Marker(20, 1_700_000_000_000_000, "brake test"),
        Marker(2 * (10 + 3) - 2, 1_700_000_000_500_000, "ünï"),
    ]


def test_a_record_cut_short_is_incomplete_and_a_tail_without_its_start_is_skipped() -> None:
    rec = encode_record(5, 0, "x" * 40)
    frames = frames_with([(3, rec)])
    torn = frames[:5]  # a crash after 2 of the record's 6 frames
    assert markers_in(torn) == [Marker(6, 5, "x" * 9, complete=False)]
    tail = frames[5:]  # the next file of a rotated session: its start is in the previous file
    assert markers_in(tail) == []


def test_frames_without_the_marker_field_have_no_markers() -> None:
    dt = np.dtype([("tick", "<u8"), ("speed", "<f4")])
    assert not has_markers(dt)
    assert markers_in(np.zeros(4, dtype=dt)) == []


def test_notes_are_cleaned_and_cut_on_a_character_boundary() -> None:
    assert clean_note("a\nb\x00c\x7f ") == "a b c"
    long = "é" * 100
    cut = clean_note(long)
    assert len(cut.encode()) <= NOTE_BYTES and cut == "é" * (NOTE_BYTES // 2)


@given(
    st.lists(
        st.tuples(st.integers(0, 2**63), st.integers(0, 0xFFFF), st.text(max_size=80)),
        max_size=6,
    )
)
def test_any_records_round_trip(records: list[tuple[int, int, str]]) -> None:
    encoded = [encode_record(w, d, note) for w, d, note in records]
    rows, row = [], 0
    for rec in encoded:
        rows.append((row, rec))
        row += -(-len(rec) // CHUNK_BYTES) + 1
    frames = frames_with(rows, n=max(1, row + 1))
    found = markers_in(frames)
    assert [(m.wall_us, m.note) for m in found] == [(w, clean_note(n)) for w, _, n in records]
    assert [m.tick for m in found] == [2 * r - d for (r, _), (_, d, _) in zip(rows, records, strict=True)]
    assert all(m.complete for m in found)
