"""Generic struct decoder: layouts from the configuration, round trips with hypothesis."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wrtfd.decoders.struct_decoder import StructDecoder
from wrtfd.errors import ConfigError, DecodeError

EXAMPLE: list[dict[str, Any]] = [
    {"name": "magic", "type": "char", "count": 2, "record": False},
    {"name": "t_ms", "type": "uint32", "offset": 4},
    {"name": "rpm", "type": "uint16", "scale": 0.25, "unit": "rpm"},
    {"name": "speed", "type": "float32", "offset": 12, "unit": "m/s", "channel": "speed_ms"},
    {"name": "wheels", "type": "int16", "count": 4},
    {"name": "label", "type": "char", "count": 6},
]


def test_example_layout() -> None:
    dec = StructDecoder(fields=EXAMPLE, magic="WR", time_field="t_ms", time_unit="ms", length=30)
    data = struct.pack("<2s2xIH2xf4h6s", b"WR", 1500, 4000, 12.5, -1, 2, -3, 4, b"abc\x00\x00\x00")
    assert len(data) == 30
    out = dec.decode(data)
    assert out.values == {
        "t_ms": 1500,
        "rpm": 1000.0,
        "speed_ms": 12.5,
        "wheels": (-1, 2, -3, 4),
        "label": "abc",
    }
    assert out.source_time_ns == 1_500_000_000
    fields = {f["name"]: f for f in dec.definition["frame"]["fields"]}
    assert set(fields) == {"t_ms", "rpm", "speed_ms", "wheels", "label"}
    assert fields["rpm"]["type"] == "float32" and fields["rpm"]["unit"] == "rpm"
    assert fields["wheels"]["dimensions"] == 4
    assert fields["label"]["tags"] == ["text"] and fields["label"]["dimensions"] == 6
    with pytest.raises(DecodeError) as err:
        dec.decode(b"XX" + data[2:])
    assert err.value.reason == "bad_magic"
    with pytest.raises(DecodeError) as err:
        dec.decode(data + b"\x00")
    assert err.value.reason == "wrong_size"


def test_big_endian_and_minimum_length() -> None:
    dec = StructDecoder(
        fields=[{"name": "a", "type": "uint16"}, {"name": "b", "type": "int32"}], endian="big"
    )
    assert dec.decode(b"\x01\x02\xff\xff\xff\xfe" + b"extra").values == {"a": 0x0102, "b": -2}
    with pytest.raises(DecodeError):
        dec.decode(b"\x01\x02\xff")


@pytest.mark.parametrize(
    "fields,options",
    [
        ([], {}),
        ([{"name": "a", "type": "float16"}], {}),
        ([{"name": "1a", "type": "uint8"}], {}),
        ([{"name": "a", "type": "uint8"}, {"name": "a", "type": "uint8"}], {}),
        ([{"name": "a", "type": "uint32"}, {"name": "b", "type": "uint8", "offset": 2}], {}),
        ([{"name": "a", "type": "uint8", "count": 0}], {}),
        ([{"name": "a", "type": "uint8", "colour": "red"}], {}),
        ([{"name": "a", "type": "char", "count": 2, "scale": 2.0}], {}),
        ([{"name": "a", "type": "uint8", "record": False}], {}),
        ([{"name": "a", "type": "uint8"}], {"length": 0}),
        ([{"name": "a", "type": "uint8"}], {"endian": "middle"}),
        ([{"name": "a", "type": "uint8"}], {"time_field": "nope"}),
        ([{"name": "a", "type": "uint8"}], {"time_field": "a", "time_unit": "fortnight"}),
        ([{"name": "a", "type": "uint8"}], {"magic_hex": "zz"}),
    ],
)
def test_bad_layouts_are_config_errors(fields: list[dict[str, Any]], options: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        StructDecoder(fields=fields, **options)


_TYPES = {"int8": "b", "uint8": "B", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
          "int64": "q", "uint64": "Q", "float64": "d"}  # fmt: skip


@st.composite
def layouts(draw: st.DrawFn) -> tuple[list[dict[str, Any]], str, bytes, list[Any]]:
    """A random sequential layout, a datagram packed with ``struct`` and the values in it."""
    n = draw(st.integers(1, 8))
    endian = draw(st.sampled_from(["<", ">"]))
    fields: list[dict[str, Any]] = []
    fmt = endian
    values: list[Any] = []
    for i in range(n):
        typ = draw(st.sampled_from(sorted(_TYPES)))
        code = _TYPES[typ]
        gap = draw(st.integers(0, 3))
        fields.append({"name": f"f{i}", "type": typ, "offset": struct.calcsize(fmt) + gap})
        fmt += f"{gap}x{code}"
        bits = struct.calcsize("<" + code) * 8
        if typ == "float64":
            values.append(draw(st.floats(allow_nan=False)))
        elif typ.startswith("u"):
            values.append(draw(st.integers(0, 2**bits - 1)))
        else:
            values.append(draw(st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)))
    return fields, "little" if endian == "<" else "big", struct.pack(fmt, *values), values


@given(layouts())
def test_random_layouts_round_trip(case: tuple[list[dict[str, Any]], str, bytes, list[Any]]) -> None:
    fields, endian, data, values = case
    out = StructDecoder(fields=fields, endian=endian, length=len(data)).decode(data)
    assert list(out.values.values()) == values
