"""Struct padding is zero on disk in a composed recording (spec 8.7; N6, N7), and validate says so.

A recording's frame nests one struct per source; the GPS struct has padding inside it, and
frames built in memory may carry anything there (numpy copies of padded structs do not copy
padding: ``np.array(reader.frames(i))`` is not a byte-faithful copy of the file). The writer
zeroes padding whatever the rows hold, so two recordings of the same values are the same bytes,
and ``validate`` reports any non-zero padding byte, nested ones included.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from wrtfd.decoders.forza import ForzaDecoder
from wrtfd.decoders.nmea import NmeaDecoder
from wrtfd.format import Reader, Schema, Writer, validate_file
from wrtfd.format.schema import covered_bytes
from wrtfd.recorder import compose_definition


def composed_schema() -> Schema:
    return Schema.from_dict(
        compose_definition([("forza", ForzaDecoder().definition), ("gps", NmeaDecoder().definition)], [])
    )


def nested_padding(dtype: np.dtype, name: str) -> np.ndarray:
    """Frame byte offsets of the padding inside the struct field ``name``."""
    sub, offset = dtype.fields[name][:2]  # type: ignore[index]
    return offset + np.flatnonzero(~covered_bytes(sub))


def test_garbage_padding_in_rows_is_zero_on_disk_nested_structs_too(tmp_path: Path) -> None:
    schema = composed_schema()
    dtype = schema.frame_dtype
    inside_gps = nested_padding(dtype, "gps")
    assert len(inside_gps) > 0  # the GPS struct has padding of its own (not only at the frame's end)
    rng = np.random.default_rng(7)
    # A writable view of the random bytes (not .copy(): numpy may not copy padding bytes)
    rows = np.frombuffer(bytearray(rng.integers(1, 256, 5 * dtype.itemsize, dtype=np.uint8)), dtype=dtype)
    rows["tick"] = np.arange(5)
    pad = ~covered_bytes(dtype)
    assert rows.view(np.uint8).reshape(5, -1)[:, pad].all()  # every padding byte is garbage
    path = tmp_path / "r.wrtf"
    with Writer(path, schema, rate_hz=60, start_timestamp_us=1_700_000_000_000_000) as w:
        w.begin_session()
        w.write_frames(rows[:3])
        w.write_frame(3, rows[3])
        w.write_frame(4, rows[4])
    assert validate_file(path) == []
    with Reader(path) as r:
        raw = r.frames(0).view(np.uint8).reshape(5, -1)  # the file's bytes (a view, not a copy)
        assert not raw[:, pad].any()
        assert np.array_equal(raw[:, ~pad], rows.view(np.uint8).reshape(5, -1)[:, ~pad])
        frames_offset = r.sessions[0].frames_offset

    data = bytearray(path.read_bytes())
    data[frames_offset + 2 * dtype.itemsize + int(inside_gps[0])] = 0x3A  # frame 2, inside the gps struct
    path.write_bytes(bytes(data))
    findings = validate_file(path)
    assert [(f.code, f.offset) for f in findings] == [("padding", frames_offset + 2 * dtype.itemsize)]
    assert "frame 2: padding bytes are not zero" in findings[0].message
