"""Comparing recorded frames: field by field (NaN equal to NaN), and as the file's bytes."""

from __future__ import annotations

import numpy as np

from wrtfd.format import Reader


def assert_same_frames(a: np.ndarray, b: np.ndarray, where: str = "") -> int:
    """Every leaf field of ``a`` equals ``b``'s; returns how many leaf fields were compared.

    Field by field, so it works on copies too: ``np.array(reader.frames(i))`` copies a padded
    struct field by field into new memory and leaves its padding bytes undefined (the file's
    are zero: the writer zeroes them, ``validate`` checks them). To compare bytes, compare the
    file's own (:func:`frame_bytes`).
    """
    assert a.dtype == b.dtype, where
    assert len(a) == len(b), (where, len(a), len(b))
    if a.dtype.names is None:
        np.testing.assert_array_equal(a, b, err_msg=where)  # NaN == NaN here
        return 1
    return sum(assert_same_frames(a[name], b[name], f"{where}.{name}") for name in a.dtype.names)


def frame_bytes(reader: Reader, session: int) -> bytes:
    """The bytes of a session's frames as they are in the file (padding included)."""
    return reader.frames(session).view(np.uint8).tobytes()
