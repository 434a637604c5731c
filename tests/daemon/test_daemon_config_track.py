"""A source's ``track``: config keys, start-time validation (key paths in every error) and the
lap-channel plug-in handed to the recorder."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from wrtfd.cli.main import main
from wrtfd.daemon.config import LoadedConfig, load_config, parse_config
from wrtfd.daemon.wiring import build_source, check_buildable, prepare
from wrtfd.errors import ConfigError
from wrtfd.tracks import LanePath, load_track

REPO = Path(__file__).resolve().parents[2]
OVAL = REPO / "config" / "tracks" / "oval.trk"

FORZA = '[[sources]]\nkind = "udp"\nprotocol = "forza"\nhost = "127.0.0.1"\nport = 5300\n'
#: A custom feed: x and z as float32, a 2-byte tag (an array: not a position).
STRUCT = (
    '[[sources]]\nkind = "udp"\nname = "feed"\nprotocol = "struct"\nhost = "127.0.0.1"\nport = 9100\n'
    'options = { endian = "little", length = 16, fields = ['
    ' { name = "tag", type = "char", count = 2 },'
    ' { name = "x", type = "float32", offset = 4 },'
    ' { name = "z", type = "float32", offset = 8 } ] }\n'
)


def _config(tmp_path: Path, sources: str, out: Path | None = None) -> Path:
    path = tmp_path / "wrtfd.toml"
    path.write_text(f'{sources}\n[recorder]\noutput_dir = "{out or tmp_path / "rec"}"\n')
    return path


def _oval_copy(directory: Path, name: str = "oval.trk", edit: tuple[str, str] | None = None) -> Path:
    text = OVAL.read_text()
    if edit is not None:
        assert edit[0] in text
        text = text.replace(edit[0], edit[1], 1)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text)
    return path


def _build_error(path: Path, index: int = 0) -> str:
    loaded = load_config(path)
    with pytest.raises(ConfigError) as info:
        build_source(loaded, index, loaded.config.sources[index])
    return str(info.value)


# --- keys (pure validation) ---------------------------------------------------------------------


def _parse_error(sources: list[dict[str, Any]]) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config({"sources": sources}, "t.toml")
    return str(info.value)


def test_track_keys_parse_with_defaults() -> None:
    cfg = parse_config(
        {
            "sources": [
                {
                    "kind": "udp",
                    "protocol": "struct",
                    "port": 9100,
                    "track": "a.trk",
                    "track_position": ["x", "z"],
                    "track_z_sign": -1,
                }
            ]
        },
        "t.toml",
    )
    src = cfg.sources[0]
    assert (src.track, src.track_position, src.track_z_sign, src.track_lane) == (
        Path("a.trk"),
        ("x", "z"),
        -1,
        0,
    )
    plain = parse_config({"sources": [{"kind": "udp", "protocol": "forza", "port": 5300}]}, "t.toml").sources[
        0
    ]
    assert (plain.track, plain.track_position, plain.track_z_sign) == (None, None, None)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"track_position": ["x", "z"]}, "t.toml: sources[0]: track_position is set but `track`"),
        ({"track_lane": 1}, "t.toml: sources[0]: track_lane is set but `track`"),
        ({"track": "a.trk", "track_position": ["x", "x"]}, "x and z must be two different channels"),
        ({"track": "a.trk", "track_position": ["x"]}, "t.toml: sources[0].track_position"),
        (
            {"track": "a.trk", "track_position": ["x", "1z"]},
            "t.toml: sources[0].track_position[1]: expected a",
        ),
        ({"track": "a.trk", "track_z_sign": 2}, "t.toml: sources[0].track_z_sign: expected one of"),
        ({"track": 3}, "t.toml: sources[0].track: expected a path"),
    ],
    ids=[
        "position-without-track",
        "lane-without-track",
        "same-field",
        "one-field",
        "bad-name",
        "sign",
        "type",
    ],
)
def test_track_key_errors_name_the_key(extra: dict[str, Any], message: str) -> None:
    error = _parse_error([{"kind": "udp", "protocol": "struct", "port": 9100, **extra}])
    assert message in error, error


def test_only_one_source_per_recording_group_can_have_a_track() -> None:
    error = _parse_error(
        [
            {"kind": "udp", "protocol": "forza", "port": 5300, "track": "a.trk"},
            {"kind": "udp", "protocol": "f1", "port": 20777, "track": "b.trk"},
        ]
    )
    assert error == (
        "t.toml: sources[1].track: only one source per recording group can have a track or circuit"
        " (sources[0] in group 'main' has one already)"
    )


def test_sources_in_different_groups_may_each_have_a_track() -> None:
    config = parse_config(
        {
            "sources": [
                {"kind": "udp", "protocol": "forza", "port": 5300, "track": "a.trk", "group": "forza"},
                {"kind": "udp", "protocol": "f1", "port": 20777, "track": "b.trk", "group": "f1"},
            ]
        },
        "t.toml",
    )
    assert [s.group_name for s in config.sources] == ["forza", "f1"]


# --- start-time validation of the file and the position channels ---------------------------------


def test_relative_track_is_found_next_to_the_config_not_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf_dir = tmp_path / "etc"
    _oval_copy(conf_dir / "tracks")
    path = _config(conf_dir, FORZA + 'track = "tracks/oval.trk"\n')
    monkeypatch.chdir(tmp_path)  # tracks/oval.trk does not exist here
    loaded = load_config(path)
    assert loaded.track_path(loaded.config.sources[0]) == conf_dir / "tracks" / "oval.trk"
    built = build_source(loaded, 0, loaded.config.sources[0])
    assert built.laps is not None
    assert built.laps.track.name == "Small oval track"
    pos = built.laps.position
    assert (pos.x, pos.z, pos.z_sign, pos.active) == ("position_x", "position_z", 1.0, "is_race_on")
    assert built.laps.source == "forza"


def test_missing_track_file(tmp_path: Path) -> None:
    path = _config(tmp_path, FORZA + 'track = "nowhere.trk"\n')
    error = _build_error(path)
    assert error.startswith(
        f"{path}: sources[0].track: {tmp_path / 'nowhere.trk'}: cannot read track file"
    ), error


def test_track_that_does_not_parse(tmp_path: Path) -> None:
    broken = tmp_path / "broken.trk"
    broken.write_text(OVAL.read_text()[:3000])
    error = _build_error(_config(tmp_path, FORZA + 'track = "broken.trk"\n'))
    assert re.match(
        rf"^{re.escape(str(tmp_path / 'wrtfd.toml'))}: sources\[0\]\.track: .*broken\.trk: line \d+", error
    )
    assert "\n" not in error


def test_track_that_fails_the_validator(tmp_path: Path) -> None:
    # vertex 3 moved by 1 m: the lane's arc round centre 0 no longer has one radius
    _oval_copy(tmp_path, "bent.trk", ("[65, 0, 5],\t/* 3 */", "[65, 0, 6],\t/* 3 */"))
    error = _build_error(_config(tmp_path, FORZA + 'track = "bent.trk"\n'))
    assert error.startswith(
        f"{tmp_path / 'wrtfd.toml'}: sources[0].track: {tmp_path / 'bent.trk'}: invalid track: "
    )
    assert "[arc-radius]" in error and "wrtfd track check" in error


def test_track_lane_must_exist(tmp_path: Path) -> None:
    _oval_copy(tmp_path)
    error = _build_error(_config(tmp_path, FORZA + 'track = "oval.trk"\ntrack_lane = 2\n'))
    assert error.endswith(
        "sources[0].track_lane: " + f"{tmp_path / 'oval.trk'} has 2 lane(s), numbered from 0"
    )
    loaded = load_config(_config(tmp_path, FORZA + 'track = "oval.trk"\ntrack_lane = 1\n'))
    laps = build_source(loaded, 0, loaded.config.sources[0]).laps
    oval = load_track(OVAL)
    assert laps is not None
    assert laps.path.length_m == LanePath(oval, 1).length_m != LanePath(oval, 0).length_m


def test_protocol_without_position_channels_needs_track_position(tmp_path: Path) -> None:
    _oval_copy(tmp_path)
    error = _build_error(_config(tmp_path, STRUCT + 'track = "oval.trk"\n'))
    assert error.startswith(f"{tmp_path / 'wrtfd.toml'}: sources[0].track_position: required with a track: ")
    assert "'struct' has no known position channels" in error


def test_track_position_names_recorded_numeric_channels(tmp_path: Path) -> None:
    _oval_copy(tmp_path)
    ok = load_config(
        _config(tmp_path, STRUCT + 'track = "oval.trk"\ntrack_position = ["x", "z"]\ntrack_z_sign = -1\n')
    )
    laps = build_source(ok, 0, ok.config.sources[0]).laps
    assert laps is not None
    assert (laps.position.x, laps.position.z, laps.position.z_sign, laps.position.active) == (
        "x",
        "z",
        -1.0,
        None,
    )
    unknown = _build_error(_config(tmp_path, STRUCT + 'track = "oval.trk"\ntrack_position = ["x", "y"]\n'))
    assert unknown.endswith("sources[0].track_position: no channel 'y'; channels are: tag, x, z"), unknown
    array = _build_error(_config(tmp_path, STRUCT + 'track = "oval.trk"\ntrack_position = ["tag", "z"]\n'))
    assert "sources[0].track_position: position channel 'tag' is not a number" in array


def test_default_position_channels_follow_the_mapping(tmp_path: Path) -> None:
    _oval_copy(tmp_path)
    renamed = (
        FORZA + 'track = "oval.trk"\nmapping = { rename = { position_x = "x", is_race_on = "racing" } }\n'
    )
    loaded = load_config(_config(tmp_path, renamed))
    laps = build_source(loaded, 0, loaded.config.sources[0]).laps
    assert laps is not None
    assert (laps.position.x, laps.position.z, laps.position.active) == ("x", "position_z", "racing")
    # without the active flag recorded, positions alone decide (is_race_on is not required)
    kept = FORZA + 'track = "oval.trk"\nmapping = { include = ["speed", "position_x", "position_z"] }\n'
    loaded = load_config(_config(tmp_path, kept))
    laps = build_source(loaded, 0, loaded.config.sources[0]).laps
    assert laps is not None and laps.position.active is None
    dropped = FORZA + 'track = "oval.trk"\nmapping = { include = ["speed", "position_x"] }\n'
    error = _build_error(_config(tmp_path, dropped))
    assert error.endswith(
        "sources[0].mapping: the lap channels need the position channel 'position_z',"
        " which the mapping leaves out"
    )


# --- the recorder gets the plug-in ---------------------------------------------------------------


def test_prepare_gives_the_recorder_lap_channels_and_creates_nothing(tmp_path: Path) -> None:
    _oval_copy(tmp_path)
    out = tmp_path / "rec"
    loaded = load_config(_config(tmp_path, FORZA + 'track = "oval.trk"\n', out))
    daemon = prepare(loaded, env={})
    recorder = daemon.recorder.groups["main"].recorder
    assert [d.name for d in recorder.derived] == ["laps"]
    frame = recorder.schema.frame_dtype
    assert set(frame["laps"].names or ()) >= {"lap_number", "lap_distance", "sector", "lap_time"}
    footer = recorder.schema.footer_dtype
    assert footer is not None and set(footer["laps"].names or ()) == {
        "lap_count",
        "best_lap_ms",
        "best_lap_number",
    }
    assert recorder.sink.metadata["Track"] == "Small oval track"
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["oval.trk", "wrtfd.toml"]


def test_configured_track_metadata_wins(tmp_path: Path) -> None:
    _oval_copy(tmp_path)
    text = FORZA + 'track = "oval.trk"\n\n[recorder]\nmetadata = { Track = "Home oval" }\n'
    path = tmp_path / "wrtfd.toml"
    path.write_text(text)
    daemon = prepare(load_config(path), env={"STATE_DIRECTORY": str(tmp_path / "state")})
    recorder = daemon.recorder.groups["main"].recorder
    assert recorder.sink.metadata["Track"] == "Home oval"


def test_no_track_no_plugin(tmp_path: Path) -> None:
    loaded = load_config(_config(tmp_path, FORZA))
    recorder = prepare(loaded, env={}).recorder.groups["main"].recorder
    assert recorder.derived == []
    assert "laps" not in (recorder.schema.frame_dtype.names or ())


def test_simrig_example_track_line_builds() -> None:
    """The commented example in config/simrig.toml, uncommented, works as written."""
    text = (REPO / "config" / "simrig.toml").read_text()
    lines = [ln for ln in text.splitlines() if ln.startswith("# track = ")]
    assert len(lines) == 1
    enabled = text.replace(lines[0], lines[0].removeprefix("# "))
    cfg = parse_config(tomllib.loads(enabled), "simrig.toml")
    loaded = LoadedConfig(config=cfg, origin="simrig.toml", base_dir=REPO / "config")
    built = check_buildable(loaded)
    assert [b.config.source_name for b in built if b.laps is not None] == ["forza"]


# --- wrtfd config check / show ------------------------------------------------------------------


def test_config_check_names_the_track(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _oval_copy(tmp_path)
    path = _config(tmp_path, FORZA + 'track = "oval.trk"\n')
    assert main(["config", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "lap channels from forza on 'Small oval track' (" in out


def test_config_check_reports_a_bad_track(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _config(tmp_path, FORZA + 'track = "missing.trk"\n')
    assert main(["config", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"wrtfd: error: {path}: sources[0].track: ") and err.count("\n") == 1


def test_config_show_prints_the_resolved_track(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _oval_copy(tmp_path / "tracks")
    path = _config(
        tmp_path, FORZA + 'track = "tracks/oval.trk"\ntrack_lane = 1\n' + STRUCT.replace("9100", "9101")
    )
    assert main(["config", "show", "--config", str(path)]) == 0
    shown = tomllib.loads(capsys.readouterr().out)
    forza, feed = shown["sources"]
    assert forza["track"] == str(tmp_path / "tracks" / "oval.trk")
    assert forza["track_lane"] == 1
    assert not any(key.startswith("track") for key in feed)
    again = parse_config(shown, "shown.toml")
    assert again.sources[0].track == tmp_path / "tracks" / "oval.trk"
    assert again.sources[0].track_lane == 1 and again.sources[1].track is None
