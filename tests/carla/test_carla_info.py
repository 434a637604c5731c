"""``wrtfd carla info``: summary values and the command's output and exit codes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tests.carla.carla_scenario as sc
from wrtfd.carla.info import summarize
from wrtfd.carla.model import ActorType
from wrtfd.carla.reader import FrameStream
from wrtfd.cli.main import main


def test_summary_lifetimes_parent_collisions() -> None:
    stream = FrameStream(sc.build(truncated=False))
    s = summarize(stream.header, stream)
    assert (s.frame_count, s.first_frame_id, s.last_frame_id) == (6, 1, 6)
    assert s.duration_s == pytest.approx(0.25)
    lives = {life.add.actor_id: life for life in s.actors}
    assert sorted(lives) == [10, 11, 12, 20, 30, 40, 50]
    assert (lives[11].created_frame, lives[11].deleted_frame) == (1, 4)
    assert lives[11].deleted_s == pytest.approx(0.15)
    assert (lives[12].created_frame, lives[12].deleted_frame) == (5, None)
    assert lives[50].parent_id == 10 and lives[10].parent_id is None
    by_type = s.by_type()
    assert [life.add.actor_id for life in by_type[ActorType.VEHICLE]] == [10, 11, 12]
    assert [life.add.actor_id for life in by_type[ActorType.TRAFFIC_SIGN]] == [30]
    assert [(c.frame_id, c.collision.collision_id) for c in s.collisions] == [(3, 7)]


def test_actor_recreated_with_same_id_closes_old_life() -> None:
    from tests.carla.carla_writer import Actor, CarlaWriter, event_add

    w = CarlaWriter()
    w.start_frame(0.1)
    w.add(event_add([Actor(5, 1, "vehicle.a")]))
    w.end_frame()
    w.start_frame(0.1)
    w.add(event_add([Actor(5, 1, "vehicle.b")]))
    w.end_frame()
    stream = FrameStream(w.getvalue())
    s = summarize(stream.header, stream)
    assert [(a.add.description_id, a.created_frame, a.deleted_frame) for a in s.actors] == [
        ("vehicle.a", 1, 2),
        ("vehicle.b", 2, None),
    ]


def test_cli_info_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "rec.log"
    path.write_bytes(sc.build())
    assert main(["carla", "info", str(path), "--events"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "Map: Town06" in out
    assert "Date: 2023-11-14 22:13:20 UTC (1700000000 s since 1970)" in out
    assert "Frames: 6 (ids 1-6)" in out
    # frame 6's -1.0 was patched when the (truncated) frame 7 started: 0.25 + 0.05
    assert "Duration: 0.300 s" in out
    assert "  Vehicle (1): 3" in out
    assert "  TrafficSign (4): 1" in out
    expected = "11 vehicle.seat.leon [uid 102] role_name=autopilot 0.000 s (frame 1) -> 0.150 s (frame 4)"
    assert any(" ".join(line.split()) == expected for line in out)
    assert any("50 sensor.other.collision [uid 401] parent=10" in line for line in out)
    assert "  frame 3 at 0.100 s: Collision id 7 between 10 (hero) and 11" in out
    assert "Skipped packets: id 12 x1, id 100 x1" in out
    assert "Problems: 2" in out
    assert any("frame 7 has no FrameEnd" in line and line.startswith("  byte ") for line in out)
    events = out[out.index("Events:") + 1 :]
    assert events[:3] == [
        "Frame 1 at 0 seconds",
        " Create 10: vehicle.tesla.model3 (1) at (100, 200, 30)",
        "  role_name = hero",
    ]
    assert " Destroy 11" in events and " Parenting 50 with 10 (parent)" in events


def test_cli_info_not_a_recording_is_one_error_line(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_bytes(b"hello, this is not CARLA")
    proc = subprocess.run(
        [sys.executable, "-m", "wrtfd", "carla", "info", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("wrtfd: error: ") and "not a CARLA recorder file" in proc.stderr
    assert "Traceback" not in proc.stderr
