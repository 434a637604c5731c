"""Config of the ACC and EA SPORTS WRC sources: the `acc` kind, the built-in default (WRC in it,
ACC not), and a WRC structure file checked at config time with one clear line naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wrtfd.cli.main import main
from wrtfd.daemon.config import AccSourceConfig, load_effective_config, parse_config
from wrtfd.daemon.defaults import CLIENT_PROTOCOLS
from wrtfd.errors import ConfigError

ACC = '[[sources]]\nkind = "acc"\nhost = "192.168.1.20"\npassword = "asd"\n'


def test_acc_kind_defaults_and_limits() -> None:
    cfg = parse_config({"sources": [{"kind": "acc", "password": "asd"}]}, "x.toml")
    src = cfg.sources[0]
    assert isinstance(src, AccSourceConfig)
    assert (src.protocol, src.host, src.port, src.update_interval_ms, src.display_name) == (
        "acc", "127.0.0.1", 9000, 100, "wrtfd",
    )  # fmt: skip
    assert src.source_name == "acc" and src.command_password == ""
    for bad, where in [
        ({"password": "x" * 256}, "sources[0].password"),
        ({"update_interval_ms": 5}, "sources[0].update_interval_ms"),
        ({"display_name": ""}, "sources[0].display_name"),
        ({"protocol": "forza"}, "sources[0].protocol"),
        ({"host": "game-pc"}, "sources[0].host"),
        ({"password": 1234}, "sources[0].password: expected string"),
    ]:
        with pytest.raises(ConfigError) as e:
            parse_config({"sources": [{"kind": "acc", **bad}]}, "x.toml")  # type: ignore[dict-item]
        assert f"x.toml: {where}" in str(e.value)


def test_builtin_default_listens_for_wrc_but_not_acc() -> None:
    loaded = load_effective_config(None, {})
    by_protocol = {s.protocol: s for s in loaded.config.sources}
    assert "acc" in CLIENT_PROTOCOLS and "acc" not in by_protocol
    wrc = by_protocol["wrc"]
    assert (wrc.port, wrc.group, wrc.host) == (20779, "wrc", "0.0.0.0")  # type: ignore[union-attr]
    ports = [s.port for s in loaded.config.sources]  # type: ignore[union-attr]
    assert len(ports) == len(set(ports))


def test_check_an_acc_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.toml"
    path.write_text(ACC)
    assert main(["config", "check", str(path)]) == 0
    assert "acc (acc/acc)" in capsys.readouterr().out


def test_wrc_structure_relative_to_the_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "laptimer.json").write_text(
        json.dumps({"id": "laptimer", "packets": [{"id": "session_update",
                                                  "channels": ["stage_current_time", "stage_progress"]}]})
    )  # fmt: skip
    path = tmp_path / "c.toml"
    path.write_text(
        '[[sources]]\nkind = "udp"\nprotocol = "wrc"\nport = 20800\n'
        'options = { structure = "laptimer.json", packet = "session_update" }\n'
    )
    assert main(["config", "schema", "--config", str(path), "-o", str(tmp_path / "frame.yaml")]) == 0
    frame = (tmp_path / "frame.yaml").read_text()
    assert "stage_current_time" in frame and "stage_progress" in frame and "vehicle_speed" not in frame
    capsys.readouterr()


@pytest.mark.parametrize(
    ("structure", "content", "expected"),
    [
        ("missing.json", None, "no such file"),
        ("bad.json", "{ nope", "is not valid JSON"),
        ("odd.json", json.dumps({"packets": [{"id": "session_update", "channels": ["warp"]}]}),
         "unknown channel 'warp'"),
    ],
)  # fmt: skip
def test_a_bad_structure_is_one_clear_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], structure: str, content: str | None, expected: str
) -> None:
    if content is not None:
        (tmp_path / structure).write_text(content)
    path = tmp_path / "c.toml"
    path.write_text(
        f'[[sources]]\nkind = "udp"\nprotocol = "wrc"\noptions = {{ structure = "{structure}" }}\n'
    )
    assert main(["config", "check", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"wrtfd: error: {path}: sources[0].options: ")
    assert str(tmp_path / structure) in err[0] and expected in err[0]
