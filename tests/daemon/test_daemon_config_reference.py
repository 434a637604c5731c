"""A source's ``reference`` (the live delta's reference lap, ``FILE[:LAP]``): config key, start-time
errors naming the key, and the recorded lap the lap channels then measure against."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from wrtfd.cli.main import main
from wrtfd.daemon.config import load_config, parse_config
from wrtfd.daemon.wiring import build_source, prepare
from wrtfd.errors import ConfigError
from wrtfd.simulate import Simulation, TrackInfo, make_encoder
from wrtfd.simulate.record import record_simulation
from wrtfd.tracks import LanePath, load_track, timing_sectors
from wrtfd.tracks.lapchannels import lap_channels_for

REPO = Path(__file__).resolve().parents[2]
OVAL = REPO / "config" / "tracks" / "oval.trk"
KART = REPO / "config" / "tracks" / "kart.trk"
FORZA = '[[sources]]\nkind = "udp"\nprotocol = "forza"\nhost = "127.0.0.1"\nport = 5300\n'


def _record(out: Path, track_file: Path, seed: int) -> tuple[Path, list]:
    track = load_track(track_file)
    path = LanePath(track)
    sectors = timing_sectors(track, path)
    sim = Simulation(path, laps=3, rate_hz=60.0, seed=seed, sectors_m=sectors)
    files = record_simulation(
        sim,
        make_encoder("forza", TrackInfo(track.name, path.length_m, sectors, 3)),
        out,
        protocol="forza",
        derived=[lap_channels_for(track, source="forza", protocol="forza")],
        metadata={"Track": track.name},
    )
    return files[0], list(sim.laps)


@pytest.fixture(scope="module")
def oval_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:
    return _record(tmp_path_factory.mktemp("ref"), OVAL, 21)


def _config(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "wrtfd.toml"
    path.write_text(f'{FORZA}track = "{OVAL}"\n{extra}\n[recorder]\noutput_dir = "{tmp_path / "rec"}"\n')
    return path


def test_reference_needs_a_track() -> None:
    with pytest.raises(
        ConfigError, match=r"sources\[0\]: reference is set but neither `track` nor `circuit`"
    ):
        parse_config({"sources": [{"kind": "udp", "protocol": "forza", "reference": "a.wrtf"}]}, "t.toml")


def test_reference_lap_reaches_the_lap_channels(tmp_path: Path, oval_file: tuple[Path, list]) -> None:
    file, laps = oval_file
    # relative to the config file, like `track`
    (tmp_path / "refs").mkdir()
    (tmp_path / "refs" / "best.wrtf").write_bytes(file.read_bytes())
    daemon = prepare(load_config(_config(tmp_path, 'reference = "refs/best.wrtf:2"')), env={})
    (plugin,) = daemon.recorder.groups["main"].recorder.derived
    ref = plugin.delta.reference
    assert ref is not None and ref.number == 2
    assert ref.lap_time_s == pytest.approx(laps[1].time_s, abs=1e-3)
    assert ref.length_m == LanePath(load_track(OVAL)).length_m
    assert re.fullmatch(r"best\.wrtf session \d+ lap 2", ref.origin), ref.origin
    # no lap: the fastest
    daemon = prepare(load_config(_config(tmp_path, f'reference = "{file}"')), env={})
    (plugin,) = daemon.recorder.groups["main"].recorder.derived
    best = min(laps, key=lambda lap: lap.time_s)
    assert plugin.delta.reference.number == best.number
    assert plugin.live()["reference"]["time_s"] == pytest.approx(best.time_s, abs=1e-3)


def test_reference_errors_name_the_key(tmp_path: Path, oval_file: tuple[Path, list]) -> None:
    file, _ = oval_file

    def error(extra: str) -> str:
        loaded = load_config(_config(tmp_path, extra))
        with pytest.raises(ConfigError) as info:
            build_source(loaded, 0, loaded.config.sources[0])
        return str(info.value)

    assert "sources[0].reference: " in error('reference = "missing.wrtf"')
    assert "no complete lap 7" in error(f'reference = "{file}:7"')
    kart_file, _ = _record(tmp_path / "kart", KART, 3)
    wrong = error(f'reference = "{kart_file}"')
    assert "sources[0].reference: " in wrong and "recorded on track" in wrong


def test_config_check_and_show_name_the_reference(
    tmp_path: Path, oval_file: tuple[Path, list], capsys: pytest.CaptureFixture[str]
) -> None:
    file, laps = oval_file
    (tmp_path / "refs").mkdir()
    (tmp_path / "refs" / "best.wrtf").write_bytes(file.read_bytes())
    path = _config(tmp_path, 'reference = "refs/best.wrtf:3"')
    assert main(["config", "check", str(path)]) == 0
    out = capsys.readouterr().out
    m = re.search(r", delta to best\.wrtf session \d+ lap 3 \((\d+\.\d{3}) s\)\n$", out)
    assert m, out
    assert float(m[1]) == pytest.approx(laps[2].time_s, abs=1e-3)
    assert main(["config", "show", "--config", str(path)]) == 0
    shown = tomllib.loads(capsys.readouterr().out)
    assert shown["sources"][0]["reference"] == f"{tmp_path / 'refs' / 'best.wrtf'}:3"
    assert parse_config(shown, "shown.toml").sources[0].reference == f"{tmp_path / 'refs' / 'best.wrtf'}:3"
