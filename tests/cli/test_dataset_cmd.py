"""``wrtfd dataset DIR -o OUT`` (the CLI's ``main``, in process), read back with DuckDB.

The recordings are the real recorder's, of the simulator driving the oval (as ``wrtfd simulate
--record`` makes them, with a driver in the metadata), in a collected folder's layout
(``DIR/<rig>/<file>.wrtf``), with a file another tool wrote (scalars, an enum, text, no laps), a
file that is not WRTF and a hidden download. Oracles: the simulator's own lap times, ``wrtfd laps
FILE --json`` (a separate command), the frames read back from the file (a ``struct`` decode of the
ticks and one channel, the reader's arrays walked field by field for the rest) and the recorded
lap channels. docs/dataset.md's two queries are run from the doc's text.
"""

from __future__ import annotations

import json
import re
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.cli.inprocess import wrtfd_main
from tests.format.samples import write_car_file
from wrtfd.format import Reader

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")

REPO = Path(__file__).resolve().parents[2]
OVAL = REPO / "config" / "tracks" / "oval.trk"
DOC = REPO / "docs" / "dataset.md"
TICK_S = 1 / 60
#: (rig, driver or None, seed, laps): Ada drives two rigs, rig-c has no driver set.
DRIVES = [("rig-a", "Ada", 1, 3), ("rig-b", "Bob", 2, 3), ("rig-b", "Ada", 3, 2), ("rig-c", None, 4, 2)]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return wrtfd_main(*args)


def _record(out: Path, driver: str | None, seed: int, laps: int) -> tuple[Path, list[dict[str, Any]]]:
    """One simulated drive recorded by the real recorder (``wrtfd simulate --record``'s path)."""
    from wrtfd.simulate import Simulation, TrackInfo, make_encoder
    from wrtfd.simulate.record import record_simulation
    from wrtfd.tracks import LanePath, load_track, timing_sectors
    from wrtfd.tracks.lapchannels import lap_channels_for

    track = load_track(OVAL)
    path = LanePath(track, 0)
    sectors = timing_sectors(track, path)
    encoder = make_encoder("forza", TrackInfo(track.name, path.length_m, sectors, laps), seed=seed)
    sim = Simulation(path, laps=laps, rate_hz=encoder.rate_hz, seed=seed, sectors_m=sectors)
    meta = {"Track": track.name} | ({"Driver": driver} if driver else {})
    derived = [lap_channels_for(track, source="forza", protocol="forza", lane=0)]
    before = set(out.glob("*.wrtf")) if out.exists() else set()
    record_simulation(sim, encoder, out, protocol="forza", derived=derived, metadata=meta)
    (new,) = set(out.glob("*.wrtf")) - before
    truth = [{"lap": lap.number, "time_s": lap.time_s} for lap in sim.laps]
    return new, truth


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("collected")
    rec = root / "rec"
    drives = []
    for rig, driver, seed, laps in DRIVES:
        path, truth = _record(rec / rig, driver, seed, laps)
        drives.append({"rig": rig, "driver": driver, "path": path, "truth": truth})
    (rec / "rig-d").mkdir()
    write_car_file(rec / "rig-d" / "other.wrtf")  # another tool's file: scalars, enum, text, no laps
    (rec / "rig-b" / "broken.wrtf").write_bytes(b"not a recording at all, but long enough " * 4)
    (rec / "rig-a" / ".20261127_x.wrtf.part").write_bytes(b"half a download")
    out = root / "ds"
    done = run("dataset", str(rec), "-o", str(out))
    return {"root": root, "rec": rec, "out": out, "run": done, "drives": drives}


def _sql(out: Path, query: str) -> list[dict[str, Any]]:
    con = duckdb.connect()
    rel = con.sql(query.replace("'OUT/", f"'{out}/"))
    return [dict(zip(rel.columns, row, strict=True)) for row in rel.fetchall()]


def _laps_table(out: Path) -> list[dict[str, Any]]:
    return _sql(
        out,
        "SELECT * FROM read_parquet('OUT/laps/**/*.parquet', hive_partitioning = true)"
        " ORDER BY rig, file, session, lap",
    )


