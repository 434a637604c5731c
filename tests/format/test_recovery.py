"""Crash recovery (N11): truncation at every byte, random corruption, repair then validate."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.format.conftest import START_US, fld, make_schema
from wrtfd.errors import WrtfdError
from wrtfd.format import Reader, Schema, Writer, repair_file, validate_file
from wrtfd.format.jsonio import iter_dump_lines


def _schema() -> Schema:
    return make_schema(
        [fld("speed", "float32"), fld("gear", "int8"), fld("state", "st")],
        header=[fld("start_timestamp", "uint64"), fld("car", "uint8", 8, tags=["text"])],
        footer=[fld("laps", "uint16")],
        types={
            "st": {
                "type": "enum",
                "description": "s",
                "values": [
                    {"name": "a", "value": 0, "description": "a"},
                    {"name": "b", "value": 3, "description": "b"},
                ],
            }
        },
    )


SESSIONS = [[0, 1, 2, 4, 7], [0, 1], [], [3, 4, 5, 6, 9, 10]]


def _write_sample(path: Path, schema: Schema) -> dict[int, tuple[int, int]]:
    """Write a small multi-session file; return each frame's (session, tick) by its end offset."""
    ends: dict[int, tuple[int, int]] = {}
    with Writer(
        path,
        schema,
        rate_hz=100,
        start_timestamp_us=START_US,
        fsync_on_close=False,
        metadata={"Track": "iracing:track/日本"},
    ) as w:
        for k, ticks in enumerate(SESSIONS):
            w.begin_session({"car": f"car{k}", "start_timestamp": START_US + k})
            for t in ticks:
                w.write_frame(t, {"speed": t / 4, "gear": k, "state": "b" if t % 2 else "a"})
                ends[w.bytes_written] = (k, t)
            w.end_session({"laps": k})
    return ends


def _frames(r: Reader) -> list[tuple[int, int]]:
    return [(i, int(t)) for i in range(len(r.sessions)) for t in r.frames(i)["tick"]]


def test_truncate_at_every_offset_recovers_every_complete_frame(tmp_path: Path) -> None:
    """N11: cut a multi-session file at every byte; the reader recovers exactly the frames that
    lie wholly before the cut, raises only library errors, and repair output validates."""
    schema = _schema()
    full = tmp_path / "full.wrtf"
    ends = _write_sample(full, schema)
    data = full.read_bytes()
    with Reader(full) as r:
        data_start = r.data_start
        assert _frames(r) == [ends[e] for e in sorted(ends)]
    cut_file = tmp_path / "cut.wrtf"
    fixed = tmp_path / "fixed.wrtf"
    readable = 0
    for cut in range(len(data)):
        cut_file.write_bytes(data[:cut])
        expected = [ends[e] for e in sorted(ends) if e <= cut]
        try:
            with Reader(cut_file) as r:
                assert not r.complete
                assert _frames(r) == expected, cut
                readable += 1
        except WrtfdError:
            assert cut < data_start, f"unreadable although the metadata is whole (cut {cut})"
            continue
        report = repair_file(cut_file, fixed, durable=False)
        assert report.frames_kept == len(expected)
        assert validate_file(fixed) == [], cut
        with Reader(fixed) as r:
            assert r.complete and _frames(r) == expected
    assert readable == len(data) - data_start


def test_repair_in_place_reports_and_keeps_frames(tmp_path: Path) -> None:
    schema = _schema()
    path = tmp_path / "crash.wrtf"
    w = Writer(path, schema, rate_hz=100, start_timestamp_us=START_US, fsync_on_close=False)
    w.begin_session({"car": "x"})
    for t in range(50):
        w.write_frame(t, {"speed": float(t)})
    w.abort()  # power cut: no session footer, no document footer
    with open(path, "ab") as f:
        f.write(b"\x01" * 5)  # torn last frame
    findings = validate_file(path)
    assert {f.code for f in findings} >= {"incomplete", "torn", "no-footer"}
    report = repair_file(path)
    assert (report.frames_kept, report.bytes_dropped, report.session_footers_written) == (50, 5, 1)
    assert report.document_footer_written and not report.rebuilt
    assert any("dropped 5 bytes" in line for line in report.lines())
    assert validate_file(path) == []
    with Reader(path) as r:
        assert r.complete and r.sessions[0].frame_count == 50 and r.sessions[0].footer_order == "spec"
    again = repair_file(path)
    assert again.was_complete and "nothing to do" in again.lines()[0]


def test_repair_rebuilds_when_garbage_is_in_the_middle(tmp_path: Path) -> None:
    """A session left without footer before another session (never written by us, but possible
    after a crash plus a naive append) is rebuilt, keeping every frame."""
    schema = _schema()
    a = tmp_path / "a.wrtf"
    _write_sample(a, schema)
    data = bytearray(a.read_bytes())
    with Reader(a) as r:
        s0 = r.sessions[0]
        assert s0.footer_offset is not None
        footer_len = s0.end_offset - s0.footer_offset
    # Remove session 0's footer: session 1 follows its frames directly.
    del data[s0.footer_offset : s0.footer_offset + footer_len]
    bad = tmp_path / "bad.wrtf"
    bad.write_bytes(bytes(data))
    report = repair_file(bad)
    assert report.rebuilt and report.session_footers_written == 1
    assert validate_file(bad) == []
    with Reader(bad) as r:
        assert [s.frame_count for s in r.sessions] == [len(t) for t in SESSIONS]


