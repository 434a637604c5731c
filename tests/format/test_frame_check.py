"""The frame check (wrtfd.format.check): frames that prove they were written by this file's
writer at their place. WRTF 1.0 stays WRTF 1.0: the check is one more frame field (N7), declared
in metadata next to the embedded definition (N5); scanning a crashed file (N11) keeps frames only
up to the first one that fails its check."""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path
from typing import Any

import crc32c
import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.format.conftest import START_US, fld, make_schema
from wrtfd.errors import FormatError, SchemaError
from wrtfd.format import Reader, Schema, Writer, repair_file, validate_file
from wrtfd.format.check import (
    CHECK_ALGORITHM,
    CHECK_FIELD,
    GROUP_MAX_BYTES,
    data_leaves,
    group_limit,
    with_check,
)
from wrtfd.format.schema import covered_bytes

# tick + 4 float32 + the check: 32-byte frames, as in the benchmark
BASE = make_schema([fld(f"c{i}", "float32") for i in range(4)], footer=[fld("laps", "uint32")])
SALT_A = 0x1234_5678_9ABC_DEF0
SALT_B = 0x0FED_CBA9_8765_4321


def _frames(schema: Schema, ticks: list[int] | range, seed: int = 0) -> np.ndarray:
    a = np.zeros(len(ticks), dtype=schema.frame_dtype)
    a["tick"] = list(ticks)
    rng = np.random.default_rng(seed)
    for i in range(4):
        a[f"c{i}"] = rng.standard_normal(len(ticks)).astype(np.float32)
    return a


def _write_batches(
    path: Path, batches: list[int], salt: int, *, seed: int = 0, close: bool = True
) -> list[tuple[int, int, list[int]]]:
    """A checked file written like the recorder does: batches, each flushed. Returns per batch
    (first byte, end byte, ticks)."""
    out = []
    w = Writer(path, BASE, rate_hz=60, start_timestamp_us=START_US, check=True, check_salt=salt)
    w.begin_session()
    tick = 0
    for k, n in enumerate(batches):
        ticks = list(range(tick, tick + n))
        start = w.bytes_written
        w.write_frames(_frames(BASE, ticks, seed + k))
        w.flush()
        out.append((start, w.bytes_written, ticks))
        tick += n + 1
    if close:
        w.close()
    else:
        w.abort()
    return out


def _ticks(r: Reader) -> list[int]:
    return [int(t) for i in range(len(r.sessions)) for t in r.frames(i)["tick"]]


def _repaired_ticks(src: Path, tmp: Path) -> list[int]:
    out = tmp / "repaired.wrtf"
    report = repair_file(src, out, durable=False)
    assert report.valid and validate_file(out) == []
    with Reader(out) as r:
        assert r.complete
        return _ticks(r)


# -- the layout ---------------------------------------------------------------------------------------


def test_the_check_is_one_more_frame_field_declared_in_metadata(tmp_path: Path) -> None:
    """N5/N7: the embedded definition has wrtfd_check (uint64) last; the frame grows by 8 bytes and
    the check sits in its last 8; metadata declares algorithm, salt and field."""
    path = tmp_path / "a.wrtf"
    _write_batches(path, [3], SALT_A)
    with Reader(path) as r:
        assert r.metadata["wrtfd.check"] == CHECK_ALGORITHM == "crc32c-group/1"
        assert r.metadata["wrtfd.check.salt"] == "123456789abcdef0"
        assert r.metadata["wrtfd.check.field"] == CHECK_FIELD == "wrtfd_check"
        assert r.schema.frame_size == BASE.frame_size + 8 == 32
        assert r.schema.frame_dtype.fields["wrtfd_check"][1] == 24  # type: ignore[index]
        assert [lf.path for lf in r.data_leaves] == [(f"c{i}",) for i in range(4)]
        assert r.check is not None and r.check_note is None
    # Another WRTF reader sees an ordinary definition with one more channel.
    text = Reader(path).metadata["wrtf.schema"]
    plain = Schema.from_yaml(text)
    assert [f.name for f in plain.frame_fields] == ["c0", "c1", "c2", "c3", "wrtfd_check"]
    assert yaml.safe_load(text)["frame"]["fields"][-1]["type"] == "uint64"
    assert data_leaves(plain, None) == plain.frame_leaves  # no declaration: nothing hidden


