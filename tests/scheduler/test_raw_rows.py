"""SourceRow's raw store (a packet's bytes through its compiled RawLayout) stores exactly what the
dict path stores from the same packet decoded field by field with ``struct``, and counts the same."""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from wrtfd.decoders.base import RawField, RawLayout, RawValues
from wrtfd.scheduler.rows import SourceRow

SRC = np.dtype(
    [
        ("speed", "<f4"),
        ("gear", "i1"),
        ("rpm", "<u2"),
        ("on", "?"),
        ("tyres", "<f4", (4,)),
        ("all_pos", "<u1", (3,)),
        ("all_dist", "<f4", (3,)),
        ("lap_ms", "<u4"),
    ]
)
FRAME = np.dtype([("tick", "<u8"), ("g", SRC), ("other", "<f8")])
SIZE = 60
WHEELS = (2, 3, 0, 1)

#: The packet: speed f32 @0, gear s8 @4, rpm u32 @5 (row: u16), on bool @9, tyres 4 x f32 @10
#: (wire RL RR FL FR), two cars of 8 bytes from 26: position u8 @+0, distance f32 @+1; the
#: row's per-car arrays hold 3 (the third 0); lap_ms computed by the "decoder".
FIELDS = (
    RawField("speed", 0, "f"),
    RawField("gear", 4, "b"),
    RawField("rpm", 5, "I"),
    RawField("on", 9, "?"),
    RawField("tyres", 10, "f", 4, order=WHEELS, array=True),
    RawField("all_pos", 26, "B", 2, 8, pad=1, array=True),
    RawField("all_dist", 27, "f", 2, 8, pad=1, array=True),
)


def reference(data: bytes, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The packet decoded field by field with struct, from the layout above (the oracle)."""
    (speed, gear, rpm, on) = struct.unpack_from("<fbI?", data, 0)
    tyres = struct.unpack_from("<4f", data, 10)
    cars = [struct.unpack_from("<Bf", data, 26 + 8 * i) for i in range(2)]
    return {
        "speed": speed,
        "gear": gear,
        "rpm": rpm,
        "on": on,
        "tyres": tuple(tyres[j] for j in WHEELS),
        "all_pos": (cars[0][0], cars[1][0], 0),
        "all_dist": (cars[0][1], cars[1][1], 0),
        "lap_ms": extra["lap_ms"],
    }


LAYOUT = RawLayout(FIELDS, ("lap_ms",), reference)


def both(
    data: bytes, lap_ms: Any
) -> tuple[np.ndarray, np.ndarray, tuple[int, int], tuple[int, int], SourceRow]:
    raw_held, dict_held = np.zeros(1, FRAME), np.zeros(1, FRAME)
    raw_row, dict_row = SourceRow(raw_held, "g"), SourceRow(dict_held, "g")
    extra = {"lap_ms": lap_ms}
    got = raw_row.apply(RawValues(LAYOUT, data, extra))
    want = dict_row.apply(reference(data, extra))
    return raw_held, dict_held, got, want, raw_row


def packet(**over: Any) -> bytes:
    buf = bytearray(SIZE)
    struct.pack_into("<fbI?4f", buf, 0, 12.5, -3, 4000, True, 1.0, 2.0, 3.0, 4.0)
    struct.pack_into("<BfBf", buf, 26, 7, 100.5, 0, 0.0)
    struct.pack_into("<Bf", buf, 34, 9, 250.25)
    for at, raw in over.items():
        struct.pack_into("<I", buf, int(at[1:]), raw)
    return bytes(buf)


def test_a_packet_is_stored_from_its_bytes_as_the_dict_path_stores_it() -> None:
    raw_held, dict_held, got, want, row = both(packet(), 61_234)
    assert got == want == (0, 0)
    assert raw_held.tobytes() == dict_held.tobytes()
    g = raw_held["g"][0]
    assert list(g["tyres"]) == [3.0, 4.0, 1.0, 2.0] and list(g["all_pos"]) == [7, 9, 0]
    assert list(g["all_dist"]) == [100.5, 250.25, 0.0] and int(g["lap_ms"]) == 61_234
    assert row._raw_stores[LAYOUT] is not None  # it took the compiled store


def test_a_signalling_nan_or_an_infinity_is_stored_as_the_dict_path_stores_it() -> None:
    for odd in (0x7F800001, 0xFFA00000, 0x7F800000, 0xFF800000, 0x7FC00123):
        for at in ("o0", "o10", "o22"):
            raw_held, dict_held, got, want, _ = both(packet(**{at: odd}), 1)
            assert got == want
            assert raw_held.tobytes() == dict_held.tobytes(), (hex(odd), at)


def test_values_that_do_not_fit_are_counted_as_the_dict_path_counts_them() -> None:
    # rpm 70,000 into a uint16, a lap time beyond uint32, a text where a number goes
    for data, lap_ms in ((packet(o5=70_000), 5), (packet(), 2**40), (packet(), "fast")):
        raw_held, dict_held, got, want, _ = both(data, lap_ms)
        assert got == want and got[1] == 1
        assert raw_held.tobytes() == dict_held.tobytes()


def test_a_layout_with_a_channel_the_row_lacks_takes_the_dict_path() -> None:
    layout = RawLayout(
        (*FIELDS, RawField("boost", 40, "f")), ("lap_ms",), lambda d, e: {**reference(d, e), "boost": 1.0}
    )
    held, ref = np.zeros(1, FRAME), np.zeros(1, FRAME)
    row = SourceRow(held, "g")
    assert row.apply(RawValues(layout, packet(), {"lap_ms": 3})) == (1, 0)  # boost: unknown
    assert row._raw_stores[layout] is None
    assert SourceRow(ref, "g").apply(layout.build(packet(), {"lap_ms": 3})) == (1, 0)
    assert held.tobytes() == ref.tobytes()


def test_raw_values_read_as_the_decoders_dict() -> None:
    values = RawValues(LAYOUT, packet(), {"lap_ms": 9})
    assert dict(values) == reference(packet(), {"lap_ms": 9}) and len(values) == 8
    assert values["all_pos"] == (7, 9, 0)


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=SIZE, max_size=SIZE), st.integers(min_value=-1, max_value=2**33))
@example(b"\x01\x00\x80\x7f" + bytes(SIZE - 4), 0)  # sNaN speed
@example(bytes(10) + b"\x00\x00\x80\xff" + bytes(SIZE - 14), 0)  # -inf tyre
@example(bytes(27) + b"\x00\x00\xa0\x7f" + bytes(SIZE - 31), 0)  # sNaN in a per-car float
@example(bytes(9) + b"\x02" + bytes(SIZE - 10), 0)  # a bool byte of 2
def test_property_raw_store_equals_the_dict_path(data: bytes, lap_ms: int) -> None:
    raw_held, dict_held, got, want, _ = both(data, lap_ms)
    assert got == want
    assert raw_held.tobytes() == dict_held.tobytes()
