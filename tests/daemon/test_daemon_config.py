"""Config models: strict types, unknown keys, key paths in errors, systemd directories, defaults."""

from __future__ import annotations

import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wrtfd.daemon.config import (
    Config,
    SerialSourceConfig,
    UdpSourceConfig,
    load_config,
    load_effective_config,
    parse_config,
    resolve_config_path,
    state_directory,
)
from wrtfd.daemon.defaults import default_config_data
from wrtfd.daemon.toml_out import dumps
from wrtfd.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "wrtfd.toml"
    path.write_text(text)
    return path


def test_minimal_udp_source_gets_defaults() -> None:
    cfg = parse_config({"sources": [{"kind": "udp", "protocol": "forza", "port": 5300}]}, "x.toml")
    src = cfg.sources[0]
    assert isinstance(src, UdpSourceConfig)
    assert src.source_name == "forza"
    assert src.host == "0.0.0.0"
    assert cfg.status.host == "127.0.0.1"
    assert cfg.recorder.rate_hz == 60
    assert cfg.recorder.output_dir == Path("recordings")


def test_models_are_frozen() -> None:
    cfg = parse_config({"sources": [{"kind": "udp", "protocol": "forza", "port": 5300}]}, "x.toml")
    with pytest.raises(Exception, match="frozen"):
        cfg.recorder.rate_hz = 30


def test_error_names_file_key_path_and_expectation() -> None:
    data = {
        "sources": [
            {"kind": "udp", "protocol": "forza", "port": 5300},
            {"kind": "udp", "protocol": "f1", "port": "20777"},
        ]
    }
    with pytest.raises(ConfigError) as info:
        parse_config(data, "/etc/wrtfd/wrtfd.toml")
    assert str(info.value) == '/etc/wrtfd/wrtfd.toml: sources[1].port: expected integer, got "20777"'


def test_unknown_keys_are_errors_at_every_level() -> None:
    data = {
        "sources": [{"kind": "serial", "protocol": "nmea", "device": "/dev/ttyUSB0", "baud": 9600}],
        "recorder": {"outdir": "x"},
        "extra": 1,
    }
    with pytest.raises(ConfigError) as info:
        parse_config(data, "c.toml")
    lines = str(info.value).splitlines()
    assert lines == ["c.toml: sources[0].baud: unknown key; recorder.outdir: unknown key; extra: unknown key"]


def test_unknown_and_missing_kind() -> None:
    with pytest.raises(ConfigError, match=r"c.toml: sources\[0\]: unknown source kind 'tcp'"):
        parse_config({"sources": [{"kind": "tcp", "protocol": "x"}]}, "c.toml")
    with pytest.raises(ConfigError, match=r"c.toml: sources\[0\]: required key `kind` is missing"):
        parse_config({"sources": [{"protocol": "forza"}]}, "c.toml")


def test_missing_required_key_of_a_kind() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"sources": [{"kind": "serial", "protocol": "nmea"}]}, "c.toml")
    assert str(info.value) == "c.toml: sources[0].device: required key is missing"


def test_range_and_pattern_errors() -> None:
    with pytest.raises(ConfigError, match=r"sources\[0\].port: expected less than or equal to 65535"):
        parse_config({"sources": [{"kind": "udp", "protocol": "forza", "port": 70000}]}, "c.toml")
    with pytest.raises(ConfigError, match=r"sources\[0\].name: expected a lowercase identifier"):
        parse_config(
            {"sources": [{"kind": "udp", "protocol": "forza", "port": 1, "name": "Bad Name"}]}, "c.toml"
        )
    with pytest.raises(ConfigError, match=r"status.host: expected an IP address"):
        parse_config(
            {"sources": [{"kind": "udp", "protocol": "forza", "port": 1}], "status": {"host": "lan"}}, "c"
        )


def test_sources_must_be_unique_by_name_and_port() -> None:
    two = [
        {"kind": "udp", "protocol": "forza", "port": 5300},
        {"kind": "udp", "protocol": "forza", "port": 5301},
    ]
    with pytest.raises(ConfigError, match="both named 'forza'"):
        parse_config({"sources": two}, "c.toml")
    same_port = [
        {"kind": "udp", "protocol": "forza", "port": 5300},
        {"kind": "udp", "protocol": "f1", "port": 5300, "host": "127.0.0.1"},
    ]
    with pytest.raises(ConfigError, match="both listen on UDP port 5300"):
        parse_config({"sources": same_port}, "c.toml")


def test_at_least_one_source() -> None:
    with pytest.raises(ConfigError, match="sources: "):
        parse_config({"sources": []}, "c.toml")


def test_toml_syntax_error_names_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "[[sources]\nkind = 'udp'\n")
    with pytest.raises(ConfigError, match=rf"^{path}: invalid TOML: .*line 1"):
        load_config(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "nope.toml")


def test_unknown_protocol_and_wrong_transport(tmp_path: Path) -> None:
    path = _write(tmp_path, '[[sources]]\nkind = "udp"\nprotocol = "pigeon"\nport = 1\n')
    with pytest.raises(
        ConfigError, match=r"sources\[0\].protocol: unknown protocol 'pigeon'; known: .*forza"
    ):
        load_config(path)
    path = _write(tmp_path, '[[sources]]\nkind = "udp"\nprotocol = "nmea"\nport = 1\n')
    with pytest.raises(ConfigError, match=r"'nmea' is a serial protocol, but this source is kind = 'udp'"):
        load_config(path)


