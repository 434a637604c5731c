"""The CARLA recorder reader against files built from the layout document (carla_writer)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tests.carla.carla_scenario as sc
from tests.carla.carla_writer import (
    Actor,
    CarlaWriter,
    anim_vehicle,
    event_add,
    event_del,
    info_header,
    packet,
    position,
)
from wrtfd.carla.model import ActorAttribute, ActorType, Collision, Parent
from wrtfd.carla.reader import FrameStream, load_recording, parse_header, read_recording
from wrtfd.errors import ImportFormatError


@pytest.fixture(scope="module")
def rec():  # type: ignore[no-untyped-def]
    return read_recording(sc.build())


def test_header_uses_unix_epoch_date_and_u16_strings() -> None:
    data = info_header(date_s=1_700_000_000, map_name="Town10HD_Opt")
    h = parse_header(data)
    assert (h.version, h.map_name, h.date_s) == (1, "Town10HD_Opt", 1_700_000_000)
    assert h.date_utc is not None and h.date_utc.isoformat() == "2023-11-14T22:13:20+00:00"
    # 2 version + 2+14 magic + 8 date + 2+12 map
    assert h.size_bytes == 40
    # The doc's example: "Town06" is 06 00 54 6f 77 6e 30 36.
    assert info_header(map_name="Town06").endswith(bytes.fromhex("06 00 54 6f 77 6e 30 36"))


@pytest.mark.parametrize(
    "data, fragment",
    [
        (b"", "only 0 bytes"),
        (b"\x01\x00\x0e\x00CARLA_RECORDEX" + bytes(10), "magic"),
        (b"\x01\x00\xff\x00CARLA", "length 255 runs past"),
        (info_header()[:20], "date missing"),
        (info_header(map_name="Town06")[:-2], "map name"),
    ],
)
def test_bad_headers_are_one_clear_error(data: bytes, fragment: str) -> None:
    with pytest.raises(ImportFormatError, match=fragment):
        parse_header(data)


def test_frames_ids_times_and_last_duration_placeholder(rec) -> None:  # type: ignore[no-untyped-def]
    assert [f.frame_id for f in rec.frames] == [1, 2, 3, 4, 5, 6]
    assert [f.elapsed_s for f in rec.frames] == pytest.approx([0.0, 0.05, 0.10, 0.15, 0.20, 0.25])
    # Each FrameStart's -1.0 is patched when the next frame starts; the truncated frame 7 did start,
    # so frame 6 is patched too; an untruncated file keeps -1.0 in its last frame.
    assert [f.duration_s for f in rec.frames] == pytest.approx([0.05] * 6)
    whole = read_recording(sc.build(truncated=False))
    assert whole.frames[-1].duration_s is None
    assert whole.duration_s == pytest.approx(0.25)
    assert whole.problems == []
    assert whole.end_offset == whole.file_size


def test_event_add_decodes_every_field(rec) -> None:  # type: ignore[no-untyped-def]
    adds = rec.frames[0].adds
    assert [a.actor_id for a in adds] == [10, 11, 40, 20, 30, 50]
    assert [a.actor_type for a in adds] == [
        ActorType.VEHICLE,
        ActorType.VEHICLE,
        ActorType.WALKER,
        ActorType.TRAFFIC_LIGHT,
        ActorType.TRAFFIC_SIGN,
        ActorType.SENSOR,
    ]
    hero = adds[0]
    assert hero.location_cm == (100.0, 200.0, 30.0)
    assert hero.rotation_deg == (0.0, 0.0, 90.0)
    assert (hero.description_uid, hero.description_id) == (101, "vehicle.tesla.model3")
    assert hero.attributes == (
        ActorAttribute(5, "role_name", "hero"),
        ActorAttribute(5, "color", "79,33,85"),
        ActorAttribute(1, "number_of_wheels", "4"),
    )
    assert hero.attribute("role_name") == "hero" and hero.attribute("missing") is None
    assert adds[4].description_id == "traffic.stop"
    assert rec.frames[4].adds[0].actor_id == 12


def test_events_parent_collision_delete(rec) -> None:  # type: ignore[no-untyped-def]
    assert rec.frames[0].parents == (Parent(50, 10),)
    assert rec.frames[2].collisions == (Collision(7, 10, 11, True, False),)
    assert rec.frames[3].deletes == (11,)
    assert all(not f.collisions for i, f in enumerate(rec.frames) if i != 2)


def test_positions_lights_and_animations_exact(rec) -> None:  # type: ignore[no-untyped-def]
    for n, frame in enumerate(rec.frames, start=1):
        pos = frame.positions
        assert pos.dtype.itemsize == 28
        ids = [int(i) for i in pos["actor_id"]]
        assert ids == [10, 40] + ([11] if n < 4 else []) + ([12] if n >= 5 else [])
        hero = pos[pos["actor_id"] == 10][0]
        assert hero["location_cm"].tolist() == [sc.hero_x_cm(n), 200.0, 30.0]
        assert hero["rotation_deg"].tolist() == [0.0, 0.0, 90.0]
        tl = frame.traffic_lights
        assert tl.tolist() == [(20, 0, 0.5 * n, 0 if n < 2 else 2)]
        anim = frame.vehicle_anims[0]
        _, steering, throttle, brake, handbrake, gear = sc.hero_controls(n)
        assert (int(anim["actor_id"]), float(anim["steering"]), float(anim["throttle"])) == (
            10,
            steering,
            throttle,
        )
        assert (float(anim["brake"]), bool(anim["handbrake"]), int(anim["gear"])) == (brake, handbrake, gear)
        assert frame.walker_anims.tolist() == [(40, 1.5)]


def test_unknown_packets_counted_by_id(rec) -> None:  # type: ignore[no-untyped-def]
    assert rec.unknown_packets == {12: 1, 100: 1}


def test_truncated_last_frame_is_dropped_and_reported(rec) -> None:  # type: ignore[no-untyped-def]
    data = sc.build()
    assert len(rec.frames) == 6
    reasons = [(p.reason, p.offset) for p in rec.problems]
    frame7 = rec.end_offset  # frame 7's FrameStart follows frame 6's FrameEnd
    pos_packet = frame7 + 5 + 24
    assert reasons == [("size_past_end", pos_packet), ("truncated_frame", frame7)]
    assert "rejected" in rec.problems[0].message
    assert rec.file_size == len(data)


def test_every_cut_keeps_every_complete_frame() -> None:
    data = sc.build(truncated=False)
    ends = []  # byte offset just after each FrameEnd
    stream = FrameStream(data)
    for frame in stream:
        ends.append(frame.offset)
    ends = [*ends[1:], len(data)]
    for cut in range(parse_header(data).size_bytes, len(data) + 1):
        r = read_recording(data[:cut])
        complete = sum(1 for e in ends if e <= cut)
        assert len(r.frames) == complete, cut
        if cut in ends or cut == r.header.size_bytes:
            assert r.problems == []
        else:
            assert r.problems, cut


def test_size_past_end_is_rejected_not_trusted() -> None:
    w = CarlaWriter()
    w.start_frame(0.05)
    w.add(position([(1, (1.0, 2.0, 3.0), (0.0, 0.0, 0.0))]))
    w.end_frame()
    w.start_frame(0.05)
    at = len(w.buf)
    w.add(packet(6, b"\x01\x00", size=0xFFFFFFF0))
    w.end_frame()
    r = read_recording(w.getvalue())
    assert [f.frame_id for f in r.frames] == [1]
    assert r.problems[0].reason == "size_past_end" and r.problems[0].offset == at
    assert str(r.problems[0]).startswith(f"byte {at}:")


def test_packet_contradicting_its_size_is_skipped_frame_kept() -> None:
    w = CarlaWriter()
    w.start_frame(0.05)
    at = len(w.buf)
    # count says 2 records but only one is there: 2 + 28 bytes instead of 2 + 56
    good = position([(1, (1.0, 2.0, 3.0), (0.0, 0.0, 0.0))])
    w.add(good[:5] + b"\x02\x00" + good[7:])
    w.add(anim_vehicle([(1, 0.1, 0.2, 0.3, False, 2)]))
    w.end_frame()
    r = read_recording(w.getvalue())
    assert len(r.frames) == 1
    assert len(r.frames[0].positions) == 0
    assert r.frames[0].vehicle_anims["gear"].tolist() == [2]
    assert [(p.reason, p.offset) for p in r.problems] == [("bad_packet", at)]
    assert "2 records of 28 bytes need 58 bytes, the packet has 30" in r.problems[0].message


def test_event_add_string_running_past_its_packet_is_reported() -> None:
    w = CarlaWriter()
    w.start_frame(0.05)
    raw = bytearray(event_add([Actor(1, 1, "vehicle.x")]))
    # description length (after 5 header + 2 count + 33 fixed bytes) made huge
    struct.pack_into("<H", raw, 5 + 2 + 33, 5000)
    w.add(bytes(raw))
    w.add(event_del([1]))
    w.end_frame()
    r = read_recording(w.getvalue())
    assert r.frames[0].adds == () and r.frames[0].deletes == (1,)
    assert r.problems[0].reason == "bad_packet"
    assert "length 5000 runs past the packet" in r.problems[0].message


def test_packets_outside_frames_and_missing_frame_end() -> None:
    w = CarlaWriter()
    w.add(position([]))  # before any FrameStart
    w.start_frame(0.05)  # never ended
    w.start_frame(0.05)
    w.end_frame()
    w.end_frame()  # a second FrameEnd
    r = read_recording(w.getvalue())
    assert [f.frame_id for f in r.frames] == [2]
    assert [p.reason for p in r.problems] == [
        "packet_outside_frame",
        "missing_frame_end",
        "packet_outside_frame",
    ]


def test_bad_frame_start_skips_that_frame_until_its_end() -> None:
    w = CarlaWriter()
    w.add(packet(0, bytes(16)))  # FrameStart of 16 bytes
    w.add(position([]))
    w.add(packet(1, b""))
    w.start_frame(0.05)
    w.end_frame()
    r = read_recording(w.getvalue())
    assert [f.frame_id for f in r.frames] == [1]
    assert [p.reason for p in r.problems] == ["bad_packet"]


def test_load_recording_from_file_and_empty_file(tmp_path: Path) -> None:
    p = tmp_path / "a.log"
    p.write_bytes(sc.build())
    assert len(load_recording(p).frames) == 6
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    with pytest.raises(ImportFormatError, match="empty file"):
        load_recording(empty)
    junk = tmp_path / "junk.log"
    junk.write_bytes(b"\x01\x00\x04\x00ABCD" + bytes(40))
    with pytest.raises(ImportFormatError, match=r"junk\.log: not a CARLA recorder file"):
        load_recording(junk)


_vec = st.tuples(*[st.floats(-1e6, 1e6, width=32)] * 3)


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(st.tuples(st.integers(0, 2**32 - 1), _vec, _vec), max_size=40),
    gears=st.lists(st.integers(-(2**31), 2**31 - 1), max_size=10),
)
def test_property_position_and_anim_round_trip(records, gears) -> None:  # type: ignore[no-untyped-def]
    w = CarlaWriter()
    w.start_frame(0.0)
    w.add(position(records))
    w.add(anim_vehicle([(i, 0.0, 1.0, 0.5, i % 2 == 0, g) for i, g in enumerate(gears)]))
    w.end_frame()
    r = read_recording(w.getvalue())
    pos = r.frames[0].positions
    assert [int(i) for i in pos["actor_id"]] == [rec[0] for rec in records]
    assert np.array_equal(
        pos["location_cm"].reshape(-1, 3), np.array([r[1] for r in records], "f4").reshape(-1, 3)
    )
    assert np.array_equal(
        pos["rotation_deg"].reshape(-1, 3), np.array([r[2] for r in records], "f4").reshape(-1, 3)
    )
    assert r.frames[0].vehicle_anims["gear"].tolist() == gears
    assert r.problems == []


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 400))
def test_property_garbage_never_crashes(tail: bytes, cut: int) -> None:
    """Any bytes after a valid header: frames or reported problems, never an exception."""
    data = (sc.build(truncated=False) + tail)[: parse_header(sc.build()).size_bytes + cut * 3]
    r = read_recording(data)
    assert r.end_offset <= len(data)
    for frame in r.frames:
        assert frame.offset < r.end_offset


_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2**32 - 1),
            st.integers(0, 255),
            _text,
            st.lists(st.tuples(st.integers(0, 255), _text, _text), max_size=4),
        ),
        max_size=6,
    )
)
def test_property_event_add_round_trip(actors) -> None:  # type: ignore[no-untyped-def]
    w = CarlaWriter()
    w.start_frame(0.0)
    w.add(event_add([Actor(i, t, d, description_uid=i ^ 7, attributes=a) for i, t, d, a in actors]))
    w.end_frame()
    r = read_recording(w.getvalue())
    assert r.problems == []
    got = r.frames[0].adds
    assert [(a.actor_id, a.actor_type, a.description_id, a.description_uid) for a in got] == [
        (i, t, d, i ^ 7) for i, t, d, _ in actors
    ]
    assert [[(x.type, x.id, x.value) for x in a.attributes] for a in got] == [a for *_, a in actors]
