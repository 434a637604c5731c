"""The numeric channels of a recording, as every channel-oriented export sees them.

One :class:`Channel` per numeric leaf of :func:`~wrtfd.format.export.export_leaves` (text leaves
are left out; enums are their integer values). Each knows its *source*: the top-level struct of
the frame it lives in (``forza``, ``f1``, ``laps``, ``stale``...), or ``None`` for a field at the
top level of a single-source file. Names are flattened with ``_`` as in the CSV export.

Helpers here are pure numpy: NaN holding and the dropped-tick grid, shared by the MoTeC and MDF
exports.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from wrtfd.format.columns import column_names, export_leaves
from wrtfd.format.schema import Leaf, Schema, StructDef

__all__ = ["Channel", "fill_dropped_ticks", "hold_non_finite", "numeric_channels", "source_of"]

#: Leaf kinds stored as integers (enums are uint32 on disk).
INTEGER_KINDS = frozenset(
    {"bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "enum"}
)


@dataclass(frozen=True, slots=True)
class Channel:
    """One numeric leaf: where it is, what it is called, in which unit."""

    leaf: Leaf
    source: str | None  # top-level struct of the frame, None for a top-level field
    name: str  # flattened full name, unique in the file (``forza_speed``)
    local_name: str  # flattened name inside its source (``speed``, ``wheels_0_temperature``)
    unit: str
    description: str

    @property
    def is_integer(self) -> bool:
        return self.leaf.kind in INTEGER_KINDS

    def column(self, frames: np.ndarray) -> np.ndarray:
        """This channel's values over ``frames`` (a view where numpy allows)."""
        col = frames
        for p in self.leaf.path:
            col = col[p] if isinstance(p, str) else col[..., p]
        return col


def source_of(schema: Schema, leaf: Leaf) -> str | None:
    """The top-level struct field a leaf belongs to (a source or a derived set), if any."""
    top = leaf.path[0]
    for f in schema.frame_fields:
        if f.name == top:
            is_struct = isinstance(schema.types.get(f.type), StructDef)
            return f.name if is_struct and f.dimensions == 0 and len(leaf.path) > 1 else None
    return None


def numeric_channels(schema: Schema) -> list[Channel]:
    """Every numeric channel an export writes, in frame order."""
    leaves = export_leaves(schema)
    names = column_names(leaves)
    out: list[Channel] = []
    for leaf, name in zip(leaves, names, strict=True):
        if leaf.kind == "text":
            continue
        src = source_of(schema, leaf)
        local = "_".join(str(p) for p in leaf.path[1:]) if src is not None else name
        out.append(Channel(leaf, src, name, local, leaf.unit or "", leaf.description or ""))
    return out


def hold_non_finite(values: np.ndarray) -> np.ndarray:
    """Float values with NaN and +-inf replaced by the last finite value before them (0.0 before
    the first): the recorder's own sample-and-hold, for formats that cannot store NaN. The
    float type is kept."""
    v = np.asarray(values)
    ok = np.isfinite(v)
    if ok.all():
        return v
    idx = np.where(ok, np.arange(len(v)), -1)
    np.maximum.accumulate(idx, out=idx)
    return np.where(idx >= 0, v[np.maximum(idx, 0)], 0.0)


def fill_dropped_ticks(ticks: np.ndarray) -> np.ndarray | None:
    """Indices into frames that cover every tick from the first to the last: a dropped tick
    (N10) repeats the frame before it. None when no tick was dropped (use the frames as they
    are). Formats with one fixed sample rate and no time channel (MoTeC) need it, or
    everything after a gap would be drawn early."""
    t = np.asarray(ticks, dtype=np.int64)
    if len(t) == 0 or int(t[-1]) - int(t[0]) + 1 == len(t):
        return None
    grid = np.arange(int(t[0]), int(t[-1]) + 1, dtype=np.int64)
    return (np.searchsorted(t, grid, side="right") - 1).astype(np.intp)
