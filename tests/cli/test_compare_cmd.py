"""``wrtfd compare``: laps aligned by lap distance, the time delta, and a PNG that decodes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.exporters.conftest import OVAL, ROAD, simulated
from wrtfd.cli.compare import LapRef, load_lap, parse_lap_ref
from wrtfd.cli.main import main
from wrtfd.compare import LapTrace, time_delta
from wrtfd.simulate import Simulation, TrackInfo, make_encoder
from wrtfd.simulate.record import record_simulation
from wrtfd.tracks import LanePath, Lap, load_track, timing_sectors
from wrtfd.tracks.lapchannels import lap_channels_for


@pytest.fixture(scope="module")
def drives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("compare")
    return {
        "forza": simulated(out / "forza", "forza", OVAL, laps=2, seed=4),
        "f1": simulated(out / "f1", "f1", OVAL, laps=2, seed=9),
    }


def trace(distance: list[float], time: list[float], lap_time: float, length: float) -> LapTrace:
    n = len(distance)
    z = np.zeros(n)
    return LapTrace(
        "x", Lap(1, 0.0, lap_time, ()), length, np.array(distance), np.array(time), z, z, z, z, z, z
    )


def test_delta_is_time_b_minus_time_a_at_each_distance() -> None:
    """A at 10 m/s and B at 20 m/s over a 100 m lap: B is ahead by d/20 s at distance d."""
    d = list(np.arange(5.0, 100.0, 5.0))
    a = trace(d, [x / 10 for x in d], 10.0, 100.0)
    b = trace(d, [x / 20 for x in d], 5.0, 100.0)
    grid, delta = time_delta(a, b, points=101)
    assert grid.tolist() == pytest.approx(np.linspace(0, 100, 101).tolist())
    assert delta == pytest.approx(-grid / 20, abs=1e-12)
    assert delta[0] == 0.0 and delta[-1] == pytest.approx(5.0 - 10.0)


def test_a_lap_against_itself_has_exactly_zero_delta(drives: dict[str, Path]) -> None:
    a = load_lap(LapRef(drives["forza"], 1), None, None, "A")
    b = load_lap(LapRef(drives["forza"], 1), None, None, "B")
    _, delta = time_delta(a, b)
    assert np.all(delta == 0.0)


def test_delta_ends_at_the_lap_time_difference(drives: dict[str, Path]) -> None:
    a = load_lap(LapRef(drives["forza"], 1), None, None, "A")
    b = load_lap(LapRef(drives["forza"], 2), None, None, "B")
    assert (a.lap.number, b.lap.number) == (1, 2)
    grid, delta = time_delta(a, b)
    assert delta[0] == 0.0
    assert a.length_m == b.length_m  # one session: one lap length
    assert delta[-1] == pytest.approx(b.lap.time_s - a.lap.time_s, abs=1e-9)
    assert np.all(np.diff(a.distance_m) >= -1e-6) and grid[-1] == min(a.length_m, b.length_m)


def test_laps_of_two_estimated_lengths_end_at_the_lap_time_difference() -> None:
    """One lap at 10 m/s over 100 m; B the same lap 1% slower. Recorded lap channels give each
    lap's length as the furthest distance recorded: 99.5 m for A, 99.0 m for B (frames at other
    phases). The delta still ends at 10.1 - 10.0 s and is 1% of the time all along."""
    da = list(np.arange(0.5, 100.0, 1.0))
    db = list(np.arange(0.0, 99.5, 1.5))
    a = trace(da, [x / 10 for x in da], 10.0, 99.5)
    b = trace(db, [x / 10 * 1.01 for x in db], 10.1, 99.0)
    grid, delta = time_delta(a, b, points=51)
    assert delta[-1] == pytest.approx(10.1 - 10.0, abs=1e-12)
    time_a = np.interp(grid, [0.0, *da, 99.5], [0.0, *(x / 10 for x in da), 10.0])
    assert delta == pytest.approx(0.01 * time_a, abs=0.06)  # B's frames stop 1 m short of its line


def simulated_at(out: Path, protocol: str, rate_hz: float, seed: int) -> Path:
    """The drive of ``seed`` on the oval (one car, one driver), recorded through ``protocol``
    at ``rate_hz``, with lap channels."""
    track = load_track(OVAL)
    path = LanePath(track)
    sectors = timing_sectors(track, path)
    sim = Simulation(path, laps=2, rate_hz=rate_hz, seed=seed, sectors_m=sectors)
    encoder = make_encoder(protocol, TrackInfo(track.name, path.length_m, sectors, 2), seed=seed)
    derived = [lap_channels_for(track, source=protocol, protocol=protocol)]
    (file,) = record_simulation(sim, encoder, out, protocol=protocol, derived=derived)
    return file


def test_the_same_lap_through_two_sources_ends_at_the_lap_time_difference(tmp_path: Path) -> None:
    """The same simulated drive through Forza at 60 Hz and F1 at 50 Hz: each file's lap length
    is estimated from its own frames (205.66 m and 205.45 m here), yet the delta ends at the
    lap-time difference, and never strays beyond a frame's time from zero along the lap."""
    a = load_lap(LapRef(simulated_at(tmp_path / "a", "forza", 60.0, seed=4), 1), None, None, "A")
    b = load_lap(LapRef(simulated_at(tmp_path / "b", "f1", 50.0, seed=4), 1), None, None, "B")
    assert a.length_m != b.length_m
    _, delta = time_delta(a, b)
    assert delta[0] == 0.0
    assert delta[-1] == pytest.approx(b.lap.time_s - a.lap.time_s, abs=1e-12)
    assert np.max(np.abs(delta)) < 1 / 50


