"""Channel values derived from CARLA frames (pure: no recorder involved)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tests.carla.carla_scenario as sc
from tests.carla.carla_writer import Actor, CarlaWriter, collision, event_add, event_del, position
from wrtfd.carla.channels import (
    AllVehiclesChannels,
    SingleActorChannels,
    all_vehicles_definition,
    field_names,
    resolve_actor,
    single_actor_definition,
)
from wrtfd.carla.reader import read_recording
from wrtfd.format import Schema


@pytest.fixture(scope="module")
def frames():  # type: ignore[no-untyped-def]
    return read_recording(sc.build()).frames


def test_resolve_actor(frames) -> None:  # type: ignore[no-untyped-def]
    adds = [a for f in frames for a in f.adds]
    assert resolve_actor("hero", adds) == 10
    assert resolve_actor("12", adds) == 12
    with pytest.raises(LookupError, match="never created"):
        resolve_actor("99", adds)
    with pytest.raises(LookupError, match="not 'car'"):
        resolve_actor("car", adds)
    with pytest.raises(LookupError, match="no actor with role_name=hero; vehicles: 11"):
        resolve_actor("hero", [a for a in adds if a.actor_id != 10])


def _schema(definition: dict) -> Schema:
    """The source definition as a whole WRTF definition (the recorder adds its own session header)."""
    session = {
        "description": "test",
        "header": {"fields": [{"name": "n", "type": "uint8", "description": "n"}]},
    }
    return Schema.from_dict({**definition, "session": session})


def test_definitions_are_valid_wrtf_and_match_the_values(frames) -> None:  # type: ignore[no-untyped-def]
    single = _schema(single_actor_definition())
    assert single.frame_dtype["x_m"] == np.dtype("<f8")
    values = SingleActorChannels(10).update(frames[0])
    assert values is not None and list(values) == field_names(single_actor_definition())
    multi = _schema(all_vehicles_definition(5))
    assert multi.frame_dtype["actor_id"].shape == (5,)
    assert list(AllVehiclesChannels(5).update(frames[0])) == field_names(all_vehicles_definition(5))


def test_single_actor_values_exact(frames) -> None:  # type: ignore[no-untyped-def]
    ch = SingleActorChannels(10)
    rows = [ch.update(f) for f in frames]
    assert all(r is not None for r in rows)
    for n, (frame, r) in enumerate(zip(frames, rows, strict=True), start=1):
        assert r is not None
        assert (r["frame_id"], r["elapsed_s"], r["actor_id"]) == (n, frame.elapsed_s, 10)
        assert (r["x_m"], r["y_m"], r["z_m"]) == (sc.hero_x_cm(n) / 100.0, 2.0, 0.3)
        assert (r["roll_deg"], r["pitch_deg"], r["yaw_deg"]) == (0.0, 0.0, 90.0)
        if n == 1:
            expected_vx = 0.0
        else:
            expected_vx = (sc.hero_x_cm(n) / 100.0 - sc.hero_x_cm(n - 1) / 100.0) / (
                frame.elapsed_s - frames[n - 2].elapsed_s
            )
            assert expected_vx == pytest.approx(10.0)
        assert (r["vx_mps"], r["vy_mps"], r["vz_mps"]) == (expected_vx, 0.0, 0.0)
        assert np.float32(r["speed_mps"]) == np.float32(expected_vx)  # as stored (float32)
        _, steering, throttle, brake, handbrake, gear = sc.hero_controls(n)
        assert (r["steering"], r["throttle"], r["brake"], r["handbrake"], r["gear"]) == (
            steering,
            throttle,
            brake,
            handbrake,
            gear,
        )
        assert r["collision_count"] == (0 if n < 3 else 1)
        assert r["last_hit_actor_id"] == (-1 if n < 3 else 11)


def test_single_actor_absent_frames_give_none(frames) -> None:  # type: ignore[no-untyped-def]
    ch = SingleActorChannels(12)  # created in frame 5
    assert [ch.update(f) is None for f in frames] == [True, True, True, True, False, False]
    ch11 = SingleActorChannels(11)  # deleted in frame 4
    rows = [ch11.update(f) for f in frames]
    assert [r is None for r in rows] == [False, False, False, True, True, True]
    assert rows[2] is not None and rows[2]["collision_count"] == 1 and rows[2]["last_hit_actor_id"] == 10


def test_all_vehicles_slots_and_values(frames) -> None:  # type: ignore[no-untyped-def]
    ch = AllVehiclesChannels(3)
    rows = [ch.update(f) for f in frames]
    assert [r["actor_id"].tolist() for r in rows] == [
        [10, 11, 0],
        [10, 11, 0],
        [10, 11, 0],
        [10, 0, 0],  # 11 deleted in frame 4: its slot is emptied
        [10, 12, 0],  # 12 reuses the freed slot 1
        [10, 12, 0],
    ]
    assert [r["vehicle_count"] for r in rows] == [2, 2, 2, 1, 2, 2]
    single = SingleActorChannels(10)
    for frame, r in zip(frames, rows, strict=True):
        s = single.update(frame)
        assert s is not None
        for key in ("x_m", "y_m", "z_m", "yaw_deg", "throttle", "steering", "brake", "handbrake", "gear"):
            assert r[key][0] == s[key], key
        for key in ("vx_mps", "speed_mps"):
            assert r[key][0] == np.float32(s[key]), key
        assert r["collision_count"][0] == s["collision_count"]
        assert r["last_hit_actor_id"][0] == s["last_hit_actor_id"]
    assert rows[2]["collision_count"].tolist() == [1, 1, 0]
    assert rows[2]["last_hit_actor_id"].tolist() == [11, 10, -1]
    # slot 1 after reuse starts fresh: no collisions, velocity 0 on its first frame
    assert rows[4]["collision_count"][1] == 0 and rows[4]["vx_mps"][1] == 0.0
    assert rows[4]["x_m"][1] == 120.0 and rows[5]["vy_mps"][1] == pytest.approx(1.0 / 100 / 0.05)


def test_slots_are_reused_only_after_delete() -> None:
    w = CarlaWriter()
    w.start_frame(0.1)
    w.add(event_add([Actor(1, 1, "v.a"), Actor(2, 1, "v.b"), Actor(3, 1, "v.c"), Actor(9, 2, "walker")]))
    w.add(position([(i, (100.0 * i, 0.0, 0.0), (0.0, 0.0, 0.0)) for i in (1, 2, 3, 9)]))
    w.end_frame()
    w.start_frame(0.1)
    w.add(event_del([1]))
    w.add(collision([(1, 3, 2, False, False)]))
    w.end_frame()
    w.start_frame(0.1)
    w.add(event_add([Actor(4, 1, "v.d")]))
    w.add(position([(4, (400.0, 0.0, 0.0), (0.0, 0.0, 0.0))]))
    w.end_frame()
    ch = AllVehiclesChannels(2)
    rows = [ch.update(f) for f in read_recording(w.getvalue()).frames]
    assert [r["actor_id"].tolist() for r in rows] == [[1, 2], [0, 2], [4, 2]]
    assert [r["vehicles_without_slot"] for r in rows] == [1, 1, 1]  # vehicle 3 never gets a slot
    assert [r["vehicle_count"] for r in rows] == [3, 2, 3]
    assert rows[1]["last_hit_actor_id"].tolist() == [-1, 3]
    assert rows[2]["x_m"].tolist() == [4.0, 2.0]
    assert [(e.actor_id, e.slot, e.taken) for e in ch.slot_events] == [
        (1, 0, True),
        (2, 1, True),
        (3, -1, True),
        (1, 0, False),
        (4, 0, True),
    ]
    assert ch.max_without_slot == 1


def test_max_vehicles_must_be_positive() -> None:
    with pytest.raises(ValueError):
        AllVehiclesChannels(0)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.lists(st.integers(1, 12), max_size=4), st.lists(st.integers(1, 12), max_size=4)),
        min_size=1,
        max_size=25,
    ),
    st.integers(1, 5),
)
def test_property_slots_never_shared_while_alive(steps, max_vehicles) -> None:  # type: ignore[no-untyped-def]
    """Random adds/deletes: an alive vehicle keeps its slot; a slot holds one vehicle at a time."""
    w = CarlaWriter()
    alive: set[int] = set()
    for adds, dels in steps:
        w.start_frame(0.05)
        new = sorted(set(adds) - alive)
        if new:
            w.add(event_add([Actor(i, 1, f"vehicle.{i}") for i in new]))
        gone = sorted(set(dels) & (alive | set(new)))
        if gone:
            w.add(event_del(gone))
        alive = (alive | set(new)) - set(gone)
        w.add(position([(i, (float(i), 0.0, 0.0), (0.0, 0.0, 0.0)) for i in sorted(alive)]))
        w.end_frame()
    ch = AllVehiclesChannels(max_vehicles)
    held: dict[int, int] = {}  # actor -> slot
    alive = set()
    for frame in read_recording(w.getvalue()).frames:
        row = ch.update(frame)
        alive = (alive | {a.actor_id for a in frame.adds}) - set(frame.deletes)
        ids = row["actor_id"].tolist()
        in_slots = [i for i in ids if i]
        assert len(in_slots) == len(set(in_slots)) and set(in_slots) <= alive
        for actor, slot in held.items():
            if actor in alive:
                assert ids[slot] == actor  # never moved nor displaced while alive
        held = {i: s for s, i in enumerate(ids) if i}
        assert row["vehicle_count"] == len(alive)
        assert row["vehicles_without_slot"] == len(alive) - len(in_slots)
        assert len(in_slots) <= max_vehicles
        for s, i in enumerate(ids):
            assert row["x_m"][s] == (i / 100.0 if i else 0.0)
