"""Recording groups in the daemon: which sources share a file, and the built-in default's split."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wrtfd.daemon.config import LoadedConfig, load_effective_config, parse_config
from wrtfd.daemon.wiring import prepare
from wrtfd.recorder.groups import RecorderGroups


def _frame_sources(live: Any) -> set[str]:
    """The source structs of a group's frame (the recorder's own fields, such as stale flags, aside)."""
    sources = {s.name for s in live.recorder.sources}
    return sources & set(live.recorder.schema.frame_dtype.names)


def test_built_in_default_gives_each_game_its_own_files(tmp_path: Path) -> None:
    loaded = load_effective_config(None, env={"STATE_DIRECTORY": str(tmp_path / "state")})
    daemon = prepare(loaded, env={"STATE_DIRECTORY": str(tmp_path / "state")})
    recorder = daemon.recorder
    assert isinstance(recorder, RecorderGroups)
    games = [h.config.source_name for h in daemon.handles]
    assert {"forza", "f1"} <= set(games)
    assert sorted(recorder.groups) == sorted(games)
    for name, live in recorder.groups.items():
        assert _frame_sources(live) == {name}  # a Forza file holds Forza channels only
    assert not (tmp_path / "state").exists()  # nothing is created before the daemon runs


def test_sources_without_a_group_share_one_recording(tmp_path: Path) -> None:
    data = {
        "sources": [
            {"kind": "udp", "protocol": "forza", "port": 5301},
            {"kind": "udp", "protocol": "f1", "port": 20777},
            {"kind": "udp", "protocol": "outgauge", "port": 4444, "group": "lfs"},
        ],
        "recorder": {"output_dir": str(tmp_path / "rec")},
    }
    loaded = LoadedConfig(config=parse_config(data, "t.toml"), origin="t.toml", base_dir=tmp_path)
    recorder = prepare(loaded, env={}).recorder
    assert sorted(recorder.groups) == ["lfs", "main"]
    assert _frame_sources(recorder.groups["main"]) == {"forza", "f1"}
    assert _frame_sources(recorder.groups["lfs"]) == {"outgauge"}
