"""Definitions: loading both forms, every validation rule of wrtf-schema.md with its path (N4),
and the C layout (N6, N7, N8)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.format.conftest import definition, fld, make_schema
from wrtfd.errors import FormatError, SchemaError
from wrtfd.format import Schema


def test_example_definition_loads_channels_form(shared_spec: Path) -> None:
    """N4: the reference sample uses the older top-level `channels:` form."""
    s = Schema.load(shared_spec / "Example.wrtf.yaml")
    assert s.frame_dtype.names is not None
    assert s.frame_dtype.names[0] == "tick"
    assert s.frame_dtype.fields["timestamp"][1] == 8  # type: ignore[index]
    wheels_dt = s.frame_dtype.fields["wheels"][0]  # type: ignore[index]
    assert wheels_dt.shape == (4,) and wheels_dt.base.itemsize == 20
    assert s.frame_size % 8 == 0
    assert s.header_dtype.names == ("type", "driver_id", "track_config", "ambient_temp")
    assert s.footer_dtype is not None and s.footer_dtype.itemsize == 16


def test_schema_md_example_frame_form_loads() -> None:
    text = """
version: "1.0"
types:
  gear_state: {type: enum, description: g, values: [{name: neutral, value: 0, description: n},
                                                    {name: reverse, value: 7, description: r}]}
  wheel_data: {type: struct, description: w, fields: [{name: temperature, type: float32, description: t},
                                                      {name: pressure, type: float32, description: p}]}
session:
  description: s
  header: {description: h, fields: [{name: type, type: uint32, description: t}]}
frame:
  description: f
  fields:
    - {name: wheels, type: wheel_data, dimensions: 4, description: w}
    - {name: current_gear, type: gear_state, description: g}
