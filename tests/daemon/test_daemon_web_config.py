"""``[web]`` and ``[groups.NAME]``: validation, the generated token, and the trigger built per group."""

from __future__ import annotations

import re
import stat
import tomllib
from pathlib import Path

import pytest

from wrtfd.cli.main import main
from wrtfd.daemon.config import parse_config
from wrtfd.errors import ConfigError

SOURCE = '[[sources]]\nkind = "udp"\nprotocol = "forza"\nhost = "127.0.0.1"\nport = 47990\n'


def write(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(SOURCE + f'[recorder]\noutput_dir = "{tmp_path / "rec"}"\n' + extra)
    return path


def test_group_options_and_the_star_table() -> None:
    cfg = parse_config(
        {
            "sources": [
                {"kind": "udp", "protocol": "forza", "group": "car"},
                {"kind": "udp", "protocol": "f1"},
            ],
            "groups": {"car": {"record": "triggered", "trigger": "speed > 5"}, "*": {"pre_trigger_s": 3.0}},
        },
        "x.toml",
    )
    assert cfg.group_config("car").record == "triggered" and cfg.group_config("car").pre_trigger_s == 10.0
    assert cfg.group_config("main").pre_trigger_s == 3.0 and cfg.group_config("main").record == "continuous"


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        ({"nope": {}}, "groups: no recording group 'nope'"),
        ({"main": {"trigger": "speed > 5"}}, 'record = "continuous"'),
        ({"main": {"record": "sometimes"}}, "groups.main.record"),
        ({"main": {"pre_trigger_max_bytes": 10}}, "groups.main.pre_trigger_max_bytes"),
    ],
)
def test_bad_group_options_name_the_key(groups: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_config({"sources": [{"kind": "udp", "protocol": "forza"}], "groups": groups}, "x.toml")


def test_a_bad_trigger_condition_fails_config_check_naming_the_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, '[groups.main]\nrecord = "triggered"\ntrigger = "speed >> 5"\n')
    assert main(["config", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "groups.main: trigger 'speed >> 5'" in err and len(err.splitlines()) == 1
    path = write(tmp_path, '[groups.main]\nrecord = "triggered"\ntrigger = "warp > 5"\n')
    assert main(["config", "check", str(path)]) == 2
    assert "no channel 'warp'" in capsys.readouterr().err


@pytest.mark.parametrize("token", ["short", "has space in it 0123"])
def test_web_token_must_be_long_and_plain(token: str) -> None:
    with pytest.raises(ConfigError, match=r"web\.token"):
        parse_config({"sources": [{"kind": "udp", "protocol": "forza"}], "web": {"token": token}}, "x.toml")


def test_config_show_prints_the_generated_token_off_loopback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loopback = write(tmp_path, "[status]\nport = 47991\n")
    assert main(["config", "show", "--config", str(loopback)]) == 0
    assert "token" not in tomllib.loads(capsys.readouterr().out.split("\n", 1)[1])["web"]
    lan = write(tmp_path, '[status]\nhost = "0.0.0.0"\nport = 47991\n')
    assert main(["config", "show", "--config", str(lan)]) == 0
    token = tomllib.loads(capsys.readouterr().out.split("\n", 1)[1])["web"]["token"]
    kept = tmp_path / "rec" / ".wrtfd-web-token"
    assert kept.read_text().strip() == token and len(token) >= 16
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert main(["config", "show", "--config", str(lan)]) == 0  # the same token every time
    assert tomllib.loads(capsys.readouterr().out.split("\n", 1)[1])["web"]["token"] == token
    configured = write(tmp_path, '[status]\nhost = "0.0.0.0"\n[web]\ntoken = "my-own-token-123456"\n')
    assert main(["config", "show", "--config", str(configured)]) == 0
    assert tomllib.loads(capsys.readouterr().out.split("\n", 1)[1])["web"]["token"] == "my-own-token-123456"
