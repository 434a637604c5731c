"""Our CDR decoder against an independent encoder: pycdr2 (Cyclone DDS's Python IDL package).

Random values of every supported type are serialized by pycdr2 (XCDR1 and XCDR2, both
endiannesses) and decoded by ours from a type parsed from IDL text; the values must be equal.
pycdr2 is a test-only dependency.
"""

import dataclasses
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pycdr2 = pytest.importorskip("pycdr2")
from pycdr2 import Endianness, IdlStruct  # noqa: E402
from pycdr2 import annotations as idl_ann  # noqa: E402
from pycdr2.types import (  # noqa: E402
    array,
    bounded_str,
    char,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    sequence,
    uint8,
    uint16,
    uint32,
    uint64,
)

from wrtfd.zddsrec.cdr import CdrDecoder, parse_encapsulation  # noqa: E402
from wrtfd.zddsrec.types import parse_idl  # noqa: E402

IDL = """
module t {
  const long N = 4;
  struct Prims {
    octet a; double b; boolean c; int16 d; int64 e; uint16 f; float g; uint64 h;
    int8 i; int32 j; uint32 k; char l; unsigned long long m; short n;
  };
  struct Vec3 { double x; double y; double z; };
  struct Wheel { string<8> name; float temp_c; sequence<short, 3> codes; };
  struct Rich {
    uint8 flag;
    float mat[3][2];
    Vec3 pos;
    sequence<double, 5> samples;
    string label;
    string<N> tag;
    Wheel wheels[2];
    sequence<Vec3, 3> path;
    string names[2];
    octet raw[5];
    sequence<octet, 6> blob;
    int64 tail;
  };
  @appendable struct Status { int32 code; string<16> text; sequence<float, 4> levels; };
  @mutable struct Config { int8 mode; double gain; sequence<Vec3, 2> points; string<12> name; uint16 rate; };
  struct Envelope { uint32 seq; Status status; Config config; double t; };
};
"""
TYPES = parse_idl(IDL)


@dataclasses.dataclass
class Prims(IdlStruct, typename="t::Prims"):
    a: uint8
    b: float64
    c: bool
    d: int16
    e: int64
    f: uint16
    g: float32
    h: uint64
    i: int8
    j: int32
    k: uint32
    l: char  # noqa: E741
    m: uint64
    n: int16


@dataclasses.dataclass
class Vec3(IdlStruct, typename="t::Vec3"):
    x: float64
    y: float64
    z: float64


@dataclasses.dataclass
class Wheel(IdlStruct, typename="t::Wheel"):
    name: bounded_str[8]
    temp_c: float32
    codes: sequence[int16, 3]


@dataclasses.dataclass
class Rich(IdlStruct, typename="t::Rich"):
    flag: uint8
    mat: array[array[float32, 2], 3]
    pos: Vec3
    samples: sequence[float64, 5]
    label: str
    tag: bounded_str[4]
    wheels: array[Wheel, 2]
    path: sequence[Vec3, 3]
    names: array[str, 2]
    raw: array[uint8, 5]
    blob: sequence[uint8, 6]
    tail: int64


@dataclasses.dataclass
@idl_ann.appendable
class Status(IdlStruct, typename="t::Status"):
    code: int32
    text: bounded_str[16]
    levels: sequence[float32, 4]


@dataclasses.dataclass
@idl_ann.mutable
class Config(IdlStruct, typename="t::Config"):
    mode: int8
    gain: float64
    points: sequence[Vec3, 2]
    name: bounded_str[12]
    rate: uint16


@dataclasses.dataclass
class Envelope(IdlStruct, typename="t::Envelope"):
    seq: uint32
    status: Status
    config: Config
    t: float64


def ints(bits: int, signed: bool) -> st.SearchStrategy[int]:
    return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else st.integers(0, 2**bits - 1)


f32 = st.floats(width=32, allow_nan=False)
f64 = st.floats(allow_nan=False)
ascii_text = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=8)
any_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20
)


def bounded(n: int) -> st.SearchStrategy[str]:
    return st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=n)


