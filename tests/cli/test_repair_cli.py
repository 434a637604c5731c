"""``wrtfd repair``: in place or -o OUT, with a report of what it did (N11)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.format.samples import write_car_file
from wrtfd.cli.main import main
from wrtfd.format import Reader, validate_file


def test_repair_in_place(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "a.wrtf"
    schema = write_car_file(f, frames=6)
    data = f.read_bytes()
    with Reader(f) as r:
        last = r.sessions[1]
    cut = last.frames_offset + 4 * schema.frame_size + 10  # 4 whole frames + a torn one
    f.write_bytes(data[:cut])
    assert main(["repair", str(f)]) == 0
    out = capsys.readouterr().out
    assert "kept 10 frames in 2 sessions" in out
    assert "wrote 1 session footer(s) and a document footer" in out
    assert f"dropped 10 bytes at offset {cut - 10}" in out
    assert validate_file(f) == []
    with Reader(f) as r:
        assert r.complete and [s.frame_count for s in r.sessions] == [6, 4]


def test_repair_to_output_keeps_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "a.wrtf"
    write_car_file(f)
    data = f.read_bytes()[:-72]  # the document footer (2 sessions: 24 + 2*24 bytes, N3)
    f.write_bytes(data)
    o = tmp_path / "o.wrtf"
    assert main(["repair", str(f), "-o", str(o)]) == 0
    assert "wrote 0 session footer(s) and a document footer" in capsys.readouterr().out
    assert f.read_bytes() == data
    assert validate_file(o) == []


def test_repair_complete_file_does_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "a.wrtf"
    write_car_file(f)
    before = f.read_bytes()
    assert main(["repair", str(f)]) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert f.read_bytes() == before


def test_repair_unreadable_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "a.wrtf"
    write_car_file(f)
    f.write_bytes(f.read_bytes()[:50])  # inside the metadata: nothing to anchor on
    assert main(["repair", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("wrtfd: error:") and err.count("\n") == 1
