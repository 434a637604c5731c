"""Copies of frames that keep the file's bytes: padding zero whatever memory held before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.fleet.conftest import dirty_heap, padded_frames, shipped_schemas
from wrtfd.decoders import registry
from wrtfd.format.records import padding_runs, take_records

SHIPPED = sorted(p.name.removesuffix(".wrtf.yaml") for p in registry.SCHEMA_DIR.glob("*.wrtf.yaml"))


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return shipped_schemas(tmp_path_factory.mktemp("shipped"))


@pytest.mark.parametrize("name", SHIPPED)
def test_copies_hold_the_fields_and_zero_padding(shipped, name: str) -> None:  # type: ignore[no-untyped-def]
    frames, clean = padded_frames(shipped[name], 50, seed=7)
    cases = {
        "all": (None, clean),
        "indices": (np.array([49, 3, 3, 17]), clean[[49, 3, 3, 17]]),
        "mask": (np.arange(50) % 3 == 1, clean[np.arange(50) % 3 == 1]),
        "slice": (slice(5, 20), clean[5:20]),
        "none": ([], clean[:0]),
    }
    for what, (index, want) in cases.items():
        dirty_heap()
        got = take_records(frames, index)
        assert got.dtype == frames.dtype and got.flags.c_contiguous and got.flags.writeable, what
        assert got.tobytes() == want.tobytes(), what
    strided = take_records(frames[::2])  # a view with a stride: copied by numpy, then cleaned
    assert strided.tobytes() == clean[::2].tobytes()
    copy = take_records(frames)
    copy["tick"] += 1  # a copy of its own
    assert frames["tick"][0] == 0


def test_padding_runs_are_the_bytes_no_field_covers(tmp_path: Path) -> None:
    dt = np.dtype(
        {"names": ["a", "b", "c"], "formats": ["u1", "<u4", "u1"], "offsets": [0, 4, 9], "itemsize": 12}
    )
    assert padding_runs(dt) == ((1, 4), (8, 9), (10, 12))
    assert padding_runs(np.dtype([("x", "<f8"), ("y", "<f4")])) == ()
