"""Round trips with random definitions (hypothesis): write, read, dump, write again: equal."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.format.conftest import START_US
from tests.format.strategies import definitions, random_records
from wrtfd.format import Reader, Schema, Writer, validate_file
from wrtfd.format.jsonio import iter_dump_lines, write_jsonl


@st.composite
def recordings(draw: st.DrawFn) -> tuple[dict[str, Any], list[list[int]], int]:
    d = draw(definitions())
    sessions = draw(
        st.lists(
            st.lists(st.integers(0, 10_000), max_size=12, unique=True).map(sorted),  # gaps = dropped ticks
            min_size=1,
            max_size=3,
        )
    )
    return d, sessions, draw(st.integers(0, 2**32))


def _write(path: Path, schema: Schema, sessions: list[list[int]], seed: int) -> list[np.ndarray]:
    written = []
    with Writer(
        path,
        schema,
        rate_hz=60,
        start_timestamp_us=START_US,
        metadata={"Track": "Nürburgring"},
        fsync_on_close=False,
    ) as w:
        for k, ticks in enumerate(sessions):
            header = random_records(schema, schema.header_dtype, schema.header_fields, 1, seed + k)[0]
            w.begin_session(header)
            frames = random_records(
                schema, schema.frame_dtype, schema.frame_fields, len(ticks), seed + 100 + k
            )
            frames["tick"] = ticks
            # Half through the batch path, half frame by frame.
            half = len(ticks) // 2
            w.write_frames(frames[:half])
            for rec in frames[half:]:
                w.write_frame(int(rec["tick"]), rec)
            footer = None
            if schema.footer_dtype is not None and schema.footer_fields is not None:
                footer = random_records(schema, schema.footer_dtype, schema.footer_fields, 1, seed + 200 + k)[
                    0
                ]
            w.end_session(footer)
            written.append(frames)
    return written


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recordings())
def test_write_read_dump_write_is_identity(rec: tuple[dict[str, Any], list[list[int]], int]) -> None:
    d, sessions, seed = rec
    schema = Schema.from_dict(d)
    with tempfile.TemporaryDirectory() as tmp:
        a = Path(tmp) / "a.wrtf"
        b = Path(tmp) / "b.wrtf"
        written = _write(a, schema, sessions, seed)
        with Reader(a) as r:
            assert r.complete and len(r.sessions) == len(sessions)
            for i, frames in enumerate(written):
                got = r.frames(i)
                assert got.tobytes() == frames.tobytes()
                s = r.sessions[i]
                ticks = sessions[i]
                assert s.frame_count == len(ticks)
                if ticks:
                    assert (s.first_tick, s.last_tick) == (ticks[0], ticks[-1])
                    assert s.dropped_ticks == ticks[-1] - ticks[0] + 1 - len(ticks)  # N10
            lines = list(iter_dump_lines(r))
        with Writer(
            b,
            schema,
            rate_hz=60,
            start_timestamp_us=START_US,
            metadata={"Track": "Nürburgring"},
            fsync_on_close=False,
        ) as w:
            assert write_jsonl(lines, w) == (len(sessions), sum(len(t) for t in sessions))
        assert b.read_bytes() == a.read_bytes()


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_float32_dump_round_trips_exactly(bits: int) -> None:
    """Dump's float32 text reads back as the very same float32 (NaN as "nan")."""
    from wrtfd.format.jsonio import _f32_to_json, _float_from_json

    x = np.array([bits], dtype=np.uint32).view(np.float32)[0]
    text = _f32_to_json(float(x))
    back = np.float32(_float_from_json(text, "x"))
    if np.isnan(x):
        assert text == "nan" and np.isnan(back)
    else:
        assert back.view(np.uint32) == x.view(np.uint32)
        if isinstance(text, float):
            assert len(repr(text)) <= max(len(repr(float(x))), 16)


def _write_checked(path: Path, schema: Schema, sessions: list[list[int]], seed: int, *, mixed: bool) -> None:
    with Writer(
        path, schema, rate_hz=60, start_timestamp_us=START_US, metadata={"Track": "Spa"}, check=True
    ) as w:
        for k, ticks in enumerate(sessions):
            w.begin_session(random_records(schema, schema.header_dtype, schema.header_fields, 1, seed + k)[0])
            frames = random_records(
                schema, schema.frame_dtype, schema.frame_fields, len(ticks), seed + 100 + k
            )
            frames["tick"] = ticks
            half = len(ticks) // 2 if mixed else len(ticks)
            w.write_frames(frames[:half])  # the definition's own layout: copied into the checked one
            for rec in frames[half:]:
                w.write_frame(int(rec["tick"]), rec)  # groups of one
            footer = None
            if schema.footer_dtype is not None and schema.footer_fields is not None:
                footer = random_records(schema, schema.footer_dtype, schema.footer_fields, 1, seed + 200 + k)[
                    0
                ]
            w.end_session(footer)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recordings(), st.booleans())
def test_checked_dump_write_round_trip(rec: tuple[dict[str, Any], list[list[int]], int], mixed: bool) -> None:
    """With the frame check: dump -> write with a's salt (as metadata) gives equal metadata,
    headers, footers and frame data (N5: the embedded definition has the check field); when a
    wrote each session as one batch (as write does), the very same bytes. dump never shows the
    check field as data."""
    d, sessions, seed = rec
    schema = Schema.from_dict(d)
    with tempfile.TemporaryDirectory() as tmp:
        a = Path(tmp) / "a.wrtf"
        b = Path(tmp) / "b.wrtf"
        _write_checked(a, schema, sessions, seed, mixed=mixed)
        with Reader(a) as r:
            salt = r.metadata["wrtfd.check.salt"]
            lines = list(iter_dump_lines(r))
            assert all('"wrtfd_check"' not in line for line in lines)
            field = r.schema.frame_dtype.fields["wrtfd_check"][1]  # type: ignore[index]
            fsize = r.schema.frame_size
            frames_at = [(s.frames_offset, s.frame_count) for s in r.sessions]
        with Writer(
            b,
            schema,
            rate_hz=60,
            start_timestamp_us=START_US,
            metadata={"Track": "Spa", "wrtfd.check.salt": salt},
            check=True,
        ) as w:
            assert write_jsonl(lines, w) == (len(sessions), sum(len(t) for t in sessions))
        assert validate_file(a) == [] and validate_file(b) == []
        da, db = bytearray(a.read_bytes()), bytearray(b.read_bytes())
        if not mixed:
            assert db == da
        assert len(da) == len(db)
        for off, n in frames_at:  # everything but the check values is the same
            for k in range(n):
                at = off + k * fsize + field
                da[at : at + 8] = db[at : at + 8] = bytes(8)
        assert db == da
