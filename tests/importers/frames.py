"""Comparing recorded frames field by field (NaN equal to NaN; padding bytes not compared)."""

from __future__ import annotations

import numpy as np


def assert_same_frames(a: np.ndarray, b: np.ndarray, where: str = "") -> int:
    """Every leaf field of ``a`` equals ``b``'s; returns how many leaf fields were compared.

    Not ``tobytes()``: the recorder leaves struct padding bytes as they were, and they may
    differ between two recordings of the same values.
    """
    assert a.dtype == b.dtype, where
    assert len(a) == len(b), (where, len(a), len(b))
    if a.dtype.names is None:
        np.testing.assert_array_equal(a, b, err_msg=where)  # NaN == NaN here
        return 1
    return sum(assert_same_frames(a[name], b[name], f"{where}.{name}") for name in a.dtype.names)