def _file_laps(path: Path, *extra: str) -> list[tuple[int, dict[str, Any]]]:
    got = run("laps", str(path), "--json", *extra)
    assert got.returncode == 0, got.stderr
    return [(s["session"], lap) for s in json.loads(got.stdout)["sessions"] for lap in s["laps"]]


def test_exit_progress_and_the_files_skipped(folder: dict[str, Any]) -> None:
    done = folder["run"]
    assert done.returncode == 1, done.stderr  # written, without the file that is not WRTF
    lines = done.stderr.splitlines()
    skipped = [line for line in lines if "skipped" in line]
    assert len(skipped) == 2, lines  # the file's line, and the summary's
    assert re.fullmatch(r"\[\d/6\] rig-b/broken\.wrtf: skipped: .+", skipped[0]), skipped
    assert skipped[1] == "1 file(s) skipped (unreadable): not in the dataset"
    progress = [line for line in lines if line.startswith("[")]
    assert len(progress) == 6  # four drives, the other tool's file, the broken one; not the .part
    assert "rig-d/other.wrtf: no laps: " in done.stderr
    marker = json.loads((folder["out"] / "_wrtfd_dataset.json").read_text())
    assert (marker["files"], marker["read"]) == (6, 5)
    assert [s["file"] for s in marker["skipped"]] == ["rig-b/broken.wrtf"]
    assert not list(folder["root"].glob(".*partial"))


def test_laps_table_equals_the_laps_command_and_the_simulator(folder: dict[str, Any]) -> None:
    out, rec = folder["out"], folder["rec"]
    rows = _laps_table(out)
    expected = []
    for d in folder["drives"]:
        rel = d["path"].relative_to(rec).as_posix()
        laps = _file_laps(d["path"])
        # the simulator's own lap times: an oracle the timing code did not produce
        assert [lap["time_s"] for _, lap in laps] == pytest.approx(
            [t["time_s"] for t in d["truth"]], abs=TICK_S
        )
        with Reader(d["path"]) as r:
            starts = [s.time_base_us for s in r.sessions]
            rate = r.rate_hz
        for session, lap in laps:
            expected.append(
                {
                    "rig": d["rig"],
                    "file": rel,
                    "session": session,
                    "session_start_us": starts[session],
                    "lap": lap["lap"],
                    "time_s": lap["time_s"],
                    "sectors_s": lap["sectors_s"],
                    "start_s": lap["start_s"],
                    "end_s": lap["end_s"],
                    "driver_name": d["driver"],
                    "driver": d["driver"] or "unknown",
                    "rate_hz": rate,
                }
            )
    expected.sort(key=lambda e: (e["rig"], e["file"], e["session"], e["lap"]))
    assert len(rows) == len(expected) == sum(laps for *_, laps in DRIVES)
    for row, exp in zip(rows, expected, strict=True):
        for key in ("rig", "file", "session", "session_start_us", "lap", "driver_name", "driver", "rate_hz"):
            assert row[key] == exp[key], (key, row, exp)
        for key in ("time_s", "start_s", "end_s"):
            assert row[key] == pytest.approx(exp[key], abs=1e-6), (key, row)
        assert row["sectors_s"] == pytest.approx(exp["sectors_s"], abs=1e-6)
        assert len(row["sectors_s"]) == 3
        assert (row["track"], row["track_name"]) == ("Small_oval_track", "Small oval track")
        assert row["valid"] is None
        # the tick range: the first frame at or after the starting crossing, the last before the end
        assert (row["first_tick"] - 1) / 60 < row["start_s"] <= row["first_tick"] / 60 + 1e-9
        assert row["last_tick"] / 60 < row["end_s"] <= (row["last_tick"] + 1) / 60 + 1e-9
    # the partition folders hold what their names say
    assert {p.name for p in (out / "laps" / "track=Small_oval_track").glob("car=*/driver=*")} == {
        "driver=Ada",
        "driver=Bob",
        "driver=unknown",
    }


def _leaves(arr: np.ndarray, prefix: str = "") -> Iterator[tuple[str, np.ndarray]]:
    """A structured array's scalar columns, walked by the test itself (path joined with ``_``)."""
    names = arr.dtype.names
    if names is not None:
        for name in names:
            yield from _leaves(arr[name], f"{prefix}_{name}" if prefix else name)
    elif arr.ndim > 1:
        for k in range(arr.shape[1]):
            yield from _leaves(arr[:, k], f"{prefix}_{k}")
    else:
        yield prefix, arr


