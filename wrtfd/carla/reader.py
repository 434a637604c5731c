"""Read CARLA recorder files: info header, then packets grouped into frames.

The layout is ``spec/carla-recorder-layout.md`` (code over docs: Unix-epoch date, u16 counts,
actor type 4 = TrafficSign). Packets 0-9 are decoded; any other id (10+, user packets >= 100)
is skipped by its size and counted by id.

The file is hostile input. A packet whose size runs past the end of the file is rejected and
ends the read; a packet whose contents contradict its size is skipped and reported; a frame
without its FrameEnd (a recorder killed mid-frame) is dropped. Every problem is reported with
its byte offset, and every complete frame before it is kept.

:func:`parse_header` and :class:`FrameStream` are pure (they take a buffer); :func:`open_recording`
maps a file and :func:`load_recording` reads one whole.
"""

from __future__ import annotations

import mmap
import struct
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from wrtfd.carla.model import (
    COLLISION_DTYPE,
    POSITION_DTYPE,
    TRAFFIC_LIGHT_DTYPE,
    VEHICLE_ANIM_DTYPE,
    WALKER_ANIM_DTYPE,
    ActorAdd,
    ActorAttribute,
    Collision,
    Frame,
    InfoHeader,
    PacketId,
    Parent,
    ReadProblem,
    Recording,
)
from wrtfd.errors import ImportFormatError

__all__ = [
    "EVENT_PACKETS",
    "MAGIC",
    "MAX_PROBLEMS_KEPT",
    "FrameStream",
    "load_recording",
    "open_recording",
    "parse_header",
    "read_recording",
]

MAGIC = "CARLA_RECORDER"
#: The event packets (add, delete, parent, collision): enough for actor lists and lifetimes.
EVENT_PACKETS = frozenset({PacketId.EVENT_ADD, PacketId.EVENT_DEL, PacketId.EVENT_PARENT, PacketId.COLLISION})
#: Problems beyond this many are counted (``problem_counts``) but not kept one by one.
MAX_PROBLEMS_KEPT = 100

_U16 = struct.Struct("<H")
_PACKET_HEADER = struct.Struct("<BI")  # packet id, size of the data that follows
_FRAME_START = struct.Struct("<Qdd")  # frame id, durationThis (s), elapsed (s)
_DATE = struct.Struct("<q")  # std::time_t, seconds since the Unix epoch
_ADD_FIXED = struct.Struct("<IB3f3fI")  # actor id, type, location xyz, rotation xyz, description uid
_U8 = struct.Struct("<B")
_DEL_DTYPE = np.dtype("<u4")
_PARENT_DTYPE = np.dtype([("child_id", "<u4"), ("parent_id", "<u4")])


class _BadPacket(Exception):
    """Internal: a packet's contents contradict its size (never leaves this module)."""


def _read_str(buf: Any, pos: int, end: int, what: str) -> tuple[str, int]:
    """A u16-length-prefixed UTF-8 string inside ``[pos, end)``; returns (text, next pos)."""
    if end - pos < 2:
        raise _BadPacket(f"{what}: no room for its length")
    (length,) = _U16.unpack_from(buf, pos)
    pos += 2
    if length > end - pos:
        raise _BadPacket(f"{what}: length {length} runs past the packet ({end - pos} bytes left)")
    text = bytes(buf[pos : pos + length]).decode("utf-8", errors="replace")
    return text, pos + length


def parse_header(buf: Any) -> InfoHeader:
    """Read the info header at the start of ``buf``.

    :raises ImportFormatError: not a CARLA recorder file, or the header is cut short.
    """
    n = len(buf)
    if n < 4:
        raise ImportFormatError(f"not a CARLA recorder file: only {n} bytes")
    (version,) = _U16.unpack_from(buf, 0)
    try:
        magic, pos = _read_str(buf, 2, n, "magic")
    except _BadPacket as exc:
        raise ImportFormatError(f"not a CARLA recorder file: {exc}") from None
    if magic != MAGIC:
        raise ImportFormatError(f"not a CARLA recorder file: magic {magic[:32]!r}, expected {MAGIC!r}")
    if n - pos < _DATE.size:
        raise ImportFormatError(f"CARLA recorder header cut short at byte {n} (date missing)")
    (date_s,) = _DATE.unpack_from(buf, pos)
    pos += _DATE.size
    try:
        map_name, pos = _read_str(buf, pos, n, "map name")
    except _BadPacket as exc:
        raise ImportFormatError(f"CARLA recorder header cut short: {exc} (at byte {pos})") from None
    return InfoHeader(version=version, date_s=date_s, map_name=map_name, size_bytes=pos)