"""
    s = Schema.from_yaml(text)
    assert s.frame_dtype.fields["current_gear"] == (np.dtype("<u4"), 8 + 32)  # type: ignore[index]
    assert s.frame_size == 48
    assert s.footer_dtype is None and s.footer_size == 0


def test_n6_float32_uint8_frame_layout() -> None:
    """N6/N7 byte check: {float32 speed, uint8 gear}: tick 0, speed 8, gear 12, size 16."""
    s = make_schema([fld("speed", "float32"), fld("gear", "uint8")])
    f = s.frame_dtype.fields
    assert f is not None
    assert (f["tick"][1], f["speed"][1], f["gear"][1], s.frame_size) == (0, 8, 12, 16)


def test_n6_uint8_float64_alignment() -> None:
    """N6: {uint8 a, float64 b}: a at 8, b at 16, size 24."""
    s = make_schema([fld("a", "uint8"), fld("b", "float64")])
    f = s.frame_dtype.fields
    assert f is not None
    assert (f["a"][1], f["b"][1], s.frame_size) == (8, 16, 24)


def test_n6_nested_struct_alignment_and_rounding() -> None:
    """N6: a struct aligns to its largest member and its size rounds up to that alignment."""
    s = make_schema(
        [fld("flag", "bool"), fld("v", "v", 2), fld("tail", "uint16")],
        types={
            "v": {
                "type": "struct",
                "description": "v",
                "fields": [fld("x", "int16"), fld("y", "int32"), fld("z", "uint8")],
            }
        },
    )
    f = s.frame_dtype.fields
    assert f is not None
    # v: x@0 y@4 z@8 -> size 12, align 4. flag@8, v@12 (2 x 12 = 24 -> 36), tail@36, struct 38 -> 40
    assert f["flag"][1] == 8 and f["v"][1] == 12 and f["tail"][1] == 36
    assert f["v"][0].base.itemsize == 12
    assert s.frame_size == 40
    assert f["flag"][0] == np.dtype("?")


def test_n8_header_padded_to_8() -> None:
    s = make_schema([fld("a", "uint8")], header=[fld("x", "uint16"), fld("y", "uint8")])
    assert s.header_dtype.itemsize == 8
    assert s.header_size == 8


def _mutate(d: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    cur: Any = d
    for p in path[:-1]:
        cur = cur[p]
    if value is _DELETE:
        del cur[path[-1]]
    else:
        cur[path[-1]] = value
    return d


_DELETE = object()

_TYPES = {
    "wheel_data": {
        "type": "struct",
        "description": "w",
        "fields": [fld("temperature", "float32"), fld("pressure", "float32")],
    },
    "gear": {
        "type": "enum",
        "description": "g",
        "values": [
            {"name": "n", "value": 0, "description": "n"},
            {"name": "r", "value": 7, "description": "r"},
        ],
    },
}


def _base() -> dict[str, Any]:
    import copy

    return definition([fld("w", "wheel_data", 4), fld("g", "gear")], types=copy.deepcopy(_TYPES))


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            ["types", "wheel_data", "fields", 1, "type"],
            "flaot32",
            "types.wheel_data.fields[1].type: unknown type 'flaot32'",
        ),
        (["version"], "2.0", 'version: must be "1.0"'),
        (["types", "gear", "values"], [], "types.gear.values: an enum must have at least one value"),
        (
            ["types", "gear", "values", 1, "name"],
            "n",
            "types.gear.values[1].name: duplicate enum value name 'n'",
        ),
        (["types", "gear", "values", 1, "value"], 0, "types.gear.values[1].value: duplicate enum value 0"),
        (
            ["types", "gear", "values", 1, "value"],
            -1,
            "types.gear.values[1].value: must be an unsigned 32-bit",
        ),
        (
            ["types", "gear", "values", 0, "description"],
            "",
            "types.gear.values[0].description: must be a non-empty",
        ),
        (["types", "gear", "fields"], [fld("x", "uint8")], "types.gear.fields: an enum cannot have fields"),
        (["types", "wheel_data", "fields"], [], "types.wheel_data.fields: must have at least one field"),
        (
            ["types", "wheel_data", "fields", 0, "name"],
            "",
            "types.wheel_data.fields[0].name: must be a non-empty",
        ),
        (
            ["types", "wheel_data", "fields", 0, "description"],
            _DELETE,
            "types.wheel_data.fields[0].description: missing",
        ),
        (
            ["types", "wheel_data", "fields", 0, "dimensions"],
            -2,
            "types.wheel_data.fields[0].dimensions: must be a non-negative",
        ),
        (
            ["types", "wheel_data", "fields", 1, "name"],
            "temperature",
            "types.wheel_data.fields[1].name: duplicate field name",
        ),
        (["types", "wheel_data", "type"], "union", "types.wheel_data.type: must be 'struct' or 'enum'"),
        (
            ["types", "float32"],
            {"type": "struct", "description": "x", "fields": [fld("a", "uint8")]},
            "types.float32: a custom type cannot reuse",
        ),
        (["session", "description"], _DELETE, "session.description: missing"),
        (["session", "header"], _DELETE, "session.header: missing"),
        (["session", "header", "fields"], [], "session.header.fields: must have at least one field"),
        (
            ["session", "footer"],
            {"description": "f", "fields": []},
            "session.footer.fields: must have at least one field",
        ),
        (
            ["session", "header", "fields"],
            [fld("a", "uint8"), fld("a", "uint16")],
            "session.header.fields[1].name: duplicate field name 'a'",
        ),
        (["frame", "description"], _DELETE, "frame.description: missing"),
        (["frame", "fields"], [], "frame.fields: must have at least one field"),
        (["frame", "fields", 1, "name"], "w", "frame.fields[1].name: duplicate field name 'w'"),
        (["frame", "fields", 1, "type"], "struct", "frame.fields[1].type: unknown type 'struct'"),
        (["frame", "fields", 0, "tags"], ["text"], "frame.fields[0].tags: 'text' needs a uint8 field"),
        (["frame"], _DELETE, "frame: missing"),
    ],
)
def test_validation_rules_name_the_path(path: list[Any], value: Any, message: str) -> None:
    """N4: each rule of wrtf-schema.md gives an error that names the path."""
    d = _mutate(_base(), path, value)
    with pytest.raises(SchemaError) as info:
        Schema.from_dict(d)
    assert message in str(info.value)


def test_circular_reference_is_rejected() -> None:
    types = {
        "a": {"type": "struct", "description": "a", "fields": [fld("b", "b")]},
        "b": {"type": "struct", "description": "b", "fields": [fld("c", "c", 2)]},
        "c": {"type": "struct", "description": "c", "fields": [fld("a", "a")]},
    }
    with pytest.raises(SchemaError, match=r"circular reference a -> b -> c -> a"):
        make_schema([fld("x", "a")], types=types)


def test_self_reference_is_rejected() -> None:
    types = {"node": {"type": "struct", "description": "n", "fields": [fld("next", "node")]}}
    with pytest.raises(SchemaError, match="circular reference node -> node"):
        make_schema([fld("x", "uint8")], types=types)


def test_frame_field_named_tick_is_reserved() -> None:
    with pytest.raises(SchemaError, match=r"frame.fields\[0\].name: 'tick' is reserved"):
        make_schema([fld("tick", "uint32")])


def test_channels_form_paths() -> None:
    d = definition([fld("a", "uint8")])
    del d["frame"]
    d["channels"] = [fld("a", "uint8"), fld("b", "flaot32")]
    with pytest.raises(SchemaError, match=r"channels\[1\].type: unknown type 'flaot32'"):
        Schema.from_dict(d)


def test_absurd_dimensions_are_refused() -> None:
    """A hostile definition cannot make readers allocate gigabytes."""
    with pytest.raises(SchemaError, match=r"frame.fields\[0\].dimensions: layout larger"):
        make_schema([fld("big", "float64", 1 << 30)])


def test_bad_yaml_is_a_schema_error() -> None:
    with pytest.raises(SchemaError, match="not valid YAML"):
        Schema.from_yaml("version: [1.0\n")
    with pytest.raises(SchemaError, match="must be a YAML mapping"):
        Schema.from_yaml("- a\n- b\n")


def test_load_missing_file_is_schema_error(tmp_path: Path) -> None:
    with pytest.raises(FormatError, match="cannot read definition"):
        Schema.load(tmp_path / "nope.yaml")


def test_from_dict_text_round_trips() -> None:
    s = make_schema([fld("a", "uint8"), fld("b", "float64", 3)])
    again = Schema.from_yaml(s.yaml_text)
    assert again.frame_dtype == s.frame_dtype
    assert again.definition == s.definition


def test_leaves_flatten_names() -> None:
    s = make_schema(
        [fld("wheels", "w", 2), fld("name", "uint8", 8, tags=["text"]), fld("v", "float32", 2)],
        types={"w": {"type": "struct", "description": "w", "fields": [fld("temperature", "float32")]}},
    )
    assert [lf.column for lf in s.frame_leaves] == [
        "wheels_0_temperature",
        "wheels_1_temperature",
        "name",
        "v_0",
        "v_1",
    ]
    assert [lf.kind for lf in s.frame_leaves] == ["float32", "float32", "text", "float32", "float32"]


_json_like = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(["version", "types", "session", "frame", "channels", "metadata"]), max_size=3),
    _json_like,
    st.data(),
)
def test_hostile_definitions_raise_only_schema_error(keys: list[str], junk: Any, data: st.DataObject) -> None:
    """Any value anywhere in a definition gives a SchemaError or a schema, never another error."""
    d = _base()
    # Poke junk into a random nested place of a valid definition, and maybe replace whole sections.
    target = data.draw(
        st.sampled_from(
            [d["frame"]["fields"][0], d["session"], d["types"]["gear"], d["types"]["wheel_data"]["fields"][1]]
        )
    )
    target[
        data.draw(st.sampled_from(["name", "type", "dimensions", "values", "fields", "tags", "description"]))
    ] = junk
    for key in keys:
        d[key] = junk
    try:
        s = Schema.from_dict(d)
    except SchemaError:
        return
    assert s.frame_dtype.itemsize % 8 == 0


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_hostile_yaml_text_raises_only_schema_error(text: str) -> None:
    try:
        Schema.from_yaml(text)
    except SchemaError:
        pass


# -- layout comparison (what `recorder.schema` pins) -------------------------------------------


def test_layout_fields_name_every_leaf_with_offset_and_wrtf_type(car_schema: Schema) -> None:
    """N6 offsets, struct arrays unrolled per element, enums as their uint32 storage."""
    from wrtfd.format.schema import layout_fields

    fields = layout_fields(car_schema.frame_dtype)
    assert fields["tick"] == (0, "uint64")
    wheels_at = car_schema.frame_dtype.fields["wheels"][1]  # type: ignore[index]
    assert fields["wheels[0].temperature"] == (wheels_at, "float32")
    assert fields["wheels[3].pressure"] == (wheels_at + 3 * 8 + 4, "float32")
    assert "wheels[4].temperature" not in fields
    state_at = car_schema.frame_dtype.fields["state"][1]  # type: ignore[index]
    assert fields["state"] == (state_at, "uint32")
    arr = layout_fields(make_schema([fld("a", "uint8"), fld("v", "float32", 3)]).frame_dtype)
    assert arr["v"] == (12, "float32[3]")  # a at 8, padded to 12 (N6)


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        ([fld("speed", "float32"), fld("gear", "int8")], None),
        ([fld("speed", "float32")], "field gear is missing"),
        (
            [fld("speed", "float32"), fld("gear", "int8"), fld("rpm", "float32")],
            "field rpm is not in the pinned definition",
        ),
        (
            [fld("rpm", "float32"), fld("speed", "float32"), fld("gear", "int8")],
            "field rpm is not in the pinned definition",  # named before the moves it causes
        ),
        (
            [fld("speed", "float64"), fld("gear", "int8")],
            "field speed is float64 at byte 8, expected float32",
        ),
        (
            [fld("gear", "int8"), fld("speed", "float32")],
            "field speed is float32 at byte 12, expected float32 at byte 8",
        ),
    ],
    ids=["same", "missing", "extra", "extra-first", "type", "moved"],
)
def test_layout_difference_names_the_first_difference(
    frame: list[dict[str, Any]], expected: str | None
) -> None:
    from wrtfd.format.schema import layout_difference

    pinned = make_schema([fld("speed", "float32"), fld("gear", "int8")]).frame_dtype
    got = layout_difference(pinned, make_schema(frame).frame_dtype)
    if expected is None:
        assert got is None
    else:
        assert got is not None and got.startswith(expected), got


def test_layout_difference_ignores_names_of_types_and_descriptions_only() -> None:
    """The same bytes under other descriptions and a renamed enum type still match."""
    from wrtfd.format.schema import layout_difference

    enum = {"type": "enum", "description": "e", "values": [{"name": "a", "value": 0, "description": "a"}]}
    a = make_schema([fld("s", "state_a")], types={"state_a": enum})
    b = make_schema([{**fld("s", "state_b"), "description": "other"}], types={"state_b": enum})
    assert layout_difference(a.frame_dtype, b.frame_dtype) is None
    c = make_schema([fld("s", "float32", 2)])
    d = make_schema([fld("s", "float32", 3)])
    assert layout_difference(c.frame_dtype, d.frame_dtype) == (
        "field s is float32[3] at byte 8, expected float32[2] at byte 8"
    )


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_layout_difference_of_a_random_definition(data: st.DataObject) -> None:
    """Equal to itself; dropping any one frame field is always reported as that field missing."""
    from tests.format.strategies import definitions
    from wrtfd.format.schema import layout_difference

    d = data.draw(definitions())
    full = Schema.from_dict(d)
    assert layout_difference(full.frame_dtype, Schema.from_dict(d).frame_dtype) is None
    fields = d["frame"]["fields"]
    if len(fields) < 2:
        return
    i = data.draw(st.integers(0, len(fields) - 1))
    smaller = {**d, "frame": {**d["frame"], "fields": fields[:i] + fields[i + 1 :]}}
    got = layout_difference(full.frame_dtype, Schema.from_dict(smaller).frame_dtype)
    assert got is not None and got.startswith(f"field {fields[i]['name']}"), got
    assert "missing" in got
