"""What goes on the wire: subjects, the live frame encoding, its layout message, decimation.

Pure (numpy and the standard library): no NATS, no clock. The encoding is documented for other
tools in ``docs/fleet.md``; in short:

* ``wrtfd.<rig>.<group>.layout``: JSON, the frame layout of a group: every channel's dotted
  name, byte offset, numpy type and shape, unit; its ``layout_id`` (CRC-32 of the channel list)
  and the group's WRTF definition (YAML) for tools that read WRTF.
* ``wrtfd.<rig>.<group>.frames``: binary, little-endian. A 16-byte head
  (:data:`FRAMES_HEAD`: magic ``WLF1``, layout id, frame count ``n``, frame size ``s``), then
  ``n`` wall times (int64, microseconds since the Unix epoch), then ``n`` frames of ``s`` bytes
  each: the very bytes of the WRTF file's frames (``tick`` first, C layout; N7).

A frame is its recorded bytes, not a re-encoding: nothing to compute per channel on the rig, and a
reader turns a message into a numpy array with one ``frombuffer``. Messages are untrusted input
to readers: :func:`decode_frames` checks every size against the head and the layout before
building a view, and raises :class:`FleetDecodeError` on anything that does not add up.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from wrtfd.errors import DecodeError
from wrtfd.fleet import untrusted
from wrtfd.format.records import take_records
from wrtfd.format.schema import Schema

__all__ = [
    "FRAMES_HEAD",
    "FRAMES_MAGIC",
    "MAX_LAYOUT_BYTES",
    "Decimator",
    "FleetDecodeError",
    "Layout",
    "LayoutField",
    "decode_frames",
    "decode_layout",
    "encode_frames",
    "encode_layout",
    "json_line",
    "layout_dtype",
    "layout_of",
    "subject_events",
    "subject_frames",
    "subject_layout",
    "subject_status",
]

FRAMES_MAGIC = b"WLF1"
#: magic, layout id (u32), frame count (u32), frame size in bytes (u32)
FRAMES_HEAD = struct.Struct("<4sIII")
#: A layout message larger than this is refused by readers (a big definition is ~40 KiB).
MAX_LAYOUT_BYTES = 1 << 20
#: Frame size limit for readers (a WRTF frame of thousands of channels is tens of KiB).
MAX_FRAME_BYTES = 1 << 20
#: Dimensions of an array channel's shape a reader takes (WRTF arrays have one or two).
MAX_SHAPE_DIMS = 8


class FleetDecodeError(DecodeError):
    """A live message that is not what its subject says (wrong magic, sizes, layout)."""


def subject_frames(rig: str, group: str) -> str:
    return f"wrtfd.{rig}.{group}.frames"


def subject_layout(rig: str, group: str) -> str:
    return f"wrtfd.{rig}.{group}.layout"


def subject_status(rig: str) -> str:
    return f"wrtfd.{rig}.status"


def subject_events(rig: str) -> str:
    return f"wrtfd.{rig}.events"


@dataclass(frozen=True, slots=True)
class LayoutField:
    """One channel of a frame: ``name`` dotted (``forza.speed``, ``forza.wheels[2].temp``)."""

    name: str
    offset: int
    #: numpy type string of one element (``<f4``, ``<u2``, ``|S16``)
    dtype: str
    #: array shape of a primitive array channel (``[4]``), empty for a scalar
    shape: tuple[int, ...] = ()
    unit: str = ""


@dataclass(frozen=True, slots=True)
class Layout:
    layout_id: int
    rate_hz: float
    frame_bytes: int
    fields: tuple[LayoutField, ...]
    #: The group's WRTF definition (YAML), for tools that build the frame from it.
    definition: str = ""

    def field(self, name: str) -> LayoutField | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None


def _units(schema: Schema) -> dict[tuple[str, ...], str]:
    """Unit per leaf path without array indices (``("wheels", "temp")``)."""
    out: dict[tuple[str, ...], str] = {}
    for leaf in schema.frame_leaves:
        key = tuple(p for p in leaf.path if isinstance(p, str))
        if leaf.unit:
            out.setdefault(key, leaf.unit)
    return out


def _walk(dt: np.dtype[Any], base: int, name: str, key: tuple[str, ...], out: list[tuple[Any, ...]]) -> None:
    if dt.subdtype is not None:
        sub, shape = dt.subdtype
        if sub.names is None:
            out.append((name, base, sub.str, tuple(int(s) for s in shape), key))
            return
        for i in range(int(np.prod(shape))):
            _walk(sub, base + i * sub.itemsize, f"{name}[{i}]", key, out)
        return
    if dt.names is None:
        out.append((name, base, dt.str, (), key))
        return
    for field_name in dt.names:
        fdt, off = dt.fields[field_name][:2]  # type: ignore[index]
        _walk(fdt, base + off, f"{name}.{field_name}" if name else field_name, (*key, field_name), out)


def layout_of(schema: Schema, rate_hz: float) -> Layout:
    """The wire layout of a group's frames (``tick`` included, at offset 0)."""
    units = _units(schema)
    raw: list[tuple[Any, ...]] = []
    _walk(schema.frame_dtype, 0, "", (), raw)
    fields = tuple(
        LayoutField(name, offset, dtype, shape, units.get(key, "")) for name, offset, dtype, shape, key in raw
    )
    frame_bytes = int(schema.frame_dtype.itemsize)
    ident = zlib.crc32(json.dumps([frame_bytes, [_field_row(f) for f in fields]]).encode())
    return Layout(ident, float(rate_hz), frame_bytes, fields, schema.yaml_text)


