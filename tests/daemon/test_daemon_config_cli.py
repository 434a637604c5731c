"""``wrtfd config check`` / ``wrtfd config show`` through the real CLI entry point."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from wrtfd.cli.main import main
from wrtfd.daemon.config import parse_config

GOOD = '[[sources]]\nkind = "udp"\nprotocol = "forza"\nport = 5300\nmapping = { include = ["speed"] }\n'


def test_check_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.toml"
    path.write_text(GOOD)
    assert main(["config", "check", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: ok: 1 source(s): forza (udp/forza)\n"


def test_check_reports_every_problem_with_its_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[[sources]]\nkind = "udp"\nprotocol = "forza"\nport = 0\n[status]\nport = true\nhst = 1\n'
    )
    assert main(["config", "check", str(path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err  # an error is one line: every problem in it, joined
    assert err[0].startswith(f"wrtfd: error: {path}: sources[0].port: expected greater than or equal to 1")
    assert "; status.port: expected integer, got true" in err[0]
    assert "; status.hst: unknown key" in err[0]


def test_check_builds_decoders_and_mapping(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.toml"
    path.write_text(GOOD.replace('"speed"', '"warp_factor"'))
    assert main(["config", "check", str(path)]) == 2
    assert "sources[0].mapping.include: no field 'warp_factor'" in capsys.readouterr().err


def test_show_prints_the_effective_config_as_toml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.toml"
    path.write_text(GOOD + '[recorder]\noutput_dir = "/data/rec"\n')
    assert main(["config", "show", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"# effective wrtfd config (from: {path})\n")
    data = tomllib.loads(out)
    assert data["sources"][0]["name"] == "forza"  # defaults filled in
    assert data["status"] == {"enabled": True, "host": "127.0.0.1", "port": 8787, "min_free_mb": 200.0}
    assert data["recorder"]["output_dir"] == "/data/rec"
    cfg = parse_config(data, "shown")
    assert cfg.sources[0].mapping.include == ("speed",)


def test_show_uses_the_systemd_configuration_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "wrtfd.toml").write_text(GOOD)
    monkeypatch.setenv("CONFIGURATION_DIRECTORY", str(tmp_path))
    monkeypatch.setenv("STATE_DIRECTORY", "/var/lib/wrtfd")
    assert main(["config", "show"]) == 0
    out = capsys.readouterr().out
    assert f"(from: {tmp_path / 'wrtfd.toml'})" in out
    assert tomllib.loads(out)["recorder"]["output_dir"] == "/var/lib/wrtfd/recordings"


def test_show_default_records_into_the_state_directory(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("CONFIGURATION_DIRECTORY", raising=False)
    monkeypatch.setenv("STATE_DIRECTORY", "/var/lib/wrtfd")
    assert main(["config", "show"]) == 0
    data = tomllib.loads(capsys.readouterr().out)
    assert data["recorder"]["output_dir"] == "/var/lib/wrtfd"
    assert all(s["kind"] == "udp" and s["host"] == "0.0.0.0" for s in data["sources"])
    ports = [s["port"] for s in data["sources"]]
    assert len(ports) == len(set(ports))


# -- recorder.schema: pinning the frame layout ----------------------------------------------------

PINNED = (
    '[[sources]]\nkind = "udp"\nprotocol = "forza"\nport = 5300\n'
    'mapping = { include = ["speed", "engine_rpm"] }\n[recorder]\nschema = "frame.wrtf.yaml"\n'
)


def test_config_schema_pins_the_layout_and_check_catches_a_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from wrtfd.format import Schema

    path = tmp_path / "c.toml"
    path.write_text(PINNED)
    assert main(["config", "check", str(path)]) == 2  # the pinned file does not exist yet
    err = capsys.readouterr().err
    assert err.startswith(
        f"wrtfd: error: {path}: recorder.schema: {tmp_path / 'frame.wrtf.yaml'}: cannot read"
    )
    assert main(["config", "schema", "--config", str(path)]) == 0
    text = capsys.readouterr().out
    pinned = Schema.from_yaml(text)
    assert set(pinned.frame_dtype["forza"].names or ()) == {"speed", "engine_rpm"}
    (tmp_path / "frame.wrtf.yaml").write_text(text)
    assert main(["config", "check", str(path)]) == 0
    capsys.readouterr()

    path.write_text(PINNED.replace('"speed", "engine_rpm"', '"speed", "engine_rpm", "gear"'))
    assert main(["config", "check", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"wrtfd: error: {path}: recorder.schema: the frame of recording group 'main' does not match "
        f"{tmp_path / 'frame.wrtf.yaml'}: field forza.gear is not in the pinned definition "
        "(`wrtfd config schema` prints the frame this config records)"
    )
    path.write_text(PINNED.replace('"speed", "engine_rpm"', '"engine_rpm"'))
    assert main(["config", "check", str(path)]) == 2
    assert "field forza.speed is missing" in capsys.readouterr().err
    # `config schema` is how a deliberate change is pinned again: it ignores the old pin
    # (the pinned file exists: replacing it takes --force)
    argv = ["config", "schema", "--config", str(path), "-o", str(tmp_path / "frame.wrtf.yaml"), "--force"]
    assert main(argv) == 0
    assert main(["config", "check", str(path)]) == 0


def test_recorder_schema_per_group_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.toml"
    two = (
        '[[sources]]\nkind = "udp"\nprotocol = "forza"\nport = 5300\ngroup = "forza"\n'
        '[[sources]]\nkind = "udp"\nprotocol = "f1"\nport = 20777\ngroup = "f1"\n[recorder]\n'
    )
    path.write_text(two + 'schema = "frame.wrtf.yaml"\n')
    assert main(["config", "check", str(path)]) == 2
    assert (
        "recorder.schema: 2 recording groups (f1, forza): give a table {group = path}"
        in capsys.readouterr().err
    )
    path.write_text(two + 'schema = { forza = "forza.yaml", fr = "x.yaml" }\n')
    assert main(["config", "check", str(path)]) == 2
    assert "recorder.schema: no recording group 'fr' (groups: f1, forza)" in capsys.readouterr().err

    path.write_text(two + 'schema = { forza = "forza.yaml" }\n')  # f1 is not pinned
    assert main(["config", "schema", "--config", str(path)]) == 2
    assert "2 recording groups (f1, forza): choose one with --group" in capsys.readouterr().err
    assert (
        main(
            [
                "config",
                "schema",
                "--config",
                str(path),
                "--group",
                "forza",
                "-o",
                str(tmp_path / "forza.yaml"),
            ]
        )
        == 0
    )
    assert main(["config", "check", str(path)]) == 0
    capsys.readouterr()
    (tmp_path / "forza.yaml").write_text((tmp_path / "forza.yaml").read_text().replace("speed", "sped"))
    assert main(["config", "check", str(path)]) == 2
    assert "group 'forza' does not match" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("3", "recorder.schema: expected a path (string), got 3"),
        ("{ main = 3 }", "recorder.schema.main: expected a path (string), got 3"),
    ],
)
def test_recorder_schema_type_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, message: str
) -> None:
    path = tmp_path / "c.toml"
    path.write_text(PINNED.replace('"frame.wrtf.yaml"', value))
    assert main(["config", "check", str(path)]) == 2
    assert capsys.readouterr().err == f"wrtfd: error: {path}: {message}\n"


@pytest.mark.parametrize("form", ['"frame.wrtf.yaml"', '{ main = "frame.wrtf.yaml" }'])
def test_show_prints_the_pinned_schema_resolved_and_the_listing_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], form: str
) -> None:
    path = tmp_path / "c.toml"
    path.write_text(PINNED.replace('"frame.wrtf.yaml"', form))
    assert main(["config", "schema", "--config", str(path), "-o", str(tmp_path / "frame.wrtf.yaml")]) == 0
    assert main(["config", "show", "--config", str(path)]) == 0
    shown = capsys.readouterr().out
    pinned = tomllib.loads(shown)["recorder"]["schema"]
    want = str(tmp_path / "frame.wrtf.yaml")
    assert pinned == (want if form.startswith('"') else {"main": want})
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "shown.toml").write_text(shown)  # absolute paths: the listing works from anywhere
    assert main(["config", "check", str(elsewhere / "shown.toml")]) == 0


@pytest.mark.parametrize("key", ["wrtf.schema", "wrtfd.check", "wrtfd.check.salt", "wrtfd.check.field", ""])
def test_check_refuses_metadata_the_writer_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str
) -> None:
    """What the writer would refuse at the first file (which killed the running daemon) is a
    config error, found by `config check` and at start, in one line."""
    path = tmp_path / "c.toml"
    path.write_text(GOOD + f'[recorder]\nmetadata = {{ "{key}" = "x", Driver = "A" }}\n')
    assert main(["config", "check", str(path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"wrtfd: error: {path}: recorder.metadata: metadata key {key!r}"), err[0]


def test_check_names_allow_from_for_a_bad_sender(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.toml"
    path.write_text(GOOD + 'allow_from = ["192.168.1.0/24", "999.1.1.1"]\n')
    assert main(["config", "check", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"wrtfd: error: {path}: sources[0].allow_from: '999.1.1.1' is not an IP address or network"
    path.write_text(GOOD + 'allow_from = ["192.168.1.0/24", "10.0.0.7"]\n')
    assert main(["config", "check", str(path)]) == 0


def test_show_makes_every_path_absolute_so_its_output_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`config show` of a config with relative paths (a DBC in options, a circuit) prints a
    config that is valid anywhere: every path resolved against the original file's directory."""
    import shutil

    REPO = Path(__file__).resolve().parents[2]
    conf = tmp_path / "conf"
    conf.mkdir()
    shutil.copy(REPO / "config" / "incar.toml", conf / "incar.toml")
    shutil.copy(REPO / "config" / "example-car.dbc", conf / "example-car.dbc")
    assert main(["config", "show", "--config", str(conf / "incar.toml")]) == 0
    data = tomllib.loads(capsys.readouterr().out)
    can = next(s for s in data["sources"] if s["name"] == "can")
    assert can["options"]["dbc"] == str(conf / "example-car.dbc")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    shown = elsewhere / "shown.toml"
    main(["config", "show", "--config", str(conf / "incar.toml")])
    shown.write_text(capsys.readouterr().out)
    assert main(["config", "check", str(shown)]) == 0, capsys.readouterr().err


