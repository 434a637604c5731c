"""A source's ``reference`` (the live delta's reference lap, ``FILE[:LAP]``): config key, start-time
errors naming the key, and the recorded lap the lap channels then measure against."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

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


def _gnss_recording(out: Path) -> tuple[Path, list]:
    """Two laps of road.trk as a u-blox receiver saw them (10 Hz NAV-PVT through the real
    decoder), recorded with the GNSS lap plug-in timing against Hillside."""
    from wrtfd.decoders.base import Sample
    from wrtfd.decoders.ubx import UbxDecoder, ubx_definition
    from wrtfd.recorder import RecorderPolicy, SourceSpec
    from wrtfd.recorder.recorder import replay
    from wrtfd.simulate.gnss import Drive, GnssErrors, epochs, nav_pvt_frame
    from wrtfd.tracks.circuit import circuit_from_track
    from wrtfd.tracks.geodesy import track_plane
    from wrtfd.tracks.gnsslaps import GnssLapChannels

    track = load_track(ROAD)
    path = LanePath(track)
    plane = track_plane(track.extensions)
    assert plane is not None
    drive = Drive(path, plane, laps=2, sectors_m=timing_sectors(track, path))
    decoder = UbxDecoder()
    samples = []
    for i, fix in enumerate(epochs(drive, GnssErrors(seed=2, tau_s=0.1), rate_hz=10, utc_start_ns=1 << 60)):
        decoded = decoder.decode(nav_pvt_frame(fix))
        assert decoded is not None
        samples.append(Sample.from_decoded("gps", 1_000_000_000 + i * 100_000_000, decoded))
    plug = GnssLapChannels(circuit_from_track(track), source="gps")
    (file,) = replay(
        samples,
        [SourceSpec("gps", ubx_definition())],
        RecorderPolicy(output_dir=out, rate_hz=20),
        start_timestamp_us=1_780_000_000_000_000,
        derived=[plug],
    )
    return file, plug.provisional  # as timed at the line: what the recorded lap channels say


ROAD = REPO / "config" / "tracks" / "road.trk"


def test_reference_lap_of_a_gnss_recording_with_a_circuit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``reference`` beside ``circuit`` (GNSS laps): the recorded GNSS lap becomes the delta's
    reference, its length where the recorded samples place the line."""
    file, laps = _gnss_recording(tmp_path / "ref")
    assert [lap.number for lap in laps] == [1, 2]
    config = tmp_path / "gnss.toml"
    config.write_text(
        '[[sources]]\nkind = "serial"\nname = "gps"\nprotocol = "ubx"\ndevice = "/dev/ttyACM0"\n'
        f'circuit = "{ROAD}"\nreference = "{file}:2"\n[recorder]\noutput_dir = "{tmp_path / "rec"}"\n'
    )
    daemon = prepare(load_config(config), env={})
    (plugin,) = daemon.recorder.groups["main"].recorder.derived
    ref = plugin.delta.reference
    assert ref is not None and ref.number == 2 and ref.origin.endswith("lap 2")
    assert ref.lap_time_s == pytest.approx(laps[1].time_s, abs=1e-3)
    assert ref.length_m == pytest.approx(LanePath(load_track(ROAD)).length_m, rel=0.01)
    assert plugin.live()["reference"]["number"] == 2
    assert main(["config", "check", str(config)]) == 0
    out = capsys.readouterr().out
    assert re.search(
        r"GNSS lap channels from gps on 'Hillside road course', delta to \S+ session 0 lap 2", out
    ), out


def test_a_fleet_reference_is_a_target_of_the_fleet(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """``reference = "fleet:best"``: no file is read; with ``[fleet]`` the source is handed to the
    fleet as a target (its track, lap length, driver), without it the journal says in one line
    that the delta uses the session's best lap."""
    from wrtfd.tracks.delta import Reference

    fleet = '[fleet]\nurl = "nats://127.0.0.1:1"\nrig = "rig-b"\n'
    with caplog.at_level("WARNING", logger="wrtfd"):
        alone = prepare(load_config(_config(tmp_path, 'reference = "fleet:best"')), env={})
    assert alone.fleet is None
    (plugin,) = alone.recorder.groups["main"].recorder.derived
    assert plugin.delta.reference is None
    assert [r.getMessage() for r in caplog.records if "fleet:best" in r.getMessage()] == [
        "source forza: reference fleet:best needs [fleet]; the delta uses the session's best lap"
    ]

    config = tmp_path / "fleet.toml"
    config.write_text(_config(tmp_path, 'reference = "fleet:driver=Ada"').read_text() + fleet)
    daemon = prepare(load_config(config), env={})
    (plugin,) = daemon.recorder.groups["main"].recorder.derived
    publisher: Any = daemon.fleet
    (target,) = publisher._follower.targets
    assert (target.source, target.spec, target.driver) == ("forza", "fleet:driver=Ada", "Ada")
    assert target.track == "Small oval track" and target.car is None
    assert target.length_m == LanePath(load_track(OVAL)).length_m
    assert main(["config", "show", "--config", str(config)]) == 0
    shown = tomllib.loads(capsys.readouterr().out)
    assert shown["sources"][0]["reference"] == "fleet:driver=Ada"  # not a path
    ref = Reference.from_samples([50.0], [5.0], lap_time_s=10.0, length_m=100.0, origin="fleet")
    target.offer(ref)  # the fleet thread's hand-over: taken at the next lap start
    assert plugin.delta.offered is ref and plugin.delta.reference is None

    gnss = tmp_path / "gnss.toml"
    gnss.write_text(
        '[[sources]]\nkind = "serial"\nname = "gps"\nprotocol = "ubx"\ndevice = "/dev/ttyACM0"\n'
        f'circuit = "{ROAD}"\nreference = "fleet:best"\n[recorder]\noutput_dir = "{tmp_path / "rec"}"\n'
        '[recorder.metadata]\nCar = "Kart 7"\n' + fleet
    )
    publisher = prepare(load_config(gnss), env={}).fleet
    (target,) = publisher._follower.targets
    assert (target.track, target.car, target.length_m, target.driver) == (
        "Hillside road course",
        "Kart 7",
        None,
        None,
    )

    loaded = load_config(_config(tmp_path, 'reference = "fleet:fastest"'))
    with pytest.raises(ConfigError, match=r"sources\[0\]\.reference: .*fleet:best or fleet:driver=NAME"):
        build_source(loaded, 0, loaded.config.sources[0])
