"""GPX and VBO exports: GPX read back with ElementTree (GPX 1.1's own elements), and a
recording without GNSS refused in one line."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.vbo.road_america import imported_road_america
from wrtfd.cli.main import main
from wrtfd.format import Reader


@pytest.fixture(scope="module")
def imported(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return imported_road_america(shared_data, tmp_path_factory)


def test_gpx_export_holds_every_fix(imported: Path, tmp_path: Path) -> None:
    gpx = tmp_path / "run.gpx"
    assert main(["export", str(imported), "-o", str(gpx)]) == 0
    ns = {"g": "http://www.topografix.com/GPX/1/1"}
    root = ET.parse(gpx).getroot()
    points = root.findall(".//g:trkpt", ns)
    with Reader(imported) as r:
        frames = r.frames(0)
        assert len(points) == len(frames)
        first = points[0]
        assert float(first.attrib["lat"]) == pytest.approx(float(frames["vbox"]["lat_deg"][0]), abs=1e-9)
        assert float(first.attrib["lon"]) == pytest.approx(float(frames["vbox"]["lon_deg"][0]), abs=1e-9)
        assert first.find("g:time", ns) is not None
        ele = first.find("g:ele", ns)
        assert ele is not None and float(ele.text or "nan") == pytest.approx(
            float(frames["vbox"]["alt_msl_m"][0])
        )
    # one segment: the single dropped tick (0.04 s) is no gap
    assert len(root.findall(".//g:trkseg", ns)) == 1


def test_export_without_gnss_is_one_clear_error(
    forza_road: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = forza_road
    for suffix in ("vbo", "gpx"):
        code = main(["export", str(src), "-o", str(tmp_path / f"x.{suffix}")])
        err = capsys.readouterr().err.strip().splitlines()
        assert code != 0
        assert len(err) == 1 and "GNSS" in err[0] and "Traceback" not in err[0]
        assert not (tmp_path / f"x.{suffix}").exists()
