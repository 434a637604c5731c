"""``wrtfd import --config`` with a circuit records GNSS lap channels and the circuit itself;
``wrtfd laps`` re-times from it without options; ``wrtfd circuit from-recording`` lays a line
where a recorded lap began; ``check``/``list`` describe circuits; errors are one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.tracks.test_gnss_real_logs import kart_log
from wrtfd.cli.main import main
from wrtfd.format import Reader
from wrtfd.tracks.analysis import recorded_session_laps
from wrtfd.tracks.circuit import distance_m, load_circuit


@pytest.fixture
def kart(shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, dict]:
    log, expected = kart_log(shared_data, tmp_path)
    a, b = expected["start_finish_line"]
    (tmp_path / "okc.json").write_text(
        json.dumps(
            {
                "format": "wrtfd-circuit",
                "name": "OKC",
                "direction": "either",
                "start_finish": {"a": a, "b": b},
            }
        )
    )
    config = tmp_path / "gps.toml"
    config.write_text(
        '[[sources]]\nkind = "serial"\nname = "gps"\nprotocol = "nmea"\ndevice = "/dev/null"\n'
        'circuit = "okc.json"\n'
    )
    out = tmp_path / "kart.wrtf"
    assert main(["import", str(log), "--config", str(config), "-o", str(out)]) == 0
    capsys.readouterr()
    return out, expected


def laps_json(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> list[dict]:
    assert main(["laps", str(path), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)["sessions"][0]["laps"]


def test_recorded_channels_and_metadata(kart: tuple[Path, dict], capsys: pytest.CaptureFixture[str]) -> None:
    out, expected = kart
    laps = laps_json(out, capsys)  # the circuit comes from the file's metadata
    assert [lap["lap"] for lap in laps] == [1, 2]
    for got, want in zip(laps, expected["laps"], strict=True):
        assert abs(got["time_s"] - want["racechrono_s"]) < 0.1
    with Reader(out) as r:
        assert r.metadata["Circuit"] == "OKC"
        frames = r.frames(0)
        times = (r.frame_times_us(0) - r.sessions[0].time_base_us) / 1e6
        recorded = recorded_session_laps(frames, times)
        lap_distance = np.asarray(frames["laps"]["lap_distance"])
    # what the recorder's plug-in wrote (the live, forward-only filter) is the re-timing's laps;
    # `wrtfd laps` smooths the fixes both ways (docs/circuits.md), which moves a lap of this real
    # 14 Hz log by about 10 ms, as in tests/e2e/test_gnss_kart_live.py
    assert [lap.number for lap in recorded.laps] == [1, 2]
    for live, again in zip(recorded.laps, laps, strict=True):
        assert abs(live.time_s - again["time_s"]) < 0.05
    # lap distance: about a kilometre of kart track, reset at the line
    assert 900.0 < lap_distance.max() < 1300.0


def test_from_recording_at_a_lap_start(
    kart: tuple[Path, dict], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, expected = kart
    made = tmp_path / "made.json"
    assert main(["circuit", "from-recording", str(out), "--lap", "2", "-o", str(made), "--name", "Kart"]) == 0
    assert "line at the start of lap 2" in capsys.readouterr().out
    circuit = load_circuit(made)
    a, b = expected["start_finish_line"]
    official_middle = ((a[0] + b[0]) / 2, (a[1] + b[1]) / 2)
    # on the official line, within the kart's path between two fixes (~1 m) plus its lateral offset
    assert distance_m(circuit.centre, official_middle) < 12.0
    assert distance_m(circuit.start.a, circuit.start.b) == pytest.approx(30.0, abs=0.01)
    laps = laps_json(out, capsys, "--circuit", str(made))
    assert [lap["lap"] for lap in laps] == [1, 2]
    for got, want in zip(laps, expected["laps"], strict=True):
        assert abs(got["time_s"] - want["racechrono_s"]) < 0.1


def test_from_recording_without_laps_uses_the_first_fix(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log, _ = kart_log(shared_data, tmp_path)
    out = tmp_path / "plain.wrtf"
    assert main(["import", str(log), "-o", str(out)]) == 0
    made = tmp_path / "first.json"
    capsys.readouterr()
    assert main(["circuit", "from-recording", str(out), "-o", str(made)]) == 0
    assert "line at the first fix" in capsys.readouterr().out
    with Reader(out) as r:
        gps = r.frames(0)["gps"]
        ok = np.isfinite(gps["lat_deg"])
        first = (float(gps["lat_deg"][ok][0]), float(gps["lon_deg"][ok][0]))
    assert distance_m(load_circuit(made).centre, first) < 0.01
    assert main(["circuit", "from-recording", str(out), "-o", str(made)]) == 2  # exists
    assert main(["circuit", "from-recording", str(out), "--lap", "3", "-o", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == f"wrtfd: error: {made}: exists (--force to overwrite)"
    assert err[1] == f"wrtfd: error: {out}: no lap channels; without --lap the line goes at the first fix"
    # the kart is near no shipped circuit: `laps` says what to give
    assert main(["laps", str(out)]) == 2
    assert capsys.readouterr().err == (
        "wrtfd: error: this GNSS recording has no lap channels and no known circuit near its first fix;"
        " give --circuit FILE (docs/circuits.md)\n"
    )


def test_check_and_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = Path(__file__).resolve().parents[2]
    assert main(["circuit", "check", str(repo / "config" / "tracks" / "road.trk")]) == 0
    assert (
        "'Hillside road course': start/finish at 44.900000, 2.500000, 2 sector line(s)"
        in capsys.readouterr().out
    )
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "wrtfd-circuit", "name": "X", "start_finish": {"a": [1, 2]}}')
    assert main(["circuit", "check", str(bad)]) == 2
    assert (
        capsys.readouterr().err
        == f'wrtfd: error: {bad}: start_finish: a line needs both end points "a" and "b"\n'
    )
    assert main(["circuit", "list", "--circuits", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert captured.out.count("wrtfd/circuits/") == 21 and "'Road America'" in captured.out
    assert f"skipped {bad}: start_finish" in captured.err
