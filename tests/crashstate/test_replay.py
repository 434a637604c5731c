"""The harness's ground truth: the frames the daemon wrote, walked from rebuilt bytes."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from tests.crashstate.check import indexed_frames
from tests.crashstate.replay import HarnessError, daemon_frames
from tests.crashstate.synthetic import history
from tests.format.samples import write_car_file
from wrtfd.format import Reader


def _chunks(data: bytes, *cuts: int) -> list[tuple]:
    edges = [0, *cuts, len(data)]
    return [("w", data[a:b]) for a, b in itertools.pairwise(edges)]


def test_the_walk_finds_the_readers_frames_and_times(tmp_path: Path) -> None:
    path = tmp_path / "car.wrtf"
    write_car_file(path, sessions=2, frames=5)
    data = path.read_bytes()
    h = history(*_chunks(data, 100, 1000), ("fsync",))
    truth = daemon_frames(h)
    with Reader(path) as r:
        assert len(truth.sessions) == len(r.sessions) == 2
        for s, t in zip(r.sessions, truth.sessions, strict=True):
            frames = r.frames(s.index)
            assert list(t.frames) == frames["tick"].tolist()
            raw = np.ascontiguousarray(frames).view(np.uint8).reshape(len(frames), -1)
            assert [f.data for f in t.frames.values()] == [bytes(x) for x in raw]
            assert [f.time_us for f in t.frames.values()] == r.frame_times_us(s.index).tolist()
            assert t.footer_offset == s.footer_offset
    assert truth.doc_footer_offset is not None
    # every frame was completed by the last write, and made durable by the fsync after it
    assert {(f.written_seq, f.synced_seq) for f in truth.frames()} == {(3, 4)}
    # the check's footer-indexed reading of a complete file gives the same frames
    indexed = indexed_frames(data, truth)
    assert indexed is not None
    assert [(tick, raw) for _, tick, raw in indexed] == [(f.tick, f.data) for f in truth.frames()]
    assert indexed_frames(data[:-1], truth) is None


def test_frames_a_truncate_cut_were_written_but_are_not_durable_after_it(tmp_path: Path) -> None:
    path = tmp_path / "car.wrtf"
    write_car_file(path, sessions=1, frames=5)
    data = path.read_bytes()
    with Reader(path) as r:
        s = r.sessions[0]
        cut_at = s.frames_offset + 3 * r.schema.frame_size
    h = history(("w", data), ("fsync",), ("truncate", cut_at))
    frames = daemon_frames(h).frames()
    assert len(frames) == 5
    assert [f.cut_seq for f in frames] == [None, None, None, 3, 3]
    assert all(f.durable_at(3) for f in frames)
    assert [f.durable_at(4) for f in frames] == [True, True, True, False, False]


def test_bytes_the_daemon_never_wrote_are_a_harness_error(tmp_path: Path) -> None:
    path = tmp_path / "car.wrtf"
    write_car_file(path, sessions=1, frames=5)
    data = path.read_bytes()
    with pytest.raises(HarnessError, match="no header"):
        daemon_frames(history(("w", data[:20])))
    with pytest.raises(HarnessError):
        daemon_frames(history(("w", data[: len(data) - 80] + b"XXXXXXXX" * 10)))
