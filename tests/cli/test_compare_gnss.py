"""``wrtfd compare`` and ``wrtfd plot`` on GNSS laps: lap distance from the fixes, the map from
latitude/longitude. The recording is the simulated car's NMEA imported as the daemon records it
(tests/tracks/sim_recording.py); the car's own laps and ``wrtfd laps`` are the oracles."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.cli.test_compare_cmd import check_png
from tests.tracks.sim_recording import ROAD, gnss_recording
from wrtfd.cli.compare import LapRef, load_lap
from wrtfd.cli.main import main
from wrtfd.compare import time_delta
from wrtfd.tracks import LanePath, load_track


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, object]]]:
    return gnss_recording(tmp_path_factory.mktemp("gnss"))


def test_a_gnss_lap_against_itself_is_zero(recording: tuple[Path, list[dict[str, object]]]) -> None:
    path, _ = recording
    a = load_lap(LapRef(path, 2), None, None, "A")
    b = load_lap(LapRef(path, 2), None, None, "B")
    grid, delta = time_delta(a, b)
    assert grid[-1] > 1000.0 and np.array_equal(delta, np.zeros_like(delta))


def test_two_gnss_laps_end_at_their_lap_time_difference(
    recording: tuple[Path, list[dict[str, object]]], capsys: pytest.CaptureFixture[str]
) -> None:
    path, truth = recording
    capsys.readouterr()
    assert main(["laps", str(path), "--json"]) == 0
    listed = {lap["lap"]: lap["time_s"] for lap in json.loads(capsys.readouterr().out)["sessions"][0]["laps"]}
    a = load_lap(LapRef(path, 1), None, None, "A")
    b = load_lap(LapRef(path, 3), None, None, "B")
    for trace in (a, b):
        assert abs(trace.lap.time_s - listed[trace.lap.number]) < 0.001  # the same timing as wrtfd laps
        want = float(truth[trace.lap.number - 1]["time_s"])
        assert abs(trace.lap.time_s - want) < 0.1
        # lap distance from the fixes: the lane's length, give or take the car's line
        lane = LanePath(load_track(ROAD), 0).length_m
        assert abs(trace.length_m - lane) < 0.02 * lane
        assert np.all(np.diff(trace.distance_m) > 0) and np.all(np.diff(trace.time_s) > 0)
        # the map: metres east and south of the start/finish line's middle; the lap starts there
        assert np.hypot(trace.x[0], trace.z[0]) < 5.0
        assert np.ptp(trace.x) > 200.0 and np.ptp(trace.z) > 200.0
    assert a.lap.time_s != b.lap.time_s
    _, delta = time_delta(a, b)
    assert delta[0] == 0.0
    assert delta[-1] == pytest.approx(b.lap.time_s - a.lap.time_s, abs=1e-9)


def test_compare_and_plot_render_a_gnss_recording(
    recording: tuple[Path, list[dict[str, object]]], tmp_path: Path
) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.image as mpimg

    path, _ = recording
    cmp = tmp_path / "cmp.png"
    assert main(["compare", f"{path}:1", f"{path}:3", "-o", str(cmp), "--width", "1000"]) == 0
    check_png(cmp, 1000)
    out = tmp_path / "plot.png"
    assert main(["plot", str(path), "-o", str(out), "--width", "1200"]) == 0
    check_png(out, 1200)
    img = mpimg.imread(out)[..., :3]
    right = img[:, img.shape[1] * 2 // 3 :]  # the map panel: the fixes coloured by speed
    coloured = (right.max(axis=2) - right.min(axis=2)) > 0.3
    assert coloured.mean() > 0.01


def test_the_real_road_america_log_plots_and_compares(shared_data: Path, tmp_path: Path) -> None:
    """The imported Road America log (its gate circuit in the metadata), the map from the fixes."""
    pytest.importorskip("matplotlib")
    from tests.vbo.road_america import ROAD_AMERICA

    ra = tmp_path / "ra.wrtf"
    assert main(["import", str(shared_data / ROAD_AMERICA), "-o", str(ra)]) == 0
    out = tmp_path / "ra.png"
    assert main(["plot", str(ra), "-o", str(out), "--width", "1000"]) == 0
    check_png(out, 1000)
    cmp = tmp_path / "ra-cmp.png"
    assert main(["compare", f"{ra}:1", f"{ra}:1", "-o", str(cmp), "--width", "1000"]) == 0
    check_png(cmp, 1000)


def test_the_kart_log_with_a_circuit_file(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plain NMEA import (no lap channels, no circuit, none known near): ``--circuit`` times
    its laps for compare and plot; the delta ends at the difference of RaceChrono's lap times."""
    from tests.tracks.test_gnss_real_logs import kart_log
    from wrtfd.tracks.circuit import load_circuit

    log, expected = kart_log(shared_data, tmp_path)
    a, b = expected["start_finish_line"]
    okc = tmp_path / "okc.json"
    okc.write_text(
        json.dumps(
            {
                "format": "wrtfd-circuit",
                "name": "OKC",
                "direction": "either",
                "start_finish": {"a": a, "b": b},
            }
        )
    )
    kart = tmp_path / "kart.wrtf"
    assert main(["import", str(log), "--format", "nmea", "-o", str(kart)]) == 0
    out = tmp_path / "kart.png"
    capsys.readouterr()
    assert main(["plot", str(kart), "-o", str(out)]) == 2  # no lap channels, no circuit: one line
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "give --circuit" in err and not out.exists()
    assert main(["compare", f"{kart}:1", f"{kart}:2", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "give --circuit" in err and not out.exists()
    assert main(["plot", str(kart), "--circuit", str(okc), "-o", str(out), "--width", "1000"]) == 0
    check_png(out, 1000)
    circuit = load_circuit(okc)
    one = load_lap(LapRef(kart, 1), None, None, "A", circuit=circuit)
    two = load_lap(LapRef(kart, 2), None, None, "B", circuit=circuit)
    want = [lap["racechrono_s"] for lap in expected["laps"]]
    assert abs(one.lap.time_s - want[0]) < 0.1 and abs(two.lap.time_s - want[1]) < 0.1
    _, delta = time_delta(one, two)
    assert delta[-1] == pytest.approx(two.lap.time_s - one.lap.time_s, abs=1e-9)
    assert abs(delta[-1] - (want[1] - want[0])) < 0.2
    cmp = tmp_path / "cmp.png"
    assert (
        main(["compare", f"{kart}:1", f"{kart}:2", "--circuit", str(okc), "-o", str(cmp), "--width", "900"])
        == 0
    )
    check_png(cmp, 900)
