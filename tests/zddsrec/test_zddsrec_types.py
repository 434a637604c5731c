"""The IDL subset and type expressions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wrtfd.errors import ConfigError
from wrtfd.zddsrec.types import (
    PRIMITIVES,
    ArrayType,
    Member,
    Primitive,
    SequenceType,
    StringType,
    StructType,
    TypeDesc,
    parse_idl,
    parse_type_expr,
    struct_from_config,
)


def test_modules_typedefs_consts_and_annotations() -> None:
    types = parse_idl(
        """
        #include <std.idl>
        // a comment
        module geo { module msg {
          const long N = 0x3;
          typedef double Vec[N];
          struct Point { Vec xyz; /* inline comment */ unsigned long long stamp; };
        }; };
        module car {
          @mutable
          struct State {
            @key long id;
            @id(10) geo::msg::Point p, q[2];
            sequence<float, 8> wheel_speeds;
            sequence<geo::msg::Point> trail;
            string<16> driver;
            long long big; unsigned short small; char c; boolean ok;
          };
        };
        """
    )
    assert set(types) == {"geo::msg::Point", "car::State"}
    point = types["geo::msg::Point"]
    assert point.members[0].type == ArrayType(PRIMITIVES["double"], (3,))
    assert point.members[1].type == PRIMITIVES["uint64"]
    state = types["car::State"]
    assert state.extensibility == "mutable"
    assert [(m.name, m.member_id, m.key) for m in state.members] == [
        ("id", 0, True),
        ("p", 10, False),
        ("q", 11, False),
        ("wheel_speeds", 12, False),
        ("trail", 13, False),
        ("driver", 14, False),
        ("big", 15, False),
        ("small", 16, False),
        ("c", 17, False),
        ("ok", 18, False),
    ]
    assert state.member("q").type == ArrayType(point, (2,))  # type: ignore[union-attr]
    assert state.member("wheel_speeds").type == SequenceType(PRIMITIVES["float"], 8)  # type: ignore[union-attr]
    assert state.member("trail").type == SequenceType(point, None)  # type: ignore[union-attr]
    assert state.member("driver").type == StringType(16)  # type: ignore[union-attr]
    assert state.member("big").type.wrtf == "int64"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("idl", "message"),
    [
        ("struct A { long x; }\nstruct B { Missing m; };", r"<idl>:2: unknown type 'Missing'"),
        ("struct A {\n  long x\n};", r"<idl>:3: expected ';'"),
        ("union U switch (long) { case 1: long a; };", r"<idl>:1: 'union' is not supported"),
        ("struct A { map<long, long> m; };", "not supported"),
        ("struct A { long x; long x; };", "duplicate member 'x'"),
        ("struct A { };", "struct A has no members"),
        ("struct A { long v[0]; };", "array size must be in 1.."),
        ("struct A { @optional long v; };", "@optional is not supported"),
        ("struct A : B { long v; };", "inheritance is not supported"),
        ("module m { struct A { long v; };", "missing '}'"),
        ("struct A { long $v; };", "unexpected character '\\$'"),
    ],
)
def test_idl_errors_name_the_line(idl: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_idl(idl)


def test_type_expressions() -> None:
    vec = StructType("Vec", ())
    known = {"Vec": vec}
    assert parse_type_expr("float[3][2]", known) == ArrayType(PRIMITIVES["float"], (3, 2))
    assert parse_type_expr("float[3][2]", known).length == 6  # type: ignore[union-attr]
    assert parse_type_expr("sequence<Vec, 4>", known) == SequenceType(vec, 4)
    assert parse_type_expr("unsigned long long", known) == PRIMITIVES["uint64"]
    assert parse_type_expr("string<8>", known) == StringType(8)
    with pytest.raises(ConfigError, match="unexpected 'x'"):
        parse_type_expr("double x", known)
    with pytest.raises(ConfigError, match="unknown type 'Nope'"):
        parse_type_expr("Nope", known)


def test_struct_from_config_errors_name_the_key() -> None:
    ok = struct_from_config(
        "V",
        {"members": [{"name": "x", "type": "double"}, {"name": "y", "type": "float", "id": 5}]},
        {},
        where="types.V",
    )
    assert [(m.name, m.member_id) for m in ok.members] == [("x", 0), ("y", 5)]
    with pytest.raises(ConfigError, match=r"types.V.members\[1\].type: .*unknown type 'dobule'"):
        struct_from_config(
            "V",
            {"members": [{"name": "x", "type": "double"}, {"name": "y", "type": "dobule"}]},
            {},
            where="types.V",
        )
    with pytest.raises(ConfigError, match=r"types.V.extensibility"):
        struct_from_config(
            "V", {"extensibility": "open", "members": [{"name": "x", "type": "double"}]}, {}, where="types.V"
        )
    with pytest.raises(ConfigError, match=r"types.V.members\[0\]: unknown key\(s\) unit"):
        struct_from_config(
            "V", {"members": [{"name": "x", "type": "double", "unit": "m"}]}, {}, where="types.V"
        )


# --------------------------------------------------------------------------- property: IDL round trip


_SPELLINGS = sorted(PRIMITIVES)


def _render(t: TypeDesc) -> tuple[str, str]:
    """(type text, declarator suffix) of a member type."""
    if isinstance(t, Primitive):
        return next(s for s in _SPELLINGS if PRIMITIVES[s] == t), ""
    if isinstance(t, StringType):
        return ("string" if t.bound is None else f"string<{t.bound}>"), ""
    if isinstance(t, SequenceType):
        inner, _ = _render(t.element)
        return (f"sequence<{inner}>" if t.bound is None else f"sequence<{inner}, {t.bound}>"), ""
    if isinstance(t, ArrayType):
        inner, _ = _render(t.element)
        return inner, "".join(f"[{d}]" for d in t.dims)
    assert isinstance(t, StructType)
    return t.name, ""


@st.composite
def idl_documents(draw: st.DrawFn) -> tuple[str, list[StructType]]:
    structs: list[StructType] = []
    for si in range(draw(st.integers(1, 4))):
        leaf = st.sampled_from(sorted(set(PRIMITIVES.values()), key=lambda p: p.name))
        elem = st.one_of(leaf, st.sampled_from(structs)) if structs else leaf
        member_type = st.one_of(
            leaf,
            st.builds(StringType, st.one_of(st.none(), st.integers(1, 64))),
            st.builds(SequenceType, elem, st.one_of(st.none(), st.integers(1, 16))),
            st.builds(ArrayType, elem, st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple)),
            *([st.sampled_from(structs)] if structs else []),
        )
        types = draw(st.lists(member_type, min_size=1, max_size=6))
        ext = draw(st.sampled_from(["final", "appendable", "mutable"]))
        members = tuple(Member(f"m{i}", t, i) for i, t in enumerate(types))
        structs.append(StructType(f"S{si}", members, ext))
    lines = []
    for s in structs:
        body = " ".join(f"{_render(m.type)[0]} {m.name}{_render(m.type)[1]};" for m in s.members)
        lines.append(f"@{s.extensibility}\nstruct {s.name} {{ {body} }};")
    return "\n".join(lines), structs


@settings(max_examples=200, deadline=None)
@given(idl_documents())
def test_idl_round_trip(doc: tuple[str, list[StructType]]) -> None:
    text, structs = doc
    parsed = parse_idl(text)
    assert parsed == {s.name: s for s in structs}
