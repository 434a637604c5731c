"""Flat tables from a WRTF file: CSV and Parquet (through pyarrow, an optional extra).

Columns are ``session``, ``tick``, ``time_us`` and one per leaf of the frame, named by joining
the path with ``_`` (``wheels_0_temperature``). Enums become their names, ``text`` fields
strings. Work is done per chunk of frames with numpy, never per row in Python, except for the
pure-Python CSV fallback used when pyarrow is not installed.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wrtfd.errors import FormatError
from wrtfd.format.markers import MARKER_FIELD, has_markers
from wrtfd.format.reader import Reader, SessionInfo, ticks_to_time_us
from wrtfd.format.schema import Leaf, Schema, leaf_column

__all__ = [
    "column_names",
    "export_file",
    "export_frames",
    "export_leaves",
    "frame_chunks",
    "iter_columns",
    "select_sessions",
]

Progress = Callable[[int, int], None]
_CHUNK = 1 << 16


def export_leaves(schema: Schema) -> list[Leaf]:
    """The channels every export writes (CSV, Parquet, MoTeC, MCAP, MDF4, compare).

    The one place that decides it: fields that are bookkeeping rather than telemetry (such as a
    per-frame integrity check, or the bytes of markers, which exports show as markers) are left
    out here, and nowhere else.
    """
    leaves = schema.frame_leaves
    if has_markers(schema.frame_dtype):
        leaves = [lf for lf in leaves if lf.path[0] != MARKER_FIELD]
    return leaves


def export_frames(reader: Reader, session: int) -> np.ndarray:
    """The frames of ``session`` every export writes: the one place that decides which frames.

    A view of the whole session today; frames that fail an integrity check are dropped here once
    files carry one. Exports take times from these frames' ticks, never from the session's.
    """
    return reader.frames(session)


def frame_chunks(frames: np.ndarray, chunk: int = _CHUNK) -> Iterator[np.ndarray]:
    """``frames`` in consecutive slices of at most ``chunk`` (views)."""
    for start in range(0, len(frames), chunk):
        yield frames[start : start + chunk]


def column_names(leaves: list[Leaf]) -> list[str]:
    """Flattened names, made unique if two paths flatten to the same text."""
    seen: dict[str, int] = {"session": 1, "tick": 1, "time_us": 1}
    out = []
    for lf in leaves:
        name = lf.column
        if name in seen:
            seen[name] += 1
            name = f"{name}_{seen[name]}"
        seen[name] = 1
        out.append(name)
    return out


def _text_column(col: np.ndarray) -> np.ndarray:
    raw = np.ascontiguousarray(col).view(f"S{col.shape[-1]}").reshape(len(col))
    return np.array([b.decode("utf-8", errors="replace") for b in raw], dtype=object)


def _enum_column(col: np.ndarray, leaf: Leaf) -> np.ndarray:
    uniq, inv = np.unique(col, return_inverse=True)
    names = {v: n for n, v in (leaf.enum.values if leaf.enum else ())}
    labels = np.array([names.get(int(u), str(int(u))) for u in uniq], dtype=object)
    return labels[inv.reshape(-1)]


def iter_columns(
    reader: Reader, chunk: int = _CHUNK, sessions: Sequence[int] | None = None
) -> Iterator[tuple[list[str], list[np.ndarray]]]:
    """(names, columns) per chunk of frames, over ``sessions`` (default: all)."""
    leaves = export_leaves(reader.schema)
    names = ["session", "tick", "time_us", *column_names(leaves)]
    for s in select_sessions(reader, sessions):
        for arr in frame_chunks(export_frames(reader, s.index), chunk):
            cols: list[np.ndarray] = [
                np.full(len(arr), s.index, dtype=np.int64),
                np.ascontiguousarray(arr["tick"]),
                ticks_to_time_us(arr["tick"], s.time_base_us, reader.rate_hz),
            ]
            for lf in leaves:
                col = leaf_column(arr, lf.path)
                if lf.kind == "text":
                    cols.append(_text_column(col))
                elif lf.kind == "enum":
                    cols.append(_enum_column(col, lf))
                else:
                    cols.append(np.ascontiguousarray(col))
            yield names, cols


def _have_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def select_sessions(reader: Reader, sessions: Sequence[int] | None) -> list[SessionInfo]:
    """The sessions to export, in file order (all of them by default).

    :raises FormatError: an index the file does not have.
    """
    if sessions is None:
        return list(reader.sessions)
    out = []
    for i in sessions:
        if not 0 <= i < len(reader.sessions):
            raise FormatError(f"{reader.path}: no session {i} (the file has {len(reader.sessions)})")
        out.append(reader.sessions[i])
    return out


def export_file(
    reader: Reader,
    output: Path,
    fmt: str | None = None,
    progress: Progress | None = None,
    sessions: Sequence[int] | None = None,
) -> int:
    """Write the frames of ``sessions`` (default all) to ``output`` as CSV or Parquet; rows written.

    :raises FormatError: unknown format, or Parquet without pyarrow.
    """
    fmt = (fmt or output.suffix.lstrip(".")).lower()
    total = sum(s.frame_count for s in select_sessions(reader, sessions))
    if fmt == "parquet":
        if not _have_pyarrow():
            raise FormatError("Parquet export needs pyarrow: install wrtfd[parquet]")
        return _export_arrow(reader, output, "parquet", total, progress, sessions)
    if fmt == "csv":
        if _have_pyarrow():
            return _export_arrow(reader, output, "csv", total, progress, sessions)
        return _export_csv_plain(reader, output, total, progress, sessions)
    raise FormatError(f"{output}: unknown export format {fmt!r} (use .csv or .parquet)")


def _export_arrow(
    reader: Reader,
    output: Path,
    fmt: str,
    total: int,
    progress: Progress | None,
    sessions: Sequence[int] | None,
) -> int:
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    leaves = export_leaves(reader.schema)
    names = ["session", "tick", "time_us", *column_names(leaves)]
    fields = [pa.field("session", pa.int64()), pa.field("tick", pa.uint64()), pa.field("time_us", pa.int64())]
    for name, lf in zip(names[3:], leaves, strict=True):
        if lf.kind in ("text", "enum"):
            fields.append(pa.field(name, pa.string()))
        else:
            fields.append(pa.field(name, pa.from_numpy_dtype(_leaf_dtype(reader, lf))))
    schema = pa.schema(fields)
    writer: Any
    writer = pq.ParquetWriter(output, schema) if fmt == "parquet" else pacsv.CSVWriter(output, schema)
    rows = 0
    try:
        for _, cols in iter_columns(reader, sessions=sessions):
            arrays = [pa.array(c, type=f.type) for c, f in zip(cols, fields, strict=True)]
            writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
            rows += len(cols[0])
            if progress:
                progress(rows, total)
        if rows == 0:
            writer.write_table(schema.empty_table())
    finally:
        writer.close()
    return rows


def _leaf_dtype(reader: Reader, lf: Leaf) -> np.dtype[Any]:
    probe = np.zeros(1, dtype=reader.schema.frame_dtype)
    return leaf_column(probe, lf.path).dtype


def _export_csv_plain(
    reader: Reader, output: Path, total: int, progress: Progress | None, sessions: Sequence[int] | None
) -> int:
    rows = 0
    with open(output, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        header_done = False
        for names, cols in iter_columns(reader, sessions=sessions):
            if not header_done:
                w.writerow(names)
                header_done = True
            # Same spelling as pyarrow's writer for booleans.
            lists = [
                np.where(c, "true", "false").tolist() if c.dtype == np.bool_ else c.tolist() for c in cols
            ]
            w.writerows(zip(*lists, strict=True))
            rows += len(cols[0])
            if progress:
                progress(rows, total)
        if not header_done:
            w.writerow(["session", "tick", "time_us", *column_names(export_leaves(reader.schema))])
    return rows
