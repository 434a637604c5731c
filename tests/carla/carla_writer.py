"""A test-only CARLA recorder file writer, written from ``spec/carla-recorder-layout.md``.

It deliberately shares nothing with ``wrtfd.carla`` (no dtypes, no Structs): the tests check the
reader against the layout document, not against itself. Like CARLA's writer it stores -1.0 in
each FrameStart's duration and patches it when the next frame starts, so the last frame keeps
the placeholder.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field


def lp_str(text: str) -> bytes:
    """u16 byte count + UTF-8 bytes, no NUL (layout doc, "Conventions")."""
    raw = text.encode("utf-8")
    return struct.pack("<H", len(raw)) + raw


def info_header(*, version: int = 1, date_s: int = 1_700_000_000, map_name: str = "Town06") -> bytes:
    return (
        struct.pack("<H", version) + lp_str("CARLA_RECORDER") + struct.pack("<q", date_s) + lp_str(map_name)
    )


def packet(pid: int, data: bytes, *, size: int | None = None) -> bytes:
    """u8 id, u32 size (of data only), data. ``size`` overrides the header for corrupt files."""
    return struct.pack("<BI", pid, len(data) if size is None else size) + data


@dataclass
class Actor:
    actor_id: int
    actor_type: int
    description_id: str
    description_uid: int = 1
    location: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rotation: tuple[float, float, float] = (0.0, 0.0, 0.0)
    attributes: list[tuple[int, str, str]] = field(default_factory=list)


def event_add(actors: Sequence[Actor]) -> bytes:
    out = bytearray(struct.pack("<H", len(actors)))
    for a in actors:
        out += struct.pack("<I", a.actor_id)
        out += struct.pack("<B", a.actor_type)
        out += struct.pack("<3f", *a.location)
        out += struct.pack("<3f", *a.rotation)
        out += struct.pack("<I", a.description_uid)
        out += lp_str(a.description_id)
        out += struct.pack("<H", len(a.attributes))
        for attr_type, attr_id, attr_value in a.attributes:
            out += struct.pack("<B", attr_type) + lp_str(attr_id) + lp_str(attr_value)
    return packet(2, bytes(out))


def event_del(ids: Sequence[int]) -> bytes:
    return packet(3, struct.pack("<H", len(ids)) + b"".join(struct.pack("<I", i) for i in ids))


def event_parent(pairs: Sequence[tuple[int, int]]) -> bytes:
    return packet(4, struct.pack("<H", len(pairs)) + b"".join(struct.pack("<II", c, p) for c, p in pairs))


def collision(records: Sequence[tuple[int, int, int, bool, bool]]) -> bytes:
    body = b"".join(struct.pack("<III??", *r) for r in records)
    return packet(5, struct.pack("<H", len(records)) + body)


def position(records: Sequence[tuple[int, tuple[float, float, float], tuple[float, float, float]]]) -> bytes:
    body = b"".join(struct.pack("<I3f3f", i, *loc, *rot) for i, loc, rot in records)
    return packet(6, struct.pack("<H", len(records)) + body)


def traffic_light(records: Sequence[tuple[int, bool, float, int]]) -> bytes:
    body = b"".join(struct.pack("<I?fB", *r) for r in records)
    return packet(7, struct.pack("<H", len(records)) + body)


def anim_vehicle(records: Sequence[tuple[int, float, float, float, bool, int]]) -> bytes:
    """(id, steering, throttle, brake, handbrake, gear) in the on-disk field order."""
    body = b"".join(struct.pack("<IfffBi", *r) for r in records)
    return packet(8, struct.pack("<H", len(records)) + body)


def anim_walker(records: Sequence[tuple[int, float]]) -> bytes:
    body = b"".join(struct.pack("<If", *r) for r in records)
    return packet(9, struct.pack("<H", len(records)) + body)


class CarlaWriter:
    """Builds a recorder file in memory, frame by frame, the way CARLA's recorder does."""

    def __init__(self, *, map_name: str = "Town06", date_s: int = 1_700_000_000) -> None:
        self.buf = bytearray(info_header(date_s=date_s, map_name=map_name))
        self.frame_id = 0
        self.elapsed_s = 0.0
        self._duration_at: int | None = None
        self.frame_offsets: list[int] = []

    def start_frame(self, delta_s: float) -> None:
        """FrameStart; ``delta_s`` is the time since the previous frame (ignored for the first)."""
        if self.frame_id == 0:
            duration = 0.0
        else:
            duration = delta_s
            self.elapsed_s += delta_s
        self.frame_id += 1
        self.frame_offsets.append(len(self.buf))
        data = struct.pack("<Q", self.frame_id)
        dur_at = len(self.buf) + 5 + len(data)
        data += struct.pack("<d", -1.0) + struct.pack("<d", self.elapsed_s)
        self.buf += packet(0, data)
        if self._duration_at is not None:
            struct.pack_into("<d", self.buf, self._duration_at, duration)
        self._duration_at = dur_at

    def end_frame(self) -> None:
        self.buf += packet(1, b"")

    def add(self, raw: bytes) -> None:
        self.buf += raw

    def getvalue(self) -> bytes:
        return bytes(self.buf)