def test_check_values_follow_the_documented_layout(tmp_path: Path) -> None:
    """Recomputed here from the file's bytes with crc32c directly, not through FrameCheck:
    bits 0-31 CRC-32C(salt LE, offset LE, frames with their CRC bytes zero), 32-47 n, 48-63 i."""
    path = tmp_path / "a.wrtf"
    batches = _write_batches(path, [5, 1, 3], SALT_A)
    data = path.read_bytes()
    for start, end, ticks in batches:
        n = len(ticks)
        group = bytearray(data[start:end])
        crcs = set()
        for i in range(n):
            (value,) = struct.unpack_from("<Q", group, i * 32 + 24)
            assert (value >> 48, (value >> 32) & 0xFFFF) == (i, n)
            crcs.add(value & 0xFFFFFFFF)
            group[i * 32 + 24 : i * 32 + 28] = bytes(4)
        expected = crc32c.crc32c(struct.pack("<QQ", SALT_A, start) + bytes(group))
        assert crcs == {expected}


def _write_large(path: Path, n_floats: int, batches: list[int]) -> tuple[Schema, list[tuple[int, float]]]:
    """A checked file of big batches (direct writes cut at page boundaries, groups capped),
    alternately in the file's layout (check column full of garbage) and the definition's own
    (copied); fixed salt and values. Returns the file schema and (tick, c0) of every frame."""
    base = make_schema([fld(f"c{i}", "float32") for i in range(n_floats)])
    file_schema = with_check(base)
    sent: list[tuple[int, float]] = []
    with Writer(path, base, rate_hz=100, start_timestamp_us=START_US, check=True, check_salt=SALT_A) as w:
        w.begin_session()
        tick = 0
        for k, n in enumerate(batches):
            schema = file_schema if k % 2 == 0 else base
            a = np.zeros(n, dtype=schema.frame_dtype)
            a["tick"] = np.arange(tick, tick + n) * 3
            for i in range(n_floats):
                a[f"c{i}"] = (np.arange(n) + i * 0.25 + k).astype(np.float32)
            if schema is file_schema:
                a[CHECK_FIELD] = 0xDEAD_BEEF_CAFE_F00D  # the writer owns the field: overwritten
            sent += zip(a["tick"].tolist(), a["c0"].tolist(), strict=True)
            w.write_frames(a)
            tick += n + 1
            if k == 3:
                w.flush()
    return file_schema, sent


@pytest.mark.parametrize(
    ("n_floats", "batches", "sha256"),
    [
        # 32-byte frames: every large batch is cut at a page boundary into two groups
        (
            4,
            [4096, 4096, 5000, 20000, 37, 1, 4096, 130],
            "88321807006ad0c9a09daeab18190d5d87776681b517cf6d6b0deb5f14044861",
        ),
        # 1032-byte frames: groups of at most 254 frames, many per batch
        (254, [4096, 300, 4096, 1, 257], "ab4130e9d8d2f2369f3e8c56a26131f16388a741898cde79b7497153cbce4ef2"),
    ],
)
def test_large_batches_follow_the_documented_layout_byte_for_byte(
    tmp_path: Path, n_floats: int, batches: list[int], sha256: str
) -> None:
    """Big batches, recomputed from the file's bytes with crc32c directly: the groups tile the
    frames, none is longer than the limit, each holds its documented index, count and CRC, the
    data is what was sent (copies of the definition's layout included). The bytes are pinned:
    a faster writer must write exactly what the writer wrote before (same salt, same calls)."""
    path = tmp_path / "big.wrtf"
    schema, sent = _write_large(path, n_floats, batches)
    data = path.read_bytes()
    # Pinned with the writer of commit 38a818b (one pattern and CRC store per group then).
    assert hashlib.sha256(data).hexdigest() == sha256
    fs = schema.frame_size
    limit = group_limit(fs)
    with Reader(path) as r:
        frames = r.frames(0)
        first = r.sessions[0].offset + 8 + schema.header_size  # the first frame's file offset
        assert [(int(t), float(c)) for t, c in zip(frames["tick"], frames["c0"], strict=True)] == sent
    at = 0
    while at < len(sent):
        (value,) = struct.unpack_from("<Q", data, first + at * fs + fs - 8)
        n = (value >> 32) & 0xFFFF
        assert value >> 48 == 0 and 1 <= n <= limit and at + n <= len(sent)
        group = bytearray(data[first + at * fs : first + (at + n) * fs])
        crcs = set()
        for i in range(n):
            (v,) = struct.unpack_from("<Q", group, i * fs + fs - 8)
            assert (v >> 48, (v >> 32) & 0xFFFF) == (i, n)
            crcs.add(v & 0xFFFFFFFF)
            group[i * fs + fs - 8 : i * fs + fs - 4] = bytes(4)
        assert crcs == {crc32c.crc32c(struct.pack("<QQ", SALT_A, first + at * fs) + bytes(group))}
        at += n


