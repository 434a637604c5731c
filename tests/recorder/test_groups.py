"""Recording groups: sources that do not belong together record separate files, side by side."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from tests.recorder.conftest import GAME_DEF, GPS_DEF
from wrtfd.decoders.base import Sample
from wrtfd.errors import ConfigError
from wrtfd.format import Reader, validate_file
from wrtfd.recorder import LiveRecorder, RecorderPolicy, SourceSpec
from wrtfd.recorder.groups import RecorderGroups, merge_snapshots


def _policy(d: Path) -> RecorderPolicy:
    return RecorderPolicy(output_dir=d, jitter_s=0.05, settle_s=0.1, fsync_interval_s=0.2)


def _two_games(out_dir: Path) -> RecorderGroups:
    forza = LiveRecorder([SourceSpec("forza", GAME_DEF, use_source_clock=False)], _policy(out_dir))
    f1 = LiveRecorder([SourceSpec("f1", GAME_DEF, use_source_clock=False)], _policy(out_dir))
    return RecorderGroups({"forza": forza, "f1": f1}, {"forza": "forza", "f1": "f1"})


async def test_each_group_records_its_own_file_with_only_its_channels(out_dir: Path) -> None:
    groups = _two_games(out_dir)
    async with anyio.create_task_group() as tg:
        await tg.start(groups.run)
        t0 = time.monotonic()
        for i in range(45):
            now = time.monotonic_ns()
            groups.sink(Sample("forza", now, {"speed": float(i), "gear": 2, "n": i}))
            if i < 30:  # the second game stops early: its file simply ends sooner
                groups.sink(Sample("f1", now, {"speed": 100.0 + i, "gear": 5, "n": i}))
            await anyio.sleep(max(0.0, t0 + (i + 1) / 60 - time.monotonic()))
        snap = groups.stats_snapshot()
        assert set(snap["groups"]) == {"forza", "f1"}
        assert snap["samples"] == 45 + 30
        assert len(snap["open_files"]) == 2
        await groups.stop()
    paths = sorted(p for g in groups.groups.values() for p in g.recorder.paths)
    assert len(paths) == 2
    seen = {}
    for path in paths:
        assert validate_file(path) == []
        with Reader(path) as r:
            # Exactly one game's channels in each file: the other game's are not there.
            (source,) = [n for n in r.frames(0).dtype.names or () if n in ("forza", "f1")]
            seen[source] = [int(x) for i in range(len(r.sessions)) for x in r.frames(i)[source]["n"]]
    assert seen["forza"][-1] == 44 and seen["f1"][-1] == 29
    assert seen["forza"] == sorted(seen["forza"]) and seen["f1"] == sorted(seen["f1"])
    assert groups.stats_snapshot()["state"] == "stopped"


def test_samples_are_routed_by_source(out_dir: Path) -> None:
    game = LiveRecorder([SourceSpec("game", GAME_DEF), SourceSpec("gps", GPS_DEF)], _policy(out_dir))
    other = LiveRecorder([SourceSpec("other", GAME_DEF)], _policy(out_dir))
    groups = RecorderGroups({"car": game, "rig": other}, {"game": "car", "gps": "car", "other": "rig"})
    groups.sink(Sample("gps", 1, {"lat_deg": 1.0}))
    groups.sink(Sample("game", 2, {"speed": 1.0}))
    groups.sink(Sample("other", 3, {"speed": 2.0}))
    assert game.samples == 2 and other.samples == 1
    with pytest.raises(ConfigError, match="unknown source 'nobody'"):
        groups.sink(Sample("nobody", 4, {}))


def test_unknown_group_and_no_group_are_config_errors(out_dir: Path) -> None:
    game = LiveRecorder([SourceSpec("game", GAME_DEF)], _policy(out_dir))
    with pytest.raises(ConfigError, match="unknown recording group"):
        RecorderGroups({"car": game}, {"game": "boat"})
    with pytest.raises(ConfigError, match="no recording group"):
        RecorderGroups({}, {})


def test_merged_snapshot_reports_the_worst_state_and_sums_counters() -> None:
    a = {
        "state": "ok",
        "file": "a.wrtf",
        "frames": 10,
        "frame_rate_hz": 60.0,
        "dropped_ticks": 1,
        "fsync_lag_s": 0.2,
        "write_pending_s": None,
        "error": None,
        "per_source": {"a": {"x": 1}},
    }
    b = {
        "state": "stalled",
        "file": "b.wrtf",
        "frames": 5,
        "frame_rate_hz": 10.0,
        "dropped_ticks": 2,
        "fsync_lag_s": 0.7,
        "write_pending_s": 6.0,
        "error": "disk hung",
        "per_source": {"b": {"x": 2}},
    }
    merged = merge_snapshots({"a": a, "b": b})
    assert merged["state"] == "stalled" and merged["error"] == "disk hung"
    assert merged["frames"] == 15 and merged["dropped_ticks"] == 3 and merged["frame_rate_hz"] == 70.0
    assert merged["file"] == "a.wrtf"  # the busiest group's file is the one STATUS= shows
    assert merged["open_files"] == ["a.wrtf", "b.wrtf"]
    assert merged["fsync_lag_s"] == 0.7 and merged["write_pending_s"] == 6.0
    assert merged["per_source"] == {"a": {"x": 1}, "b": {"x": 2}}
    stopped = merge_snapshots({"a": {**a, "state": "stopped"}, "b": {**b, "state": "stopped"}})
    assert stopped["state"] == "stopped"
    single = merge_snapshots({"only": a})
    assert single["frames"] == 10 and single["groups"] == {"only": a} and single["open_files"] == ["a.wrtf"]