prims = st.builds(
    Prims,
    a=ints(8, False),
    b=f64,
    c=st.booleans(),
    d=ints(16, True),
    e=ints(64, True),
    f=ints(16, False),
    g=f32,
    h=ints(64, False),
    i=ints(8, True),
    j=ints(32, True),
    k=ints(32, False),
    l=st.characters(min_codepoint=0x20, max_codepoint=0x7E),
    m=ints(64, False),
    n=ints(16, True),
)
vec3 = st.builds(Vec3, x=f64, y=f64, z=f64)
wheel = st.builds(Wheel, name=bounded(8), temp_c=f32, codes=st.lists(ints(16, True), max_size=3))
rich = st.builds(
    Rich,
    flag=ints(8, False),
    mat=st.lists(st.lists(f32, min_size=2, max_size=2), min_size=3, max_size=3),
    pos=vec3,
    samples=st.lists(f64, max_size=5),
    label=any_text,
    tag=bounded(4),
    wheels=st.lists(wheel, min_size=2, max_size=2),
    path=st.lists(vec3, max_size=3),
    names=st.lists(any_text, min_size=2, max_size=2),
    raw=st.binary(min_size=5, max_size=5),
    blob=st.lists(ints(8, False), max_size=6),
    tail=ints(64, True),
)
status = st.builds(Status, code=ints(32, True), text=bounded(16), levels=st.lists(f32, max_size=4))
config = st.builds(
    Config,
    mode=ints(8, True),
    gain=f64,
    points=st.lists(vec3, max_size=2),
    name=bounded(12),
    rate=ints(16, False),
)
envelope = st.builds(Envelope, seq=ints(32, False), status=status, config=config, t=f64)


def expected(obj: Any) -> Any:
    """pycdr2's value in our decoder's shape: dicts, flat lists, char as its code."""
    if dataclasses.is_dataclass(obj):
        out = {f.name: expected(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        if isinstance(obj, Prims):
            out["l"] = ord(obj.l)
        if isinstance(obj, Rich):
            out["mat"] = [v for row in obj.mat for v in row]  # multi-dimensional arrays come out flat
        return out
    if isinstance(obj, bytes | bytearray):
        return list(obj)
    if isinstance(obj, list | tuple):
        return [expected(v) for v in obj]
    return obj


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


ENDIANS = [Endianness.Little, Endianness.Big]
CASES = [
    ("t::Prims", prims, (False, True)),
    ("t::Rich", rich, (False, True)),
    ("t::Status", status, (True,)),  # appendable: pycdr2 encodes it as XCDR2 (D_CDR2) only
    ("t::Config", config, (True,)),  # pycdr2 encodes mutable types only as XCDR2 (PL_CDR2)
    ("t::Envelope", envelope, (True,)),
]


@pytest.mark.parametrize("endian", ENDIANS, ids=["le", "be"])
@pytest.mark.parametrize(("type_name", "values", "versions"), CASES, ids=[c[0] for c in CASES])
def test_decode_matches_pycdr2(
    type_name: str, values: st.SearchStrategy[Any], versions: tuple[bool, ...], endian: Endianness
) -> None:
    decoder = CdrDecoder(TYPES[type_name])

    @settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(values)
    def check(obj: Any) -> None:
        for v2 in versions:
            payload = obj.serialize(endianness=endian, use_version_2=v2)
            enc = parse_encapsulation(payload)
            assert enc.little == (endian is Endianness.Little)
            assert enc.version == (2 if v2 else 1)
            got = decoder.decode(payload)
            want = expected(obj)
            assert same(want, got), (v2, want, got)

    check()


def test_encapsulation_kinds_seen_from_pycdr2() -> None:
    """pycdr2 names appendable D_CDR2 and mutable PL_CDR2, with the ids deployed stacks use."""
    s = Status(1, "x", []).serialize(endianness=Endianness.Little, use_version_2=True)
    c = Config(0, 0.0, [], "", 0).serialize(endianness=Endianness.Big, use_version_2=True)
    p = Prims(0, 0.0, False, 0, 0, 0, 0.0, 0, 0, 0, 0, "a", 0, 0).serialize(endianness=Endianness.Big)
    assert parse_encapsulation(s).name == "D_CDR2_LE"
    assert parse_encapsulation(c).name == "PL_CDR2_BE"
    assert parse_encapsulation(p).name == "CDR_BE"
