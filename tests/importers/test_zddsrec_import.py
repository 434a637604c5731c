"""``wrtfd import FILE.zddsrec``: replay through the scheduler and recorder, driven by recorded time."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from wrtfd.cli.main import main
from wrtfd.zddsrec.format import Header, ParticipantEntry, SampleKind, TopicEntry, ZddsrecWriter

recorder = pytest.importorskip("wrtfd.recorder")
if not hasattr(recorder, "replay"):
    pytest.skip("wrtfd.recorder.replay is not available yet", allow_module_level=True)

from wrtfd.format import Reader  # noqa: E402

RATE_HZ = 100
PERIOD_NS = 1_000_000_000 // RATE_HZ
TIME_BASE_NS = 1_700_000_000_000_000_000

MAP = """
[rate]
hz = 100

[source]
name = "car"

[[topics]]
topic = "rt/state"
idl = "state.idl"
type = "demo::State"
[topics.channels]
"seq" = "seq"
"speed" = { channel = "speed", unit = "m/s" }
"wheels" = "wheels"
"""
IDL = "module demo { struct State { uint32 seq; double speed; float wheels[4]; }; };"


def payload(seq: int) -> bytes:
    return b"\x00\x01\x00\x00" + struct.pack("<I4xd4f", seq, seq * 0.5, 1.0, 2.0, 3.0, float(seq))


def write_capture(path: Path, present: list[int], *, extra: bytes = b"") -> None:
    """One sample per 10 ms tick index in ``present`` (plus an unmapped topic every 7th)."""
    header = Header(
        TIME_BASE_NS,
        (ParticipantEntry(bytes(16), "sim"),),
        (TopicEntry("rt/state", "demo::State"), TopicEntry("rt/log", "Log")),
    )
    buf = io.BytesIO()
    w = ZddsrecWriter(buf, header)
    for k in present:
        w.write_frame(k * PERIOD_NS + 1_000, 0, 0, SampleKind.ALIVE, payload(k))
        if k % 7 == 0:
            w.write_frame(k * PERIOD_NS + 2_000, 0, 1, SampleKind.ALIVE, b"\x00\x01\x00\x00text")
    path.write_bytes(buf.getvalue() + extra)


@pytest.fixture
def mapping(tmp_path: Path) -> Path:
    (tmp_path / "state.idl").write_text(IDL)
    (tmp_path / "map.toml").write_text(MAP)
    return tmp_path / "map.toml"


def run(*argv: str) -> int:
    return main(["import", *argv])


def test_gaps_give_exactly_the_dropped_ticks(tmp_path: Path, mapping: Path) -> None:
    """Ticks 0..299 with two pauses (100..149: 50 ticks; 200..209: 10 ticks) -> 60 dropped ticks."""
    present = [k for k in range(300) if not (100 <= k < 150 or 200 <= k < 210)]
    cap = tmp_path / "gaps.zddsrec"
    write_capture(cap, present)
    out = tmp_path / "gaps.wrtf"
    assert (
        run(str(cap), "--config", str(mapping), "-o", str(out), "--start-timestamp", "1700000000000000") == 0
    )
    with Reader(out) as r:
        assert r.rate_hz == RATE_HZ
        assert len(r.sessions) == 1
        s = r.sessions[0]
        assert s.frame_count == len(present)
        assert s.last_tick is not None and s.first_tick is not None
        assert s.last_tick - s.first_tick + 1 - s.frame_count == 60  # N10
        assert s.dropped_ticks == 60
        frames = r.frames(0)
        ticks = (frames["tick"] - frames["tick"][0]).tolist()
        assert ticks == present
        car = frames["car"]
        assert car["seq"].tolist() == present
        assert np.array_equal(car["speed"], np.array(present) * 0.5)
        assert car["wheels"][:, 3].tolist() == [float(k) for k in present]
        assert r.metadata["zddsrec.file"] == "gaps.zddsrec"


def test_same_input_same_bytes(tmp_path: Path, mapping: Path) -> None:
    cap = tmp_path / "c.zddsrec"
    write_capture(cap, list(range(120)))
    a, b = tmp_path / "a.wrtf", tmp_path / "b.wrtf"
    for out in (a, b):
        assert run(str(cap), "--config", str(mapping), "-o", str(out), "--start-timestamp", "1234567") == 0
    assert a.read_bytes() == b.read_bytes()
    # Without --start-timestamp the default is the first imported sample's recorded time: the
    # same bytes as giving that time explicitly, and again the same on every run.
    c, d, e = tmp_path / "c.wrtf", tmp_path / "d.wrtf", tmp_path / "e.wrtf"
    assert run(str(cap), "--config", str(mapping), "-o", str(c)) == 0
    assert run(str(cap), "--config", str(mapping), "-o", str(d)) == 0
    first_sample_us = (TIME_BASE_NS + 1_000) // 1000
    assert (
        run(str(cap), "--config", str(mapping), "-o", str(e), "--start-timestamp", str(first_sample_us)) == 0
    )
    assert c.read_bytes() == d.read_bytes() == e.read_bytes()
    assert c.read_bytes() != a.read_bytes()


def test_torn_tail_is_reported_and_complete_frames_imported(
    tmp_path: Path, mapping: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cap = tmp_path / "t.zddsrec"
    write_capture(cap, list(range(50)), extra=b"F" + bytes(10))
    out = tmp_path / "t.wrtf"
    assert run(str(cap), "--config", str(mapping), "-o", str(out)) == 0
    err = capsys.readouterr().err
    assert "torn last frame (11 bytes at offset" in err
    assert "8 samples of unmapped topic rt/log" in err
    with Reader(out) as r:
        assert r.sessions[0].frame_count == 50


def test_cli_errors_are_one_line(tmp_path: Path, mapping: Path) -> None:
    cap = tmp_path / "c.zddsrec"
    write_capture(cap, list(range(10)))
    out = tmp_path / "o.wrtf"
    out.write_bytes(b"keep me")
    cases = [
        (["import", str(cap), "-o", str(tmp_path / "x.wrtf")], "needs --config MAP.toml"),
        (["import", str(cap), "--config", str(mapping), "-o", str(out)], "exists; use --force"),
    ]
    bad = tmp_path / "bad.zddsrec"
    data = bytearray(cap.read_bytes())
    first_frame = data.index(b"F\xe8\x03")  # delta 1000 ns: the first frame
    data[first_frame + 17] = 9  # unknown sample kind
    bad.write_bytes(bytes(data))
    cases.append(
        (
            ["import", str(bad), "--config", str(mapping), "-o", str(tmp_path / "b.wrtf")],
            f"unknown sample kind 9 (at byte {first_frame})",
        )
    )
    for argv, message in cases:
        r = subprocess.run(
            [sys.executable, "-m", "wrtfd", *argv], capture_output=True, text=True, timeout=120
        )
        assert r.returncode == 2, r.stderr
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("wrtfd: error: ")
        assert message in r.stderr
    assert out.read_bytes() == b"keep me"
    assert not (tmp_path / "b.wrtf").exists()


def test_disposed_instance_goes_stale_until_it_comes_back(tmp_path: Path) -> None:
    """NOT_ALIVE_DISPOSED at tick 50 marks the state's float channels NaN (integers keep their
    last value) until the instance is alive again at tick 60; the clock topic drives every tick."""
    (tmp_path / "state.idl").write_text(IDL + "\nstruct Clock { uint64 n; };")
    (tmp_path / "map.toml").write_text(
        MAP
        + '\n[[topics]]\ntopic = "rt/clock"\nidl = "state.idl"\ntype = "Clock"\nchannels = { n = "clk" }\n'
    )
    header = Header(
        TIME_BASE_NS,
        (ParticipantEntry(bytes(16), "sim"),),
        (TopicEntry("rt/state", "demo::State"), TopicEntry("rt/clock", "Clock")),
    )
    buf = io.BytesIO()
    w = ZddsrecWriter(buf, header)
    for k in range(100):
        t = k * PERIOD_NS + 1_000
        w.write_frame(t, 0, 1, SampleKind.ALIVE, b"\x00\x01\x00\x00" + struct.pack("<Q", k))
        if k == 50:
            w.write_frame(t + 10, 0, 0, SampleKind.NOT_ALIVE_DISPOSED, b"")
        elif k < 50 or k >= 60:
            w.write_frame(t + 10, 0, 0, SampleKind.ALIVE, payload(k))
    cap = tmp_path / "d.zddsrec"
    cap.write_bytes(buf.getvalue())
    out = tmp_path / "d.wrtf"
    assert run(str(cap), "--config", str(tmp_path / "map.toml"), "-o", str(out)) == 0
    with Reader(out) as r:
        car = r.frames(0)["car"]
        assert car["clk"].tolist() == list(range(100))
        speed = car["speed"]
        assert np.isnan(speed[50:60]).all()
        assert np.array_equal(speed[:50], np.arange(50) * 0.5)
        assert np.array_equal(speed[60:], np.arange(60, 100) * 0.5)
        assert np.isnan(car["wheels"][50:60]).all()
        assert car["seq"][50:60].tolist() == [49] * 10  # integer channels hold their last value
