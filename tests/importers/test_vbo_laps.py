"""VBO laps: the real Road America log's ``[laptiming]`` gate becomes the file's circuit and its
lap channels; a GNSS recording's circuit becomes ``[laptiming]`` gates on export, and export then
import gives the same channels and the same lap and sector times."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from tests.tracks.sim_recording import gnss_recording
from tests.vbo.road_america import ROAD_AMERICA, imported_road_america
from wrtfd.cli.main import main
from wrtfd.format import Reader
from wrtfd.tracks.circuit import recorded_circuit
from wrtfd.tracks.geodesy import LocalPlane


@pytest.fixture(scope="module")
def imported(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return imported_road_america(shared_data, tmp_path_factory)


def laps_json(path: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    capsys.readouterr()
    assert main(["laps", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _file_gate(shared_data: Path) -> list[float]:
    """The Start gate's four numbers as the file writes them (lon, lat minutes, west positive)."""
    text = (shared_data / ROAD_AMERICA).read_bytes().decode("utf-8")
    line = text.split("[laptiming]\r\n")[1].split("\r\n")[0]
    assert line.startswith("Start")
    return [float(v) for v in line.split()[1:5]]


def test_road_america_imports_with_its_gate_and_its_flying_lap(
    shared_data: Path, imported: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lon1, lat1, lon2, lat2 = _file_gate(shared_data)
    gate = (lat1 / 60.0, -lon1 / 60.0)
    behind = (lat2 / 60.0, -lon2 / 60.0)
    with Reader(imported) as r:
        circuit = recorded_circuit(r.metadata, "ra")
        assert circuit is not None and r.metadata["Circuit"] == circuit.name
        frames = r.frames(0)
        lap_numbers = frames["laps"]["lap_number"]
    # the line runs through the gate's point, across the direction behind -> point, 30 m wide
    plane = LocalPlane(*gate)
    ax, ay = plane.to_xy(*circuit.start.a)
    bx, by = plane.to_xy(*circuit.start.b)
    hx, hy = (-v for v in plane.to_xy(*behind))
    assert math.hypot((ax + bx) / 2, (ay + by) / 2) < 0.001
    assert math.hypot(bx - ax, by - ay) == pytest.approx(30.0, abs=0.001)
    assert abs((bx - ax) * hx + (by - ay) * hy) < 1e-6 * math.hypot(hx, hy) * 30.0
    # "right": a -> b turned right is the driving direction
    assert (by - ay) * hx - (bx - ax) * hy > 0
    # the lap channels: the out-lap 0 until the first crossing, then 1, 2, 3
    assert np.unique(lap_numbers).tolist() == [0, 1, 2, 3]
    assert np.all(np.diff(lap_numbers.astype(np.int64)) >= 0)
    report = laps_json(imported, capsys)
    expected = json.loads((shared_data / f"{ROAD_AMERICA}.expected_laps.json").read_text())
    flying = report["sessions"][0]["laps"][0]
    assert report["circuit"] == circuit.name
    assert abs(flying["time_s"] - expected["complete_laps"][0]["time_s"]) < 0.1  # Lap_Number's 115.00
    assert abs(flying["time_s"] - 114.96) < 0.02  # the json's GPS-gate figure


def test_a_split_gate_makes_a_sector_line(shared_data: Path, tmp_path: Path) -> None:
    text = (shared_data / ROAD_AMERICA).read_bytes().decode("utf-8")
    start = text.split("[laptiming]\r\n")[1].split("\r\n")[0]
    split = start.replace("Start ", "Split ").replace("Start / Finish", "Split 1")
    edited = tmp_path / "split.vbo"
    edited.write_bytes(text.replace(start, start + "\r\n" + split + "\r\nFinish " + start[6:]).encode())
    out = tmp_path / "split.wrtf"
    assert main(["import", str(edited), "-o", str(out)]) == 0
    with Reader(out) as r:
        circuit = recorded_circuit(r.metadata, "split")
    assert circuit is not None and len(circuit.sectors) == 1
    assert circuit.sectors[0] == circuit.start  # the same gate: the same line


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, object]]]:
    return gnss_recording(tmp_path_factory.mktemp("sim"))


def _gates(vbo: Path) -> list[list[str]]:
    text = vbo.read_bytes().decode("utf-8")
    return [line.split() for line in text.split("[laptiming]\r\n")[1].split("\r\n\r\n")[0].split("\r\n")]


