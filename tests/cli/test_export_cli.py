"""``wrtfd export``: CSV and Parquet with flattened column names."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

from tests.format.conftest import START_US
from tests.format.samples import write_car_file
from wrtfd.cli.main import main


def test_export_csv(tmp_path: Path) -> None:
    f = tmp_path / "a.wrtf"
    write_car_file(f)
    out = tmp_path / "a.csv"
    assert main(["export", str(f), "-o", str(out)]) == 0
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert len(rows) == 10
    assert list(rows[0])[:5] == ["session", "tick", "time_us", "speed", "gear"]
    assert "wheels_0_temperature" in rows[0] and "wheels_3_pressure" in rows[0]
    r1 = rows[1]
    assert (r1["session"], r1["tick"], r1["time_us"]) == ("0", "2", str(START_US + 40_000))
    assert float(rows[0]["speed"]) == pytest.approx(0.1)
    assert rows[0]["state"] == "pits" and rows[2]["state"] == "7"
    assert rows[0]["driver"] == "Ayrton"
    assert float(rows[0]["wheels_2_temperature"]) == 82.25
    assert rows[5]["session"] == "1" and rows[5]["time_us"] == str(START_US + 1_000_000)


def test_export_parquet(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    f = tmp_path / "a.wrtf"
    write_car_file(f)
    out = tmp_path / "a.parquet"
    assert main(["export", str(f), "-o", str(out)]) == 0
    t = pq.read_table(out)
    assert t.num_rows == 10
    assert t.column("wheels_1_temperature").to_pylist()[0] == 81.25
    assert t.column("state").to_pylist()[:3] == ["pits", "racing", "7"]
    assert str(t.schema.field("speed").type) == "float"
    assert t.column("on_track").to_pylist()[:2] == [True, False]


def test_export_unknown_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "a.wrtf"
    write_car_file(f)
    assert main(["export", str(f), "-o", str(tmp_path / "a.xlsx")]) == 2
    assert "unknown export format" in capsys.readouterr().err


def test_without_pyarrow(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parquet says what to install; CSV falls back to the standard library with the same columns."""
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # makes `import pyarrow` fail
    f = tmp_path / "a.wrtf"
    write_car_file(f)
    assert main(["export", str(f), "-o", str(tmp_path / "a.parquet")]) == 2
    assert "install wrtfd[parquet]" in capsys.readouterr().err
    out = tmp_path / "a.csv"
    assert main(["export", str(f), "-o", str(out)]) == 0
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert len(rows) == 10 and rows[0]["state"] == "pits" and rows[0]["driver"] == "Ayrton"
    assert float(rows[0]["wheels_2_temperature"]) == 82.25 and rows[1]["on_track"] == "false"


def test_export_one_session(tmp_path: Path) -> None:
    f = tmp_path / "a.wrtf"
    write_car_file(f)
    out = tmp_path / "a.csv"
    assert main(["export", str(f), "-o", str(out), "--session", "1"]) == 0
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert len(rows) == 5 and {r["session"] for r in rows} == {"1"}
