"""Config and wiring of the issue-14 games: the ``gt7`` source kind (the console's address, the
variant, ports), Project CARS on its shared port, and lap channels for every game with positions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from wrtfd.daemon.config import Gt7SourceConfig, LoadedConfig, load_config, parse_config
from wrtfd.daemon.wiring import build_source, check_buildable
from wrtfd.errors import ConfigError
from wrtfd.sources.gt7 import PROBE_ORDER, Gt7Source

REPO = Path(__file__).resolve().parents[2]
OVAL = REPO / "config" / "tracks" / "oval.trk"


def _loaded(sources: list[dict[str, Any]], tmp_path: Path) -> LoadedConfig:
    return LoadedConfig(
        config=parse_config({"sources": sources}, "t.toml"), origin="t.toml", base_dir=tmp_path
    )


def test_gt7_source_defaults_and_wiring(tmp_path: Path) -> None:
    loaded = _loaded([{"kind": "gt7", "console": "192.168.1.30"}], tmp_path)
    src = loaded.config.sources[0]
    assert isinstance(src, Gt7SourceConfig)
    assert (src.protocol, src.port, src.console_port, src.variant, src.host) == (
        "gt7",
        33740,
        33739,
        None,
        "0.0.0.0",
    )
    built = build_source(loaded, 0, src)
    assert isinstance(built.source, Gt7Source)
    assert built.source.console == ("192.168.1.30", 33739) and built.source.letters == PROBE_ORDER
    assert built.address == "udp 0.0.0.0:33740, heartbeat to 192.168.1.30:33739"
    assert any(f["name"] == "packet_size" for f in built.definition["frame"]["fields"])
    fixed = _loaded([{"kind": "gt7", "console": "10.0.0.5", "variant": "~", "port": 40000}], tmp_path)
    source = build_source(fixed, 0, fixed.config.sources[0]).source
    assert isinstance(source, Gt7Source) and source.letters == ("~",) and source.port == 40000


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ({"kind": "gt7"}, r"t.toml: sources\[0\].console: required key is missing"),
        ({"kind": "gt7", "console": "ps5.local"}, r"sources\[0\].console: expected an IP address"),
        ({"kind": "gt7", "console": "10.0.0.5", "variant": "D"}, r"sources\[0\].variant: expected one of"),
        (
            {"kind": "gt7", "console": "10.0.0.5", "protocol": "forza"},
            r"sources\[0\].protocol: expected one of",
        ),
        ({"kind": "gt7", "console": "10.0.0.5", "heartbeat_interval_s": 0}, r"heartbeat_interval_s"),
        ({"kind": "gtx", "console": "10.0.0.5"}, r"unknown source kind 'gtx'"),
    ],
)
def test_gt7_config_errors_name_the_key(source: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config({"sources": [source]}, "t.toml")


def test_gt7_port_cannot_be_shared_with_a_listener() -> None:
    sources = [
        {"kind": "udp", "protocol": "forza", "port": 33740},
        {"kind": "gt7", "console": "10.0.0.5"},
    ]
    with pytest.raises(ConfigError, match="both listen on UDP port 33740"):
        parse_config({"sources": sources}, "t.toml")


@pytest.mark.parametrize(
    ("source", "x", "z"),
    [
        ({"kind": "gt7", "console": "10.0.0.5"}, "position_x", "position_z"),
        ({"kind": "udp", "protocol": "pcars2"}, "full_position_x", "full_position_z"),
        ({"kind": "udp", "protocol": "pcars"}, "world_position_x", "world_position_z"),
    ],
)
def test_lap_channels_for_every_game_with_a_position(
    tmp_path: Path, source: dict[str, Any], x: str, z: str
) -> None:
    loaded = _loaded([{**source, "track": str(OVAL)}], tmp_path)
    built = build_source(loaded, 0, loaded.config.sources[0])
    assert built.laps is not None
    assert (built.laps.position.x, built.laps.position.z) == (x, z)
    check_buildable(loaded)


def test_example_config_builds() -> None:
    loaded = load_config(REPO / "config" / "gt7.toml")
    built = check_buildable(loaded)
    assert [b.config.protocol for b in built] == ["gt7", "pcars2"]
    assert [b.config.group_name for b in built] == ["gt7", "pcars2"]
