"""GNSS laps from real circuit logs equal the logger's (or reference timer's) own lap times.

The kart's NMEA (Orlando Kart Center, about 17 Hz) goes through ``wrtfd import`` then
``wrtfd laps --circuit``; the Road America VBOX file's ``[data]`` is parsed here (minutes,
longitude positive west) and timed at its ``[laptiming]`` gate.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from wrtfd.cli.main import main
from wrtfd.tracks.circuit import Circuit, line_across
from wrtfd.tracks.geodesy import LocalPlane
from wrtfd.tracks.gnsslaps import timer_for

KART = "trackday/nmea/DovesLapTimer__gps_race_data_praga_laps.h"
VBO = "trackday/vbo/vbo-parser__25IR05_RdAm_FP1_Run04_KO.vbo"


def kart_log(shared_data: Path, tmp_path: Path) -> tuple[Path, dict]:
    source = (shared_data / KART).read_text()
    sentences = re.findall(r'"(\$[^"]*)"', source.split("gps_logs[] = {", 1)[1])
    assert len(sentences) > 1500
    log = tmp_path / "kart.nmea"
    log.write_text("\r\n".join(sentences) + "\r\n")
    expected = json.loads((shared_data / f"{KART}.expected_laps.json").read_text())
    return log, expected


def test_kart_nmea_laps_through_import(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log, expected = kart_log(shared_data, tmp_path)
    a, b = expected["start_finish_line"]
    circuit = tmp_path / "okc.json"
    # the json gives the line's two ends, not which way the kart crossed it: "either"
    circuit.write_text(
        json.dumps(
            {
                "format": "wrtfd-circuit",
                "name": "Orlando Kart Center",
                "direction": "either",
                "start_finish": {"a": a, "b": b},
            }
        )
    )
    out = tmp_path / "kart.wrtf"
    assert main(["import", str(log), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["laps", str(out), "--circuit", str(circuit), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    laps = report["sessions"][0]["laps"]
    assert [lap["lap"] for lap in laps] == [1, 2]
    for got, want in zip(laps, expected["laps"], strict=True):
        assert abs(got["time_s"] - want["racechrono_s"]) < 0.1
        assert abs(got["time_s"] - want["doveslaptimer_linear_s"]) < 0.1
    best = min(lap["time_s"] for lap in laps)
    assert [lap["delta_s"] for lap in laps] == [round(lap["time_s"] - best, 3) for lap in laps]
    assert report["circuit"] == "Orlando Kart Center"


def read_vbo(path: Path) -> tuple[dict[str, np.ndarray], list[float]]:
    section = ""
    columns: list[str] = []
    rows: list[list[str]] = []
    gate: list[float] = []
    for line in path.read_text(encoding="latin-1").splitlines():
        if line.startswith("["):
            section = line.strip()
        elif section == "[laptiming]" and line.startswith("Start"):
            gate = [float(v) for v in line.split()[1:5]]
        elif section == "[column names]" and line.strip():
            columns = line.split()
        elif section == "[data]" and line.strip():
            rows.append(line.split())
    col = {c: i for i, c in enumerate(columns)}

    def seconds(hhmmss: str) -> float:
        return int(hhmmss[:2]) * 3600 + int(hhmmss[2:4]) * 60 + float(hhmmss[4:])

    data = {
        "t": np.array([seconds(r[col["time"]]) for r in rows]),
        "lat": np.array([float(r[col["lat"]]) / 60.0 for r in rows]),
        "lon": np.array([-float(r[col["long"]]) / 60.0 for r in rows]),  # minutes, west positive
        "v": np.array([float(r[col["velocity"]]) / 3.6 for r in rows]),
        "heading": np.radians([float(r[col["heading"]]) for r in rows]),
    }
    return data, gate


def test_road_america_vbo_flying_lap(shared_data: Path) -> None:
    data, gate = read_vbo(shared_data / VBO)
    # [laptiming] Start: lon, lat of two points 4.8 m apart ALONG the straight (minutes, west
    # positive): the gate is across the track at the first point; the car drives from the
    # second towards the first (its heading there is about 176 degrees: south).
    p1 = (gate[1] / 60.0, -gate[0] / 60.0)
    p2 = (gate[3] / 60.0, -gate[2] / 60.0)
    plane = LocalPlane(*p1)
    x2, y2 = plane.to_xy(*p2)
    assert 4.0 < math.hypot(x2, y2) < 6.0 and abs(x2) < 0.5  # along the north-south straight
    near = np.argmin(np.hypot(*plane.to_xy(data["lat"], data["lon"])))
    assert abs(math.degrees(data["heading"][near]) - 180.0) < 15.0
    line = line_across(plane, 0.0, 0.0, -x2, -y2, 30.0)
    timer, tplane = timer_for(Circuit("Road America", line))
    xs, ys = tplane.to_xy(data["lat"], data["lon"])
    for i in range(len(xs)):
        v, h = data["v"][i], data["heading"][i]
        timer.update(float(data["t"][i]), float(xs[i]), float(ys[i]), v * math.sin(h), v * math.cos(h))
    expected = json.loads((shared_data / f"{VBO}.expected_laps.json").read_text())
    flying = expected["complete_laps"][0]["time_s"]
    assert abs(timer.laps[0].time_s - flying) < 0.1
    assert abs(timer.laps[0].time_s - 114.96) < 0.02  # the json's own GPS-gate figure
    # the first crossing is the Lap_Number 1 -> 2 transition less the CAN latency (~0.25 s)
    t_switch = 19 * 3600 + 45 * 60 + 48.92
    assert 0.15 < t_switch - timer.laps[0].start_s < 0.35


def test_road_america_from_the_shipped_library(shared_data: Path) -> None:
    """The library's Road America line (made from racetrackdb's box and outline, not from the
    VBOX file) times the same flying lap."""
    from wrtfd.tracks.circuit import shipped_circuits

    data, _ = read_vbo(shared_data / VBO)
    circuit = next(c for c in shipped_circuits() if c.name == "Road America")
    timer, plane = timer_for(circuit)
    xs, ys = plane.to_xy(data["lat"], data["lon"])
    for i in range(len(xs)):
        v, h = data["v"][i], data["heading"][i]
        timer.update(float(data["t"][i]), float(xs[i]), float(ys[i]), v * math.sin(h), v * math.cos(h))
    assert abs(timer.laps[0].time_s - 114.96) < 0.05
