"""Values read from a CARLA recorder file (see ``spec/carla-recorder-layout.md``).

Per-record packets that carry one record per actor every frame (positions, traffic lights,
animations) are kept as numpy structured arrays with the on-disk packed layout, so a frame of
100 vehicles costs one ``np.frombuffer`` and not 100 ``struct`` calls. Event packets, which are
rare, become frozen dataclasses.

Units are CARLA's own: locations in centimetres (Unreal units), rotations in degrees
(X=roll, Y=pitch, Z=yaw), times in seconds.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from enum import IntEnum, unique

import numpy as np

__all__ = [
    "COLLISION_DTYPE",
    "POSITION_DTYPE",
    "TRAFFIC_LIGHT_DTYPE",
    "VEHICLE_ANIM_DTYPE",
    "WALKER_ANIM_DTYPE",
    "ActorAdd",
    "ActorAttribute",
    "ActorType",
    "Collision",
    "Frame",
    "InfoHeader",
    "PacketId",
    "Parent",
    "ReadProblem",
    "Recording",
    "TrafficLightState",
    "actor_type_name",
]


@unique
class PacketId(IntEnum):
    """Packet ids this reader decodes; everything else is skipped by its size and counted."""

    FRAME_START = 0
    FRAME_END = 1
    EVENT_ADD = 2
    EVENT_DEL = 3
    EVENT_PARENT = 4
    COLLISION = 5
    POSITION = 6
    TRAFFIC_LIGHT = 7
    ANIM_VEHICLE = 8
    ANIM_WALKER = 9


@unique
class ActorType(IntEnum):
    """FCarlaActor::ActorType as the code has it (the docs' "4 = INVALID" is out of date)."""

    OTHER = 0
    VEHICLE = 1
    WALKER = 2
    TRAFFIC_LIGHT = 3
    TRAFFIC_SIGN = 4
    SENSOR = 5
    INVALID = 6


@unique
class TrafficLightState(IntEnum):
    RED = 0
    YELLOW = 1
    GREEN = 2
    OFF = 3


def actor_type_name(value: int) -> str:
    """``Vehicle`` for 1, ``type 9`` for a value the enum does not know."""
    try:
        return ActorType(value).name.replace("_", " ").title().replace(" ", "")
    except ValueError:
        return f"type {value}"


# Packed (pragma pack 1) record layouts; numpy structured dtypes are packed unless align=True.
POSITION_DTYPE = np.dtype([("actor_id", "<u4"), ("location_cm", "<f4", (3,)), ("rotation_deg", "<f4", (3,))])
TRAFFIC_LIGHT_DTYPE = np.dtype([("actor_id", "<u4"), ("frozen", "u1"), ("elapsed_s", "<f4"), ("state", "u1")])
VEHICLE_ANIM_DTYPE = np.dtype(
    [
        ("actor_id", "<u4"),
        ("steering", "<f4"),
        ("throttle", "<f4"),
        ("brake", "<f4"),
        ("handbrake", "u1"),
        ("gear", "<i4"),
    ]
)
WALKER_ANIM_DTYPE = np.dtype([("actor_id", "<u4"), ("speed", "<f4")])
COLLISION_DTYPE = np.dtype(
    [
        ("collision_id", "<u4"),
        ("actor1_id", "<u4"),
        ("actor2_id", "<u4"),
        ("actor1_is_hero", "u1"),
        ("actor2_is_hero", "u1"),
    ]
)


@dataclass(frozen=True, slots=True)
class InfoHeader:
    """The file's info header. ``date_s`` counts seconds from the Unix epoch (code, not docs)."""

    version: int
    date_s: int
    map_name: str
    size_bytes: int  # where the first packet starts

    @property
    def date_utc(self) -> _dt.datetime | None:
        """The date as UTC, or None when the value is outside what datetime can show."""
        try:
            return _dt.datetime.fromtimestamp(self.date_s, tz=_dt.UTC)
        except (OverflowError, OSError, ValueError):
            return None


@dataclass(frozen=True, slots=True)
class ActorAttribute:
    type: int  # EActorAttributeType; the value is always stored as text
    id: str
    value: str


@dataclass(frozen=True, slots=True)
class ActorAdd:
    """One actor created in a frame (packet 2)."""

    actor_id: int
    actor_type: int
    location_cm: tuple[float, float, float]
    rotation_deg: tuple[float, float, float]
    description_uid: int
    description_id: str
    attributes: tuple[ActorAttribute, ...] = ()

    def attribute(self, name: str) -> str | None:
        for attr in self.attributes:
            if attr.id == name:
                return attr.value
        return None


@dataclass(frozen=True, slots=True)
class Parent:
    child_id: int
    parent_id: int


@dataclass(frozen=True, slots=True)
class Collision:
    collision_id: int
    actor1_id: int
    actor2_id: int
    actor1_is_hero: bool
    actor2_is_hero: bool


@dataclass(frozen=True, slots=True)
class ReadProblem:
    """Something wrong in the file: where (byte offset), a stable slug, and what."""

    offset: int
    reason: str
    message: str

    def __str__(self) -> str:
        return f"byte {self.offset}: {self.message}"


def _empty(dtype: np.dtype) -> np.ndarray:
    return np.zeros(0, dtype=dtype)


@dataclass(frozen=True, slots=True, eq=False)
class Frame:
    """One complete frame (FrameStart .. FrameEnd).

    ``duration_s`` is None when the file still holds the writer's -1.0 placeholder (normally only
    the last frame: the writer patches a frame's duration when it starts the next one).
    ``offset`` is the byte offset of the FrameStart packet.
    """

    frame_id: int
    elapsed_s: float
    duration_s: float | None
    offset: int
    adds: tuple[ActorAdd, ...] = ()
    deletes: tuple[int, ...] = ()
    parents: tuple[Parent, ...] = ()
    collisions: tuple[Collision, ...] = ()
    positions: np.ndarray = field(default_factory=lambda: _empty(POSITION_DTYPE))
    traffic_lights: np.ndarray = field(default_factory=lambda: _empty(TRAFFIC_LIGHT_DTYPE))
    vehicle_anims: np.ndarray = field(default_factory=lambda: _empty(VEHICLE_ANIM_DTYPE))
    walker_anims: np.ndarray = field(default_factory=lambda: _empty(WALKER_ANIM_DTYPE))


@dataclass(slots=True)
class Recording:
    """A whole file read into memory: header, complete frames, and what went wrong.

    ``unknown_packets`` counts skipped packets by id (10+, user packets >= 100).
    ``end_offset`` is the byte just after the last complete frame.
    """

    header: InfoHeader
    frames: list[Frame]
    problems: list[ReadProblem]
    unknown_packets: dict[int, int]
    file_size: int
    end_offset: int

    @property
    def duration_s(self) -> float:
        """Elapsed time of the last frame plus its duration when known (CARLA's "Duration")."""
        if not self.frames:
            return 0.0
        last = self.frames[-1]
        return last.elapsed_s + (last.duration_s or 0.0)