def test_frames_table_equals_the_frames_in_the_file(folder: dict[str, Any]) -> None:
    out, rec = folder["out"], folder["rec"]
    con = duckdb.connect()
    for d in folder["drives"]:
        rel = d["path"].relative_to(rec).as_posix()
        data = d["path"].read_bytes()
        with Reader(d["path"]) as r:
            frame_size = r.schema.frame_dtype.itemsize
            forza_at = r.schema.frame_dtype.fields["forza"][0].fields["speed"][1]  # type: ignore[index]
            speed_at = r.schema.frame_dtype.fields["forza"][1] + forza_at  # type: ignore[index]
            for i, sess in enumerate(r.sessions):
                q = (
                    f"SELECT * FROM read_parquet('{out}/frames/forza/**/*.parquet', hive_partitioning = true)"
                    f" WHERE file = '{rel}' AND session = {i} ORDER BY tick"
                )
                rel_q = con.sql(q)
                got = dict(zip(rel_q.columns, zip(*rel_q.fetchall(), strict=True), strict=True))
                n = sess.frame_count
                assert len(got["tick"]) == n > 0
                # ticks and speed as the bytes on disk say (u64 tick first, then the channels, C layout)
                at = sess.frames_offset
                ticks = [struct.unpack_from("<Q", data, at + k * frame_size)[0] for k in range(n)]
                speeds = [struct.unpack_from("<f", data, at + k * frame_size + speed_at)[0] for k in range(n)]
                assert list(got["tick"]) == ticks
                assert np.array_equal(np.array(got["speed"], dtype=np.float32), np.array(speeds, np.float32))
                frames = r.frames(i)
                times = sess.time_base_us + (frames["tick"].astype(np.int64) * 1_000_000 + 30) // 60
                assert np.abs(np.array(got["time_us"]) - times).max() <= 1
                assert set(got["rig"]) == {d["rig"]} and set(got["driver"]) == {d["driver"] or "unknown"}
                # every channel of the source, whole columns
                channels = dict(_leaves(frames["forza"]))
                assert set(channels) <= set(got), set(channels) - set(got)
                for name, col in channels.items():
                    mine = np.array(got[name], dtype=col.dtype)
                    assert np.array_equal(mine, col, equal_nan=col.dtype.kind == "f"), name
                assert list(got["stale"]) == frames["stale"]["forza"].tolist()
                # the lap and distance columns: the recorded lap channels
                assert list(got["lap"]) == frames["laps"]["lap_number"].astype(int).tolist()
                assert np.array_equal(
                    np.array(got["lap_distance_m"], dtype=np.float64),
                    frames["laps"]["lap_distance"].astype(np.float64),
                )


def test_a_file_of_another_tool_scalars_enums_and_text(folder: dict[str, Any]) -> None:
    """Fields at the top of the frame go to the table ``frame``; a partition value made path-safe."""
    out = folder["out"]
    rows = _sql(
        out,
        "SELECT * FROM read_parquet('OUT/frames/frame/**/*.parquet', hive_partitioning = true)"
        " ORDER BY session, tick",
    )
    with Reader(folder["rec"] / "rig-d" / "other.wrtf") as r:
        frames = [r.frames(i) for i in range(len(r.sessions))]
    allf = np.concatenate(frames)
    assert len(rows) == len(allf) == 10
    assert [row["tick"] for row in rows] == allf["tick"].astype(int).tolist()
    speed = np.array([row["speed"] for row in rows], dtype=np.float32)
    assert np.array_equal(speed, allf["speed"], equal_nan=True)
    assert [row["gear"] for row in rows] == allf["gear"].tolist()
    assert [row["wheels_2_temperature"] for row in rows] == allf["wheels"]["temperature"][:, 2].tolist()
    # the enum by its names (an unnamed value as its number), the text decoded; `driver` is a
    # partition's name, so the channel keeps its table's prefix
    assert [row["state"] for row in rows][:3] == ["pits", "racing", "7"]
    assert {row["frame_driver"] for row in rows} == {"Ayrton"}
    assert {(row["track"], row["car"], row["driver"]) for row in rows} == {
        ("iracing_track", "unknown", "unknown")
    }
    assert all(row["lap"] is None and row["lap_distance_m"] is None for row in rows)


