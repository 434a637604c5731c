"""``wrtfd import --format carla``: recordings built from the layout document -> WRTF, frame by frame."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tests.carla.carla_scenario as sc
from tests.carla.carla_writer import Actor, CarlaWriter, anim_vehicle, event_add, position
from wrtfd.cli.main import main
from wrtfd.errors import ImportFormatError
from wrtfd.format import Reader
from wrtfd.importers.carla import import_recording, median_rate_hz

REPO = Path(__file__).resolve().parents[2]
MINI_TRACK = REPO / "tests" / "tracks" / "data" / "mini.trk"
START_US = 1_700_000_000_000_000


@pytest.fixture()
def rec_path(tmp_path: Path) -> Path:
    p = tmp_path / "scenario.log"
    p.write_bytes(sc.build())
    return p


def _text(arr: np.ndarray) -> str:
    return bytes(arr).rstrip(b"\0").decode()


def test_hero_import_frames_exact(rec_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "hero.wrtf"
    assert main(["import", str(rec_path), "-o", str(out), "--start-timestamp", str(START_US)]) == 0
    err = capsys.readouterr().err
    assert f"6 CARLA frames -> {out} at 20 Hz (6 samples)" in err
    assert "frame 7 has no FrameEnd" in err  # the truncated last frame is reported, not imported
    with Reader(out) as r:
        assert r.rate_hz == 20 and r.complete and len(r.sessions) == 1
        f = r.frames(0)
        c = f["carla"]
        assert f["tick"].tolist() == [0, 1, 2, 3, 4, 5]
        assert c["frame_id"].tolist() == [1, 2, 3, 4, 5, 6]
        assert c["elapsed_s"].tolist() == pytest.approx([0.0, 0.05, 0.1, 0.15, 0.2, 0.25])
        assert c["actor_id"].tolist() == [10] * 6
        assert c["x_m"].tolist() == [sc.hero_x_cm(n) / 100.0 for n in range(1, 7)]
        assert c["y_m"].tolist() == [2.0] * 6
        assert c["z_m"].tolist() == [0.3] * 6
        assert c["yaw_deg"].tolist() == [90.0] * 6 and c["roll_deg"].tolist() == [0.0] * 6
        # 0.5 m per 0.05 s, computed in float64 and stored as float32
        assert c["vx_mps"].tolist() == [0.0] + [10.0] * 5
        assert c["speed_mps"].tolist() == [0.0] + [10.0] * 5
        assert c["vy_mps"].tolist() == [0.0] * 6
        controls = [sc.hero_controls(n) for n in range(1, 7)]
        assert c["steering"].tolist() == [k[1] for k in controls]
        assert c["throttle"].tolist() == [k[2] for k in controls]
        assert c["brake"].tolist() == [k[3] for k in controls]
        assert c["handbrake"].tolist() == [k[4] for k in controls]
        assert c["gear"].tolist() == [k[5] for k in controls]
        assert c["collision_count"].tolist() == [0, 0, 1, 1, 1, 1]
        assert c["last_hit_actor_id"].tolist() == [-1, -1, 11, 11, 11, 11]
        header = r.sessions[0].header
        assert _text(header["track"]) == "Town06"
        assert _text(header["car"]) == "vehicle.tesla.model3"
        md = r.metadata
        assert md["carla.map"] == "Town06" and md["Track"] == "Town06"
        assert md["carla.date"] == "2023-11-14T22:13:20+00:00" and md["carla.date_s"] == "1700000000"
        assert md["carla.actor"] == "10" and md["carla.frames"] == "6"
        actors = {a["id"]: a for a in json.loads(md["carla.actors"])}
        assert sorted(actors) == [10, 11, 12, 20, 30, 40, 50]
        assert actors[10]["attributes"] == {"role_name": "hero", "color": "79,33,85", "number_of_wheels": "4"}
        assert actors[10]["description_id"] == "vehicle.tesla.model3" and actors[10]["description_uid"] == 101
        assert actors[30]["type_name"] == "TrafficSign"
        assert actors[11]["deleted_frame"] == 4 and actors[50]["parent_id"] == 10


def test_all_vehicles_import_slots(rec_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "all.wrtf"
    import_recording(rec_path, out, actor="all-vehicles", max_vehicles=3, start_timestamp_us=START_US)
    with Reader(out) as r:
        c = r.frames(0)["carla"]
        assert c["actor_id"].tolist() == [
            [10, 11, 0],
            [10, 11, 0],
            [10, 11, 0],
            [10, 0, 0],
            [10, 12, 0],
            [10, 12, 0],
        ]
        assert c["vehicle_count"].tolist() == [2, 2, 2, 1, 2, 2]
        assert c["x_m"][:, 0].tolist() == [sc.hero_x_cm(n) / 100.0 for n in range(1, 7)]
        assert c["x_m"][:, 1].tolist() == [110.0, 110.0, 110.0, 0.0, 120.0, 120.0]
        assert c["y_m"][:, 1].tolist() == [0.01, 0.02, 0.03, 0.0, 0.05, 0.06]
        assert c["collision_count"][2].tolist() == [1, 1, 0]
        assert c["last_hit_actor_id"][2].tolist() == [11, 10, -1]
        assert c["throttle"][:, 1].tolist() == [0.25, 0.25, 0.25, 0.0, 0.25, 0.25]
        assert r.metadata["carla.actor"] == "all-vehicles" and r.metadata["carla.max_vehicles"] == "3"


def test_import_is_deterministic(rec_path: Path, tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.wrtf", tmp_path / "b.wrtf", tmp_path / "c.wrtf"
    import_recording(rec_path, a, start_timestamp_us=START_US)
    import_recording(rec_path, b, start_timestamp_us=START_US)
    import_recording(rec_path, c, start_timestamp_us=START_US + 1_000_000)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()
    # without --start-timestamp the recording's own date is used: still deterministic
    d, e = tmp_path / "d.wrtf", tmp_path / "e.wrtf"
    import_recording(rec_path, d)
    import_recording(rec_path, e)
    assert d.read_bytes() == e.read_bytes()
    with Reader(d) as r:
        # CARLA elapsed 0 is the recording's date; tick 0 starts half a tick earlier (the
        # scheduler puts the first sample in the middle of its tick)
        assert r.sessions[0].time_base_us == sc.DATE_S * 1_000_000 - 25_000


def test_rate_default_and_override(tmp_path: Path) -> None:
    w = CarlaWriter()
    for n in range(20):
        w.start_frame(0.1)  # 10 Hz recording
        w.add(event_add([Actor(1, 1, "v", attributes=[(5, "role_name", "hero")])]) if n == 0 else b"")
        w.add(position([(1, (100.0 * n, 0.0, 0.0), (0.0, 0.0, 0.0))]))
        w.end_frame()
    src = tmp_path / "ten.log"
    src.write_bytes(w.getvalue())
    res = import_recording(src, tmp_path / "ten.wrtf", start_timestamp_us=START_US)
    assert res.rate_hz == 10
    with Reader(tmp_path / "ten.wrtf") as r:
        assert r.rate_hz == 10 and r.frames(0)["carla"]["frame_id"].tolist() == list(range(1, 21))
    res = import_recording(src, tmp_path / "five.wrtf", rate_hz=5, start_timestamp_us=START_US)
    with Reader(tmp_path / "five.wrtf") as r:
        ids = r.frames(0)["carla"]["frame_id"].tolist()
        # the first CARLA frame sits in the middle of tick 0; then two frames per tick, the last kept
        assert r.rate_hz == 5 and ids == [1, *range(3, 20, 2), 20]
    assert median_rate_hz([0.0]) == 20 and median_rate_hz([0.0, 0.0167, 0.0333, 0.05, 0.0667]) == 60


def test_actor_by_id_and_gaps_before_creation(rec_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "late.wrtf"
    res = import_recording(rec_path, out, actor="12", start_timestamp_us=START_US)
    assert res.samples == 2
    with Reader(out) as r:
        c = r.frames(0)["carla"]
        assert c["frame_id"].tolist() == [5, 6] and c["x_m"].tolist() == [120.0, 120.0]
        assert r.metadata["Car"] == "vehicle.audi.tt"


def test_track_adds_lap_channels(tmp_path: Path) -> None:
    from wrtfd.tracks import LanePath, load_track

    path = LanePath(load_track(MINI_TRACK))
    speed_mps, hz = 20.0, 20
    w = CarlaWriter()
    frames = int((2.5 * path.length_m / speed_mps) * hz)
    for n in range(frames):
        w.start_frame(1.0 / hz)
        if n == 0:
            w.add(event_add([Actor(7, 1, "vehicle.mini", attributes=[(5, "role_name", "hero")])]))
        s = (5.0 + speed_mps * n / hz) % path.length_m
        x, _, z = path.point_at(s)
        w.add(position([(7, (x * 100.0, z * 100.0, 0.0), (0.0, 0.0, 0.0))]))  # track z = CARLA Y
        w.add(anim_vehicle([(7, 0.0, 1.0, 0.0, False, 3)]))
        w.end_frame()
    src = tmp_path / "laps.log"
    src.write_bytes(w.getvalue())
    out = tmp_path / "laps.wrtf"
    import_recording(src, out, track=MINI_TRACK, start_timestamp_us=START_US)
    with Reader(out) as r:
        laps = r.frames(0)["laps"]
        assert laps["lap_number"][0] == 0 and laps["lap_number"][-1] == 2
        assert float(laps["lap_distance"][0]) == pytest.approx(5.0, abs=0.01)
        footer = r.sessions[0].footer
        assert footer is not None and int(footer["laps"]["lap_count"]) == 1
        assert int(footer["laps"]["best_lap_ms"]) == pytest.approx(path.length_m / speed_mps * 1000, abs=2)


def test_errors_are_one_line(rec_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "x.wrtf"
    out.write_bytes(b"keep me")
    assert main(["import", str(rec_path), "-o", str(out)]) == 2
    assert "exists; use --force" in capsys.readouterr().err and out.read_bytes() == b"keep me"
    assert main(["import", str(rec_path), "-o", str(out), "--force", "--actor", "99"]) == 2
    assert "actor 99 is never created" in capsys.readouterr().err and out.read_bytes() == b"keep me"
    args = ["import", str(rec_path), "-o", str(tmp_path / "y.wrtf"), "--actor", "all-vehicles"]
    assert main([*args, "--track", str(MINI_TRACK)]) == 2
    assert "--track works with one actor" in capsys.readouterr().err
    assert main([*args, "--max-vehicles", "0"]) == 2
    assert main(["import", str(rec_path), "-o", str(tmp_path / "z.wrtf"), "--rate", "0"]) == 2
    assert not (tmp_path / "y.wrtf").exists() and not (tmp_path / "z.wrtf").exists()
    junk = tmp_path / "junk.log"
    junk.write_bytes(b"\x01\x00\x0e\x00CARLA_RECORDER")  # header cut before the date
    with pytest.raises(ImportFormatError, match="date missing"):
        import_recording(junk, tmp_path / "j.wrtf")


def test_no_complete_frame(tmp_path: Path) -> None:
    w = CarlaWriter()
    w.start_frame(0.05)
    w.add(position([(1, (0.0, 0.0, 0.0), (0.0, 0.0, 0.0))]))
    src = tmp_path / "cut.log"
    src.write_bytes(w.getvalue())
    with pytest.raises(ImportFormatError, match="no complete frame"):
        import_recording(src, tmp_path / "cut.wrtf")


def test_cli_subprocess_end_to_end(rec_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "e2e.wrtf"
    cmd = [sys.executable, "-m", "wrtfd", "import", str(rec_path), "-o", str(out), "--actor", "all-vehicles"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    with Reader(out) as r:
        assert r.total_frames == 6
        assert r.frames(0)["carla"]["actor_id"][-1].tolist()[:2] == [10, 12]
    assert "6 CARLA frames" in proc.stderr and "Traceback" not in proc.stderr


def test_frames_going_back_in_time_are_dropped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    w = CarlaWriter()
    for n, delta in enumerate([0.0, 0.05, -0.02, 0.07, 0.05]):  # elapsed 0, .05, .03, .10, .15
        w.start_frame(delta)
        if n == 0:
            w.add(event_add([Actor(1, 1, "v", attributes=[(5, "role_name", "hero")])]))
        w.add(position([(1, (100.0 * n, 0.0, 0.0), (0.0, 0.0, 0.0))]))
        w.end_frame()
    src = tmp_path / "back.log"
    src.write_bytes(w.getvalue())
    out = tmp_path / "back.wrtf"
    assert main(["import", str(src), "-o", str(out), "--rate", "20"]) == 0
    assert "1 frames dropped: elapsed time out of range" in capsys.readouterr().err
    with Reader(out) as r:
        assert r.frames(0)["carla"]["frame_id"].tolist() == [1, 2, 4, 5]


def test_start_timestamp_too_small_is_refused(rec_path: Path, tmp_path: Path) -> None:
    with pytest.raises(ImportFormatError, match="at least 50000 us at 20 Hz"):
        import_recording(rec_path, tmp_path / "s.wrtf", start_timestamp_us=0)
    import_recording(rec_path, tmp_path / "s.wrtf", start_timestamp_us=50_000)
    with Reader(tmp_path / "s.wrtf") as r:
        assert r.sessions[0].time_base_us == 25_000