def test_group_layouts_tile_the_batch_and_only_small_ones_are_kept() -> None:
    """seal()'s per-batch layout: groups of at most the limit, one starting at the cut when it is
    inside, every frame's (index, count); layouts are cached for repeated batch sizes, but a
    huge batch's (8 bytes a frame) is not kept after the call."""
    from wrtfd.format import check as check_module

    for count, cut, limit in ((4096, 100, 8192), (20_000, 0, 8192), (20_000, 9000, 8192), (5, 5, 2)):
        lengths, pattern = check_module._group_layout(count, cut, limit)
        assert sum(lengths) == count == len(pattern) and max(lengths) <= limit
        starts = np.cumsum([0, *lengths[:-1]])
        if 0 < cut < count:
            assert cut in starts
        index = pattern >> np.uint64(48)
        n = (pattern >> np.uint64(32)) & np.uint64(0xFFFF)
        assert (pattern & np.uint64(0xFFFFFFFF) == 0).all()
        assert list(index[starts]) == [0] * len(lengths) and list(n[starts]) == list(lengths)
    huge = check_module._LAYOUT_CACHE_FRAMES + 1
    check_module._group_layout(huge, 0, 8192)
    assert all(key[0] <= check_module._LAYOUT_CACHE_FRAMES for key in check_module._GROUP_LAYOUT_CACHE)
    assert len(check_module._GROUP_LAYOUT_CACHE) <= check_module._LAYOUT_CACHE_ENTRIES


def test_salts_are_new_for_every_file(tmp_path: Path) -> None:
    salts = set()
    for k in range(4):
        with Writer(tmp_path / f"{k}.wrtf", BASE, rate_hz=1, start_timestamp_us=START_US, check=True) as w:
            salts.add(w.check.salt if w.check else None)
        with Reader(tmp_path / f"{k}.wrtf") as r:
            text = r.metadata["wrtfd.check.salt"]
            assert len(text) == 16 and text == text.lower() and int(text, 16) in salts
    assert len(salts) == 4


def test_write_frame_is_a_group_of_one_and_big_batches_are_capped(tmp_path: Path) -> None:
    path = tmp_path / "g.wrtf"
    with Writer(path, BASE, rate_hz=60, start_timestamp_us=START_US, check=True) as w:
        w.begin_session()
        w.write_frame(0, {"c0": 1.0})
        w.write_frames(_frames(w.schema, range(1, 20_001)))
    limit = group_limit(32)
    assert limit == GROUP_MAX_BYTES // 32 == 8192
    with Reader(path) as r:
        check = r.frames(0)["wrtfd_check"]
        n = (check >> np.uint64(32)) & np.uint64(0xFFFF)
        i = check >> np.uint64(48)
        starts = np.flatnonzero(i == 0)
        assert int(n[0]) == 1 and starts[1] == 1
        assert int(n.max()) <= limit and len(starts) >= 1 + 20_000 // limit + 1
        assert r.verify_session(0) is None and validate_file(path) == []