def test_export_writes_the_circuit_as_gates(
    recording: tuple[Path, list[dict[str, object]]], tmp_path: Path
) -> None:
    path, _ = recording
    vbo = tmp_path / "sim.vbo"
    assert main(["export", str(path), "-o", str(vbo)]) == 0
    with Reader(path) as r:
        # the recorder keeps the circuit's gates beside it; the export writes those lines
        laptiming = r.metadata["vbo.laptiming"].splitlines()
        circuit = recorded_circuit(r.metadata, "sim")
        gps = r.frames(0)["gps"]
    assert circuit is not None
    gates = _gates(vbo)
    assert [g[0] for g in gates] == ["Start"] + ["Split"] * len(circuit.sectors)
    assert [line.split() for line in laptiming] == [list(g) for g in gates]
    for gate, line in zip(gates, [circuit.start, *circuit.sectors], strict=True):
        lon1, lat1, lon2, lat2 = (float(v) for v in gate[1:5])
        point, behind = (lat1 / 60, -lon1 / 60), (lat2 / 60, -lon2 / 60)
        plane = LocalPlane(*line.middle)
        px, py = plane.to_xy(*point)
        assert math.hypot(px, py) < 0.01  # minutes to 6 decimals: about 2 mm
        bx, by = plane.to_xy(*behind)
        assert math.hypot(bx, by) == pytest.approx(5.0, abs=0.01)
        ax, ay = plane.to_xy(*line.a)
        assert abs(bx * ax + by * ay) < 0.002 * math.hypot(ax, ay)  # square across the line
        # behind: where the car comes from, by the receiver's own course at the nearest fix
        fx, fy = plane.to_xy(gps["lat_deg"], gps["lon_deg"])
        course = math.radians(float(gps["course_deg"][np.nanargmin(np.hypot(fx, fy))]))
        assert bx * math.sin(course) + by * math.cos(course) < -4.5


def test_export_then_import_gives_the_same_channels_and_laps(
    recording: tuple[Path, list[dict[str, object]]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, truth = recording
    vbo = tmp_path / "sim.vbo"
    again = tmp_path / "again.wrtf"
    assert main(["export", str(path), "-o", str(vbo)]) == 0
    assert main(["import", str(vbo), "-o", str(again)]) == 0
    first, second = laps_json(path, capsys), laps_json(again, capsys)
    a, b = first["sessions"][0]["laps"], second["sessions"][0]["laps"]
    assert [lap["lap"] for lap in a] == [lap["lap"] for lap in b] == [1, 2, 3]
    for x, y, t in zip(a, b, truth, strict=True):
        assert abs(x["time_s"] - y["time_s"]) < 0.001
        assert len(x["sectors_s"]) == len(y["sectors_s"]) == 3
        for s, u in zip(x["sectors_s"], y["sectors_s"], strict=True):
            assert abs(s - u) < 0.001
        assert abs(x["time_s"] - float(t["time_s"])) < 0.1  # type: ignore[arg-type]
    with Reader(path) as ra, Reader(again) as rb:
        fa, fb = ra.frames(0), rb.frames(0)
        assert len(fa) == len(fb)
        gps, vbox = fa["gps"], fb["vbox"]
        assert set(gps.dtype.names or ()) == set(vbox.dtype.names or ())
        for name in gps.dtype.names or ():
            # VBO has no "missing": a channel with no value yet is written 0 (docs/exports.md)
            want = np.nan_to_num(np.asarray(gps[name], dtype=np.float64), nan=0.0)
            got = np.asarray(vbox[name], dtype=np.float64)
            if name in ("speed_mps",):
                assert np.allclose(got, want, rtol=0, atol=0.0005 / 3.6), name  # km/h to 3 decimals
            elif name in ("lat_deg", "lon_deg"):
                assert np.allclose(got, want, rtol=0, atol=0.5e-8 / 60), name  # 8 decimals of a minute
            elif name in ("course_deg",):
                assert np.allclose(got, want % 360.0, rtol=0, atol=0.0005), name
            elif name in ("alt_msl_m",):
                assert np.allclose(got, want, rtol=0, atol=0.005), name
            else:
                assert np.array_equal(got, want), name
        # the lap channels are made again from the fixes, the same
        for name in ("lap_number", "sector"):
            assert np.array_equal(fa["laps"][name], fb["laps"][name]), name


def test_gates_that_make_no_circuit_are_a_note(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Split gate 6000 km from the Start (a hand-edited file): imported without laps, said once."""
    text = (shared_data / ROAD_AMERICA).read_bytes().decode("utf-8")
    start = text.split("[laptiming]\r\n")[1].split("\r\n")[0]
    far = "Split        +0.000000 +0.000000 +0.000000 +0.010000 ¬ far"
    edited = tmp_path / "far.vbo"
    edited.write_bytes(text.replace(start, start + "\r\n" + far).encode())
    out = tmp_path / "far.wrtf"
    capsys.readouterr()
    assert main(["import", str(edited), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.count("gates not used for laps") == 1 and "more than 50 km" in err
    with Reader(out) as r:
        assert "CircuitLines" not in r.metadata and "laps" not in (r.frames(0).dtype.names or ())
        assert r.metadata["vbo.laptiming"].count("\n") == 1  # both gates kept as written
