"""``wrtfd track check|show`` through the real entry point (subprocess)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "tracks" / "data"


def wrtfd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wrtfd", *args], capture_output=True, text=True, cwd=REPO, timeout=120
    )


def test_check_good_file() -> None:
    r = wrtfd("track", "check", "config/tracks/road.trk")
    assert r.returncode == 0, r.stderr
    assert "ok: 'Hillside road course'" in r.stdout and "1 lane(s)" in r.stdout


def test_check_lists_findings_with_paths() -> None:
    r = wrtfd("track", "check", str(DATA / "broken" / "neighbor-mismatch.trk"))
    assert r.returncode == 1
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 2
    assert "sectors[0].edges[1]: " in lines[0] and lines[0].endswith("[neighbor-mismatch]")
    assert "2 problem(s)" in r.stderr


def test_check_unparseable_is_one_error_line() -> None:
    r = wrtfd("track", "check", str(DATA / "broken" / "parse-syntax.trk"))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("wrtfd: error: ")
    assert "Traceback" not in r.stderr


def test_show_writes_a_map(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "map.png"
    r = wrtfd("track", "show", "config/tracks/kart.trk", "-o", str(out), "--width", "600")
    assert r.returncode == 0, r.stderr
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image as mpimg
    import numpy as np

    img = mpimg.imread(out)
    assert img.shape[1] == 600
    # not blank: many distinct colours, and the red start line is there
    assert len(np.unique(img.reshape(-1, img.shape[2])[:, :3].round(2), axis=0)) > 20
    red = (img[..., 0] > 0.9) & (img[..., 1] < 0.2) & (img[..., 2] < 0.2)
    assert red.sum() > 20


def test_show_of_a_broken_lane_is_one_error_line(tmp_path: Path) -> None:
    r = wrtfd("track", "show", str(DATA / "broken" / "index-range.trk"), "-o", str(tmp_path / "x.png"))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "vertex index out of range" in r.stderr