def test_write_frames_fills_the_callers_check_column_and_copies_read_only_arrays(tmp_path: Path) -> None:
    a, b = tmp_path / "a.wrtf", tmp_path / "b.wrtf"
    with Writer(a, BASE, rate_hz=60, start_timestamp_us=START_US, check=True) as w:
        w.begin_session()
        frames = _frames(w.schema, range(10))
        w.write_frames(frames)
        assert (frames["wrtfd_check"] >> np.uint64(32) & np.uint64(0xFFFF) == 10).all()  # documented
    with Reader(a) as ra:
        view = ra.frames(0)  # read-only: the writer must copy it, not fail
        before = view.tobytes()
        with Writer(b, BASE, rate_hz=60, start_timestamp_us=START_US, check=True) as w:
            w.begin_session()
            w.write_frames(view)
        assert view.tobytes() == before
    assert validate_file(b) == []


def test_frames_in_the_definitions_own_layout_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "d.wrtf"
    with Writer(path, BASE, rate_hz=60, start_timestamp_us=START_US, check=True) as w:
        w.begin_session()
        base = _frames(BASE, range(100))
        w.write_frames(base)  # 24-byte frames: copied into the 32-byte file layout
        w.write_frame(200, base[0])
    with Reader(path) as r:
        got = r.frames(0)
        assert list(got["tick"]) == [*range(100), 200]
        assert np.array_equal(got["c3"][:100], base["c3"])
    assert validate_file(path) == []


def test_salt_can_be_reproduced_and_check_keys_belong_to_the_writer(tmp_path: Path) -> None:
    meta = {"wrtfd.check.salt": "00000000000000ff", "Track": "x"}
    with Writer(tmp_path / "a.wrtf", BASE, rate_hz=1, start_timestamp_us=1, check=True, metadata=meta) as w:
        assert w.check is not None and w.check.salt == 0xFF
    with pytest.raises(FormatError, match="needs check=True"):
        Writer(tmp_path / "b.wrtf", BASE, rate_hz=1, start_timestamp_us=1, metadata=meta)
    with pytest.raises(FormatError, match="16 lowercase hex"):
        Writer(tmp_path / "c.wrtf", BASE, rate_hz=1, check=True, metadata={"wrtfd.check.salt": "XYZ"})
    with pytest.raises(FormatError, match="disagree"):
        Writer(tmp_path / "d.wrtf", BASE, rate_hz=1, check=True, check_salt=1, metadata=meta)
    assert not (tmp_path / "b.wrtf").exists() and not (tmp_path / "c.wrtf").exists()


def test_the_check_field_name_is_reserved() -> None:
    bad = make_schema([fld("wrtfd_check", "float32"), fld("x", "float32")])
    with pytest.raises(SchemaError, match="reserved"):
        with_check(bad)
    assert with_check(with_check(BASE)) is with_check(BASE)


# -- what fails the check -----------------------------------------------------------------------------


def test_a_frame_from_another_file_with_the_same_layout_is_rejected(tmp_path: Path) -> None:
    """Same layout, same write pattern, same offsets: only the salt differs."""
    a, b = tmp_path / "a.wrtf", tmp_path / "b.wrtf"
    groups = _write_batches(a, [4, 4, 4, 4], SALT_A)
    _write_batches(b, [4, 4, 4, 4], SALT_B, seed=99)
    start, end, _ = groups[2]
    data = bytearray(a.read_bytes())
    other = b.read_bytes()
    assert (
        other[start:end] != data[start:end] and other[start : start + 8] == data[start : start + 8]
    )  # same ticks
    data[start:end] = other[start:end]
    spliced = tmp_path / "spliced.wrtf"
    spliced.write_bytes(bytes(data))
    findings = [f for f in validate_file(spliced) if f.code == "check"]
    assert [f.offset for f in findings] == [start]
    assert "frames 8..11" in findings[0].message and "CRC mismatch" in findings[0].message
    with Reader(spliced) as r:  # complete: opens without a CRC pass; verifying finds it
        assert r.complete
        failure = r.verify_session(0)
        assert failure is not None and (failure.frame, failure.offset) == (8, start)
        kept, failures = r.verified_frames(0)
        assert [(f.frame, f.frames) for f in failures] == [(8, 4)]
        assert list(kept["tick"]) == groups[0][2] + groups[1][2] + groups[3][2]
    assert _repaired_ticks(spliced, tmp_path) == groups[0][2] + groups[1][2]  # up to the first failure


