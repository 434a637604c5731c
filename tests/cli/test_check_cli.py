"""The command line with the frame check: validate's exit codes, repair that never lies, dump and
export that leave out (and report) frames failing the check."""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.format.conftest import START_US
from tests.format.samples import car_schema, rewrite_args, write_definition
from wrtfd.cli.main import main
from wrtfd.format import Reader, Writer, validate_file

BATCHES = (3, 4, 5, 6)  # frames in each flushed batch of a session: one check group each


def _write_checked(path: Path, *, close: bool = True) -> list[int]:
    """Two sessions written in flushed batches, like the recorder; returns every frame's end offset."""
    schema = car_schema()
    ends = []
    w = Writer(path, schema, rate_hz=50, start_timestamp_us=START_US, check=True, fsync_on_close=False)
    for k in range(2):
        w.begin_session({"start_timestamp": START_US + k, "track": "Spa"})
        for b, size in enumerate(BATCHES):
            frames = np.zeros(size, dtype=w.schema.frame_dtype)
            frames["tick"] = np.arange(10 * b, 10 * b + size)
            frames["speed"] = np.arange(size, dtype=np.float32) + k
            frames["wheels"]["pressure"] = 1.9
            start = w.bytes_written
            w.write_frames(frames)
            w.flush()
            ends += [start + (i + 1) * w.schema.frame_size for i in range(len(frames))]
        w.end_session({"laps": k})
    if close:
        w.close()
    else:
        w.abort()
    return ends