def test_state_and_configuration_directories(tmp_path: Path) -> None:
    assert state_directory({"STATE_DIRECTORY": "/var/lib/wrtfd:/var/lib/other"}) == Path("/var/lib/wrtfd")
    assert state_directory({}) is None
    conf = tmp_path / "etc"
    conf.mkdir()
    env = {"CONFIGURATION_DIRECTORY": str(conf)}
    assert resolve_config_path(None, env) is None  # no wrtfd.toml there: built-in default
    (conf / "wrtfd.toml").write_text('[[sources]]\nkind = "udp"\nprotocol = "forza"\nport = 5300\n')
    assert resolve_config_path(None, env) == conf / "wrtfd.toml"
    assert resolve_config_path(Path("x.toml"), env) == Path("x.toml")
    loaded = load_effective_config(None, {**env, "STATE_DIRECTORY": str(tmp_path / "state")})
    assert loaded.origin == str(conf / "wrtfd.toml")
    assert (
        loaded.output_dir({"STATE_DIRECTORY": str(tmp_path / "state")}) == tmp_path / "state" / "recordings"
    )


def test_default_config_one_listener_per_port_and_state_dir() -> None:
    protocols = {
        # port_rank and client as in their descriptors (wrtfd/protocols): F1 wins the shared
        # port; Assetto Corsa is a game wrtfd contacts, so nothing listens for it
        "f1": SimpleNamespace(transport="udp", default_port=20777, port_rank=1),
        "codemasters": SimpleNamespace(transport="udp", default_port=20777, port_rank=4),
        "forza": SimpleNamespace(transport="udp", default_port=5300, port_rank=0),
        "assetto_corsa": SimpleNamespace(transport="udp", default_port=9996, client=True),
        "nmea": SimpleNamespace(transport="serial", default_port=None),
    }
    data = default_config_data(protocols, {"STATE_DIRECTORY": "/var/lib/wrtfd"})
    assert [(s["protocol"], s["port"]) for s in data["sources"]] == [("forza", 5300), ("f1", 20777)]
    assert data["recorder"]["output_dir"] == "/var/lib/wrtfd"
    assert default_config_data(protocols, {})["recorder"]["output_dir"] == "recordings"
    cfg = parse_config(data, "built-in default")
    assert len(cfg.sources) == 2


def test_builtin_default_from_registry_validates() -> None:
    loaded = load_effective_config(None, {})
    assert loaded.origin == "built-in default"
    assert {s.kind for s in loaded.config.sources} == {"udp"}
    assert "forza" in {s.protocol for s in loaded.config.sources}


@pytest.mark.parametrize("path", sorted((REPO / "config").glob("*.toml")), ids=lambda p: p.name)
def test_example_configs_parse(path: Path) -> None:
    data = tomllib.loads(path.read_text())
    cfg = parse_config(data, str(path))
    assert cfg.sources


def test_show_output_round_trips_to_the_same_config() -> None:
    data = {
        "sources": [
            {
                "kind": "udp",
                "protocol": "forza",
                "port": 5300,
                "options": {"game": "fm2023"},
                "mapping": {"include": ["speed", "rpm"], "rename": {"rpm": "engine_rpm"}},
            },
            {"kind": "serial", "name": "gps", "protocol": "nmea", "device": "/dev/ttyACM0", "baudrate": 9600},
        ],
        "recorder": {"metadata": {"Track": 'Spa "GP"', "Driver": "Ä"}, "rotate_bytes": 1 << 30},
    }
    cfg = parse_config(data, "c.toml")
    text = dumps(cfg.model_dump(mode="json"))
    again = parse_config(tomllib.loads(text), "shown.toml")
    assert again == cfg
    assert isinstance(again.sources[1], SerialSourceConfig)


_text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=20)


@given(
    # (keys the writer can take: not empty, not one it writes itself)
    metadata=st.dictionaries(
        _text.filter(lambda k: k not in ("", "wrtf.schema", "wrtfd.check")), _text, max_size=5
    ),
    rate=st.integers(1, 1000),
    fsync=st.floats(0.001, 1000, allow_nan=False),
)
def test_dumps_round_trip_property(metadata: dict[str, str], rate: int, fsync: float) -> None:
    cfg = Config.model_validate(
        {
            "sources": [{"kind": "udp", "protocol": "forza", "port": 5300}],
            "recorder": {"metadata": metadata, "rate_hz": rate, "fsync_interval_s": fsync},
        }
    )
    assert parse_config(tomllib.loads(dumps(cfg.model_dump(mode="json"))), "p") == cfg


def test_jitter_s_reaches_the_recorder_policy_within_its_bounds(tmp_path: Path) -> None:
    from wrtfd.daemon.config import load_config
    from wrtfd.daemon.recorder_port import recorder_policy
    from wrtfd.defaults import ARRIVAL_BUNCH_S, TICK_JITTER_S

    path = tmp_path / "wrtfd.toml"
    source = '[[sources]]\nkind = "udp"\nprotocol = "forza"\nport = 5300\n'
    path.write_text(source)
    assert recorder_policy(load_config(path), tmp_path).jitter_s == TICK_JITTER_S
    path.write_text(source + "[recorder]\njitter_s = 0.5\n")
    assert recorder_policy(load_config(path), tmp_path).jitter_s == 0.5
    for bad in (ARRIVAL_BUNCH_S / 2, 2.5):  # under bunch_s (the policy refuses it), over 2 s
        path.write_text(source + f"[recorder]\njitter_s = {bad}\n")
        with pytest.raises(ConfigError, match="jitter_s"):
            load_config(path)