def test_a_frame_moved_within_the_file_is_rejected(tmp_path: Path) -> None:
    """Same file, same salt: a group copied to another group's place fails (its offset is in the
    CRC), though its bytes are this writer's own."""
    a = tmp_path / "a.wrtf"
    groups = _write_batches(a, [2, 2, 2, 2], SALT_A)
    data = bytearray(a.read_bytes())
    (s1, e1, _), (s3, e3, _) = groups[1], groups[3]
    data[s3:e3] = data[s1:e1]
    moved = tmp_path / "moved.wrtf"
    moved.write_bytes(bytes(data))
    with Reader(moved) as r:
        f = r.verify_session(0)
        assert f is not None and f.offset == s3 and f.frames == 2
    # validate's scan stops at the tick that goes back (N10) and says so at that offset
    assert {f.code for f in validate_file(moved) if f.offset == s3} & {"check", "tick-order"}


def test_a_frame_moved_forward_with_rising_ticks_is_rejected_by_the_scan(tmp_path: Path) -> None:
    """Ticks 0, 2, 4, 6, 8: frame 8 (a group of one) copied over frame 6 and the file cut there
    reads 0, 2, 4, 8 (ticks rise, N11 alone would keep it), but the frame is not at its place."""
    a = tmp_path / "a.wrtf"
    groups = _write_batches(a, [1, 1, 1, 1, 1], SALT_A, close=False)
    data = bytearray(a.read_bytes())
    (s3, e3, _), (s4, e4, _) = groups[3], groups[4]
    data[s3:e3] = data[s4:e4]
    moved = tmp_path / "moved.wrtf"
    moved.write_bytes(bytes(data[:e3]))
    with Reader(moved) as r:
        assert not r.complete and _ticks(r) == [0, 2, 4]
    assert _repaired_ticks(moved, tmp_path) == [0, 2, 4]


def _crash_state(tmp: Path, kind: str) -> tuple[Path, list[int]]:
    """A file whose first 3 groups are on disk, then what a power cut can leave in the rest of its
    later size; returns (file, the ticks that must be read back)."""
    a = tmp / "a.wrtf"
    groups = _write_batches(a, [5, 7, 3, 6, 4], SALT_A, close=False)
    data = bytearray(a.read_bytes())
    synced = groups[2][1]
    keep = [t for _, _, ticks in groups[:3] for t in ticks]
    rng = np.random.default_rng(7)
    rest = len(data) - synced
    if kind == "zeros":
        data[synced:] = bytes(rest)
    elif kind == "random":
        data[synced:] = rng.integers(0, 256, rest, dtype=np.uint8).tobytes()
    elif kind == "random-rising-ticks":  # random bytes that look like frames (N11 alone would keep them)
        junk = rng.integers(0, 256, rest, dtype=np.uint8)
        junk[: rest // 32 * 32].reshape(-1, 32)[:, :8] = np.arange(100, 100 + rest // 32, dtype="<u8")[
            :, None
        ].view(np.uint8)
        data[synced:] = junk.tobytes()
    elif kind == "half-zero":  # the second half of a frame of the next group never reached the disk
        s = groups[3][0]
        data[s + 32 + 16 : s + 64] = bytes(16)  # group 3 fails whole; nothing after it is trusted
    elif kind == "stale":  # an older recording's blocks at the same offsets
        older = tmp / "older.wrtf"
        _write_batches(older, [5, 7, 3, 6, 4], SALT_B, seed=5, close=False)
        data[synced:] = older.read_bytes()[synced : len(data)]
    elif kind == "torn":  # a prefix of the next write, torn inside its group (and inside a frame)
        s, _, _ = groups[3]
        data = data[: s + 40]
    else:  # pragma: no cover
        raise AssertionError(kind)
    out = tmp / f"{kind}.wrtf"
    out.write_bytes(bytes(data))
    return out, keep


