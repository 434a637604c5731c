"""Frames as ROS 2 messages in CDR, for Foxglove: a ``ros2msg`` schema made from the frame
definition, and whole batches of frames encoded at once.

A WRTF frame is a fixed layout, and so is its CDR message when every field is a fixed-size
primitive: CDR (XCDR1, little-endian) puts each primitive at an offset aligned to its own size,
counted from the end of the 4-byte encapsulation header. So the message is a numpy structured
dtype with those offsets, a batch of messages is one array filled column by column, and each
message is a slice of its bytes: no per-frame Python beyond the slice.

The message (``wrtfd/msg/Frame``) holds ``session`` and ``tick`` and one nested message per
source (``wrtfd/Forza forza``, ``wrtfd/Laps laps``...), each with every channel of the source as
one scalar field, flattened and named as in the JSON export (``tire_temp_2``), so Foxglove's
Plot panel offers ``/frames.forza.tire_temp_2``. ROS 2 field names are lower-case letters,
digits and single underscores: other names are folded to that (``Engine_Speed`` ->
``engine_speed``), the channel's own name, unit and description kept in the schema's comment.
Enums are their numbers (uint32, names in the comment). A text field is a CDR string of fixed
capacity: its length word always counts the field's full size, so short texts arrive padded
with NUL characters (Foxglove shows them as they are; strip them when comparing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from wrtfd.exporters.channels import source_of
from wrtfd.format.columns import export_leaves
from wrtfd.format.schema import Leaf, Schema, leaf_column

__all__ = ["CDR_LE_HEADER", "FRAME_TYPE", "CdrLayout", "cdr_layout", "ros2_name"]

#: Encapsulation header of plain CDR, little-endian (representation id 0x0001, options 0).
CDR_LE_HEADER = b"\x00\x01\x00\x00"
FRAME_TYPE = "wrtfd/msg/Frame"
_SEPARATOR = "=" * 80

#: WRTF primitive -> (ros2msg type, numpy type); enums are stored as uint32.
_PRIMITIVES: dict[str, tuple[str, str]] = {
    "bool": ("bool", "?"),
    "int8": ("int8", "i1"),
    "uint8": ("uint8", "u1"),
    "int16": ("int16", "<i2"),
    "uint16": ("uint16", "<u2"),
    "int32": ("int32", "<i4"),
    "uint32": ("uint32", "<u4"),
    "int64": ("int64", "<i8"),
    "uint64": ("uint64", "<u8"),
    "float32": ("float32", "<f4"),
    "float64": ("float64", "<f8"),
    "enum": ("uint32", "<u4"),
}
_NOT_NAME = re.compile(r"[^a-z0-9_]+")


def ros2_name(name: str, taken: set[str]) -> str:
    """``name`` as a ROS 2 field name (``[a-z][a-z0-9_]*``, no ``__``, no trailing ``_``), made
    unique among ``taken`` (which it joins)."""
    out = _NOT_NAME.sub("_", name.lower())
    out = re.sub(r"_+", "_", out).strip("_") or "field"
    if not out[0].isalpha():
        out = "f_" + out
    base, k = out, 2
    while out in taken:
        out = f"{base}_{k}"
        k += 1
    taken.add(out)
    return out


def _type_name(source: str, taken: set[str]) -> str:
    parts = [p for p in re.split(r"[^A-Za-z0-9]+", source) if p]
    name = "".join(p[:1].upper() + p[1:] for p in parts) or "Source"
    if not name[0].isalpha():
        name = "S" + name
    base, k = name, 2
    while name in taken or name == "Frame":
        name = f"{base}{k}"
        k += 1
    taken.add(name)
    return name


def _comment(leaf: Leaf, original: str, field: str) -> str:
    bits = [] if original == field else [original]
    if leaf.unit:
        bits.append(f"({leaf.unit})")
    if leaf.description:
        bits.append(leaf.description)
    if leaf.kind == "enum" and leaf.enum is not None:
        bits.append("[" + ", ".join(f"{v}={n}" for n, v in leaf.enum.values) + "]")
    text = " ".join(bits).replace("\n", " ")
    return f" # {text}" if text else ""


@dataclass(frozen=True, slots=True)
class _Slot:
    leaf: Leaf
    name: str  # the numpy field of the message dtype
    text_bytes: int = 0  # > 0: a text field of this capacity (its length word is ``name + "#len"``)


@dataclass(frozen=True, slots=True)
class CdrLayout:
    """The ``ros2msg`` schema of a frame definition and the numpy layout of its CDR messages."""

    schema_name: str
    schema_text: bytes
    dtype: np.dtype[Any]
    slots: tuple[_Slot, ...]

    def encode(self, frames: np.ndarray, session: int) -> bytes:
        """The messages of ``frames`` back to back, ``dtype.itemsize`` bytes each."""
        out = np.zeros(len(frames), dtype=self.dtype)
        out["#header"] = np.frombuffer(CDR_LE_HEADER, dtype="<u4")[0]
        out["session"] = session
        out["tick"] = frames["tick"]
        for slot in self.slots:
            col = leaf_column(frames, slot.leaf.path)
            if slot.text_bytes:
                out[slot.name + "#len"] = slot.text_bytes + 1
                raw = np.ascontiguousarray(col).view(f"S{col.shape[-1]}").reshape(len(col))
                out[slot.name] = raw
            else:
                out[slot.name] = col
        return out.tobytes()


def cdr_layout(schema: Schema) -> CdrLayout:
    """The message layout of ``schema``'s frames (every channel an export writes)."""
    groups: dict[str | None, list[Leaf]] = {}
    for lf in export_leaves(schema):
        groups.setdefault(source_of(schema, lf), []).append(lf)
    names: list[str] = []
    formats: list[Any] = []
    offsets: list[int] = []
    pos = 0  # offset in the payload, after the encapsulation header

    def place(name: str, fmt: str, size: int, align: int) -> None:
        nonlocal pos
        pos = -(-pos // align) * align
        names.append(name)
        formats.append(fmt)
        offsets.append(4 + pos)
        pos += size

    names.append("#header")
    formats.append("<u4")
    offsets.append(0)
    place("session", "<u4", 4, 4)
    place("tick", "<u8", 8, 8)
    top: list[str] = ["# wrtfd frame: one message per frame", "uint32 session", "uint64 tick"]
    nested: list[str] = []
    slots: list[_Slot] = []
    type_names: set[str] = set()
    top_names = {"session", "tick"}
    for source, leaves in groups.items():
        lines: list[str]
        if source is None:
            lines, taken, prefix = top, top_names, ""
        else:
            type_name = _type_name(source, type_names)
            field = ros2_name(source, top_names)
            top.append(f"{type_name} {field} # the channels of {source}")
            lines, taken, prefix = [], set(), f"{field}."
            nested.append(f"{_SEPARATOR}\nMSG: wrtfd/{type_name}\n")
        start = 1 if source is not None else 0
        for lf in leaves:
            original = "_".join(str(p) for p in lf.path[start:])
            field_name = ros2_name(original, taken)
            key = prefix + field_name
            if lf.kind == "text":
                size = int(np.prod(_text_capacity(schema, lf)))
                place(key + "#len", "<u4", 4, 4)
                place(key, f"S{size + 1}", size + 1, 1)
                slots.append(_Slot(lf, key, size))
                lines.append(f"string {field_name}{_comment(lf, original, field_name)}")
                continue
            ros_type, fmt = _PRIMITIVES[lf.kind]
            itemsize = np.dtype(fmt).itemsize
            place(key, fmt, itemsize, itemsize)
            slots.append(_Slot(lf, key))
            lines.append(f"{ros_type} {field_name}{_comment(lf, original, field_name)}")
        if source is not None:
            nested[-1] += "\n".join(lines) + "\n"
    text = "\n".join(top) + "\n" + "".join(nested)
    dtype = np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": 4 + pos})
    return CdrLayout(FRAME_TYPE, text.encode(), dtype, tuple(slots))


def _text_capacity(schema: Schema, leaf: Leaf) -> tuple[int, ...]:
    """The trailing shape of a text leaf's column (its capacity in bytes)."""
    probe = np.zeros(1, dtype=schema.frame_dtype)
    return tuple(leaf_column(probe, leaf.path).shape[1:])
