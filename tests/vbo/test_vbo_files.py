"""VBO files read and written, against the bytes of a real VBOX log read here by plain string
splitting (the layout as Racelogic describes it), and a writer -> reader round trip."""

from __future__ import annotations

import io
import math
import tempfile
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.vbo.road_america import ROAD_AMERICA
from wrtfd.errors import ImportFormatError
from wrtfd.vbo.reader import VboChannel, VboGate, hhmmss_to_seconds, looks_like_vbo, read_vbo
from wrtfd.vbo.writer import format_gate, write_vbo


def _sections(raw: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    name = ""
    for line in raw.split("\r\n"):
        if line.startswith("[") and line.endswith("]"):
            name = line[1:-1]
            out[name] = []
        elif name:
            out[name].append(line)
    return out


@pytest.fixture(scope="module")
def road_america(shared_data: Path) -> Path:
    return shared_data / ROAD_AMERICA


def test_real_log_values_equal_the_lines_split_by_hand(road_america: Path) -> None:
    raw = road_america.read_bytes().decode("utf-8")
    sec = _sections(raw)
    columns = sec["column names"][0].split()
    lines = [line.split() for line in sec["data"] if line.strip()]
    vbo = read_vbo(road_america)
    assert [c.column for c in vbo.channels] == columns
    assert [c.title for c in vbo.channels] == [t for t in sec["header"] if t]
    assert vbo.rows == len(lines) == 10401
    assert not vbo.dropped
    for j, name in enumerate(columns):
        expect = np.array([float(line[j]) for line in lines])
        assert np.array_equal(vbo.values[name], expect), name
    assert vbo.created == datetime(2025, 8, 1, 14, 43, 32)


def test_real_log_units_belong_to_the_last_channels(road_america: Path) -> None:
    vbo = read_vbo(road_america)
    units = {c.column: c.unit for c in vbo.channels}
    assert units["Engine_Speed"] == "RPM"
    assert units["Ambient_Temperature"] == "°C"
    assert units["Brake_Pressure_Front"] == "bar"
    assert units["Throttle_Pedal"] == "%"
    assert units["avitime"] == "s"
    assert units["sats"] == units["lat"] == units["Gear"] == ""


def test_real_gate_is_a_point_and_the_point_behind_it(road_america: Path) -> None:
    """The [laptiming] convention, checked against the file: the second point lies a few metres
    behind the first along the driving direction (the car's heading at each crossing)."""
    vbo = read_vbo(road_america)
    (gate,) = vbo.gates
    assert (gate.kind, gate.name) == ("Start", "Start / Finish")
    # the line's own numbers: longitude first, minutes, west positive
    assert gate.lon_deg == pytest.approx(-5279.378270 / 60, abs=1e-12)
    assert gate.lat_deg == pytest.approx(2627.874410 / 60, abs=1e-12)
    north_m = (gate.lat_deg - gate.behind_lat_deg) * 111_000
    east_m = (gate.lon_deg - gate.behind_lon_deg) * 111_000 * math.cos(math.radians(gate.lat_deg))
    assert 3.0 < math.hypot(north_m, east_m) < 10.0
    gate_dir = math.degrees(math.atan2(east_m, north_m)) % 360  # behind -> gate
    lat = vbo.values["lat"] / 60
    lon = -vbo.values["long"] / 60
    dist = np.hypot((lat - gate.lat_deg) * 111_000, (lon - gate.lon_deg) * 80_000)
    near = np.flatnonzero((dist[1:-1] < dist[:-2]) & (dist[1:-1] <= dist[2:]) & (dist[1:-1] < 15)) + 1
    assert len(near) >= 2  # the out-lap's and the flying lap's crossings
    for i in near:
        heading = float(vbo.values["heading"][i])
        assert abs((heading - gate_dir + 180) % 360 - 180) < 15


def test_times_of_day_unwrap_past_midnight() -> None:
    t = hhmmss_to_seconds(np.array([235959.96, 0.0, 0.04, 10203.5]))
    assert t.tolist() == pytest.approx([86399.96, 86400.0, 86400.04, 86400 + 3723.5])
    with pytest.raises(ValueError, match="HHMMSS"):
        hhmmss_to_seconds(np.array([126000.0]))


def _columns(n: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "sats": rng.integers(4, 30, n).astype(np.float64),
        "time": 3600.0 * 19 + np.arange(n) * 0.04,
        "lat": 43.79 + rng.random(n) * 0.01,
        "long": -87.99 + rng.random(n) * 0.01,
        "velocity": rng.random(n) * 250,
        "heading": rng.random(n) * 360,
        "height": rng.random(n) * 400 - 10,
        "vert-vel": rng.random(n) * 4 - 2,
        "RPM_x": rng.random(n) * 9000,
    }


@settings(max_examples=25)
@given(n=st.integers(1, 300), seed=st.integers(0, 2**32 - 1))
def test_written_file_reads_back(n: int, seed: int) -> None:
    cols = _columns(n, seed)
    gate = VboGate("Start", "S/F", 43.7979, -87.9896, 43.79795, -87.98964)
    buf = io.StringIO(newline="")
    custom = [VboChannel("RPM_x", "RPM_x", "RPM")]
    assert (
        write_vbo(buf, created=datetime(2025, 8, 1, 19, 0, 0), columns=cols, custom=custom, gates=[gate]) == n
    )
    text = buf.getvalue()
    assert text.startswith("File created on 01/08/2025 @ 19:00:00\r\n")
    assert "\n" not in text.replace("\r\n", "")  # every line ends CRLF
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "x.vbo"
        p.write_text(text, encoding="utf-8", newline="")
        back = read_vbo(p)
    assert [c.column for c in back.channels] == list(cols)
    assert back.channels[-1].unit == "RPM"
    np.testing.assert_allclose(back.values["lat"] / 60, cols["lat"], atol=1e-9)
    np.testing.assert_allclose(-back.values["long"] / 60, cols["long"], atol=1e-9)
    np.testing.assert_allclose(hhmmss_to_seconds(back.values["time"]), cols["time"], atol=6e-4)
    np.testing.assert_allclose(back.values["velocity"], cols["velocity"], atol=6e-4)
    np.testing.assert_allclose(back.values["RPM_x"], cols["RPM_x"], rtol=1e-6)
    (g,) = back.gates
    assert g.name == "S/F"
    assert (g.lat_deg, g.lon_deg) == pytest.approx((gate.lat_deg, gate.lon_deg), abs=1e-7)
    assert format_gate(g) == format_gate(gate)


@settings(max_examples=50)
@given(junk=st.lists(st.text(max_size=80), max_size=20))
def test_bad_data_lines_are_counted_never_raised(
    junk: list[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    good = "012 194333.680 +2627.79783600 +5279.38692000"
    body = "\r\n".join([good, *(j.replace("\r", " ").replace("\n", " ") for j in junk), good])
    text = (
        "File created on 01/08/2025 @ 14:43:32\r\n\r\n[column names]\r\nsats time lat long\r\n\r\n[data]\r\n"
        + body
    )
    p = tmp_path_factory.mktemp("vbo") / "j.vbo"
    p.write_text(text, encoding="utf-8", newline="")
    vbo = read_vbo(p)
    assert vbo.rows >= 2
    assert vbo.rows + sum(vbo.dropped.values()) == vbo.lines_read


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("File created on 01/08/2025 @ 14:43:32\r\n[header]\r\ntime\r\n", "no \\[data\\]"),
        ("File created on 01/08/2025 @ 14:43:32\r\n[data]\r\n1 2\r\n", "no \\[column names\\]"),
        ("[header]\r\na\r\nb\r\n[column names]\r\na\r\n[data]\r\n1\r\n", "lists 2 channels"),
        ("[column names]\r\na a\r\n[data]\r\n1 2\r\n", "twice"),
        ("[column names]\r\na b\r\n[data]\r\n1\r\nx y\r\n", "no data line"),
        ("[laptiming]\r\nStart 1 2 3\r\n[column names]\r\na\r\n[data]\r\n1\r\n", "laptiming"),
    ],
)
def test_broken_files_give_one_clear_error(tmp_path: Path, text: str, message: str) -> None:
    p = tmp_path / "bad.vbo"
    p.write_text(text, encoding="utf-8", newline="")
    with pytest.raises(ImportFormatError, match=message):
        read_vbo(p)


def test_an_endless_line_is_cut_and_counted(tmp_path: Path) -> None:
    p = tmp_path / "long.vbo"
    p.write_bytes(b"[column names]\r\na\r\n[data]\r\n1\r\n" + b"9" * 200_000 + b"\r\n2\r\n")
    vbo = read_vbo(p)
    assert vbo.values["a"].tolist() == [1.0, 2.0]
    assert vbo.dropped["too_long"] == 1


def test_detection() -> None:
    assert looks_like_vbo(b"File created on 01/08/2025 @ 14:43:32\r\n\r\n[header]\r\n")
    assert looks_like_vbo(b"[header]\r\ntime\r\n[column names]\r\ntime\r\n")
    assert not looks_like_vbo(b"$GPRMC,123519,A,4807.038,N")