@pytest.mark.parametrize("kind", ["zeros", "random", "random-rising-ticks", "half-zero", "stale", "torn"])
def test_crash_leftovers_are_rejected_by_scan_validate_and_repair(tmp_path: Path, kind: str) -> None:
    """Zero pages, random bytes, a half-zero frame, an older file's frames at the same offsets:
    the reader's scan (N11) shows exactly the synced frames, validate reports the rest, repair
    keeps exactly the synced frames and its output validates."""
    path, keep = _crash_state(tmp_path, kind)
    with Reader(path) as r:
        assert not r.complete and _ticks(r) == keep
        assert r.scan is not None and r.scan.skipped  # and says what it skipped
    findings = validate_file(path)
    assert {f.code for f in findings} & {"check", "incomplete"}
    if kind in ("random-rising-ticks", "stale", "half-zero"):
        assert any(f.code == "check" for f in findings)  # frames that look real fail their check
    assert _repaired_ticks(path, tmp_path) == keep


def test_the_scan_of_a_file_without_the_check_keeps_random_frames_with_rising_ticks(tmp_path: Path) -> None:
    """What the check is for: without it (N11 alone) bytes with rising ticks read as frames."""
    path = tmp_path / "plain.wrtf"
    w = Writer(path, BASE, rate_hz=60, start_timestamp_us=START_US)
    w.begin_session()
    w.write_frames(_frames(BASE, range(5)))
    w.abort()
    junk = np.random.default_rng(3).integers(0, 256, (10, 24), dtype=np.uint8)
    junk[:, :8] = np.arange(100, 110, dtype="<u8")[:, None].view(np.uint8)
    with open(path, "ab") as f:
        f.write(junk.tobytes())
    with Reader(path) as r:
        assert _ticks(r) == [*range(5), *range(100, 110)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(1, 40), min_size=1, max_size=6), st.data())
def test_cut_anywhere_reads_back_only_whole_groups(
    tmp_path_factory: pytest.TempPathFactory, batches: list[int], data: st.DataObject
) -> None:
    """N11 with the check: cut at any byte, the scan keeps exactly the groups wholly before the
    cut (a partly written group is lost whole), and repair's output validates."""
    tmp = tmp_path_factory.mktemp("cut")
    path = tmp / "a.wrtf"
    groups = _write_batches(path, batches, SALT_A)
    full = path.read_bytes()
    first = groups[0][0]
    cut = data.draw(st.integers(first, len(full) - 1))
    path.write_bytes(full[:cut])
    expected = [t for _, end, ticks in groups if end <= cut for t in ticks]
    with Reader(path) as r:
        assert _ticks(r) == expected
    if expected:
        assert _repaired_ticks(path, tmp) == expected


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 7000), st.sampled_from(["none", "flush", "frame", "session"])),
        min_size=1,
        max_size=6,
    )
)
def test_every_flush_ends_on_a_whole_group(tmp_path_factory: pytest.TempPathFactory, steps: list) -> None:
    """Small and large batches (the large ones written directly, cut before a page boundary),
    single frames, flushes, sessions: after every flush the file on disk reads back every frame
    written (no group split between two writes), and the closed file validates."""
    path = tmp_path_factory.mktemp("g") / "g.wrtf"
    w = Writer(path, BASE, rate_hz=100, start_timestamp_us=START_US, check=True)
    w.begin_session()
    written: list[int] = []
    tick = 0
    for n, action in steps:
        w.write_frames(_frames(w.schema, range(tick, tick + n)))
        written += range(tick, tick + n)
        tick += n + 1
        if action == "frame":
            w.write_frame(tick)
            written.append(tick)
            tick += 1
        elif action == "flush":
            w.flush()
            with Reader(path) as r:
                assert _ticks(r) == written
        elif action == "session":
            w.begin_session()
            tick = 0
        with Reader(path) as r:  # at any time: a prefix, never an unverified frame
            got = _ticks(r)
            assert got == written[: len(got)]
    w.close()
    assert validate_file(path) == []
    with Reader(path) as r:
        assert _ticks(r) == written and all(r.verify_session(i) is None for i in range(len(r.sessions)))


# -- files without the check, and checks this wrtfd does not know ---------------------------------------


