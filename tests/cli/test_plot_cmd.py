"""``wrtfd plot``: a real PNG of the expected size that is not blank; a clear line without matplotlib."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.cli.inprocess import wrtfd_main
from wrtfd.simulate import Simulation, TrackInfo, make_encoder
from wrtfd.simulate.record import record_simulation
from wrtfd.tracks import LanePath, load_track, timing_sectors
from wrtfd.tracks.lapchannels import lap_channels_for

REPO = Path(__file__).resolve().parents[2]
KART = REPO / "config" / "tracks" / "kart.trk"


def wrtfd(*args: str) -> subprocess.CompletedProcess[str]:
    return wrtfd_main(*args)  # in process: matplotlib imported once, not per plot


def wrtfd_process(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``python -m wrtfd ARGS`` in its own interpreter (its own ``PYTHONPATH``)."""
    return subprocess.run(
        [sys.executable, "-m", "wrtfd", *args], capture_output=True, text=True, cwd=REPO, timeout=180, env=env
    )


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    track = load_track(KART)
    path = LanePath(track)
    sectors = timing_sectors(track, path)
    sim = Simulation(path, laps=2, rate_hz=60.0, seed=1, sectors_m=sectors)
    files = record_simulation(
        sim,
        make_encoder("forza", TrackInfo(track.name, path.length_m, sectors, 2)),
        tmp_path_factory.mktemp("plot"),
        protocol="forza",
        derived=[lap_channels_for(track, source="forza", protocol="forza")],
    )
    return files[0]


def session_with_laps(recording: Path) -> int:
    from wrtfd.format import Reader

    with Reader(recording) as r:
        return max(range(len(r.sessions)), key=lambda i: r.sessions[i].frame_count)


def check_png(path: Path, width: int) -> np.ndarray:
    import matplotlib.image as mpimg

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = mpimg.imread(path)
    assert img.shape[1] == width and img.shape[0] > width // 3
    rgb = img[..., :3].reshape(-1, 3)
    # not blank: plenty of colours and plenty of non-white pixels
    assert len(np.unique(rgb.round(2), axis=0)) > 100
    assert (rgb.min(axis=1) < 0.9).mean() > 0.02
    return img


@pytest.mark.parametrize("with_track", [True, False])
def test_plot_renders(recording: Path, tmp_path: Path, with_track: bool) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "laps.png"
    args = [
        "plot",
        str(recording),
        "--session",
        str(session_with_laps(recording)),
        "-o",
        str(out),
        "--width",
        "1200",
    ]
    if with_track:
        args += ["--track", str(KART)]
    r = wrtfd(*args)
    assert r.returncode == 0, r.stderr
    img = check_png(out, 1200)
    if with_track:
        # the track's start/finish line is drawn in pure red on the map
        red = (img[..., 0] > 0.9) & (img[..., 1] < 0.15) & (img[..., 2] < 0.15)
        assert red.sum() > 10


def test_missing_matplotlib_is_one_clear_line(recording: Path, tmp_path: Path) -> None:
    fake = tmp_path / "fake"
    (fake / "matplotlib").mkdir(parents=True)
    (fake / "matplotlib" / "__init__.py").write_text("raise ImportError('no matplotlib here')\n")
    env = dict(os.environ, PYTHONPATH=f"{fake}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    r = wrtfd_process("plot", str(recording), "-o", str(tmp_path / "x.png"), env=env)
    assert r.returncode == 2
    assert r.stderr == "wrtfd: error: plotting needs matplotlib: install wrtfd[plot]\n"
    assert not (tmp_path / "x.png").exists()


def test_session_without_driving_is_an_error(tmp_path: Path, recording: Path) -> None:
    pytest.importorskip("matplotlib")
    # session 0 holds only the menus before the start (IsRaceOn = 0, positions zero)
    r = wrtfd("plot", str(recording), "--session", "0", "-o", str(tmp_path / "menu.png"))
    assert r.returncode == 2
    assert r.stderr == "wrtfd: error: no positions to plot in this session (the car was never driven)\n"


def test_default_session_is_the_drive_not_the_menus(tmp_path: Path, recording: Path) -> None:
    pytest.importorskip("matplotlib")
    r = wrtfd("plot", str(recording), "-o", str(tmp_path / "drive.png"), "--width", "800")
    assert r.returncode == 0, r.stderr
    check_png(tmp_path / "drive.png", 800)
    bad = wrtfd("plot", str(recording), "--session", "9", "-o", str(tmp_path / "none.png"))
    assert bad.returncode == 2
    assert bad.stderr.startswith("wrtfd: error: ") and "no session 9 (it has " in bad.stderr
    assert not (tmp_path / "none.png").exists()
