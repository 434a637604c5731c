"""Flat tables from a WRTF file: CSV and Parquet (through pyarrow, an optional extra).

Columns are ``session``, ``tick``, ``time_us`` and one per leaf of the frame, named by joining
the path with ``_`` (``wheels_0_temperature``), without the frame check's field unless asked
(``with_check``). Only frames that pass the frame check are exported; the others are reported
in ``dropped``. Enums become their names, ``text`` fields strings. Work is done per chunk of
frames with numpy, never per row in Python, except for the pure-Python CSV fallback used when
pyarrow is not installed.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from wrtfd._optional import missing_dependency
from wrtfd.errors import FormatError
from wrtfd.format.columns import (
    Dropped,
    column_names,
    export_frames,
    export_leaves,
    frame_chunks,
    iter_columns,
    select_sessions,
)
from wrtfd.format.reader import Reader
from wrtfd.format.schema import Leaf, leaf_column

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


class _Options(NamedTuple):
    sessions: Sequence[int] | None
    with_check: bool
    dropped: Dropped | None


def _have_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def export_file(
    reader: Reader,
    output: Path,
    fmt: str | None = None,
    progress: Progress | None = None,
    sessions: Sequence[int] | None = None,
    *,
    with_check: bool = False,
    dropped: Dropped | None = None,
) -> int:
    """Write the frames of ``sessions`` (default all) that pass the frame check to ``output`` as
    CSV or Parquet; rows written. Frames left out are appended to ``dropped``.

    :raises FormatError: unknown format.
    :raises MissingDependencyError: Parquet without pyarrow.
    """
    fmt = (fmt or output.suffix.lstrip(".")).lower()
    total = sum(s.frame_count for s in select_sessions(reader, sessions))
    opts = _Options(sessions, with_check, dropped)
    if fmt == "parquet":
        if not _have_pyarrow():
            raise missing_dependency("pyarrow", extra="parquet", purpose="Parquet export")
        return _export_arrow(reader, output, "parquet", total, progress, opts)
    if fmt == "csv":
        if _have_pyarrow():
            return _export_arrow(reader, output, "csv", total, progress, opts)
        return _export_csv_plain(reader, output, total, progress, opts)
    raise FormatError(f"{output}: unknown export format {fmt!r} (use .csv or .parquet)")


def _export_arrow(
    reader: Reader,
    output: Path,
    fmt: str,
    total: int,
    progress: Progress | None,
    opts: _Options,
) -> int:
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    leaves = export_leaves(reader.schema, with_check=opts.with_check)
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
        for _, cols in iter_columns(
            reader, sessions=opts.sessions, with_check=opts.with_check, dropped=opts.dropped
        ):
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
    reader: Reader, output: Path, total: int, progress: Progress | None, opts: _Options
) -> int:
    rows = 0
    with open(output, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        header_done = False
        for names, cols in iter_columns(
            reader, sessions=opts.sessions, with_check=opts.with_check, dropped=opts.dropped
        ):
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
            w.writerow(
                [
                    "session",
                    "tick",
                    "time_us",
                    *column_names(export_leaves(reader.schema, with_check=opts.with_check)),
                ]
            )
    return rows