def _queries() -> list[str]:
    return re.findall(r"```sql\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def test_the_documented_queries(folder: dict[str, Any]) -> None:
    out, rec = folder["out"], folder["rec"]
    best_sectors, apex = _queries()
    # best sectors per driver, from each file's laps as `wrtfd laps` gives them
    per: dict[str, list[list[float]]] = {}
    completed: dict[tuple[str, int, int], str] = {}
    for d in folder["drives"]:
        who = d["driver"] or f"({d['rig']})"
        for session, found in _file_laps(d["path"]):
            per.setdefault(who, []).append(found["sectors_s"])
            completed[(d["path"].relative_to(rec).as_posix(), session, found["lap"])] = who
    rows = _sql(out, best_sectors)
    want = [(who, k + 1, min(s[k] for s in laps)) for who, laps in sorted(per.items()) for k in range(3)]
    assert [(r["driver"], r["sector"]) for r in rows] == [(w, k) for w, k, _ in want]
    assert [r["best_s"] for r in rows] == pytest.approx([b for *_, b in want], abs=1e-6)
    assert {r["driver"] for r in rows} == {"Ada", "Bob", "(rig-c)"}

    # the speed at turn 1's apex: per completed lap, the frame nearest 71.4 m of the recorded
    # lap distance (ties: the earlier), its speed
    apex_m = float(re.search(r"abs\(f\.lap_distance_m - ([0-9.]+)\)", apex).group(1))  # type: ignore[union-attr]
    speeds: dict[str, list[float]] = {}
    for d in folder["drives"]:
        rel = d["path"].relative_to(rec).as_posix()
        with Reader(d["path"]) as rd:
            for i in range(len(rd.sessions)):
                f = rd.frames(i)
                lap_no, dist = f["laps"]["lap_number"].astype(int), f["laps"]["lap_distance"].astype(float)
                for lap in sorted({int(n) for n in lap_no}):
                    who = completed.get((rel, i, lap))
                    if who is None:
                        continue
                    idx = np.flatnonzero(lap_no == lap)
                    k = idx[np.argmin(np.abs(dist[idx] - apex_m))]
                    speeds.setdefault(who, []).append(float(f["forza"]["speed"][k]))
    rows = _sql(out, apex)
    assert [r["driver"] for r in rows] == sorted(speeds)
    for r in rows:
        mine = speeds[r["driver"]]
        assert r["laps"] == len(mine)
        assert (r["min_speed"], r["max_speed"]) == pytest.approx((min(mine), max(mine)), rel=1e-6)
        assert r["mean_speed"] == pytest.approx(sum(mine) / len(mine), rel=1e-6)
        assert 10 < r["min_speed"] < 30  # m/s in the oval's turn (a sanity bound: the sim's grip limit)


def test_track_option_times_laps_as_the_laps_command_does(folder: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "ds"
    done = run("dataset", str(folder["rec"]), "-o", str(out), "--track", str(OVAL), "-q")
    assert done.returncode == 1, done.stderr
    assert not [line for line in done.stderr.splitlines() if line.startswith("[") and "skipped" not in line]
    rows = _laps_table(out)
    expected = []
    for d in folder["drives"]:
        rel = d["path"].relative_to(folder["rec"]).as_posix()
        expected += [(rel, s, lap) for s, lap in _file_laps(d["path"], "--track", str(OVAL))]
    expected.sort(key=lambda e: (e[0].split("/")[0], e[0], e[1], e[2]["lap"]))
    assert [(r["file"], r["session"], r["lap"]) for r in rows] == [
        (f, s, lap["lap"]) for f, s, lap in expected
    ]
    assert [r["time_s"] for r in rows] == pytest.approx([lap["time_s"] for *_, lap in expected], abs=1e-6)
    assert [r["sectors_s"] for r in rows] == [
        pytest.approx(lap["sectors_s"], abs=1e-6) for *_, lap in expected
    ]


def test_rerun_refuses_overwrites_only_a_dataset(folder: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "ds"
    first = run("dataset", str(folder["rec"]), "-o", str(out), "-q")
    assert first.returncode == 1
    before = _laps_table(out)
    again = run("dataset", str(folder["rec"]), "-o", str(out))
    assert again.returncode == 2
    assert again.stderr.splitlines() == [
        f"wrtfd: error: {out} exists: give --overwrite to replace it, or another -o"
    ]
    (out / "laps" / "stray.txt").write_text("from before")
    over = run("dataset", str(folder["rec"]), "-o", str(out), "--overwrite", "-q")
    assert over.returncode == 1, over.stderr
    assert not (out / "laps" / "stray.txt").exists()  # replaced, not merged
    assert _laps_table(out) == before
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    refused = run("dataset", str(folder["rec"]), "-o", str(mine), "--overwrite")
    assert refused.returncode == 2
    assert "is not a wrtfd dataset" in refused.stderr and len(refused.stderr.splitlines()) == 1
    assert (mine / "notes.txt").read_text() == "keep me"


def test_nothing_readable_writes_nothing(tmp_path: Path) -> None:
    rec = tmp_path / "rec"
    (rec / "rig-x").mkdir(parents=True)
    (rec / "rig-x" / "a.wrtf").write_bytes(b"\0" * 100)
    out = tmp_path / "ds"
    done = run("dataset", str(rec), "-o", str(out))
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert lines[-1] == f"wrtfd: error: {rec}: none of the 1 recording(s) could be read"
    assert len(lines) == 2 and lines[0].startswith("[1/1] rig-x/a.wrtf: skipped: ")
    assert not out.exists() and not list(tmp_path.glob(".*partial"))
    empty = tmp_path / "empty"
    empty.mkdir()
    none = run("dataset", str(empty), "-o", str(out))
    assert none.returncode == 2
    assert none.stderr == f"wrtfd: error: {empty}: no WRTF recordings (*.wrtf) found\n"


def test_without_pyarrow_one_line(folder: dict[str, Any], tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['pyarrow'] = None; sys.modules['pyarrow.parquet'] = None\n"
        "from wrtfd.cli.main import main\n"
        f"sys.exit(main(['dataset', {str(folder['rec'])!r}, '-o', {str(tmp_path / 'ds')!r}]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 2
    assert done.stderr == "wrtfd: error: wrtfd dataset needs pyarrow: install wrtfd[parquet]\n"
    assert not (tmp_path / "ds").exists()


def test_a_file_cut_short_is_read_as_far_as_its_frames_are_whole(
    folder: dict[str, Any], tmp_path: Path
) -> None:
    """A recording whose writer was killed (no footer, a torn frame at the end): its whole frames
    that pass the check; the last commit group, cut short, cannot be checked and is left out (as
    ``wrtfd export`` leaves it out), which the file's line says (exit 1)."""
    rec = tmp_path / "rec" / "rig-a"
    rec.mkdir(parents=True)
    data = folder["drives"][0]["path"].read_bytes()
    cut = rec / "cut.wrtf"
    cut.write_bytes(data[: len(data) * 2 // 3 + 7])
    with Reader(cut) as r:
        whole = [len(r.verified_frames(i)[0]) for i in range(len(r.sessions))]
    assert sum(whole) > 0
    out = tmp_path / "ds"
    done = run("dataset", str(tmp_path / "rec"), "-o", str(out))
    assert done.returncode == 1, done.stderr
    assert "frame check were left out" in done.stderr and "cut short" in done.stderr
    rows = _sql(
        out,
        "SELECT session, count(*) AS n FROM read_parquet('OUT/frames/forza/**/*.parquet',"
        " hive_partitioning = true) GROUP BY session ORDER BY session",
    )
    assert [(r["session"], r["n"]) for r in rows] == [(i, n) for i, n in enumerate(whole) if n]
    laps = _laps_table(out)
    assert [r["lap"] for r in laps] == [lap["lap"] for _, lap in _file_laps(cut)]


def test_gnss_laps_and_their_frames(tmp_path: Path) -> None:
    """A track day's GNSS recording (the circuit in its metadata, with pit lines; the car in the
    pit lane at the end of lap 1): laps as ``wrtfd laps`` times them, its in-lap and out-lap
    flagged, and near the car's true ones; each frame's lap is the lap its time falls in."""
    from tests.tracks.sim_recording import gnss_recording

    pytest.importorskip("pyproj")
    rec = tmp_path / "rec" / "kart-1"
    rec.mkdir(parents=True)
    path, truth = gnss_recording(rec, pit_laps=(1,), pit_lines_m=(-100.0, 100.0))
    (rec / "sim.nmea").unlink()
    out = tmp_path / "ds"
    done = run("dataset", str(tmp_path / "rec"), "-o", str(out))
    assert done.returncode == 0, done.stderr
    laps = _laps_table(out)
    listed = _file_laps(path)
    assert [(row["session"], row["lap"]) for row in laps] == [(s, lap["lap"]) for s, lap in listed]
    assert [row["time_s"] for row in laps] == pytest.approx([lap["time_s"] for _, lap in listed], abs=1e-6)
    assert [row["pit"] for row in laps] == [lap.get("pit") for _, lap in listed] == ["in", "out", None]
    true_times = {int(t["lap"]): float(t["time_s"]) for t in truth}  # type: ignore[call-overload, arg-type]
    for row in laps:
        assert row["time_s"] == pytest.approx(true_times[row["lap"]], abs=0.2)  # 10 Hz fixes, 1 m of error
    (track,) = {row["track"] for row in laps}
    assert track != "unknown" and {row["driver"] for row in laps} == {"unknown"}
    assert sorted(p.name for p in (out / "frames").iterdir()) == ["gps", "laps"]  # the source, the live laps
    table = "gps"
    frames = _sql(
        out,
        f"SELECT session, tick, lap, lap_distance_m FROM read_parquet('OUT/frames/{table}/**/*.parquet',"
        " hive_partitioning = true) ORDER BY session, tick",
    )
    with Reader(path) as rd:
        rate = rd.rate_hz
    for lap in laps:
        inside = [f for f in frames if f["session"] == lap["session"] and f["lap"] == lap["lap"]]
        ticks = [f["tick"] for f in inside]
        # the frames of the lap: from its first tick to its last (a fix's time, not the frame's,
        # places the crossing: a frame or so of slack at either end)
        assert (
            abs(min(ticks) - lap["first_tick"]) <= rate // 5
            and abs(max(ticks) - lap["last_tick"]) <= rate // 5
        )
        dist = [f["lap_distance_m"] for f in inside]
        assert dist == sorted(dist) and 0 <= dist[0] < 30 and dist[-1] > 1000  # road.trk: km-long laps


def test_frames_failing_the_check_are_left_out_and_said(folder: dict[str, Any], tmp_path: Path) -> None:
    """A byte flipped in one frame (a bad sector): the frames its check covers are left out, as
    ``wrtfd export`` leaves them out; one line says so, exit 1; every other frame is there."""
    rec = tmp_path / "rec" / "rig-a"
    rec.mkdir(parents=True)
    data = bytearray(folder["drives"][0]["path"].read_bytes())
    with Reader(folder["drives"][0]["path"]) as r:
        sess = r.sessions[1]
        size = r.schema.frame_dtype.itemsize
        forza: Any = r.schema.frame_dtype.fields["forza"]  # type: ignore[index]
        speed_at = forza[1] + forza[0].fields["speed"][1]
    data[sess.frames_offset + 500 * size + speed_at] ^= 0x40
    bad = rec / "flipped.wrtf"
    bad.write_bytes(bytes(data))
    with Reader(bad) as r:
        kept = [len(r.verified_frames(i)[0]) for i in range(len(r.sessions))]
        totals = [s.frame_count for s in r.sessions]
    assert kept[1] < totals[1] and kept[0] == totals[0]  # the check sees the flip
    out = tmp_path / "ds"
    done = run("dataset", str(tmp_path / "rec"), "-o", str(out))
    assert done.returncode == 1, done.stderr
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("[1/1]")]
    lost = totals[1] - kept[1]
    assert f"{lost} frame(s) that fail the frame check were left out; first: session 1" in line
    assert f"{lost} frame(s) that fail the frame check left out" in done.stderr.splitlines()
    rows = _sql(
        out,
        "SELECT session, count(*) AS n FROM read_parquet('OUT/frames/forza/**/*.parquet',"
        " hive_partitioning = true) GROUP BY session ORDER BY session",
    )
    assert [(row["session"], row["n"]) for row in rows] == list(enumerate(kept))
    marker = json.loads((out / "_wrtfd_dataset.json").read_text())
    assert marker["frames_failing_the_check"] == lost