def test_validate_finds_tick_order_and_padding(tmp_path: Path) -> None:
    schema = _schema()
    path = tmp_path / "v.wrtf"
    _write_sample(path, schema)
    with Reader(path) as r:
        s = r.sessions[0]
        fsize = schema.frame_size
        state_off = schema.frame_dtype.fields["state"][1]  # type: ignore[index]
    data = bytearray(path.read_bytes())
    data[s.frames_offset + fsize + state_off] = 9  # an enum number without a name is data, not an error
    data[s.frames_offset + 2 * fsize - 1] = 0xFF  # padding byte of frame 1
    path.write_bytes(bytes(data))
    codes = {f.code: f for f in validate_file(path)}
    assert "enum" not in codes
    assert codes["padding"].offset == s.frames_offset + fsize
    # Tick order: make frame 2's tick smaller than frame 1's.
    data[s.frames_offset + 2 * fsize : s.frames_offset + 2 * fsize + 8] = (0).to_bytes(8, "little")
    path.write_bytes(bytes(data))
    findings = validate_file(path)
    tick = [f for f in findings if f.code == "tick-order"]
    assert tick and tick[0].offset == s.frames_offset + 2 * fsize
    assert any(f.code in ("doc-entry", "incomplete") for f in findings)


def test_validate_reports_header_problems(tmp_path: Path) -> None:
    schema = _schema()
    path = tmp_path / "h.wrtf"
    _write_sample(path, schema)
    data = bytearray(path.read_bytes())
    data[36] = 1  # reserved
    data[8] = 2  # version
    path.write_bytes(bytes(data))
    assert [(f.offset, f.code) for f in validate_file(path)] == [(8, "version")]
    data[8] = 1
    data[16:24] = bytes(8)  # rate 0
    path.write_bytes(bytes(data))
    codes = {(f.offset, f.code) for f in validate_file(path)}
    assert {(16, "rate"), (36, "reserved")} <= codes


def test_validate_catches_lying_document_footer(tmp_path: Path) -> None:
    """Spec 9: the document footer's counts and offsets must match the sessions."""
    schema = _schema()
    path = tmp_path / "d.wrtf"
    _write_sample(path, schema)
    data = bytearray(path.read_bytes())
    n = len(SESSIONS)
    entry0 = len(data) - 16 - 24 * n
    data[entry0 + 16 : entry0 + 24] = (99).to_bytes(8, "little")  # frame count of session 0
    path.write_bytes(bytes(data))
    findings = validate_file(path)
    assert any(
        f.code == "doc-entry" and f.offset == entry0 and "frame count 99" in f.message for f in findings
    )
    with Reader(path) as r:  # the reader falls back to scanning and still reads every frame
        assert not r.complete and [s.frame_count for s in r.sessions] == [len(t) for t in SESSIONS]


@pytest.fixture(scope="module")
def sample_bytes() -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "s.wrtf"
        _write_sample(p, _schema())
        return p.read_bytes()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 10**9), st.integers(0, 255)), min_size=1, max_size=8))
def test_random_corruption_raises_only_library_errors(
    sample_bytes: bytes, edits: list[tuple[int, int]]
) -> None:
    data = bytearray(sample_bytes)
    for pos, value in edits:
        data[pos % len(data)] = value
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "c.wrtf"
        p.write_bytes(bytes(data))
        findings = validate_file(p)
        assert isinstance(findings, list)
        try:
            with Reader(p) as r:
                for i in range(len(r.sessions)):
                    frames = r.frames(i)
                    assert len(r.frame_times_us(i)) == len(frames)
                lines = list(iter_dump_lines(r))
                assert len(lines) == len(r.sessions) + r.total_frames
        except WrtfdError:
            pass
        try:
            out = Path(tmp) / "r.wrtf"
            repair_file(p, out, durable=False)
        except WrtfdError:
            return
        with Reader(out) as r:
            assert r.complete


def test_copy_keeps_source_untouched(tmp_path: Path) -> None:
    schema = _schema()
    src = tmp_path / "s.wrtf"
    w = Writer(src, schema, rate_hz=10, start_timestamp_us=START_US, fsync_on_close=False)
    w.begin_session()
    w.write_frame(1)
    w.abort()
    before = src.read_bytes()
    out = tmp_path / "o.wrtf"
    repair_file(src, out)
    assert src.read_bytes() == before
    assert validate_file(out) == []
    shutil.copyfile(out, tmp_path / "x.wrtf")
    assert np.array_equal(Reader(tmp_path / "x.wrtf").frames(0)["tick"], [1])


def test_damaged_metadata_value_still_reads(tmp_path: Path) -> None:
    """N12: invalid UTF-8 in a value is a finding with its offset; the frames stay readable."""
    schema = _schema()
    path = tmp_path / "m.wrtf"
    _write_sample(path, schema)
    data = bytearray(path.read_bytes())
    pos = data.find("日本".encode())
    data[pos] = 0xFF
    path.write_bytes(bytes(data))
    findings = validate_file(path)
    assert [(f.code, f.offset) for f in findings] == [("metadata-utf8", pos - len("iracing:track/") - 4)]
    with Reader(path) as r:
        assert r.metadata["Track"].startswith("iracing:track/\ufffd")
        assert r.total_frames == sum(len(t) for t in SESSIONS)
