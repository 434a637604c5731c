"""``wrtfd validate``: exit 0 valid, 1 findings (one per line, with offsets), 2 unreadable."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.format.samples import write_car_file, write_definition
from wrtfd.cli.main import main


def test_valid_file_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "a.wrtf"
    write_car_file(f)
    assert main(["validate", str(f)]) == 0
    assert capsys.readouterr().out.strip().endswith("valid")


def test_findings_exit_1_one_per_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "a.wrtf"
    write_car_file(f)
    data = bytearray(f.read_bytes())
    data[36] = 7  # reserved field
    f.write_bytes(bytes(data[:-30]))  # and no document footer
    assert main(["validate", str(f)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert any("offset 36:" in line and "[reserved]" in line for line in lines)
    assert any("[incomplete]" in line for line in lines)
    assert all(line.startswith(f"{f}: offset ") for line in lines)


def test_missing_required_schema_key_is_a_finding(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """N12: `wrtf.schema` is required; --schema lets the rest be checked."""
    f = tmp_path / "bare.wrtf"
    write_car_file(f, embed_schema=False)
    d = write_definition(tmp_path / "d.yaml")
    assert main(["validate", str(f), "--schema", str(d)]) == 1
    out = capsys.readouterr().out
    assert "[metadata-required]" in out and out.count("\n") == 1


def test_unreadable_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tmp_path / "missing.wrtf")]) == 2
    assert capsys.readouterr().err.startswith("wrtfd: error:")
    bad_def = tmp_path / "bad.yaml"
    bad_def.write_text("version: '1.0'\nframe: {}\n")
    f = tmp_path / "a.wrtf"
    write_car_file(f)
    assert main(["validate", str(f), "--schema", str(bad_def)]) == 2
    assert "session: missing" in capsys.readouterr().err
