"""``wrtfd dump`` / ``wrtfd write``: JSON Lines and back to an equal file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.format.conftest import START_US
from tests.format.samples import rewrite_args, write_car_file, write_definition
from wrtfd.cli.main import main
from wrtfd.format import Reader


def _dump(f: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> list[dict[str, object]]:
    assert main(["dump", str(f), *extra]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_dump_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "a.wrtf"
    write_car_file(f)
    lines = _dump(f, capsys)
    assert len(lines) == 2 + 10
    s = lines[0]
    assert s == {
        "kind": "session",
        "session": 0,
        "header": {"start_timestamp": START_US, "track": "鈴鹿"},
        "footer": {"laps": 10, "best_lap_s": 91.125},
        "frames": 5,
        "last_tick": 8,
    }
    fr = [x for x in lines if x["kind"] == "frame"]
    assert [x["tick"] for x in fr[:5]] == [0, 2, 4, 6, 8]
    assert fr[1]["time_us"] == START_US + 2 * 20_000  # N9: session base + tick * 1e6 / rate
    d0, d1, d2, d3, d4 = (x["data"] for x in fr[:5])
    assert isinstance(d0, dict) and isinstance(d1, dict) and isinstance(d2, dict)
    assert isinstance(d3, dict) and isinstance(d4, dict)
    assert d0["speed"] == 0.1  # shortest float32 text, not 0.10000000149011612
    assert (d1["speed"], d2["speed"], d3["speed"]) == ("nan", "inf", -0.0)
    assert d4["speed"] == 3.4028235e38
    assert (d0["state"], d1["state"], d2["state"]) == ("pits", "racing", 7)  # name, or number if unnamed
    assert d0["on_track"] is True and d1["on_track"] is False
    assert d0["driver"] == "Ayrton" and d0["gear"] == -1
    assert d0["wheels"][3] == {"temperature": 83.25, "pressure": 1.9}
    only1 = _dump(f, capsys, "--session", "1")
    assert only1[0]["session"] == 1 and len(only1) == 6


def test_dump_bad_session_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "a.wrtf"
    write_car_file(f)
    assert main(["dump", str(f), "--session", "5"]) == 2
    assert "no session 5" in capsys.readouterr().err


def test_dump_write_pipe_gives_equal_file(tmp_path: Path) -> None:
    """`wrtfd dump a | wrtfd write --schema d --rate R --start-timestamp S -o b -` == a."""
    a = tmp_path / "a.wrtf"
    b = tmp_path / "b.wrtf"
    write_car_file(a, sessions=3, frames=7)
    d = write_definition(tmp_path / "d.yaml")
    cmd = [sys.executable, "-m", "wrtfd.cli.main"]
    dump = subprocess.run([*cmd, "dump", str(a)], capture_output=True, check=True)
    subprocess.run(
        [
            *cmd,
            *rewrite_args(d),
            "--meta",
            "Track=iracing:track/日本",
            "-o",
            str(b),
            "-",
        ],
        input=dump.stdout,
        capture_output=True,
        check=True,
    )
    assert b.read_bytes() == a.read_bytes()
    with Reader(a) as ra, Reader(b) as rb:
        for i in range(3):
            assert ra.frames(i).tobytes() == rb.frames(i).tobytes()


def test_write_errors_name_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = write_definition(tmp_path / "d.yaml")
    src = tmp_path / "in.jsonl"
    out = tmp_path / "o.wrtf"
    src.write_text(
        '{"kind":"session","session":0,"header":{},"footer":null}\n'
        '{"kind":"frame","session":0,"tick":5,"data":{"speed":1}}\n'
        '{"kind":"frame","session":0,"tick":5,"data":{"speed":2}}\n'
    )
    assert main(["write", "--schema", str(d), "--rate", "10", "-o", str(out), str(src)]) == 2
    assert "line 3: tick 5 after 5" in capsys.readouterr().err
    assert not out.exists()
    src.write_text('{"kind":"session","header":{"nope":1}}\n')
    assert main(["write", "--schema", str(d), "--rate", "10", "-o", str(out), str(src)]) == 2
    assert "line 1: header.nope: no such field" in capsys.readouterr().err
    src.write_text('{"kind":"session","header":{}}\n{"kind":"frame","tick":1,"data":{"state":"flying"}}\n')
    assert main(["write", "--schema", str(d), "--rate", "10", "-o", str(out), str(src)]) == 2
    assert "'flying' is not a value of enum state" in capsys.readouterr().err


def test_write_refuses_existing_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = write_definition(tmp_path / "d.yaml")
    out = tmp_path / "o.wrtf"
    out.write_bytes(b"keep")
    src = tmp_path / "in.jsonl"
    src.write_text("")
    assert main(["write", "--schema", str(d), "--rate", "10", "-o", str(out), str(src)]) == 2
    assert "exists" in capsys.readouterr().err and out.read_bytes() == b"keep"
    assert (
        main(
            [
                "write",
                "--schema",
                str(d),
                "--rate",
                "10",
                "--meta",
                "Car=GT3",
                "--force",
                "-o",
                str(out),
                str(src),
            ]
        )
        == 0
    )
    with Reader(out) as r:
        assert r.metadata["Car"] == "GT3" and r.sessions == []


def test_example_definition_round_trip(
    tmp_path: Path, shared_spec: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spec's Example.wrtf.yaml (older `channels:` form, N4) through dump and write."""
    import io

    import numpy as np

    from wrtfd.format import Schema, Writer

    example = shared_spec / "Example.wrtf.yaml"
    schema = Schema.load(example)
    a = tmp_path / "a.wrtf"
    frames = np.zeros(3, dtype=schema.frame_dtype)
    frames["tick"] = [0, 1, 5]
    frames["wheels"]["temperature"] = np.float32(71.3)
    frames["engine_temperature"]["coolant_temps"] = [[90.5, 91, 92, 93]] * 3
    with Writer(a, schema, rate_hz=60, start_timestamp_us=START_US, fsync_on_close=False) as w:
        w.begin_session({"type": "Qualifying", "ambient_temp": 21.5})
        w.write_frames(frames)
        w.end_session({"total_laps": 12, "fuel_used": 40.25})
    assert main(["dump", str(a)]) == 0
    text = capsys.readouterr().out
    first = json.loads(text.splitlines()[0])
    assert first["header"]["type"] == "Qualifying" and first["footer"]["fuel_used"] == 40.25
    frame = json.loads(text.splitlines()[1])["data"]
    assert (
        frame["wheels"][2]["temperature"] == 71.3 and frame["engine_temperature"]["coolant_temps"][0] == 90.5
    )
    b = tmp_path / "b.wrtf"
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    args = [
        "write",
        "--schema",
        str(example),
        "--rate",
        "60",
        "--start-timestamp",
        str(START_US),
        "-o",
        str(b),
        "-",
    ]
    assert main(args) == 0
    assert b.read_bytes() == a.read_bytes()
