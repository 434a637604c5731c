"""Frame arrays outlive their Reader: numpy holds the map, not a buffer export, so closing the
reader must not unmap it under them (it did, and reading such an array crashed the process)."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

from wrtfd.format import Reader

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def test_frames_read_after_the_reader_is_closed() -> None:
    path = GOLDEN / "car_checked.wrtf"
    with Reader(path) as r:
        frames = r.frames(0)
        expected = frames.tobytes()
        ticks = frames["tick"]
    assert frames.tobytes() == expected and int(ticks.max()) == int(ticks[-1])


def test_the_map_goes_with_the_last_array() -> None:
    r = Reader(GOLDEN / "car_checked.wrtf")
    frames = r.frames(0)
    mm = weakref.ref(frames.base)
    r.close()
    assert mm() is not None  # still mapped for the array
    del frames
    gc.collect()
    assert mm() is None  # and unmapped once it is gone
