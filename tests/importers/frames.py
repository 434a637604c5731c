"""Comparing recorded frames: field by field (NaN equal to NaN), and as the file's bytes."""

from __future__ import annotations

import numpy as np

from wrtfd.format import Reader
from wrtfd.format.check import CHECK_FIELD


def assert_same_frames(a: np.ndarray, b: np.ndarray, where: str = "", *, top: bool = True) -> int:
    """Every leaf field of ``a`` equals ``b``'s; returns how many leaf fields were compared.

    The frame check (``wrtfd_check``) is left out: it binds a frame to its own file (a salt per
    file, the frame's offset), so the same frame in two files has two checks; each file's own
    checks are verified by the reader. Not ``tobytes()``: ``np.array`` copies of a file's frames
    copy fields, not padding bytes.
    To compare bytes, compare the file's own (:func:`frame_bytes`).
    """
    assert a.dtype == b.dtype, where
    assert len(a) == len(b), (where, len(a), len(b))
    if a.dtype.names is None:
        np.testing.assert_array_equal(a, b, err_msg=where)  # NaN == NaN here
        return 1
    return sum(
        assert_same_frames(a[name], b[name], f"{where}.{name}", top=False)
        for name in a.dtype.names
        if not (top and name == CHECK_FIELD)
    )


def frame_bytes(reader: Reader, session: int) -> bytes:
    """The bytes of a session's frames as they are in the file (padding included), but for the
    frame check's 8 bytes (zeroed here: they bind each frame to its own file)."""
    frames = reader.frames(session)
    raw = frames.view(np.uint8).reshape(len(frames), -1).copy()
    fields = frames.dtype.fields
    if fields is not None and CHECK_FIELD in fields:
        offset = int(fields[CHECK_FIELD][1])
        raw[:, offset : offset + 8] = 0
    return raw.tobytes()