def _field_row(f: LayoutField) -> list[Any]:
    return [f.name, f.offset, f.dtype, list(f.shape), f.unit]


def encode_layout(layout: Layout, *, rig: str, group: str) -> bytes:
    doc = {
        "v": 1,
        "rig": rig,
        "group": group,
        "layout_id": layout.layout_id,
        "rate_hz": layout.rate_hz,
        "frame_bytes": layout.frame_bytes,
        "fields": [_field_row(f) for f in layout.fields],
        "definition": layout.definition,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def _uint(value: object, high: int) -> int:
    """A JSON integer from 0 to ``high``; ValueError otherwise (a float, a bool, 400 digits)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        raise ValueError(f"{str(value)[:40]!r} is not an integer from 0 to {high}")
    return value


def _field(row: object) -> LayoutField:
    if not isinstance(row, list) or len(row) != 5:
        raise ValueError("a channel is [name, offset, dtype, shape, unit]")
    name, offset, dtype, shape, unit = row
    if not isinstance(shape, list) or len(shape) > MAX_SHAPE_DIMS:
        raise ValueError(f"channel {str(name)[:40]!r}: shape is not a short list")
    return LayoutField(
        str(name),
        _uint(offset, MAX_FRAME_BYTES),
        str(dtype),
        tuple(_uint(s, MAX_FRAME_BYTES) for s in shape),
        str(unit),
    )


def decode_layout(payload: bytes) -> tuple[str, str, Layout]:
    """(rig, group, layout) from a layout message; raises FleetDecodeError (reason ``too_large``
    or ``bad_layout``), nothing else, whatever the payload."""
    if len(payload) > MAX_LAYOUT_BYTES:
        raise FleetDecodeError(f"layout message of {len(payload)} bytes", reason="too_large")
    try:
        doc = untrusted.loads(payload)
        if not isinstance(doc, dict) or not isinstance(doc.get("fields"), list):
            raise ValueError("not an object with a list of fields")
        rate_hz = untrusted.number(doc.get("rate_hz"), 0.0)
        if rate_hz is None:
            raise ValueError("rate_hz is not a finite number")
        layout = Layout(
            _uint(doc.get("layout_id"), 0xFFFF_FFFF),
            rate_hz,
            _uint(doc.get("frame_bytes"), MAX_FRAME_BYTES),
            tuple(_field(row) for row in doc["fields"]),
            str(doc.get("definition", "")),
        )
        rig, group = str(doc.get("rig")), str(doc.get("group"))
    except (ValueError, TypeError, KeyError) as exc:
        raise FleetDecodeError(f"not a layout message: {exc}", reason="bad_layout") from None
    if layout.frame_bytes < 8:
        raise FleetDecodeError(f"frame size {layout.frame_bytes} out of range", reason="bad_layout")
    layout_dtype(layout)  # every field must fit in the frame
    return rig, group, layout


def layout_dtype(layout: Layout) -> np.dtype[Any]:
    """A flat numpy record type of the frame: one field per channel, named by its dotted name.

    Raises FleetDecodeError (``bad_layout``) for a type numpy does not know, a shape it refuses,
    a channel outside the frame, and any type holding Python objects (``O``): such a type reads
    no frame from bytes, and would make every frame message raise."""
    try:
        formats = [np.dtype((f.dtype, f.shape)) if f.shape else np.dtype(f.dtype) for f in layout.fields]
    except (TypeError, ValueError, OverflowError) as exc:
        raise FleetDecodeError(f"unknown channel type: {exc}", reason="bad_layout") from None
    for f, fmt in zip(layout.fields, formats, strict=True):
        if fmt.hasobject:
            raise FleetDecodeError(f"channel {f.name} holds Python objects ({f.dtype})", reason="bad_layout")
        if f.offset < 0 or f.offset + fmt.itemsize > layout.frame_bytes:
            raise FleetDecodeError(f"channel {f.name} lies outside the frame", reason="bad_layout")
    try:
        return np.dtype(
            {
                "names": [f.name for f in layout.fields],
                "formats": formats,
                "offsets": [f.offset for f in layout.fields],
                "itemsize": layout.frame_bytes,
            }
        )
    except (ValueError, TypeError, OverflowError) as exc:
        raise FleetDecodeError(f"bad layout: {exc}", reason="bad_layout") from None


def encode_frames(
    layout_id: int,
    frames: np.ndarray,
    times_us: np.ndarray,
    *,
    index: Any = None,
    max_bytes: int = 1 << 20,
) -> Iterator[bytes]:
    """Frame messages for ``frames[index]`` (records of the recording's frame type; every frame
    when ``index`` is None), each at most ``max_bytes`` (the server's max_payload); a frame larger
    than that is not sent. The frames go out as WRTF stores them: copied as bytes, padding zero
    whatever their memory held (:func:`wrtfd.format.records.take_records`)."""
    picked = take_records(frames, index)
    times = np.ascontiguousarray(times_us if index is None else times_us[index], dtype="<i8")
    n = len(picked)
    size = int(picked.dtype.itemsize)
    per_message = max(0, (max_bytes - FRAMES_HEAD.size) // (size + 8))
    if n == 0 or per_message == 0:
        return
    body = np.ndarray((n * size,), np.uint8, picked)
    for start in range(0, n, per_message):
        stop = min(n, start + per_message)
        head = FRAMES_HEAD.pack(FRAMES_MAGIC, layout_id, stop - start, size)
        yield head + times[start:stop].tobytes() + body[start * size : stop * size].tobytes()


def decode_frames(payload: bytes, layout: Layout) -> tuple[np.ndarray, np.ndarray]:
    """(wall times in us, frames as a flat record array of :func:`layout_dtype`)."""
    if len(payload) < FRAMES_HEAD.size:
        raise FleetDecodeError(f"frame message of {len(payload)} bytes", reason="too_short")
    magic, layout_id, count, size = FRAMES_HEAD.unpack_from(payload)
    if magic != FRAMES_MAGIC:
        raise FleetDecodeError(f"bad magic {magic!r}", reason="bad_magic")
    if layout_id != layout.layout_id or size != layout.frame_bytes:
        raise FleetDecodeError(
            f"layout {layout_id:#x}/{size} B, expected {layout.layout_id:#x}/{layout.frame_bytes} B",
            reason="layout_mismatch",
        )
    want = FRAMES_HEAD.size + count * (8 + size)
    if len(payload) != want:
        raise FleetDecodeError(
            f"{len(payload)} bytes for {count} frames, expected {want}", reason="wrong_size"
        )
    times = np.frombuffer(payload, dtype="<i8", count=count, offset=FRAMES_HEAD.size)
    frames = np.frombuffer(
        payload, dtype=layout_dtype(layout), count=count, offset=FRAMES_HEAD.size + 8 * count
    )
    return times, frames


class Decimator:
    """Keeps at most ``hz`` frames per second of wall time (0 or None: every frame).

    A frame is kept when it starts a new ``1/hz`` slot of the wall clock, so the kept frames are
    evenly spaced whatever the block boundaries are.
    """

    def __init__(self, hz: float | None) -> None:
        self.period_us = 0 if not hz else max(1, round(1e6 / hz))
        self._last_slot: int | None = None

    def select(self, times_us: np.ndarray) -> np.ndarray:
        """Indices of the frames to keep among ``times_us`` (non-decreasing)."""
        if self.period_us == 0 or len(times_us) == 0:
            return np.arange(len(times_us))
        slots = np.asarray(times_us, dtype=np.int64) // self.period_us
        prev = np.empty_like(slots)
        prev[0] = -(1 << 62) if self._last_slot is None else self._last_slot
        prev[1:] = slots[:-1]
        keep = np.flatnonzero(slots != prev)
        self._last_slot = int(slots[-1])
        return keep


def json_line(doc: Mapping[str, Any]) -> bytes:
    """A compact JSON message (status, events)."""
    return json.dumps(doc, separators=(",", ":"), default=str).encode()
