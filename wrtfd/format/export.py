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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from wrtfd.errors import FormatError
from wrtfd.format.check import CheckFailure
from wrtfd.format.reader import Reader, check_dropped, ticks_to_time_us
from wrtfd.format.schema import Leaf, leaf_column

__all__ = ["column_names", "export_file", "iter_columns"]

Progress = Callable[[int, int], None]
Dropped = list[tuple[int, CheckFailure]]
_CHUNK = 1 << 16


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


def _leaves(reader: Reader, with_check: bool) -> list[Leaf]:
    return reader.schema.frame_leaves if with_check else reader.data_leaves


def iter_columns(
    reader: Reader, chunk: int = _CHUNK, *, with_check: bool = False, dropped: Dropped | None = None
) -> Iterator[tuple[list[str], list[np.ndarray]]]:
    """(names, columns) per chunk of the frames that pass the frame check, over all sessions;
    the frames left out go to ``dropped``."""
    leaves = _leaves(reader, with_check)
    names = ["session", "tick", "time_us", *column_names(leaves)]
    if dropped is not None:
        dropped.extend(check_dropped(reader))
    for s in reader.sessions:
        frames, failures = reader.verified_frames(s.index)
        if dropped is not None:
            dropped.extend((s.index, f) for f in failures)
        for start in range(0, len(frames), chunk):
            arr = frames[start : start + chunk]
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


def export_file(
    reader: Reader,
    output: Path,
    fmt: str | None = None,
    progress: Progress | None = None,
    *,
    with_check: bool = False,
    dropped: Dropped | None = None,
) -> int:
    """Write the frames of ``reader`` that pass the frame check to ``output`` (format from
    ``fmt`` or the suffix); rows written. Frames left out are appended to ``dropped``.

    :raises FormatError: unknown format, or Parquet without pyarrow.
    """
    fmt = (fmt or output.suffix.lstrip(".")).lower()
    total = reader.total_frames
    opts = _Options(with_check, dropped)
    if fmt == "parquet":
        if not _have_pyarrow():
            raise FormatError("Parquet export needs pyarrow: install wrtfd[parquet]")
        return _export_arrow(reader, output, "parquet", total, progress, opts)
    if fmt == "csv":
        if _have_pyarrow():
            return _export_arrow(reader, output, "csv", total, progress, opts)
        return _export_csv_plain(reader, output, total, progress, opts)
    raise FormatError(f"{output}: unknown export format {fmt!r} (use .csv or .parquet)")


class _Options(NamedTuple):
    with_check: bool
    dropped: Dropped | None


def _export_arrow(
    reader: Reader, output: Path, fmt: str, total: int, progress: Progress | None, opts: _Options
) -> int:
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    leaves = _leaves(reader, opts.with_check)
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
        for _, cols in iter_columns(reader, with_check=opts.with_check, dropped=opts.dropped):
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
        for names, cols in iter_columns(reader, with_check=opts.with_check, dropped=opts.dropped):
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
            w.writerow(["session", "tick", "time_us", *column_names(_leaves(reader, opts.with_check))])
    return rows