def _records(buf: Any, body: int, end: int, dtype: np.dtype, what: str) -> np.ndarray:
    """``u16 count`` + ``count`` packed records filling the packet exactly, as a read-only array."""
    size = end - body
    if size < 2:
        raise _BadPacket(f"{what}: {size} bytes, too short for its record count")
    (count,) = _U16.unpack_from(buf, body)
    need = 2 + count * dtype.itemsize
    if need != size:
        raise _BadPacket(
            f"{what}: {count} records of {dtype.itemsize} bytes need {need} bytes, the packet has {size}"
        )
    if count == 0:
        return np.zeros(0, dtype=dtype)
    if isinstance(buf, bytes):  # immutable: a read-only view is safe and free
        return np.frombuffer(buf, dtype=dtype, count=count, offset=body + 2)
    # mmap or bytearray: copy the bytes out (a plain memcpy, much cheaper than ndarray.copy() of
    # an unaligned structured array), so no view outlives the mapping
    return np.frombuffer(bytes(buf[body + 2 : end]), dtype=dtype)


def _event_adds(buf: Any, body: int, end: int) -> list[ActorAdd]:
    if end - body < 2:
        raise _BadPacket("EventAdd: too short for its record count")
    (count,) = _U16.unpack_from(buf, body)
    pos = body + 2
    adds: list[ActorAdd] = []
    for i in range(count):
        what = f"EventAdd record {i + 1}/{count}"
        if end - pos < _ADD_FIXED.size:
            raise _BadPacket(f"{what}: runs past the packet")
        actor_id, actor_type, lx, ly, lz, rx, ry, rz, uid = _ADD_FIXED.unpack_from(buf, pos)
        pos += _ADD_FIXED.size
        description_id, pos = _read_str(buf, pos, end, f"{what} description")
        if end - pos < 2:
            raise _BadPacket(f"{what}: attribute count runs past the packet")
        (nattr,) = _U16.unpack_from(buf, pos)
        pos += 2
        attrs: list[ActorAttribute] = []
        for _ in range(nattr):
            if end - pos < 1:
                raise _BadPacket(f"{what}: attribute runs past the packet")
            (attr_type,) = _U8.unpack_from(buf, pos)
            attr_id, pos = _read_str(buf, pos + 1, end, f"{what} attribute id")
            attr_value, pos = _read_str(buf, pos, end, f"{what} attribute value")
            attrs.append(ActorAttribute(attr_type, attr_id, attr_value))
        adds.append(
            ActorAdd(
                actor_id=actor_id,
                actor_type=actor_type,
                location_cm=(lx, ly, lz),
                rotation_deg=(rx, ry, rz),
                description_uid=uid,
                description_id=description_id,
                attributes=tuple(attrs),
            )
        )
    if pos != end:
        raise _BadPacket(f"EventAdd: {end - pos} bytes left over after {count} records")
    return adds


class _FrameBuilder:
    """Collects one frame's packets until its FrameEnd."""

    __slots__ = (
        "adds",
        "collisions",
        "deletes",
        "duration_s",
        "elapsed_s",
        "frame_id",
        "offset",
        "parents",
        "positions",
        "traffic_lights",
        "vehicle_anims",
        "walker_anims",
    )

    def __init__(self, frame_id: int, elapsed_s: float, duration_s: float | None, offset: int) -> None:
        self.frame_id = frame_id
        self.elapsed_s = elapsed_s
        self.duration_s = duration_s
        self.offset = offset
        self.adds: list[ActorAdd] = []
        self.deletes: list[int] = []
        self.parents: list[Parent] = []
        self.collisions: list[Collision] = []
        self.positions: list[np.ndarray] = []
        self.traffic_lights: list[np.ndarray] = []
        self.vehicle_anims: list[np.ndarray] = []
        self.walker_anims: list[np.ndarray] = []

    def build(self) -> Frame:
        def join(parts: list[np.ndarray], dtype: np.dtype) -> np.ndarray:
            if not parts:
                return np.zeros(0, dtype=dtype)
            return parts[0] if len(parts) == 1 else np.concatenate(parts)

        return Frame(
            frame_id=self.frame_id,
            elapsed_s=self.elapsed_s,
            duration_s=self.duration_s,
            offset=self.offset,
            adds=tuple(self.adds),
            deletes=tuple(self.deletes),
            parents=tuple(self.parents),
            collisions=tuple(self.collisions),
            positions=join(self.positions, POSITION_DTYPE),
            traffic_lights=join(self.traffic_lights, TRAFFIC_LIGHT_DTYPE),
            vehicle_anims=join(self.vehicle_anims, VEHICLE_ANIM_DTYPE),
            walker_anims=join(self.walker_anims, WALKER_ANIM_DTYPE),
        )


