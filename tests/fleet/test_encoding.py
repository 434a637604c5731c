"""The live wire format: layout and frame messages round-trip, and hostile ones are refused."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fleet.conftest import (
    START_US,
    dirty_heap,
    forza_frames,
    forza_schema,
    padded_frames,
    shipped_schemas,
)
from wrtfd.decoders import registry
from wrtfd.fleet.encoding import (
    FRAMES_HEAD,
    Decimator,
    FleetDecodeError,
    decode_frames,
    decode_layout,
    encode_frames,
    encode_layout,
    layout_of,
)
from wrtfd.format.schema import layout_fields


@pytest.fixture(scope="module")
def schema(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return forza_schema(tmp_path_factory.mktemp("schema"))


def test_layout_names_every_channel_with_offset_type_and_unit(schema) -> None:  # type: ignore[no-untyped-def]
    layout = layout_of(schema, 60)
    fields = {f.name: f for f in layout.fields}
    assert fields["tick"].offset == 0 and fields["tick"].dtype == "<u8"
    assert fields["forza.speed"].unit == "m/s"
    assert layout.frame_bytes == schema.frame_dtype.itemsize
    # the same offsets the format's own layout walk finds (arrays of structs are unrolled)
    known = layout_fields(schema.frame_dtype)
    for name, (offset, _kind) in known.items():
        assert fields[name].offset == offset, name
    rig, group, back = decode_layout(encode_layout(layout, rig="rig-1", group="main"))
    assert (rig, group) == ("rig-1", "main")
    assert back == layout
    assert back.definition == schema.yaml_text


def test_layout_id_is_stable_and_differs_between_layouts(schema, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import yaml

    from wrtfd.decoders import registry
    from wrtfd.recorder import Recorder, RecorderPolicy, SourceSpec

    a = layout_of(schema, 60)
    assert layout_of(schema, 60).layout_id == a.layout_id  # same channels, same id
    definition = yaml.safe_load((registry.SCHEMA_DIR / "outgauge.wrtf.yaml").read_text())
    other = Recorder([SourceSpec("outgauge", definition)], RecorderPolicy(output_dir=tmp_path)).schema
    assert layout_of(other, 60).layout_id != a.layout_id


def test_frames_round_trip_to_the_recorded_values(schema) -> None:  # type: ignore[no-untyped-def]
    layout = layout_of(schema, 60)
    frames, times = forza_frames(schema, 7, first_tick=100)
    (payload,) = list(encode_frames(layout.layout_id, frames, times))
    assert len(payload) == FRAMES_HEAD.size + 7 * (8 + layout.frame_bytes)
    got_times, got = decode_frames(payload, layout)
    assert list(got_times) == list(times)
    assert list(got["tick"]) == list(range(100, 107))
    np.testing.assert_array_equal(got["forza.speed"], frames["forza"]["speed"])
    # the frame bytes are the recording's bytes: a WRTF reader's dtype reads them as well
    raw = np.frombuffer(payload, dtype=schema.frame_dtype, count=7, offset=FRAMES_HEAD.size + 56)
    assert raw.tobytes() == frames.tobytes()


SHIPPED = sorted(p.name.removesuffix(".wrtf.yaml") for p in registry.SCHEMA_DIR.glob("*.wrtf.yaml"))


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return shipped_schemas(tmp_path_factory.mktemp("shipped"))


def _frame_bytes(payloads: list[bytes]) -> tuple[list[int], bytes]:
    """Wall times and frame bytes of frame messages, read with a plain ``struct`` decode of the
    documented head (magic, layout id, count, frame size; then the times; then the frames)."""
    times: list[int] = []
    body = b""
    for p in payloads:
        magic, _layout_id, count, size = struct.unpack_from("<4sIII", p)
        assert magic == b"WLF1" and len(p) == 16 + count * (8 + size)
        times.extend(struct.unpack_from(f"<{count}q", p, 16))
        body += p[16 + 8 * count :]
    return times, body


@pytest.mark.parametrize("name", SHIPPED)
def test_frame_messages_hold_the_files_bytes_padding_included(shipped, name: str) -> None:  # type: ignore[no-untyped-def]
    """Padding goes out zero (as WRTF stores it) whatever the frames' memory held before: the
    frames here carry 0xAA in every padding byte and freed memory is full of 0x55."""
    schema = shipped[name]
    layout = layout_of(schema, 60)
    frames, clean = padded_frames(schema, 90, seed=len(name))
    times = START_US + np.arange(90, dtype=np.int64) * 1_000_000 // 60
    dirty_heap()
    times_out, body = _frame_bytes(list(encode_frames(layout.layout_id, frames, times, max_bytes=8192)))
    assert times_out == times.tolist()
    assert body == clean.tobytes()
    decimated = Decimator(10).select(times)  # what the publisher keeps at live_hz = 10
    for index in (decimated, np.flatnonzero(np.arange(90) % 4 != 1), np.arange(90) % 3 == 0):
        dirty_heap()
        payloads = list(encode_frames(layout.layout_id, frames, times, index=index, max_bytes=8192))
        times_out, body = _frame_bytes(payloads)
        assert times_out == times[index].tolist()
        assert body == clean[index].tobytes()


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 300), limit=st.integers(200, 20_000))
def test_messages_respect_the_payload_limit_and_lose_nothing(schema, n: int, limit: int) -> None:  # type: ignore[no-untyped-def]
    layout = layout_of(schema, 60)
    frames, times = forza_frames(schema, n)
    messages = list(encode_frames(layout.layout_id, frames, times, max_bytes=limit))
    if FRAMES_HEAD.size + 8 + layout.frame_bytes > limit:
        assert messages == []  # a frame that cannot fit is not sent at all
        return
    assert all(len(m) <= limit for m in messages)
    ticks = np.concatenate([decode_frames(m, layout)[1]["tick"] for m in messages])
    assert list(ticks) == list(range(n))


def test_hostile_frame_messages_are_refused_with_a_reason(schema) -> None:  # type: ignore[no-untyped-def]
    layout = layout_of(schema, 60)
    frames, times = forza_frames(schema, 3)
    (good,) = list(encode_frames(layout.layout_id, frames, times))
    cases = {
        "too_short": good[:10],
        "bad_magic": b"XXXX" + good[4:],
        "wrong_size": good[:-1],
        "layout_mismatch": good[:4] + struct.pack("<I", layout.layout_id ^ 1) + good[8:],
    }
    # a count that claims more frames than the bytes hold
    count_lie = bytearray(good)
    struct.pack_into("<I", count_lie, 8, 1_000_000)
    cases["wrong_size_count"] = bytes(count_lie)
    for name, payload in cases.items():
        with pytest.raises(FleetDecodeError) as err:
            decode_frames(payload, layout)
        assert err.value.reason == name.removesuffix("_count"), name


def test_hostile_layouts_are_refused(schema) -> None:  # type: ignore[no-untyped-def]
    doc = json.loads(encode_layout(layout_of(schema, 60), rig="r", group="g"))
    outside = dict(doc, fields=[["x", doc["frame_bytes"] - 2, "<f8", [], ""]])
    for payload in (
        b"not json",
        json.dumps(dict(doc, fields="nope")).encode(),
        json.dumps(outside).encode(),
        json.dumps(dict(doc, frame_bytes=1 << 30)).encode(),
        json.dumps(dict(doc, fields=[["x", 8, "not-a-type", [], ""]])).encode(),
        b" " * (2 << 20),
    ):
        with pytest.raises(FleetDecodeError):
            decode_layout(payload)


@settings(max_examples=60, deadline=None)
@given(
    hz=st.sampled_from([1.0, 5.0, 10.0, 20.0]),
    blocks=st.lists(st.integers(1, 30), min_size=1, max_size=20),
    gaps=st.lists(st.integers(0, 50), min_size=20, max_size=20),
)
def test_decimation_keeps_one_frame_per_slot_across_blocks(
    hz: float, blocks: list[int], gaps: list[int]
) -> None:
    dec = Decimator(hz)
    period_us = round(1e6 / hz)
    kept: list[int] = []
    t = START_US
    all_times: list[int] = []
    for size, gap in zip(blocks, gaps, strict=False):
        times = t + np.arange(size, dtype=np.int64) * 16_667
        t = int(times[-1]) + 16_667 * (1 + gap)
        kept.extend(int(times[i]) for i in dec.select(times))
        all_times.extend(int(x) for x in times)
    slots = [x // period_us for x in kept]
    assert slots == sorted(set(slots))  # at most one per slot, in order
    assert set(slots) == {x // period_us for x in all_times}  # and one in every slot with data


def test_decimation_off_keeps_everything() -> None:
    times = np.arange(10, dtype=np.int64) * 1000
    assert list(Decimator(None).select(times)) == list(range(10))
    assert list(Decimator(0).select(times)) == list(range(10))


def test_layouts_no_reader_can_use_are_refused_with_a_reason(schema) -> None:  # type: ignore[no-untyped-def]
    """What made every ``wrtfd watch`` fail (found against a real server): an id that is not a
    u32, a negative or absurd shape, a Python-object channel (accepted, then every frame raised),
    nesting deeper than the interpreter's recursion limit, numbers of 400 digits."""
    doc = json.loads(encode_layout(layout_of(schema, 60), rig="r", group="g"))
    tick_x = [["tick", 0, "<u8", [], ""], ["x", 8, "<f4", [], ""]]
    hostile = [
        b'{"layout_id": Infinity}',
        json.dumps(dict(doc, layout_id=float("inf"))).encode().replace(b"inf", b"Infinity"),
        json.dumps(dict(doc, layout_id=-1)).encode(),
        json.dumps(dict(doc, layout_id=1 << 32)).encode(),
        json.dumps(dict(doc, layout_id=10**400)).encode(),
        json.dumps(dict(doc, frame_bytes=10**400)).encode(),
        json.dumps(dict(doc, rate_hz=10**400)).encode(),
        json.dumps(dict(doc, frame_bytes=16, fields=[tick_x[0], ["x", 8, "<f4", [-1], ""]])).encode(),
        json.dumps(dict(doc, frame_bytes=16, fields=[tick_x[0], ["x", 8, "<f4", [10**400], ""]])).encode(),
        json.dumps(dict(doc, frame_bytes=16, fields=[tick_x[0], ["x", 10**400, "<f4", [], ""]])).encode(),
        json.dumps(dict(doc, frame_bytes=16, fields=[tick_x[0], ["x", 8, "O", [], ""]])).encode(),
        json.dumps(dict(doc, frame_bytes=16, fields=[tick_x[0], ["x", 8, "u1,O", [], ""]])).encode(),
        b'{"fields": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    ]
    for payload in hostile:
        with pytest.raises(FleetDecodeError) as info:
            decode_layout(payload)
        assert info.value.reason == "bad_layout", payload[:80]
    # the same layout with a sane channel is taken
    _rig, _group, layout = decode_layout(json.dumps(dict(doc, frame_bytes=16, fields=tick_x)).encode())
    assert [f.name for f in layout.fields] == ["tick", "x"]
