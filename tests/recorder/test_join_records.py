"""join_records: frame blocks joined as bytes, exact dtype kept, result writable."""

from __future__ import annotations

import numpy as np

from wrtfd.recorder.files import join_records

# a padded, nested frame like the recorder composes (tick, a source struct with a bool and a float64)
FRAME = np.dtype([("tick", "<u8"), ("src", [("on", "?"), ("x", "<f8")]), ("n", "<u2")], align=True)


def _block(ticks: list[int]) -> np.ndarray:
    raw = np.arange(len(ticks) * FRAME.itemsize, dtype=np.uint8) | 1  # padding bytes non-zero too
    a = np.frombuffer(raw.tobytes(), dtype=FRAME).copy()
    a["tick"] = ticks
    return a


def test_blocks_are_joined_byte_for_byte_with_the_exact_dtype() -> None:
    a, b = _block([1, 2]), _block([5, 6, 9])
    joined = join_records([a, b[::-1][::-1]])  # a non-owning view is fine too
    assert joined.dtype == FRAME  # not repacked: the same offsets and itemsize
    assert joined.tobytes() == a.tobytes() + b.tobytes()  # padding bytes included
    assert list(joined["tick"]) == [1, 2, 5, 6, 9]


def test_a_single_block_is_copied_and_writable() -> None:
    a = _block([3, 4])
    one = join_records([a])
    one["tick"] -= 3  # what FileSink does with a tick offset
    assert list(one["tick"]) == [0, 1] and list(a["tick"]) == [3, 4]
    rows = FRAME.itemsize
    assert np.array_equal(
        one.view(np.uint8).reshape(2, rows)[:, 8:], a.view(np.uint8).reshape(2, rows)[:, 8:]
    )