def _decode_into(pid: int, buf: Any, body: int, end: int, cur: _FrameBuilder) -> None:
    """Decode packet ``pid`` (2-9) into the open frame; raises _BadPacket."""
    if pid == PacketId.POSITION:
        cur.positions.append(_records(buf, body, end, POSITION_DTYPE, "Position"))
    elif pid == PacketId.ANIM_VEHICLE:
        cur.vehicle_anims.append(_records(buf, body, end, VEHICLE_ANIM_DTYPE, "AnimVehicle"))
    elif pid == PacketId.TRAFFIC_LIGHT:
        cur.traffic_lights.append(_records(buf, body, end, TRAFFIC_LIGHT_DTYPE, "TrafficLight"))
    elif pid == PacketId.ANIM_WALKER:
        cur.walker_anims.append(_records(buf, body, end, WALKER_ANIM_DTYPE, "AnimWalker"))
    elif pid == PacketId.EVENT_ADD:
        cur.adds.extend(_event_adds(buf, body, end))
    elif pid == PacketId.EVENT_DEL:
        cur.deletes.extend(int(v) for v in _records(buf, body, end, _DEL_DTYPE, "EventDel"))
    elif pid == PacketId.EVENT_PARENT:
        cur.parents.extend(
            Parent(int(r["child_id"]), int(r["parent_id"]))
            for r in _records(buf, body, end, _PARENT_DTYPE, "EventParent")
        )
    elif pid == PacketId.COLLISION:
        cur.collisions.extend(
            Collision(
                int(r["collision_id"]),
                int(r["actor1_id"]),
                int(r["actor2_id"]),
                bool(r["actor1_is_hero"]),
                bool(r["actor2_is_hero"]),
            )
            for r in _records(buf, body, end, COLLISION_DTYPE, "Collision")
        )


