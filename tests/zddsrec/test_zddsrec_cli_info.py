"""``wrtfd zddsrec info``."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from wrtfd.cli.main import main
from wrtfd.zddsrec.format import Header, ParticipantEntry, SampleKind, TopicEntry, ZddsrecWriter


def capture(path: Path, *, torn: bool = False) -> None:
    header = Header(
        1_700_000_000_000_000_000,
        (ParticipantEntry(bytes(16), "sim"), ParticipantEntry(b"\xab" * 16, "logger")),
        (TopicEntry("rt/a", "A"), TopicEntry("rt/b", "B"), TopicEntry("rt/none", "N")),
    )
    buf = io.BytesIO()
    w = ZddsrecWriter(buf, header)
    for i in range(30):
        w.write_frame(
            2_000_000 + i * 100_000_000, i % 2, 0 if i % 3 else 1, SampleKind.ALIVE, b"\x00\x01\x00\x00xx"
        )
    w.write_frame(5_000_000_000, 1, 1, SampleKind.NOT_ALIVE_DISPOSED, b"")
    w.write_frame(5_000_000_000, 1, 1, SampleKind.NOT_ALIVE_UNREGISTERED, b"")
    data = buf.getvalue()
    path.write_bytes(data + (b"F\x00\x00" if torn else b""))


def test_info_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "c.zddsrec"
    capture(f, torn=True)
    assert main(["zddsrec", "info", str(f), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["frames"] == 32
    assert [(t["name"], t["type_name"], t["frames"]) for t in s["topics"]] == [
        ("rt/a", "A", 20),
        ("rt/b", "B", 12),
        ("rt/none", "N", 0),
    ]
    assert (
        s["topics"][1]["disposed"] == 1
        and s["topics"][1]["unregistered"] == 1
        and s["topics"][1]["alive"] == 10
    )
    assert [p["frames"] for p in s["participants"]] == [15, 17]
    assert s["participants"][1]["guid"] == "ab" * 16
    assert s["span_s"] == pytest.approx(4.998)
    assert s["torn_tail"] == {"offset": f.stat().st_size - 3, "size": 3}


def test_info_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "c.zddsrec"
    capture(f)
    assert main(["zddsrec", "info", str(f)]) == 0
    out = capsys.readouterr().out
    assert "time base:    2023-11-14T22:13:20.000000000Z" in out
    assert "time span:    4.998 s" in out
    assert "[1] rt/b  (B)  frames 12  [alive 10, disposed 1, unregistered 1]" in out
    assert "torn tail" not in out


def test_info_on_garbage_is_one_error_line(tmp_path: Path) -> None:
    f = tmp_path / "x.zddsrec"
    f.write_bytes(b"ZDDS" + b"\x02\x00\x00\x00" + bytes(20))
    r = subprocess.run(
        [sys.executable, "-m", "wrtfd", "zddsrec", "info", str(f)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1
    assert r.stderr.startswith("wrtfd: error: ") and "unsupported .zddsrec version 2" in r.stderr
