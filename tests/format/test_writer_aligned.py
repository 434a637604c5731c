"""Large batches go to write() up to a page boundary, the rest of the batch stays buffered: the
file stays a readable prefix (N11), and a failed write still truncates back to the last complete
frame with the writer's counters matching the disk."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.format.conftest import START_US, fld, make_schema
from wrtfd.format import Reader, Schema, Writer, validate_file

# 24-byte frames: a page boundary falls inside a frame most of the time
SCHEMA = make_schema([fld("x", "float32"), fld("n", "uint32"), fld("k", "uint16")])
PAGE = 4096


def _frames(ticks: range | list[int]) -> np.ndarray:
    a = np.zeros(len(ticks), dtype=SCHEMA.frame_dtype)
    a["tick"] = list(ticks)
    a["x"] = np.asarray(list(ticks), dtype=np.float32) / 4
    a["n"] = list(ticks)
    return a


def _on_disk(path: Path) -> list[int]:
    with Reader(path) as r:
        return [int(t) for i in range(len(r.sessions)) for t in r.frames(i)["tick"]]


def test_a_large_batch_ends_its_write_on_a_page_boundary(tmp_path: Path) -> None:
    path = tmp_path / "a.wrtf"
    w = Writer(path, SCHEMA, rate_hz=100, start_timestamp_us=START_US)
    w.begin_session()
    w.write_frames(_frames(range(5000)))  # 120,000 bytes: a direct write
    size = path.stat().st_size
    assert size % PAGE == 0 and 0 < w.bytes_written - size < PAGE  # the rest is buffered
    assert _on_disk(path) == list(range((size - (w.bytes_written - 5000 * 24)) // 24))  # N11 prefix
    w.flush()
    assert path.stat().st_size == w.bytes_written and _on_disk(path) == list(range(5000))
    w.close()
    assert validate_file(path) == [] and _on_disk(path) == list(range(5000))


def test_unbuffered_writer_writes_every_batch_whole(tmp_path: Path) -> None:
    path = tmp_path / "u.wrtf"
    w = Writer(path, SCHEMA, rate_hz=100, start_timestamp_us=START_US, buffer_bytes=0)
    w.begin_session()
    w.write_frames(_frames(range(5000)))
    assert path.stat().st_size == w.bytes_written  # buffer_bytes=0: nothing held back
    w.close()


def test_a_failed_flush_of_a_split_frame_truncates_to_the_last_complete_frame(
    tmp_path: Path, file_size_limit: Callable[[int], None]
) -> None:
    path = tmp_path / "f.wrtf"
    w = Writer(path, SCHEMA, rate_hz=100, start_timestamp_us=START_US)
    w.begin_session()
    w.write_frames(_frames(range(4800)))
    on_disk = path.stat().st_size
    frames_at = w.bytes_written - 4800 * 24
    assert (on_disk - frames_at) % 24 != 0  # the page boundary cut a frame
    complete = (on_disk - frames_at) // 24
    file_size_limit(on_disk + 1)  # the rest of the batch can't go out
    with pytest.raises(OSError):
        w.flush()
    file_size_limit(1 << 40)
    assert path.stat().st_size == frames_at + complete * 24  # the torn frame is gone
    assert w.frames_in_session == complete and w.last_tick == complete - 1 and w.first_tick == 0
    assert w.bytes_written == path.stat().st_size
    w.write_frames(_frames(range(complete, complete + 10)))
    w.close()
    assert validate_file(path) == []
    assert _on_disk(path) == list(range(complete + 10))


def test_a_failed_direct_write_rolls_back_to_before_the_batch(
    tmp_path: Path, file_size_limit: Callable[[int], None]
) -> None:
    path = tmp_path / "d.wrtf"
    w = Writer(path, SCHEMA, rate_hz=100, start_timestamp_us=START_US)
    w.begin_session()
    w.write_frames(_frames(range(5000)))
    w.flush()
    good = path.stat().st_size
    file_size_limit(good + 50_000)  # the next batch's write fails half-way
    with pytest.raises(OSError):
        w.write_frames(_frames(range(5000, 10000)))
    file_size_limit(1 << 40)
    assert path.stat().st_size == good and w.bytes_written == good
    assert w.frames_in_session == 5000 and w.last_tick == 4999
    w.write_frames(_frames(range(6000, 6003)))
    w.close()
    assert _on_disk(path) == [*range(5000), 6000, 6001, 6002]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 7000), st.sampled_from(["none", "flush", "check", "session"])),
        min_size=1,
        max_size=8,
    )
)
def test_property_mixed_batches_flushes_and_sessions(
    tmp_path_factory: pytest.TempPathFactory, steps: list
) -> None:
    """Any mix of small and large batches, flushes and new sessions: the file is always a readable
    prefix of what was written, and the closed file holds exactly every frame."""
    path = tmp_path_factory.mktemp("p") / "p.wrtf"
    w = Writer(path, SCHEMA, rate_hz=100, start_timestamp_us=START_US)
    w.begin_session()
    written: list[int] = []
    tick = 0
    for n, action in steps:
        w.write_frames(_frames(range(tick, tick + n)))
        written += range(tick, tick + n)
        tick += n + 1
        if action == "flush":
            w.flush()
            assert _on_disk(path) == written
        elif action == "check":
            got = _on_disk(path)
            assert got == written[: len(got)]  # a prefix, the rest still buffered
            assert path.stat().st_size <= w.bytes_written
        elif action == "session":
            w.begin_session()
            tick = 0
    w.close()
    assert validate_file(path) == []
    with Reader(path) as r:
        assert [int(t) for i in range(len(r.sessions)) for t in r.frames(i)["tick"]] == written


# -- with the frame check: never inside a frame, so never inside a commit group -----------------------


def _checked(path: Path, schema: Schema = SCHEMA) -> Writer:
    w = Writer(path, schema, rate_hz=100, start_timestamp_us=START_US, check=True)
    w.begin_session()
    return w


def test_with_the_check_a_large_batch_ends_on_a_page_boundary_between_two_frames(tmp_path: Path) -> None:
    """The write ends on a page boundary only where one falls between two frames (never inside a
    frame or a commit group); the file on disk reads back whole groups (N11)."""
    path = tmp_path / "c.wrtf"
    w = _checked(path)
    fsize = w.schema.frame_size
    w.write_frames(_frames(range(5000)))
    size = path.stat().st_size
    frames_at = w.bytes_written - 5000 * fsize
    assert (size - frames_at) % fsize == 0  # whole frames: no frame, and no group, is cut
    assert size == w.bytes_written or size % PAGE == 0  # whole, or up to a page boundary
    assert _on_disk(path) == list(range((size - frames_at) // fsize))
    w.flush()
    assert _on_disk(path) == list(range(5000))
    w.close()
    assert validate_file(path) == []


def test_with_the_check_a_batch_is_written_whole_when_page_boundaries_between_frames_are_far_apart(
    tmp_path: Path,
) -> None:
    """1032-byte frames (tick, 254 float32, the check) meet a page boundary only every 512 frames
    (lcm(1032, 4096)): cutting there would leave up to half a megabyte buffered, so a large batch
    is written whole, as whole commit groups."""
    path = tmp_path / "w.wrtf"
    w = _checked(path, make_schema([fld("v", "float32", 254)]))
    assert w.schema.frame_size == 1032
    frames = np.zeros(300, dtype=w.schema.frame_dtype)
    frames["tick"] = np.arange(300)
    w.write_frames(frames)
    assert path.stat().st_size == w.bytes_written
    w.close()
    assert validate_file(path) == [] and _on_disk(path) == list(range(300))


def test_page_cuts_fall_between_frames_or_not_at_all() -> None:
    from wrtfd.format.writer import _page_cut

    for fsize in (8, 24, 32, 40, 1024, 1032, 4096, 8192):
        for start in range(0, 3 * PAGE, 8):
            for count in (1, 7, 200, 5000):
                cut = _page_cut(start, count, fsize)
                assert 1 <= cut <= count
                if cut < count:
                    assert (start + cut * fsize) % PAGE == 0  # a page boundary between two frames
                    assert (count - cut) * fsize <= 64 * 1024
                    later = range(cut + 1, count + 1)
                    assert not any((start + c * fsize) % PAGE == 0 for c in later if c < count)