@pytest.mark.parametrize(
    ("content", "what"),
    [
        (b"", "empty"),
        (b"NOTWRTF!" + bytes(100), "not WRTF"),
        (None, "header cut"),
        (None, "metadata cut"),
    ],
)
def test_validate_exits_2_on_unreadable_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes | None, what: str
) -> None:
    f = tmp_path / "u.wrtf"
    if content is None:
        _write_checked(f)
        f.write_bytes(f.read_bytes()[: 20 if what == "header cut" else 60])
    else:
        f.write_bytes(content)
    assert main(["validate", str(f)]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("wrtfd: error:") and "unreadable" in err and err.count("\n") == 1
    assert out.startswith(f"{f}: offset ")  # the finding itself, with its offset
    assert main(["info", str(f)]) == 2 and main(["repair", str(f)]) == 2  # the same verdict


def test_validate_reports_failing_frames_with_offsets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "a.wrtf"
    ends = _write_checked(f)
    fsize = car_schema().frame_size + 8
    data = bytearray(f.read_bytes())
    first = ends[3] - fsize  # frame 3 of session 0: the first of the second batch (4 frames)
    data[first + 9] ^= 0x40
    f.write_bytes(bytes(data))
    assert main(["validate", str(f)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"{f}: offset {first}: session 0 frames 3..6 (offsets {first} + k * {fsize}) fail the frame check: "
        "CRC mismatch: not the bytes this file's writer wrote at this offset (damaged, stale, or from "
        "another file) [check]"
    ]


def test_dump_and_export_leave_out_failing_frames_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "a.wrtf"
    ends = _write_checked(f)
    assert main(["dump", str(f)]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(lines) == 2 + 2 * 18 and "wrtfd_check" not in lines[1]["data"]
    data = bytearray(f.read_bytes())
    data[ends[0] - 3] ^= 1  # frame 0's group count (3 -> 259): its group of 3 frames fails
    f.write_bytes(bytes(data))
    assert main(["dump", str(f)]) == 1
    out, err = capsys.readouterr()
    lines = [json.loads(x) for x in out.splitlines()]
    assert lines[0]["frames"] == 15 and len(lines) == 2 + 15 + 18
    assert [x["tick"] for x in lines[1:4]] == [10, 11, 12]
    assert err.count("\n") == 1 and "3 frame(s) that fail the frame check were left out" in err
    assert main(["dump", str(f), "--with-check", "--session", "1"]) == 0
    assert "wrtfd_check" in json.loads(capsys.readouterr().out.splitlines()[1])["data"]
    out_csv = tmp_path / "a.csv"
    assert main(["export", str(f), "-o", str(out_csv)]) == 1
    assert "3 frame(s)" in capsys.readouterr().err
    rows = out_csv.read_text().splitlines()
    assert len(rows) == 1 + 33 and "wrtfd_check" not in rows[0]


def group_starts(session: int) -> list[int]:
    """File-wide indices of the first frame of each of ``session``'s batches (_write_checked)."""
    first = session * sum(BATCHES)
    return [first + sum(BATCHES[:b]) for b in range(len(BATCHES))]


@pytest.mark.parametrize("suffix", [".ld", ".mf4", ".csv", ".mcap"])
def test_export_of_sessions_whose_every_frame_fails_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    """A session none of whose frames passes is skipped like an empty one; when no frame of the
    file passes, .ld (one file per session) has nothing to write: one error line, exit 2."""
    f = tmp_path / "a.wrtf"
    ends = _write_checked(f)
    data = bytearray(f.read_bytes())
    for i in group_starts(0):
        data[ends[i] - 3] ^= 1  # the group count of each group's first frame: the group fails
    f.write_bytes(bytes(data))
    out = tmp_path / f"a{suffix}"
    assert main(["export", str(f), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "18 frame(s) that fail the frame check were left out" in err and "Traceback" not in err
    assert "wrote " in err and ": 18 frames" in err  # session 1's frames, every one of them
    if suffix == ".ld":
        assert sorted(p.name for p in tmp_path.glob("a*.ld*")) == ["a-s1.ld", "a-s1.ldx"]
    for i in group_starts(1):
        data[ends[i] - 3] ^= 1
    f.write_bytes(bytes(data))
    for p in tmp_path.glob("a?*.*"):
        p.unlink()
    code = main(["export", str(f), "-o", str(out), "--force"])  # over the first export's output
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if suffix == ".ld":
        assert code == 2 and err.count("\n") == 1
        assert err == f"wrtfd: error: {f}: no frames to export (every frame fails the frame check)\n"
        assert not list(tmp_path.glob("a*.ld*"))
    else:  # a table or a log with no rows is still a file: written, and the left-out frames said
        assert code == 1 and "36 frame(s) that fail the frame check were left out" in err


def test_write_with_the_salt_of_a_dump_gives_the_same_file(tmp_path: Path) -> None:
    """dump | write --meta wrtfd.check.salt=...: identical bytes when a was written one batch per
    session, as write does (tests/format/test_roundtrip_property.py covers other groupings)."""
    a, b = tmp_path / "a.wrtf", tmp_path / "b.wrtf"
    schema = car_schema()
    with Writer(a, schema, rate_hz=50, start_timestamp_us=START_US, check=True, metadata={"Car": "GT3"}) as w:
        w.begin_session({"track": "Spa"})
        frames = np.zeros(7, dtype=schema.frame_dtype)
        frames["tick"] = [0, 1, 2, 5, 6, 7, 9]
        frames["speed"] = np.linspace(0, 60, 7, dtype=np.float32)
        w.write_frames(frames)
        w.end_session({"laps": 2, "best_lap_s": 90.5})
    with Reader(a) as r:
        salt = r.metadata["wrtfd.check.salt"]
    dump = tmp_path / "a.jsonl"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["dump", str(a)]) == 0
    dump.write_text(buf.getvalue())
    d = write_definition(tmp_path / "d.yaml")
    args = [*rewrite_args(d), "--meta", "Car=GT3"]
    assert main([*args, "--meta", f"wrtfd.check.salt={salt}", "-o", str(b), str(dump)]) == 0
    assert b.read_bytes() == a.read_bytes()
    assert main([*args, "--check", "-o", str(b), "--force", str(dump)]) == 0  # a new salt
    with Reader(b) as r:
        assert r.metadata["wrtfd.check.salt"] != salt and r.verify_session(0) is None


@pytest.fixture(scope="module")
def checked_sample() -> tuple[bytes, bytes]:
    """(a complete file, a crashed one: no footers) with the frame check."""
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "a.wrtf"
        _write_checked(p)
        complete = p.read_bytes()
        p.unlink()
        _write_checked(p, close=False)
        return complete, p.read_bytes()


Damage = tuple[bool, int, list[tuple[int, int, str]], int]

#: Which sample (the crashed one?), a cut of up to 400 bytes, byte runs to zero, randomise or flip.
DAMAGE = st.tuples(
    st.booleans(),
    st.integers(0, 10**9),
    st.lists(
        st.tuples(st.integers(0, 10**9), st.integers(1, 64), st.sampled_from(["zero", "random", "flip"]))
    ),
    st.integers(0, 2**32 - 1),
)


def _damaged(checked_sample: tuple[bytes, bytes], damage: Damage) -> bytes:
    """The complete or the crashed sample, cut short, then zeroed, random or flipped byte runs."""
    crashed, cut, edits, seed = damage
    data = bytearray(checked_sample[1] if crashed else checked_sample[0])
    rng = np.random.default_rng(seed)
    data = data[: max(1, len(data) - cut % 400)]
    for pos, n, kind in edits:
        at = pos % len(data)
        run = min(n, len(data) - at)
        if kind == "zero":
            data[at : at + run] = bytes(run)
        elif kind == "random":
            data[at : at + run] = rng.integers(0, 256, run, dtype=np.uint8).tobytes()
        else:
            data[at] ^= 1 << (n % 8)
    return bytes(data)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(DAMAGE)
def test_repair_exit_code_matches_whether_its_output_validates(
    checked_sample: tuple[bytes, bytes], damage: Damage
) -> None:
    """Random cuts, zeroed, random and flipped byte runs: repair exits 0 only when its output
    validates, and never 0 when it would not (1: written but invalid; 2: unreadable). info,
    validate and dump answer every state with an exit code, never a traceback."""
    data = _damaged(checked_sample, damage)
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "c.wrtf", Path(tmp) / "r.wrtf"
        src.write_bytes(data)
        sink = io.StringIO()
        for command in ("info", "validate", "dump"):
            err = io.StringIO()
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(err):
                answer = main([command, str(src)])
            assert answer in (0, 1, 2), command
            if answer == 2:  # unreadable: one error line
                assert err.getvalue().startswith("wrtfd: error: ") and err.getvalue().count("\n") == 1, err
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            code = main(["repair", str(src), "-o", str(out)])
        assert code in (0, 1, 2)
        if code == 2:
            assert not out.exists()
            return
        valid = validate_file(out) == []
        assert (code == 0) == valid
        if code == 0:
            with Reader(out) as r:  # and nothing in it fails the check
                assert all(r.verify_session(i) is None for i in range(len(r.sessions)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(DAMAGE)
@example((False, 0, [(58, 3, "zero")], 0))  # NULs in the definition: YAML's error ran over two lines
@example((True, 21180761, [(139379, 7, "random")], 2))  # a session starting in the year 148108
def test_export_answers_any_damage_with_an_exit_code(
    checked_sample: tuple[bytes, bytes], damage: Damage
) -> None:
    """The same damage through every export a car's file can take: exit 0 or 1 with the output
    written, or 2 with one error line and nothing written; never a traceback. (Random damage
    rarely leaves a readable session whose every frame fails the check: the test above holds
    that case, which raised IndexError in .ld and .mf4.)"""
    data = _damaged(checked_sample, damage)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "c.wrtf"
        src.write_bytes(data)
        for suffix in (".csv", ".ld", ".mf4", ".mcap"):
            out = Path(tmp) / f"e{suffix}"
            err = io.StringIO()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                code = main(["export", str(src), "-o", str(out)])
            written = sorted(p.name for p in Path(tmp).glob("e*"))
            if code == 2:
                assert written == [] and err.getvalue().count("\n") == 1, (suffix, err.getvalue())
            else:
                assert code in (0, 1) and written, (suffix, code, err.getvalue())
            for p in Path(tmp).glob("e*"):
                p.unlink()
