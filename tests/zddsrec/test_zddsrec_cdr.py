"""CDR decoding edge cases: hostile payloads, bounds, XCDR1 parameter lists, alignment."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wrtfd.errors import DecodeError
from wrtfd.zddsrec.cdr import ENCAPSULATIONS, CdrDecoder, parse_encapsulation
from wrtfd.zddsrec.types import parse_idl

T = parse_idl(
    """
    struct P { octet a; double b; };
    struct S { string<4> name; sequence<long, 3> vals; P p; };
    @mutable struct M { int8 mode; @id(7) double gain; string name; uint16 rate; };
    """
)


def test_alignment_xcdr1_vs_xcdr2() -> None:
    """A double after an octet sits at offset 8 in XCDR1 (max align 8) and 4 in XCDR2 (max align 4)."""
    dec = CdrDecoder(T["P"])
    v1 = b"\x00\x01\x00\x00" + b"\x07" + bytes(7) + struct.pack("<d", 2.5)
    v2 = b"\x00\x07\x00\x00" + b"\x07" + bytes(3) + struct.pack("<d", 2.5)
    assert dec.decode(v1) == {"a": 7, "b": 2.5}
    assert dec.decode(v2) == {"a": 7, "b": 2.5}
    be = b"\x00\x00\x00\x00" + b"\x07" + bytes(7) + struct.pack(">d", -1.0)
    assert dec.decode(be) == {"a": 7, "b": -1.0}


def test_every_truncation_is_a_decode_error() -> None:
    dec = CdrDecoder(T["S"])
    body = (
        struct.pack("<I", 4)
        + b"abc\x00"
        + struct.pack("<I", 2)
        + struct.pack("<ii", 5, -6)
        + b"\x09"
        + bytes(3)
        + struct.pack("<d", 1.5)  # a at 20, b aligned to 24
    )
    full = b"\x00\x01\x00\x00" + body
    assert dec.decode(full) == {"name": "abc", "vals": [5, -6], "p": {"a": 9, "b": 1.5}}
    for cut in range(len(full)):
        with pytest.raises(DecodeError) as exc:
            dec.decode(full[:cut])
        assert exc.value.reason == "cdr_truncated"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (struct.pack("<I", 6) + b"abcde\x00", "cdr_string_too_long"),  # string<4>: at most 5 bytes with NUL
        (struct.pack("<I", 2) + b"\xff\x00" + bytes(2) + struct.pack("<I", 0), "cdr_bad_string"),
        (struct.pack("<I", 1) + b"\x00" + bytes(3) + struct.pack("<I", 4), "cdr_sequence_too_long"),
        (struct.pack("<I", 1) + b"\x00" + bytes(3) + struct.pack("<I", 0xFFFFFFFF), "cdr_sequence_too_long"),
    ],
)
def test_bounds_and_bad_strings(body: bytes, reason: str) -> None:
    with pytest.raises(DecodeError) as exc:
        CdrDecoder(T["S"]).decode(b"\x00\x01\x00\x00" + body + bytes(32))
    assert exc.value.reason == reason


def test_unknown_encapsulation() -> None:
    with pytest.raises(DecodeError) as exc:
        CdrDecoder(T["P"]).decode(b"\x00\x04\x00\x00" + bytes(16))  # XML: not CDR
    assert exc.value.reason == "cdr_unknown_encapsulation"
    assert parse_encapsulation(b"\x00\x11\x00\x00").name == "CDR2_LE"  # the XTypes 1.2 numbering
    assert {e.kind for e in ENCAPSULATIONS.values()} == {"plain", "delimited", "plist"}


@settings(max_examples=500, deadline=None)
@given(st.sampled_from(sorted(ENCAPSULATIONS)), st.binary(max_size=80))
def test_random_bytes_never_crash(rep_id: int, body: bytes) -> None:
    for name in ("S", "M"):
        try:
            value = CdrDecoder(T[name], max_sequence_len=1000).decode(struct.pack(">HH", rep_id, 0) + body)
        except DecodeError as exc:
            assert exc.reason.startswith("cdr_")
        else:
            assert set(value) == {m.name for m in T[name].members}


def _param(pid: int, value: bytes) -> bytes:
    out = struct.pack("<HH", pid, len(value)) + value
    return out + bytes((-len(out)) % 4)


def test_xcdr1_parameter_list() -> None:
    """PL_CDR: u16 id + u16 length parameters (member ids from @id and sequential numbering),
    the extended form 0x3F01, an unknown skippable parameter, and the 0x3F02 list end."""
    body = (
        _param(0, b"\xfd")  # mode = -3
        + _param(0x3F01, struct.pack("<II", 7, 8))
        + struct.pack("<d", 0.25)  # extended: gain (id 7)
        + _param(42, b"junk")  # unknown, not must-understand: skipped
        + _param(8, struct.pack("<I", 3) + b"hi\x00")  # name: id 8 follows @id(7)
        + _param(0x3F02, b"")
    )
    got = CdrDecoder(T["M"]).decode(b"\x00\x03\x00\x00" + body)
    assert got == {"mode": -3, "gain": 0.25, "name": "hi", "rate": 0}  # rate absent: default


def test_xcdr1_parameter_value_alignment_restarts() -> None:
    body = _param(7, struct.pack("<d", 9.5)) + _param(0x3F02, b"")  # value right after the 4-byte header
    assert CdrDecoder(T["M"]).decode(b"\x00\x03\x00\x00" + body)["gain"] == 9.5


def test_must_understand_unknown_member_is_refused() -> None:
    body = _param(0x4000 | 99, b"\x00\x00\x00\x00") + _param(0x3F02, b"")
    with pytest.raises(DecodeError) as exc:
        CdrDecoder(T["M"]).decode(b"\x00\x03\x00\x00" + body)
    assert exc.value.reason == "cdr_must_understand"


def test_parameter_longer_than_payload() -> None:
    with pytest.raises(DecodeError) as exc:
        CdrDecoder(T["M"]).decode(b"\x00\x03\x00\x00" + struct.pack("<HH", 0, 200) + b"\x01")
    assert exc.value.reason == "cdr_truncated"


def test_dheader_beyond_payload() -> None:
    """XCDR2 delimited: a DHEADER claiming more bytes than there are is refused."""
    app = parse_idl("@appendable struct A { long x; };")["A"]
    with pytest.raises(DecodeError) as exc:
        CdrDecoder(app).decode(b"\x00\x09\x00\x00" + struct.pack("<Ii", 400, 1))
    assert exc.value.reason == "cdr_bad_dheader"
    # extra appended members beyond the known ones are skipped
    assert CdrDecoder(app).decode(b"\x00\x09\x00\x00" + struct.pack("<Iii", 8, 1, 2)) == {"x": 1}