class FrameStream:
    """Iterate the complete frames of a recorder file held in ``buf`` (bytes, mmap, memoryview).

    Iterating more than once re-reads from the start (and resets the counters). After iteration:
    ``problems`` (the first :data:`MAX_PROBLEMS_KEPT`), ``problem_counts`` (all, by reason),
    ``unknown_packets`` (skipped packets by id), ``end_offset`` (after the last complete frame).

    ``decode`` limits which of packets 2-9 are decoded (the others are skipped by size, not
    counted): a quick first pass can read only the events, e.g. ``EVENT_PACKETS``.

    :raises ImportFormatError: from the constructor, when the info header is not CARLA's.
    """

    def __init__(self, buf: Any, *, decode: frozenset[int] | None = None) -> None:
        self._buf = buf
        self._decode = frozenset(range(2, 10)) if decode is None else decode
        self.header = parse_header(buf)
        self.file_size = len(buf)
        self.problems: list[ReadProblem] = []
        self.problem_counts: Counter[str] = Counter()
        self.unknown_packets: Counter[int] = Counter()
        self.end_offset = self.header.size_bytes

    def again(self, *, decode: frozenset[int] | None = None) -> FrameStream:
        """A new stream over the same buffer (e.g. a full pass after a quick events-only one)."""
        return FrameStream(self._buf, decode=decode)

    def _problem(self, offset: int, reason: str, message: str) -> None:
        self.problem_counts[reason] += 1
        if len(self.problems) < MAX_PROBLEMS_KEPT:
            self.problems.append(ReadProblem(offset, reason, message))

    def __iter__(self) -> Iterator[Frame]:
        buf = self._buf
        n = len(buf)
        pos = self.header.size_bytes
        self.problems = []
        self.problem_counts = Counter()
        self.unknown_packets = Counter()
        self.end_offset = pos
        unpack_header = _PACKET_HEADER.unpack_from
        cur: _FrameBuilder | None = None
        skipping = False  # inside a frame whose FrameStart was unusable: wait for its FrameEnd
        while pos < n:
            if n - pos < _PACKET_HEADER.size:
                self._problem(
                    pos, "truncated_packet_header", f"packet header cut short: {n - pos} of 5 bytes"
                )
                break
            pid, size = unpack_header(buf, pos)
            body = pos + _PACKET_HEADER.size
            end = body + size
            if end > n:
                self._problem(
                    pos,
                    "size_past_end",
                    f"packet {pid} says {size} bytes but only {n - body} remain in the file; rejected",
                )
                break
            if pid == PacketId.FRAME_START:
                if cur is not None:
                    self._problem(
                        cur.offset, "missing_frame_end", f"frame {cur.frame_id} has no FrameEnd; dropped"
                    )
                cur, skipping = self._start_frame(buf, pos, body, size)
            elif pid == PacketId.FRAME_END:
                if size:
                    self._problem(pos, "bad_packet", f"FrameEnd carries {size} bytes (expected 0); ignored")
                if cur is not None:
                    yield cur.build()
                    self.end_offset = end
                elif not skipping:
                    self._problem(pos, "packet_outside_frame", "FrameEnd without a FrameStart")
                cur = None
                skipping = False
            elif pid <= PacketId.ANIM_WALKER:
                if pid not in self._decode:
                    pass
                elif cur is not None:
                    try:
                        _decode_into(pid, buf, body, end, cur)
                    except _BadPacket as exc:
                        self._problem(pos, "bad_packet", f"{exc}; packet skipped")
                elif not skipping:
                    self._problem(pos, "packet_outside_frame", f"packet {pid} outside a frame; skipped")
            else:
                self.unknown_packets[pid] += 1
            pos = end
        if cur is not None:
            self._problem(
                cur.offset,
                "truncated_frame",
                f"frame {cur.frame_id} has no FrameEnd before the end of the file; dropped",
            )

    def _start_frame(self, buf: Any, pos: int, body: int, size: int) -> tuple[_FrameBuilder | None, bool]:
        if size != _FRAME_START.size:
            self._problem(pos, "bad_packet", f"FrameStart of {size} bytes (expected 24); frame skipped")
            return None, True
        frame_id, duration_s, elapsed_s = _FRAME_START.unpack_from(buf, body)
        if not np.isfinite(elapsed_s):
            self._problem(pos, "bad_packet", f"frame {frame_id}: elapsed is {elapsed_s}; frame skipped")
            return None, True
        # The writer stores -1.0 and patches it when the next frame starts.
        duration: float | None = duration_s if np.isfinite(duration_s) and duration_s >= 0.0 else None
        return _FrameBuilder(frame_id, elapsed_s, duration, pos), False

    def recording(self) -> Recording:
        """Read every frame into a :class:`Recording`."""
        frames = list(self)
        return Recording(
            header=self.header,
            frames=frames,
            problems=list(self.problems),
            unknown_packets=dict(sorted(self.unknown_packets.items())),
            file_size=self.file_size,
            end_offset=self.end_offset,
        )


def read_recording(data: Any) -> Recording:
    """Parse a whole recorder file already in memory.

    :raises ImportFormatError: the info header is not a CARLA recorder's.
    """
    return FrameStream(data).recording()


@contextmanager
def open_recording(path: Path) -> Iterator[FrameStream]:
    """Map ``path`` read-only and give a :class:`FrameStream` over it (frames hold copies, not views).

    :raises ImportFormatError: not a CARLA recorder file.
    :raises OSError: the file cannot be opened.
    """
    with Path(path).open("rb") as f:
        size = f.seek(0, 2)
        if size == 0:
            raise ImportFormatError(f"{path}: empty file, not a CARLA recorder")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            try:
                stream = FrameStream(mm)
            except ImportFormatError as exc:
                raise ImportFormatError(f"{path}: {exc}") from None
            yield stream


def load_recording(path: Path) -> Recording:
    """Read a whole recorder file.

    :raises ImportFormatError: not a CARLA recorder file.
    :raises OSError: the file cannot be read.
    """
    with open_recording(path) as stream:
        return stream.recording()
