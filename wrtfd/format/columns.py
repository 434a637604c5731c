"""A recording as flat columns: ``session``, ``tick``, ``time_us`` and one per leaf of the frame.

Leaves are named by joining their path with ``_`` (``wheels_0_temperature``); enums become their
names, ``text`` fields strings. The same columns feed ``wrtfd export`` (CSV, Parquet) and
:meth:`wrtfd.format.Reader.to_dataframe`. Work is done per chunk of frames with numpy.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from wrtfd._optional import require
from wrtfd.errors import FormatError
from wrtfd.format.check import CHECK_FIELD, CheckFailure, data_leaves
from wrtfd.format.markers import MARKER_FIELD, has_markers
from wrtfd.format.schema import Leaf, Schema, leaf_column
from wrtfd.format.times import ticks_to_time_us

if TYPE_CHECKING:
    import pandas as pd

    from wrtfd.format.reader import Reader, SessionInfo

__all__ = [
    "Dropped",
    "column_names",
    "dropped_frames",
    "export_frames",
    "export_leaves",
    "frame_chunks",
    "iter_columns",
    "select_sessions",
    "to_dataframe",
]

_CHUNK = 1 << 16
#: Frames left out because they fail the frame check: (session index, failure).
Dropped = list[tuple[int, CheckFailure]]


def export_leaves(schema: Schema, *, with_check: bool = False) -> list[Leaf]:
    """The channels every export writes (CSV, Parquet, MoTeC, MCAP, MDF4, compare).

    The one place that decides it: fields that are bookkeeping rather than telemetry (the frame
    check, shown only ``with_check``; the bytes of markers, which exports show as markers) are
    left out here, and nowhere else.
    """
    leaves = schema.frame_leaves if with_check else data_leaves(schema, CHECK_FIELD)
    if has_markers(schema.frame_dtype):
        leaves = [lf for lf in leaves if lf.path[0] != MARKER_FIELD]
    return leaves


def export_frames(reader: Reader, session: int, dropped: Dropped | None = None) -> np.ndarray:
    """The frames of ``session`` every export writes: the one place that decides which frames.

    Those that pass the frame check (all of them in a file without one); the others are
    appended to ``dropped`` (session, failure). Exports take times from these frames' ticks.
    """
    frames, failures = reader.verified_frames(session)
    if dropped is not None:
        dropped.extend((session, f) for f in failures)
    return frames


def dropped_frames(reader: Reader, sessions: Sequence[int] | None = None) -> Dropped:
    """What :func:`export_frames` leaves out of ``sessions`` (default all), with what the
    reader's scan of an incomplete file left out: for the one line a command reports."""
    indices = {s.index for s in select_sessions(reader, sessions)}
    scanned = reader.scan.check_failures if reader.scan is not None else ()
    out: Dropped = [f for f in scanned if f[0] in indices]
    for i in sorted(indices):
        out.extend((i, f) for f in reader.check_failures(i))
    return out


def frame_chunks(frames: np.ndarray, chunk: int = _CHUNK) -> Iterator[np.ndarray]:
    """``frames`` in consecutive slices of at most ``chunk`` (views)."""
    for start in range(0, len(frames), chunk):
        yield frames[start : start + chunk]


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
    reader: Reader,
    chunk: int = _CHUNK,
    *,
    session: int | None = None,
    sessions: Sequence[int] | None = None,
    with_check: bool = False,
    dropped: Dropped | None = None,
) -> Iterator[tuple[list[str], list[np.ndarray]]]:
    """(names, columns) per chunk of the frames that pass the frame check, over ``sessions`` (or
    only ``session``; default all); the frames left out go to ``dropped``."""
    leaves = export_leaves(reader.schema, with_check=with_check)
    names = ["session", "tick", "time_us", *column_names(leaves)]
    chosen = select_sessions(reader, [session] if session is not None else sessions)
    if dropped is not None:
        indices = {s.index for s in chosen}
        scanned = reader.scan.check_failures if reader.scan is not None else ()  # see check_dropped
        dropped.extend(f for f in scanned if f[0] in indices)
    for s in chosen:
        for arr in frame_chunks(export_frames(reader, s.index, dropped), chunk):
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


def to_dataframe(reader: Reader, session: int | None = None) -> pd.DataFrame:
    """Every frame (of ``session``, or of all sessions) as one pandas DataFrame.

    :raises MissingDependencyError: pandas is not installed (``pip install 'wrtfd[pandas]'``).
    """
    pandas = require("pandas", extra="pandas", purpose="Reader.to_dataframe")
    if session is not None:
        reader.frames(session)  # the reader's own error for a session that is not there
    names = ["session", "tick", "time_us", *column_names(export_leaves(reader.schema))]
    chunks = [cols for _, cols in iter_columns(reader, session=session)]
    if not chunks:
        return pandas.DataFrame({name: [] for name in names})
    columns = {name: np.concatenate([c[k] for c in chunks]) for k, name in enumerate(names)}
    frame: pd.DataFrame = pandas.DataFrame(columns, copy=False)
    return frame