def test_files_without_the_check_read_exactly_as_before(tmp_path: Path) -> None:
    """Older files and the .NET reference's have no wrtfd.check: nothing changes (N2 reference
    footer order included)."""
    path = tmp_path / "plain.wrtf"
    frames = _frames(BASE, range(0, 20, 2))
    with Writer(path, BASE, rate_hz=60, start_timestamp_us=START_US) as w:
        w.begin_session()
        w.write_frames(frames)
        w.end_session({"laps": 3})
    data = bytearray(path.read_bytes())
    assert b"wrtfd.check" not in data and b"wrtfd_check" not in data
    with Reader(path) as r:
        assert r.check is None and r.check_note is None and r.check_field is None
        assert r.schema.frame_size == BASE.frame_size
        assert r.frames(0).tobytes() == frames.tobytes()
        assert r.data_leaves == r.schema.frame_leaves and r.verify_session(0) is None
    pos = data.find(b"WRSF0001")  # the reference's footer order (N2)
    a, b = struct.unpack_from("<QQ", data, pos + 8)
    struct.pack_into("<QQ", data, pos + 8, b, a)
    path.write_bytes(bytes(data))
    with Reader(path) as r:
        assert r.sessions[0].footer_order == "reference" and r.frames(0).tobytes() == frames.tobytes()
    assert validate_file(path) == []
    cut = tmp_path / "cut.wrtf"
    cut.write_bytes(bytes(data[: pos - 5]))  # crashed: a torn last frame, scanned as before
    with Reader(cut) as r:
        assert _ticks(r) == list(range(0, 18, 2))


def test_an_unknown_check_is_read_but_not_verified_and_validate_says_so(tmp_path: Path) -> None:
    path = tmp_path / "future.wrtf"
    _write_batches(path, [3, 3], SALT_A)
    data = path.read_bytes()
    old = CHECK_ALGORITHM.encode()
    new = b"crc32c-group/9"
    assert len(old) == len(new)
    path.write_bytes(data.replace(old, new))
    with Reader(path) as r:
        assert r.check is None and r.check_note is not None and "not known" in r.check_note
        assert r.check_field == "wrtfd_check" and len(r.data_leaves) == 4  # still not a channel
        assert _ticks(r) == [0, 1, 2, 4, 5, 6]
    findings = validate_file(path)
    assert [f.code for f in findings] == ["check-unverified"]


def test_validate_caps_long_lists_of_failing_frames(tmp_path: Path) -> None:
    path = tmp_path / "many.wrtf"
    groups = _write_batches(path, [1] * 60, SALT_A)
    data = bytearray(path.read_bytes())
    for start, _, _ in groups[::2]:
        data[start + 8] ^= 0xFF  # one bit flip per group of one
    path.write_bytes(bytes(data))
    findings = [f for f in validate_file(path) if f.code == "check"]
    assert len(findings) == 21 and "10 more frames in 10 stretches" in findings[-1].message
    assert [f.offset for f in findings[:20]] == [s for s, _, _ in groups[::2]][:20]


def test_dump_and_export_drop_failing_frames(tmp_path: Path) -> None:
    from wrtfd.format.export import export_file
    from wrtfd.format.jsonio import iter_dump_lines

    path = tmp_path / "d.wrtf"
    groups = _write_batches(path, [3, 2, 3], SALT_A)
    data = bytearray(path.read_bytes())
    data[groups[1][0] + 12] ^= 1
    path.write_bytes(bytes(data))
    with Reader(path) as r:
        dropped: list = []
        lines = list(iter_dump_lines(r, dropped=dropped))
        assert len(lines) == 1 + 6 and '"frames":6' in lines[0]
        assert all("wrtfd_check" not in line for line in lines)
        assert [(i, f.frame, f.frames) for i, f in dropped] == [(0, 3, 2)]
        dropped = []
        rows = export_file(r, tmp_path / "o.csv", progress=None, dropped=dropped)
        assert rows == 6 and len(dropped) == 1
        header = (tmp_path / "o.csv").read_text().splitlines()[0]
        assert "wrtfd_check" not in header
        export_file(r, tmp_path / "c.csv", with_check=True)
        assert "wrtfd_check" in (tmp_path / "c.csv").read_text().splitlines()[0]


