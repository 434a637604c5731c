"""``wrtfd info``: text and JSON, both footer orders (N2), incomplete files (N11)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from tests.format.samples import write_car_file, write_definition
from wrtfd.cli.main import main


def test_info_json_lists_sessions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "a.wrtf"
    write_car_file(f)
    assert main(["info", str(f), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["complete"] is True and d["rate_hz"] == 50 and d["frames"] == 10
    assert d["metadata"]["Track"] == "iracing:track/日本"
    s0, s1 = d["sessions"]
    assert (s0["frames"], s0["first_tick"], s0["last_tick"], s0["dropped_ticks"]) == (5, 0, 8, 4)
    assert (s1["frames"], s1["first_tick"], s1["last_tick"], s1["dropped_ticks"]) == (5, 0, 4, 0)
    assert s0["footer_order"] == "spec" and s0["header"]["track"] == "鈴鹿"
    assert s0["duration_s"] == pytest.approx(9 / 50)
    assert s0["offset"] > 40 and s1["offset"] > s0["offset"]


def test_info_reports_reference_footer_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """N2/N5: a file like the .NET reference writes: footer order last tick first, and no
    embedded definition (read with --schema)."""
    f = tmp_path / "ref.wrtf"
    write_car_file(f, embed_schema=False)
    d = write_definition(tmp_path / "car.wrtf.yaml")
    data = bytearray(f.read_bytes())
    pos = data.find(b"WRSF0001")
    while pos >= 0:
        a, b = struct.unpack_from("<QQ", data, pos + 8)
        struct.pack_into("<QQ", data, pos + 8, b, a)
        pos = data.find(b"WRSF0001", pos + 8)
    f.write_bytes(bytes(data))
    assert main(["info", str(f), "--schema", str(d)]) == 0
    out = capsys.readouterr().out
    assert "footer order reference" in out and "footer order spec" not in out
    assert "5 frames, ticks 0..8, dropped 4" in out


def test_info_incomplete_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "crash.wrtf"
    write_car_file(f)
    data = f.read_bytes()
    f.write_bytes(data[: len(data) - 100])  # lose the document footer and part of the last session
    assert main(["info", str(f), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["complete"] is False and d["problem"]
    assert [s["complete"] for s in d["sessions"]] == [True, False]
    assert main(["info", str(f)]) == 0
    assert "INCOMPLETE" in capsys.readouterr().out


def test_info_external_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """N5: a file without `wrtf.schema` needs --schema; without it, one error line, exit 2."""
    f = tmp_path / "bare.wrtf"
    write_car_file(f, embed_schema=False)
    assert main(["info", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("wrtfd: error:") and "--schema" in err and err.count("\n") == 1
    d = write_definition(tmp_path / "car.wrtf.yaml")
    assert main(["info", str(f), "--schema", str(d), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["definition"] == "external"


def test_info_not_a_wrtf_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "x.wrtf"
    f.write_bytes(b"PK\x03\x04" + bytes(60))
    assert main(["info", str(f)]) == 2
    err = capsys.readouterr().err
    assert "not a WRTF file" in err and "Traceback" not in err


@pytest.mark.parametrize("command", ["info", "validate", "dump"])
def test_a_fifo_or_a_device_is_one_line_at_once(tmp_path: Path, command: str) -> None:
    """A FIFO blocked the open until a writer came (for ever, in a script); a device was read as
    an empty file. In a subprocess with a timeout, so that the old behaviour fails, not hangs."""
    import os
    import subprocess
    import sys

    fifo = tmp_path / "pipe.wrtf"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/null")):
        r = subprocess.run(
            [sys.executable, "-m", "wrtfd", command, str(path)], capture_output=True, text=True, timeout=30
        )
        assert r.returncode == 2
        assert r.stderr == f"wrtfd: error: {path}: not a regular file (a pipe or a device) (at byte 0)\n"
    r = subprocess.run(
        [sys.executable, "-m", "wrtfd", command, str(tmp_path)], capture_output=True, text=True
    )
    assert (r.returncode, r.stderr) == (2, f"wrtfd: error: Is a directory: {tmp_path}\n")
