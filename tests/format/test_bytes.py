"""Byte-level layout of files written here, checked against docs/wrtf-notes.md (N1, N3, N5, N7, N8, N12)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np

from tests.format.conftest import START_US, fld, make_schema
from wrtfd.format import Reader, Schema, Writer


def _speed_gear() -> Schema:
    return make_schema(
        [fld("speed", "float32"), fld("gear", "uint8")],
        header=[fld("driver_id", "uint32")],
        footer=[fld("laps", "uint16")],
    )


def test_n1_metadata_entries_padded_to_8_with_utf8(tmp_file: Callable[..., Path]) -> None:
    """N1: u32 key_len, key, pad to 8; u32 value_len, value, pad to 8 (file offsets), UTF-8."""
    schema = _speed_gear()
    path = tmp_file("m.wrtf")
    with Writer(
        path,
        schema,
        rate_hz=48000,
        start_timestamp_us=START_US,
        metadata={"Track": "iracing:track/日本", "Car": "iracing:car/4321"},
        embed_schema=False,
    ):
        pass
    b = path.read_bytes()
    # Header (spec 3): magic, version, rate, timestamp, count, reserved.
    assert b[0:8] == b"WRTF0001"
    assert struct.unpack_from("<QQQII", b, 8) == (1, 48000, START_US, 2, 0)
    # Entry 1 key "Track": len at 40, key at 44..49, pad to 56.
    assert struct.unpack_from("<I", b, 40) == (5,)
    assert b[44:49] == b"Track" and b[49:56] == b"\0" * 7
    value = "iracing:track/日本".encode()
    assert len(value) == 20
    assert struct.unpack_from("<I", b, 56) == (20,)
    assert b[60:80] == value  # 60 + 20 = 80, already 8-aligned: no padding
    # Entry 2: "Car" at 80.
    assert struct.unpack_from("<I", b, 80) == (3,)
    assert b[84:87] == b"Car" and b[87:88] == b"\0"
    assert struct.unpack_from("<I", b, 88) == (16,)
    assert b[92:108] == b"iracing:car/4321" and b[108:112] == b"\0" * 4
    # No session: the document footer follows (N3): WRDF0001, no entries, count 0, WRDE0001.
    assert b[112:] == b"WRDF0001" + struct.pack("<Q", 0) + b"WRDE0001"
    with Reader(path, schema=schema) as r:
        assert r.metadata == {"Track": "iracing:track/日本", "Car": "iracing:car/4321"}
        assert r.complete and r.sessions == []


def test_no_metadata_session_at_40(tmp_file: Callable[..., Path]) -> None:
    """N1/N8: with no metadata the first session magic is at offset 40."""
    schema = _speed_gear()
    path = tmp_file()
    with Writer(path, schema, rate_hz=60, start_timestamp_us=START_US, embed_schema=False) as w:
        w.begin_session({"driver_id": 9})
    b = path.read_bytes()
    assert struct.unpack_from("<I", b, 32) == (0,)
    assert b[40:48] == b"WRSE0001"


def test_n7_n8_session_frames_footer_and_n3_document_footer(tmp_file: Callable[..., Path]) -> None:
    """Session header (N8) + frames of 16 bytes (N7) + session footer in spec order (N2, N8), then
    a document footer of 24 + 24*N bytes with start marker at EOF-(24+24N) (N3)."""
    schema = _speed_gear()
    path = tmp_file()
    with Writer(path, schema, rate_hz=60, start_timestamp_us=START_US, embed_schema=False) as w:
        w.begin_session({"driver_id": 0x01020304})
        w.write_frame(0, {"speed": 1.5, "gear": 3})
        w.write_frame(5, {"speed": -2.0, "gear": 4})
        w.end_session({"laps": 7})
        w.begin_session({"driver_id": 2})
        w.write_frame(1, {"speed": 0.25})
    b = path.read_bytes()
    s0 = 40
    assert b[s0 : s0 + 8] == b"WRSE0001"
    assert b[s0 + 8 : s0 + 16] == struct.pack("<I", 0x01020304) + b"\0" * 4  # header struct padded to 8
    f0 = s0 + 16
    assert b[f0 : f0 + 16] == struct.pack("<Qf", 0, 1.5) + bytes([3]) + b"\0" * 3
    assert b[f0 + 16 : f0 + 32] == struct.pack("<Qf", 5, -2.0) + bytes([4]) + b"\0" * 3
    foot0 = f0 + 32
    assert b[foot0 : foot0 + 24] == b"WRSF0001" + struct.pack("<QQ", 2, 5)  # count, then last tick (N2)
    assert b[foot0 + 24 : foot0 + 32] == struct.pack("<H", 7) + b"\0" * 6
    s1 = foot0 + 32
    assert b[s1 : s1 + 8] == b"WRSE0001"
    foot1 = s1 + 16 + 16
    assert b[foot1 : foot1 + 24] == b"WRSF0001" + struct.pack("<QQ", 1, 1)
    doc = foot1 + 32
    assert len(b) - doc == 72  # N3: 2 sessions -> 24 + 2*24 bytes
    assert b[doc : doc + 8] == b"WRDF0001"
    assert struct.unpack_from("<QQQQQQ", b, doc + 8) == (s0, foot0, 2, s1, foot1, 1)
    assert b[-16:] == struct.pack("<Q", 2) + b"WRDE0001"
    assert b[doc:].startswith(b"WRDF") and len(b) - (24 + 24 * 2) == doc


def test_n5_schema_stored_in_metadata(tmp_file: Callable[..., Path]) -> None:
    """N5/N12: files written here carry their definition as `wrtf.schema`, first."""
    schema = _speed_gear()
    path = tmp_file()
    with Writer(path, schema, rate_hz=60, start_timestamp_us=START_US, metadata={"Car": "x"}):
        pass
    b = path.read_bytes()
    klen = struct.unpack_from("<I", b, 40)[0]
    assert b[44 : 44 + klen] == b"wrtf.schema"
    with Reader(path) as r:
        assert r.schema_source == "embedded"
        assert r.schema.frame_dtype == schema.frame_dtype
        assert list(r.metadata) == ["wrtf.schema", "Car"]


def test_frames_view_is_zero_copy_and_read_only(tmp_file: Callable[..., Path]) -> None:
    schema = _speed_gear()
    path = tmp_file()
    with Writer(path, schema, rate_hz=100, start_timestamp_us=START_US) as w:
        w.begin_session({})
        arr: np.ndarray = np.zeros(1000, dtype=schema.frame_dtype)
        arr["tick"] = np.arange(1000) * 2
        arr["speed"] = np.linspace(0, 1, 1000, dtype=np.float32)
        w.write_frames(arr)
    with Reader(path) as r:
        f = r.frames(0)
        assert not f.flags.writeable and not f.flags.owndata
        assert np.array_equal(f, arr)
        s = r.sessions[0]
        assert (
            f.__array_interface__["data"][0] - np.frombuffer(r._buf, np.uint8).__array_interface__["data"][0]
            == s.frames_offset
        )
        del f
