"""The raw tap's config keys and wiring: which sources are tapped, which interfaces, the hub."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from wrtfd.daemon.config import LoadedConfig, parse_config
from wrtfd.daemon.tap import tap_interfaces
from wrtfd.daemon.wiring import build_sources, prepare
from wrtfd.errors import ConfigError
from wrtfd.recorder.observe import FileOpened


def _data(recorder: dict[str, Any] | None = None, **source_extra: Any) -> dict[str, Any]:
    return {
        "sources": [
            {
                "kind": "udp",
                "name": "forza",
                "protocol": "forza",
                "port": 5301,
                "group": "rig",
                **source_extra,
            },
            {"kind": "serial", "name": "gps", "protocol": "nmea", "device": "/dev/ttyGPS", "group": "rig"},
            {"kind": "udp", "name": "f1", "protocol": "f1", "port": 20777, "group": "f1"},
        ],
        "recorder": {"output_dir": "rec", **(recorder or {})},
        "status": {"enabled": False},
    }


def _loaded(data: dict[str, Any], tmp_path: Path) -> LoadedConfig:
    return LoadedConfig(config=parse_config(data, "t.toml"), origin="t.toml", base_dir=tmp_path)


@pytest.mark.parametrize(
    ("recorder", "source", "tapped"),
    [
        ({}, {}, []),
        ({"raw_tap": True}, {}, ["forza", "gps", "f1"]),
        ({"raw_tap": ["rig"]}, {}, ["forza", "gps"]),
        ({"raw_tap": ["rig"]}, {"raw_tap": False}, ["gps"]),  # a source's own key wins
        ({}, {"raw_tap": True}, ["forza"]),
    ],
)
def test_which_sources_are_tapped(
    tmp_path: Path, recorder: dict[str, Any], source: dict[str, Any], tapped: list[str]
) -> None:
    loaded = _loaded(_data(recorder, **source), tmp_path)
    interfaces = tap_interfaces(loaded, build_sources(loaded))
    assert [i.source for i in interfaces] == tapped
    kinds = {i.source: i.kind for i in interfaces}
    assert kinds.get("gps", "raw") == "raw" and kinds.get("forza", "udp") == "udp"
    for i in interfaces:
        assert i.description.startswith(f"wrtfd source {i.source}: ")


def test_tap_config_errors_name_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"recorder.raw_tap: no recording group 'nope' \(groups: f1, rig\)"):
        _loaded(_data({"raw_tap": ["nope"]}), tmp_path)
    with pytest.raises(ConfigError, match=r"recorder.raw_tap_max_bytes: .*1048576"):
        _loaded(_data({"raw_tap": True, "raw_tap_max_bytes": 1000}), tmp_path)
    with pytest.raises(ConfigError, match=r"sources\[0\].raw_tap: expected true or false"):
        _loaded(_data(raw_tap="yes"), tmp_path)


def test_prepare_wires_the_tap_to_its_sources_and_the_hub(tmp_path: Path) -> None:
    loaded = _loaded(_data({"raw_tap": ["rig"], "raw_tap_max_bytes": 1 << 20}), tmp_path)
    pipeline = prepare(loaded, env={})
    tap = pipeline.tap
    assert tap is not None
    assert tap.groups == ["rig"] and tap.max_bytes == 1 << 20
    assert tap.output_dir == pipeline.output_dir
    sinks = {h.source.name: getattr(h.source, "raw_sink", None) for h in pipeline.handles}
    assert sinks["forza"] is not None and sinks["gps"] is not None and sinks["f1"] is None
    pipeline.hub.publish(FileOpened("rig", str(tmp_path / "x.wrtf"), 1))
    pipeline.hub.publish(FileOpened("f1", str(tmp_path / "y.wrtf"), 1))  # not a tapped group
    assert tap.snapshot()["queued"] == 1  # the tap observes the recorder's file events ...
    assert not pipeline.hub.wants_frames  # ... and only them: no frame is copied for it
    assert tap.close()  # never started: nothing to write, nothing created
    assert not (tmp_path / "rec").exists()


def test_no_tap_no_hook(tmp_path: Path) -> None:
    pipeline = prepare(_loaded(_data(), tmp_path), env={})
    assert pipeline.tap is None
    assert all(getattr(h.source, "raw_sink", None) is None for h in pipeline.handles)