def test_two_games_on_one_track_align_by_lap_distance(drives: dict[str, Path]) -> None:
    """Forza and F1 packets of two simulated drives of the oval: the recorded lap distances
    (measured along the same lane) cover the same lap, so the delta stays within the lap-time
    difference of those two similar drivers; re-detecting with the track file agrees."""
    track = load_track(OVAL)
    for tr in (None, track):
        a = load_lap(LapRef(drives["forza"], None), tr, None, "A")
        b = load_lap(LapRef(drives["f1"], None), tr, None, "B")
        assert a.length_m == pytest.approx(b.length_m, rel=0.01)
        _, delta = time_delta(a, b)
        gap = abs(b.lap.time_s - a.lap.time_s)
        assert np.max(np.abs(delta)) <= gap + 0.5


def test_default_is_each_files_best_lap(drives: dict[str, Path]) -> None:
    best = load_lap(LapRef(drives["forza"], None), None, None, "A")
    laps = [load_lap(LapRef(drives["forza"], n), None, None, "A").lap for n in (1, 2)]
    assert best.lap == min(laps, key=lambda lap: lap.time_s)


def test_lap_refs() -> None:
    assert parse_lap_ref("run.wrtf:3") == LapRef(Path("run.wrtf"), 3)
    assert parse_lap_ref("run.wrtf") == LapRef(Path("run.wrtf"), None)
    assert parse_lap_ref("c:/x/run.wrtf") == LapRef(Path("c:/x/run.wrtf"), None)


def check_png(path: Path, width: int) -> None:
    import matplotlib.image as mpimg

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = mpimg.imread(path)
    assert img.shape[1] == width and img.shape[0] > width // 3
    rgb = img[..., :3].reshape(-1, 3)
    assert len(np.unique(rgb.round(2), axis=0)) > 50  # not blank
    assert (rgb.min(axis=1) < 0.9).mean() > 0.02


@pytest.mark.parametrize("with_track", [False, True])
def test_compare_renders(drives: dict[str, Path], tmp_path: Path, with_track: bool) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "cmp.png"
    args = ["compare", f"{drives['forza']}:1", str(drives["f1"]), "-o", str(out), "--width", "1000"]
    if with_track:
        args += ["--track", str(OVAL)]
    assert main(args) == 0
    check_png(out, 1000)


def test_a_lap_against_itself_renders(drives: dict[str, Path], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "same.png"
    f = drives["forza"]
    assert main(["compare", f"{f}:2", f"{f}:2", "-o", str(out), "--width", "800"]) == 0
    check_png(out, 800)


def test_missing_lap_is_one_error_line(
    drives: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "x.png"
    assert main(["compare", f"{drives['forza']}:7", str(drives["f1"]), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no session has lap 7" in err and not out.exists()
    assert main(["compare", str(drives["f1"]), str(drives["f1"]), "-o", str(out), "--track", str(ROAD)]) == 2
    assert "no session has a completed lap" in capsys.readouterr().err
