"""CARLA frames -> channel values for the recorder (pure: no I/O, no clock).

Two layouts, each with its WRTF definition (the frame fields of the source ``carla``):

* one actor (``--actor hero|ID``): scalars for that actor;
* all vehicles (``--actor all-vehicles``): the same channels as fixed arrays of ``max_vehicles``
  slots, plus ``actor_id[slot]`` (0 = empty slot). A vehicle takes the lowest free slot when it is
  created and keeps it until it is deleted; only then can another vehicle reuse that slot.

Units: CARLA stores centimetres; the channels are metres (``x_m``), metres per second
(``speed_mps``), degrees (``yaw_deg``: X=roll, Y=pitch, Z=yaw as in Unreal) and CARLA's elapsed
seconds. Velocity is derived from the actor's consecutive positions: (p[n] - p[n-1]) / (t[n] - t[n-1]),
0 on the frame where the actor first appears.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from wrtfd.carla.model import ActorAdd, ActorType, Frame

__all__ = [
    "SOURCE_NAME",
    "AllVehiclesChannels",
    "SingleActorChannels",
    "SlotEvent",
    "all_vehicles_definition",
    "field_names",
    "resolve_actor",
    "single_actor_definition",
]

SOURCE_NAME = "carla"
_CM_PER_M = 100.0

# (name, type, unit, description) of each per-actor channel, in frame order.
_ACTOR_FIELDS: tuple[tuple[str, str, str | None, str], ...] = (
    ("x_m", "float64", "m", "Location X in the CARLA world (recorded in cm)"),
    ("y_m", "float64", "m", "Location Y in the CARLA world (recorded in cm)"),
    ("z_m", "float64", "m", "Location Z in the CARLA world (recorded in cm)"),
    ("roll_deg", "float32", "deg", "Rotation about X"),
    ("pitch_deg", "float32", "deg", "Rotation about Y"),
    ("yaw_deg", "float32", "deg", "Rotation about Z"),
    ("vx_mps", "float32", "m/s", "Velocity X derived from consecutive positions"),
    ("vy_mps", "float32", "m/s", "Velocity Y derived from consecutive positions"),
    ("vz_mps", "float32", "m/s", "Velocity Z derived from consecutive positions"),
    ("speed_mps", "float32", "m/s", "Speed: norm of the derived velocity"),
    ("throttle", "float32", None, "Throttle input 0..1 (vehicle animation packet)"),
    ("steering", "float32", None, "Steering input -1..1 (vehicle animation packet)"),
    ("brake", "float32", None, "Brake input 0..1 (vehicle animation packet)"),
    ("handbrake", "bool", None, "Handbrake engaged"),
    ("gear", "int32", None, "Gear (vehicle animation packet)"),
    ("collision_count", "uint32", None, "Collisions involving this actor so far"),
    ("last_hit_actor_id", "int64", None, "CARLA id of the actor last collided with; -1 = none yet"),
)


def _field(name: str, type_: str, unit: str | None, description: str, dimensions: int = 0) -> dict[str, Any]:
    f: dict[str, Any] = {"name": name, "type": type_, "dimensions": dimensions, "description": description}
    if unit:
        f["unit"] = unit
    return f


def _definition(fields: list[dict[str, Any]], title: str) -> dict[str, Any]:
    return {
        "version": "1.0",
        "metadata": {"title": title, "description": "Imported from a CARLA simulator recorder file"},
        "frame": {"description": "CARLA recorder frame", "fields": fields},
    }


def single_actor_definition() -> dict[str, Any]:
    """Frame fields for one actor."""
    fields = [
        _field("frame_id", "uint64", None, "CARLA frame id of the last frame at or before this tick"),
        _field("elapsed_s", "float64", "s", "CARLA elapsed time of that frame"),
        _field("actor_id", "uint32", None, "CARLA id of the actor"),
    ]
    fields += [_field(*f) for f in _ACTOR_FIELDS]
    return _definition(fields, "CARLA actor")


def all_vehicles_definition(max_vehicles: int) -> dict[str, Any]:
    """Frame fields for every vehicle: arrays of ``max_vehicles`` slots."""
    fields = [
        _field("frame_id", "uint64", None, "CARLA frame id of the last frame at or before this tick"),
        _field("elapsed_s", "float64", "s", "CARLA elapsed time of that frame"),
        _field("vehicle_count", "uint32", None, "Vehicles alive in this frame"),
        _field("vehicles_without_slot", "uint32", None, "Vehicles alive but left out: all slots taken"),
        _field("actor_id", "uint32", None, "CARLA id of the vehicle in each slot; 0 = empty", max_vehicles),
    ]
    fields += [_field(*f, dimensions=max_vehicles) for f in _ACTOR_FIELDS]
    return _definition(fields, f"CARLA vehicles ({max_vehicles} slots)")


def resolve_actor(spec: str, adds: Iterable[ActorAdd]) -> int:
    """The actor id meant by ``--actor hero|ID`` (hero: attribute role_name=hero, first created).

    :raises LookupError: no such actor in the recording (message says what exists).
    """
    adds = list(adds)
    if spec == "hero":
        for add in adds:
            if add.attribute("role_name") == "hero":
                return add.actor_id
        vehicles = [a.actor_id for a in adds if a.actor_type == ActorType.VEHICLE]
        raise LookupError(
            f"no actor with role_name=hero; vehicles: {', '.join(map(str, vehicles[:20])) or 'none'}"
            + (" ..." if len(vehicles) > 20 else "")
        )
    try:
        actor_id = int(spec)
    except ValueError:
        raise LookupError(f"--actor must be hero, all-vehicles or an actor id, not {spec!r}") from None
    if not any(a.actor_id == actor_id for a in adds):
        raise LookupError(f"actor {actor_id} is never created in the recording")
    return actor_id


class SingleActorChannels:
    """Channel values of one actor, frame after frame; None for frames where it has no position."""

    def __init__(self, actor_id: int) -> None:
        self.actor_id = actor_id
        self._prev: tuple[float, float, float] | None = None
        self._prev_t = 0.0
        self._collisions = 0
        self._last_hit = -1
        self._controls: tuple[float, float, float, bool, int] = (0.0, 0.0, 0.0, False, 0)

    def update(self, frame: Frame) -> dict[str, Any] | None:
        aid = self.actor_id
        for c in frame.collisions:
            if c.actor1_id == aid or c.actor2_id == aid:
                self._collisions += 1
                self._last_hit = c.actor2_id if c.actor1_id == aid else c.actor1_id
        if aid in frame.deletes:
            self._prev = None
        anim = frame.vehicle_anims
        if len(anim):
            hit = np.flatnonzero(anim["actor_id"] == aid)
            if len(hit):
                _, steering, throttle, brake, handbrake, gear = anim[hit[-1]].tolist()
                self._controls = (throttle, steering, brake, bool(handbrake), gear)
        pos = frame.positions
        rows = np.flatnonzero(pos["actor_id"] == aid) if len(pos) else None
        if rows is None or not len(rows):
            return None
        row = pos[rows[-1]]
        loc_cm, rot = row["location_cm"].tolist(), row["rotation_deg"].tolist()  # Python floats
        x, y, z = loc_cm[0] / _CM_PER_M, loc_cm[1] / _CM_PER_M, loc_cm[2] / _CM_PER_M
        t = frame.elapsed_s
        vx = vy = vz = 0.0
        if self._prev is not None and t > self._prev_t:
            dt = t - self._prev_t
            px, py, pz = self._prev
            vx, vy, vz = (x - px) / dt, (y - py) / dt, (z - pz) / dt
        self._prev, self._prev_t = (x, y, z), t
        throttle, steering, brake, handbrake, gear = self._controls
        return {
            "frame_id": frame.frame_id,
            "elapsed_s": t,
            "actor_id": aid,
            "x_m": x,
            "y_m": y,
            "z_m": z,
            "roll_deg": rot[0],
            "pitch_deg": rot[1],
            "yaw_deg": rot[2],
            "vx_mps": vx,
            "vy_mps": vy,
            "vz_mps": vz,
            "speed_mps": math.hypot(vx, vy, vz),
            "throttle": throttle,
            "steering": steering,
            "brake": brake,
            "handbrake": handbrake,
            "gear": gear,
            "collision_count": self._collisions,
            "last_hit_actor_id": self._last_hit,
        }


@dataclass(frozen=True, slots=True)
class SlotEvent:
    """A vehicle took or left a slot (for metadata and tests)."""

    frame_id: int
    actor_id: int
    slot: int  # -1: no free slot
    taken: bool


# Column order of the float32 block of AllVehiclesChannels.
_F4_COLUMNS = (
    "roll_deg",
    "pitch_deg",
    "yaw_deg",
    "vx_mps",
    "vy_mps",
    "vz_mps",
    "speed_mps",
    "throttle",
    "steering",
    "brake",
)


class _SlotLookup:
    """actor id -> slot for a frame's records, cached while the frame's id list repeats."""

    __slots__ = ("_ids", "_mask", "_slots", "sorted_ids", "sorted_slots")

    def __init__(self) -> None:
        self.sorted_ids = np.zeros(0, np.uint32)
        self.sorted_slots = np.zeros(0, np.int64)
        self._ids: np.ndarray | None = None
        self._mask = np.zeros(0, np.bool_)
        self._slots: np.ndarray | slice = np.zeros(0, np.int64)

    def rebuild(self, slot_of: Mapping[int, int]) -> None:
        ids = np.fromiter(slot_of.keys(), np.uint32, len(slot_of))
        slots = np.fromiter(slot_of.values(), np.int64, len(slot_of))
        order = np.argsort(ids, kind="stable")
        self.sorted_ids, self.sorted_slots = ids[order], slots[order]
        self._ids = None

    def __call__(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray | slice]:
        """(mask of records whose actor has a slot, their slots: an index array or a slice)."""
        prev = self._ids
        if prev is not None and len(prev) == len(ids) and np.array_equal(prev, ids):
            return self._mask, self._slots
        sorted_ids = self.sorted_ids
        if not len(sorted_ids) or not len(ids):
            mask, slots = np.zeros(len(ids), np.bool_), np.zeros(0, np.int64)
        else:
            idx = np.searchsorted(sorted_ids, ids)
            idx[idx >= len(sorted_ids)] = 0
            mask = sorted_ids[idx] == ids
            slots = self.sorted_slots[idx[mask]]
        k = len(slots)
        # records in slot order 0..k-1 (vehicles created in order, none deleted): a slice is cheaper
        fast: np.ndarray | slice = slots
        if k and slots[0] == 0 and slots[-1] == k - 1 and np.array_equal(slots, np.arange(k)):
            fast = slice(0, k)
        self._ids, self._mask, self._slots = ids.copy(), mask, fast
        return mask, fast


class AllVehiclesChannels:
    """Every vehicle in a fixed number of slots; vectorised per frame (no per-vehicle Python work).

    The slots' current values live in a few blocks (float64 location, float32 rotation, velocity
    and controls, and the integer channels); each frame's values are views of fresh copies of
    them, so a sample never changes after it was handed to the scheduler.
    """

    def __init__(self, max_vehicles: int) -> None:
        if max_vehicles < 1:
            raise ValueError("max_vehicles must be at least 1")
        n = max_vehicles
        self.max_vehicles = n
        self.slot_events: list[SlotEvent] = []
        self.max_without_slot = 0
        self._slot_of: dict[int, int] = {}
        self._free = list(range(n))  # kept sorted: the lowest free slot is taken first
        self._vehicles: set[int] = set()  # alive vehicle ids, with or without a slot
        # one cache per packet kind: positions also list walkers, animations only vehicles
        self._pos_lookup = _SlotLookup()
        self._anim_lookup = _SlotLookup()
        self._loc = np.zeros((n, 3), np.float64)  # x, y, z in m
        self._f4 = np.zeros((n, len(_F4_COLUMNS)), np.float32)
        self._actor_id = np.zeros(n, np.uint32)
        self._handbrake = np.zeros(n, np.bool_)
        self._gear = np.zeros(n, np.int32)
        self._collisions = np.zeros(n, np.uint32)
        self._last_hit = np.full(n, -1, np.int64)
        self._prev_loc = np.zeros((n, 3), np.float64)
        self._prev_t = np.zeros(n, np.float64)
        self._has_prev = np.zeros(n, np.bool_)
        self._moved = False  # velocities were set in the previous frame

    def _clear(self, slot: int) -> None:
        for arr in (self._loc, self._f4, self._prev_loc):
            arr[slot] = 0.0
        self._actor_id[slot] = 0
        self._handbrake[slot] = False
        self._gear[slot] = 0
        self._collisions[slot] = 0
        self._last_hit[slot] = -1
        self._prev_t[slot] = 0.0
        self._has_prev[slot] = False

    def _events(self, frame: Frame) -> None:
        changed = False
        for add in frame.adds:
            if add.actor_type != ActorType.VEHICLE:
                continue
            if add.actor_id in self._slot_of:  # re-created without a delete: keep its slot, reset it
                slot = self._slot_of[add.actor_id]
                self._clear(slot)
                self._actor_id[slot] = add.actor_id
                continue
            self._vehicles.add(add.actor_id)
            if self._free:
                slot = self._free.pop(0)
                self._slot_of[add.actor_id] = slot
                self._clear(slot)
                self._actor_id[slot] = add.actor_id
                changed = True
            else:
                slot = -1
            self.slot_events.append(SlotEvent(frame.frame_id, add.actor_id, slot, True))
        for actor_id in frame.deletes:
            self._vehicles.discard(actor_id)
            slot = self._slot_of.pop(actor_id, -1)
            if slot >= 0:
                self._clear(slot)
                self._free.append(slot)
                self._free.sort()
                changed = True
                self.slot_events.append(SlotEvent(frame.frame_id, actor_id, slot, False))
        if changed:
            self._pos_lookup.rebuild(self._slot_of)
            self._anim_lookup.rebuild(self._slot_of)
        for c in frame.collisions:
            for me, other in ((c.actor1_id, c.actor2_id), (c.actor2_id, c.actor1_id)):
                s = self._slot_of.get(me)
                if s is not None:
                    self._collisions[s] += 1
                    self._last_hit[s] = other

    def update(self, frame: Frame) -> dict[str, Any]:
        if frame.adds or frame.deletes or frame.collisions:
            self._events(frame)
        f4 = self._f4
        t = frame.elapsed_s
        if self._moved:
            f4[:, 3:7] = 0.0  # velocity is only known where the vehicle has a position this frame
            self._moved = False
        pos = frame.positions
        if len(pos):
            mask, slots = self._pos_lookup(pos["actor_id"])
            rec = pos if mask.all() else pos[mask]
            loc = rec["location_cm"].astype(np.float64)
            loc /= _CM_PER_M
            self._loc[slots] = loc
            f4[slots, 0:3] = rec["rotation_deg"]
            dt = t - self._prev_t[slots]
            moving = self._has_prev[slots] & (dt > 0)
            if moving.all():
                vel = (loc - self._prev_loc[slots]) / dt[:, None]
                ms: np.ndarray | slice = slots
            elif moving.any():
                ms = np.arange(self.max_vehicles)[slots][moving]
                vel = (loc[moving] - self._prev_loc[ms]) / dt[moving][:, None]
            else:
                vel = None
            if vel is not None:
                f4[ms, 3:6] = vel
                f4[ms, 6] = np.hypot(np.hypot(vel[:, 0], vel[:, 1]), vel[:, 2])
                self._moved = True
            self._prev_loc[slots] = loc
            self._prev_t[slots] = t
            self._has_prev[slots] = True
        anim = frame.vehicle_anims
        if len(anim):
            mask, slots = self._anim_lookup(anim["actor_id"])
            rec = anim if mask.all() else anim[mask]
            f4[slots, 7] = rec["throttle"]
            f4[slots, 8] = rec["steering"]
            f4[slots, 9] = rec["brake"]
            self._handbrake[slots] = rec["handbrake"] != 0
            self._gear[slots] = rec["gear"]
        without = len(self._vehicles) - len(self._slot_of)
        self.max_without_slot = max(self.max_without_slot, without)
        loc_c = self._loc.copy()
        f4_c = f4.copy()
        values: dict[str, Any] = {
            "frame_id": frame.frame_id,
            "elapsed_s": t,
            "vehicle_count": len(self._vehicles),
            "vehicles_without_slot": without,
            "actor_id": self._actor_id.copy(),
            "x_m": loc_c[:, 0],
            "y_m": loc_c[:, 1],
            "z_m": loc_c[:, 2],
        }
        for i, name in enumerate(_F4_COLUMNS[:7]):
            values[name] = f4_c[:, i]
        values["throttle"] = f4_c[:, 7]
        values["steering"] = f4_c[:, 8]
        values["brake"] = f4_c[:, 9]
        values["handbrake"] = self._handbrake.copy()
        values["gear"] = self._gear.copy()
        values["collision_count"] = self._collisions.copy()
        values["last_hit_actor_id"] = self._last_hit.copy()
        return values


def field_names(definition: Mapping[str, Any]) -> list[str]:
    """Top-level frame field names of a definition (the keys of every values dict)."""
    return [f["name"] for f in definition["frame"]["fields"]]