def test_show_resolves_circuit_and_topic_map(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[[sources]]\nkind = "udp"\nprotocol = "forza"\nport = 5300\n'
        'circuit = "circuits/mine.json"\n'
        '[[sources]]\nkind = "dds"\nname = "dds"\nprotocol = "zddsrec"\nport = 7400\n'
        'topic_map = "maps/topics.toml"\n'
    )
    from wrtfd.daemon.config import load_config
    from wrtfd.errors import ConfigError

    try:
        load_config(path)
    except ConfigError as exc:  # the model must accept it (the files are not read by `show`)
        pytest.skip(f"config shape not accepted here: {exc}")
    assert main(["config", "show", "--config", str(path)]) == 0
    data = tomllib.loads(capsys.readouterr().out)
    assert data["sources"][0]["circuit"] == str(tmp_path / "circuits" / "mine.json")
    assert data["sources"][1]["topic_map"] == str(tmp_path / "maps" / "topics.toml")


def test_schema_refuses_to_overwrite_without_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.toml"
    path.write_text(GOOD)
    out = tmp_path / "frame.wrtf.yaml"
    out.write_text("keep me\n")
    assert main(["config", "schema", "--config", str(path), "-o", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("wrtfd: error: ") and "--force" in err[0], err
    assert out.read_text() == "keep me\n"
    assert main(["config", "schema", "--config", str(path), "-o", str(out), "--force"]) == 0
    assert out.read_text() != "keep me\n"