def test_sync_on_create_makes_the_file_appear_whole(tmp_path: Path) -> None:
    """The file appears under its name only with its header and metadata written and synced."""
    path = tmp_path / "new.wrtf"
    w = Writer(path, BASE, rate_hz=60, start_timestamp_us=START_US, check=True, sync_on_create=True)
    assert sorted(os.listdir(tmp_path)) == ["new.wrtf"]  # no temporary name left behind
    with Reader(path) as r:
        assert r.sessions == [] and r.metadata["wrtfd.check"] == CHECK_ALGORITHM
    w.close()
    with pytest.raises(FileExistsError):
        Writer(path, BASE, rate_hz=60, sync_on_create=True)
    assert validate_file(path) == [] and sorted(os.listdir(tmp_path)) == ["new.wrtf"]


def test_write_frame_writes_the_batch_bytes_as_groups_of_one(tmp_path: Path) -> None:
    """The per-frame path against the batch path: the same frames give the same file, byte for
    byte, except that each frame's check is a group of its own, recomputed here with crc32c
    directly. Records come in every form write_frame takes (a record of the file's layout with
    garbage in its padding and its check field, one of the definition's own layout, a 0-d array,
    a mapping), so none of them may leak a byte the batch path would not write."""
    base = make_schema([fld("gear", "uint8"), fld("speed", "float32"), fld("rpm", "uint16")])
    file_schema = with_check(base)
    fs = file_schema.frame_size
    pad = np.flatnonzero(~covered_bytes(file_schema.frame_dtype))
    assert len(pad), "the layout has padding to keep zero"
    ticks = [0, 1, 5, 9, 100, 2**40, 2**40 + 1, 2**40 + 7]
    frames = np.zeros(len(ticks), dtype=file_schema.frame_dtype)
    frames["tick"] = ticks
    frames["gear"] = np.arange(len(ticks)) + 1
    frames["speed"] = np.linspace(-3.5, 90.25, len(ticks), dtype=np.float32)
    frames["rpm"] = np.arange(len(ticks)) * 1000 + 7
    dirty = frames.copy()
    dirty_bytes = dirty.view(np.uint8).reshape(len(ticks), fs)
    dirty_bytes[:, pad] = 0xAB
    dirty[CHECK_FIELD] = 0xEEEE_EEEE_EEEE_EEEE
    own = np.zeros(len(ticks), dtype=base.frame_dtype)
    for name in ("tick", "gear", "speed", "rpm"):
        own[name] = frames[name]
    own.view(np.uint8).reshape(len(ticks), base.frame_size)[:, pad[pad < base.frame_size]] = 0xCD

    def write(path: Path, per_frame: bool) -> None:
        with Writer(path, base, rate_hz=60, start_timestamp_us=START_US, check=True, check_salt=SALT_A) as w:
            w.begin_session()
            if not per_frame:
                w.write_frames(frames.copy())
            else:
                for i, t in enumerate(ticks):
                    forms = [
                        dirty[i],
                        own[i],
                        dirty[i : i + 1].reshape(()),
                        {
                            "gear": int(frames["gear"][i]),
                            "speed": float(frames["speed"][i]),
                            "rpm": int(frames["rpm"][i]),
                        },
                    ]
                    tick: Any = np.uint64(t) if i % 2 else t  # numpy ints are taken too
                    w.write_frame(tick, forms[i % 4])
            w.end_session()

    batch, single = tmp_path / "batch.wrtf", tmp_path / "single.wrtf"
    write(batch, per_frame=False)
    write(single, per_frame=True)
    expected = bytearray(batch.read_bytes())
    with Reader(batch) as r:
        first = r.sessions[0].offset + 8 + file_schema.header_size
    check_at = fs - 8
    for i in range(len(ticks)):
        at = first + i * fs
        frame = bytearray(expected[at : at + fs])
        frame[check_at:fs] = struct.pack("<IHH", 0, 1, 0)  # CRC zero, n = 1, i = 0
        crc = crc32c.crc32c(struct.pack("<QQ", SALT_A, at) + bytes(frame))
        frame[check_at : check_at + 4] = struct.pack("<I", crc)
        expected[at : at + fs] = frame
    assert single.read_bytes() == bytes(expected)
    assert validate_file(single) == []
