"""``wrtfd laps``: laps and sector times from recordings made through the real decoder + recorder."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.cli.inprocess import wrtfd_main
from wrtfd.simulate import Simulation, TrackInfo, make_encoder
from wrtfd.simulate.record import record_simulation
from wrtfd.tracks import LanePath, load_track, timing_sectors
from wrtfd.tracks.lapchannels import LapChannels, lap_channels_for

REPO = Path(__file__).resolve().parents[2]
OVAL = REPO / "config" / "tracks" / "oval.trk"
TICK_S = 1 / 60


def wrtfd(*args: str) -> subprocess.CompletedProcess[str]:
    return wrtfd_main(*args, cwd=REPO)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Simulation, Path]:
    """An F1 session with live lap channels, and a Forza one recorded without them."""
    track = load_track(OVAL)
    path = LanePath(track)
    sectors = timing_sectors(track, path)
    info = TrackInfo(track.name, path.length_m, sectors, 3)
    out = tmp_path_factory.mktemp("laps")
    sim = Simulation(path, laps=3, rate_hz=60.0, seed=11, sectors_m=sectors)
    with_channels = record_simulation(
        sim,
        make_encoder("f1", info, seed=11),
        out / "f1",
        protocol="f1",
        derived=[lap_channels_for(track, source="f1", protocol="f1")],
    )
    plain_sim = Simulation(path, laps=2, rate_hz=60.0, seed=12, sectors_m=sectors)
    plain = record_simulation(plain_sim, make_encoder("forza", info), out / "forza", protocol="forza")
    assert len(with_channels) == 1 and len(plain) == 1
    return with_channels[0], sim, plain[0]


def test_redetected_laps_match_the_simulator(recorded: tuple[Path, Simulation, Path]) -> None:
    f1_file, sim, _ = recorded
    r = wrtfd("laps", str(f1_file), "--track", str(OVAL), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["track"] == "Small oval track"
    (session,) = [s for s in doc["sessions"] if s["laps"]]
    assert [lap["lap"] for lap in session["laps"]] == [1, 2, 3]
    for got, ref in zip(session["laps"], sim.laps, strict=True):
        assert got["time_s"] == pytest.approx(ref.time_s, abs=TICK_S)
        assert got["sectors_s"] == pytest.approx(list(ref.sector_times_s), abs=TICK_S)
    best = min(sim.laps, key=lambda lap: lap.time_s)
    assert session["best_lap"] == best.number


def test_live_channels_read_back(recorded: tuple[Path, Simulation, Path]) -> None:
    f1_file, sim, _ = recorded
    r = wrtfd("laps", str(f1_file), "--json")
    assert r.returncode == 0, r.stderr
    laps = [lap for s in json.loads(r.stdout)["sessions"] for lap in s["laps"]]
    assert [lap["lap"] for lap in laps] == [1, 2, 3]
    for got, ref in zip(laps, sim.laps, strict=True):
        assert got["time_s"] == pytest.approx(ref.time_s, abs=TICK_S)


def test_table_output(recorded: tuple[Path, Simulation, Path]) -> None:
    f1_file, _, _ = recorded
    r = wrtfd("laps", str(f1_file), "--track", str(OVAL))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "session 0: 3 complete lap(s)" in lines
    assert any(line.split()[:1] == ["lap"] and "S3" in line for line in lines)
    assert sum(1 for line in lines if line.strip().startswith(("1 ", "2 ", "3 "))) == 3
    assert sum(1 for line in lines if line.endswith(" *")) == 1
    assert any(line.strip().startswith("best: lap") for line in lines)


def test_forza_without_channels_needs_a_track(recorded: tuple[Path, Simulation, Path]) -> None:
    _, _, forza_file = recorded
    r = wrtfd("laps", str(forza_file))
    assert r.returncode == 2
    assert (
        r.stderr.strip() == "wrtfd: error: this recording has no lap channels; give --track to detect laps"
        " from positions"
    )
    r = wrtfd("laps", str(forza_file), "--track", str(OVAL), "--json")
    assert r.returncode == 0, r.stderr
    laps = [lap for s in json.loads(r.stdout)["sessions"] for lap in s["laps"]]
    assert [lap["lap"] for lap in laps] == [1, 2]


def test_missing_file_is_one_line(tmp_path: Path) -> None:
    r = wrtfd("laps", str(tmp_path / "none.wrtf"), "--track", str(OVAL))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_a_circuits_folder_that_is_not_there_is_one_line(
    recorded: tuple[Path, Simulation, Path], tmp_path: Path
) -> None:
    """It was ignored: the laps were timed against the shipped circuits only, without a word."""
    path, _, _ = recorded
    r = wrtfd("laps", str(path), "--circuits", str(tmp_path / "mine"))
    assert r.returncode == 2 and r.stderr == f"wrtfd: error: --circuits {tmp_path / 'mine'}: not a folder\n"


def test_format_lap_time() -> None:
    from wrtfd.cli.laps import format_lap_time

    assert format_lap_time(83.4564) == "1:23.456"
    assert format_lap_time(42.1) == "42.100"
    assert format_lap_time(60.0) == "1:00.000"


def record_with_live_laps(out: Path, *, seed: int, keep_sectors: bool = True) -> tuple[Path, LapChannels]:
    """Three laps of the oval through F1 with the lap-channel plug-in the daemon uses; the
    plug-in is returned as the recording left it (what the live page read from it)."""
    track = load_track(OVAL)
    path = LanePath(track)
    sectors = timing_sectors(track, path)
    plugin = lap_channels_for(track, source="f1", protocol="f1")
    if not keep_sectors:  # as a recording made before the plug-in wrote its sectors
        plugin.metadata = {}
    sim = Simulation(path, laps=3, rate_hz=60.0, seed=seed, sectors_m=sectors)
    encoder = make_encoder("f1", TrackInfo(track.name, path.length_m, sectors, 3), seed=seed)
    (file,) = record_simulation(sim, encoder, out, protocol="f1", derived=[plugin])
    return file, plugin


def test_recorded_lap_channels_give_the_live_pages_sector_times(tmp_path: Path) -> None:
    """``wrtfd laps --json`` without a track: each lap's sector times from the recorded
    ``laps.sector``/``laps.lap_distance`` channels and the timing sectors, as the live page
    showed them (LapChannels.live(), to its millisecond)."""
    file, plugin = record_with_live_laps(tmp_path / "rec", seed=21)
    r = wrtfd("laps", str(file), "--json")
    assert r.returncode == 0, r.stderr
    laps = [lap for s in json.loads(r.stdout)["sessions"] for lap in s["laps"]]
    live_laps = plugin.detector.laps
    assert [lap["lap"] for lap in laps] == [lap.number for lap in live_laps] == [1, 2, 3]
    for got, live in zip(laps, live_laps, strict=True):
        assert len(got["sectors_s"]) == 3
        assert got["sectors_s"] == pytest.approx(list(live.sector_times_s), abs=1e-4)
        assert sum(got["sectors_s"]) == pytest.approx(got["time_s"], abs=1e-9)
    page = plugin.live()["best"]
    (best,) = [lap for lap in laps if lap["lap"] == page["number"]]
    assert best["sectors_s"] == pytest.approx(page["sectors_s"], abs=1e-3)
    table = wrtfd("laps", str(file)).stdout
    assert "S3" in table


def test_sector_times_of_a_recording_without_its_sectors_are_close(tmp_path: Path) -> None:
    """A file whose lap channels did not record the timing sectors: the sector boundaries are
    placed between the frames where ``laps.sector`` changes, close to the live times."""
    file, plugin = record_with_live_laps(tmp_path / "old", seed=22, keep_sectors=False)
    r = wrtfd("laps", str(file), "--json")
    assert r.returncode == 0, r.stderr
    laps = [lap for s in json.loads(r.stdout)["sessions"] for lap in s["laps"]]
    assert len(laps) == len(plugin.detector.laps) == 3
    for got, live in zip(laps, plugin.detector.laps, strict=True):
        assert got["sectors_s"] == pytest.approx(list(live.sector_times_s), abs=TICK_S / 2)
