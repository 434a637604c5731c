"""Copies of frame records that hold the file's bytes: every padding byte zero (spec 8.7).

numpy copies a structured array with padding field by field into fresh, uninitialised memory
(``frames[index]``, ``frames.copy()``, ``np.array(frames)``, ``np.ascontiguousarray`` of a
strided view): the padding of the copy is whatever the heap held before. Frames that leave the
process (the fleet's live frames) are copied here instead: as rows of bytes, then the padding
runs zeroed, so a copy is byte for byte the frame a WRTF file stores. See docs/fleet.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from wrtfd.format.schema import covered_bytes

__all__ = ["padding_runs", "take_records", "zero_padding"]

#: Up to this many padding runs per record, they are zeroed slice by slice (else one scatter).
_RUNS_BY_SLICE = 8
#: Padding runs by dtype (the few frame types of a process), kept with the dtype they describe.
_RUNS: dict[int, tuple[np.dtype[Any], tuple[tuple[int, int], ...], np.ndarray]] = {}


def padding_runs(dtype: np.dtype[Any]) -> tuple[tuple[int, int], ...]:
    """The ``[start, stop)`` byte ranges of a record type that no field covers."""
    return _padding(dtype)[0]


def _padding(dtype: np.dtype[Any]) -> tuple[tuple[tuple[int, int], ...], np.ndarray]:
    known = _RUNS.get(id(dtype))
    if known is not None and known[0] is dtype:
        return known[1], known[2]
    covered = covered_bytes(dtype)
    edges = np.flatnonzero(np.diff(np.concatenate(([1], covered.view(np.int8), [1]))))
    runs = tuple((int(a), int(b)) for a, b in zip(edges[::2], edges[1::2], strict=True))
    cols = np.flatnonzero(~covered)
    if len(_RUNS) > 64:  # a bound for a long-lived process that meets many dtypes
        _RUNS.clear()
    _RUNS[id(dtype)] = (dtype, runs, cols)
    return runs, cols


def zero_padding(rows: np.ndarray, dtype: np.dtype[Any]) -> None:
    """Zero the padding bytes of ``rows`` (a writable ``(n, dtype.itemsize)`` uint8 array)."""
    runs, cols = _padding(dtype)
    if not runs:
        return
    if len(runs) <= _RUNS_BY_SLICE:
        for a, b in runs:
            rows[:, a:b] = 0
    else:
        rows[:, cols] = 0


def take_records(records: np.ndarray, index: Any = None) -> np.ndarray:
    """A new, writable, C-contiguous copy of ``records[index]`` (every record when ``index`` is
    None; an integer array, a boolean mask or a slice), padding zero whatever the source held."""
    dtype = records.dtype
    size = dtype.itemsize
    src = records if records.flags.c_contiguous else np.ascontiguousarray(records)
    rows: np.ndarray = np.ndarray((len(src), size), np.uint8, src)
    if index is None:
        picked = rows.copy()
    elif isinstance(index, slice):
        picked = rows[index].copy()
    else:
        index = np.asarray(index)
        picked = rows[index if index.dtype == np.bool_ else index.astype(np.intp, copy=False)]
    zero_padding(picked, dtype)
    return np.frombuffer(picked, dtype=dtype)
