"""VBO import and export: the real Road America log against its lines decoded here by hand
(minutes, west-positive longitude, km/h), and export -> import giving the same file."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from tests.vbo.road_america import ROAD_AMERICA, imported_road_america
from wrtfd.cli.main import main
from wrtfd.format import Reader


@pytest.fixture(scope="module")
def imported(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return imported_road_america(shared_data, tmp_path_factory)


def _data_lines(path: Path) -> tuple[list[str], list[list[str]]]:
    raw = path.read_bytes().decode("utf-8")
    head, data = raw.split("[data]\r\n")
    columns = head.split("[column names]\r\n")[1].split("\r\n")[0].split()
    return columns, [line.split() for line in data.split("\r\n") if line.strip()]


def test_real_log_imports_with_every_sample_on_its_own_tick(shared_data: Path, imported: Path) -> None:
    columns, lines = _data_lines(shared_data / ROAD_AMERICA)
    col = {name: i for i, name in enumerate(columns)}
    with Reader(imported) as r:
        assert r.rate_hz == 25
        frames = r.frames(0)
        assert len(frames) == len(lines) == 10401
        v = frames["vbox"]
        lat = np.array([float(x[col["lat"]]) / 60 for x in lines])
        lon = np.array([-float(x[col["long"]]) / 60 for x in lines])
        kmh = np.array([float(x[col["velocity"]]) for x in lines])
        rpm = np.array([float(x[col["Engine_Speed"]]) for x in lines])
        assert np.array_equal(v["lat_deg"], lat)
        assert np.array_equal(v["lon_deg"], lon)
        assert np.allclose(v["speed_mps"], kmh / 3.6, rtol=0, atol=1e-12)
        assert np.array_equal(v["Engine_Speed"], rpm)
        # times: the 0.081 s step in the log is the one dropped tick
        hhmmss = np.array([float(x[col["time"]]) for x in lines])
        secs = (hhmmss // 10000) * 3600 + (hhmmss // 100 % 100) * 60 + hhmmss % 100
        ticks = frames["tick"].astype(np.int64)
        assert np.array_equal(ticks - ticks[0], np.round((secs - secs[0]) * 25).astype(np.int64))
        assert r.metadata["vbo.laptiming"].startswith("Start")


def test_export_then_import_gives_the_same_frames(imported: Path, tmp_path: Path) -> None:
    vbo = tmp_path / "again.vbo"
    assert main(["export", str(imported), "-o", str(vbo)]) == 0
    text = vbo.read_bytes().decode("utf-8")
    assert re.match(r"File created on \d\d/\d\d/\d{4} @ \d\d:\d\d:\d\d\r\n\r\n\[header\]\r\n", text)
    # Racelogic's order and standard columns, longitude in minutes west-positive
    order = [m.group(1) for m in re.finditer(r"^\[([a-z ]+)\]\r$", text, re.M)]
    assert order == ["header", "channel units", "comments", "laptiming", "column names", "data"]
    columns, lines = _data_lines(vbo)
    assert columns[:8] == ["sats", "time", "lat", "long", "velocity", "heading", "height", "vert-vel"]
    assert float(lines[0][3]) == pytest.approx(87.99 * 60, abs=1.0)
    header = text.split("[header]\r\n")[1].split("\r\n\r\n")[0].split("\r\n")
    units = text.split("[channel units]\r\n")[1].split("\r\n\r\n")[0].split("\r\n")
    assert len(header) == len(columns) and len(units) == len(columns) - 8
    again = tmp_path / "again.wrtf"
    assert main(["import", str(vbo), "-o", str(again)]) == 0
    with Reader(imported) as a, Reader(again) as b:
        assert a.start_timestamp_us == b.start_timestamp_us
        fa, fb = a.frames(0), b.frames(0)
        assert np.array_equal(fa["tick"], fb["tick"])
        names = fa.dtype["vbox"].names or ()
        assert names == fb.dtype["vbox"].names
        for name in names:
            assert np.array_equal(fa["vbox"][name], fb["vbox"][name]), name
        assert a.metadata["vbo.laptiming"] == b.metadata["vbo.laptiming"]


def test_a_file_that_is_not_vbo_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.vbo"
    bad.write_bytes(b"File created on 01/08/2025 @ 14:43:32\r\n\r\n[header]\r\ntime\r\n")
    code = main(["import", str(bad), "-o", str(tmp_path / "out.wrtf")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and "no [data] section" in err[0]
    assert not (tmp_path / "out.wrtf").exists()
