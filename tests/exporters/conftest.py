"""Recordings the export tests share: made by the simulator and from real captures, never copied."""

from __future__ import annotations

from pathlib import Path

import pytest

from wrtfd.decoders.base import Sample
from wrtfd.decoders.nmea import NmeaDecoder
from wrtfd.errors import DecodeError
from wrtfd.simulate import Simulation, TrackInfo, make_encoder
from wrtfd.simulate.record import record_simulation
from wrtfd.tracks import LanePath, load_track, timing_sectors
from wrtfd.tracks.lapchannels import lap_channels_for

REPO = Path(__file__).resolve().parents[2]
ROAD = REPO / "config" / "tracks" / "road.trk"
OVAL = REPO / "config" / "tracks" / "oval.trk"
START_US = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z
T0_NS = 5_000_000_000_000

METADATA = {
    "Driver": "Ayrton Test",
    "Event": "Club day",
    "Session": "Practice 2",
    "Comment": "dry, 18C",
}


def simulated(
    out: Path, protocol: str, track_file: Path, *, laps: int = 2, seed: int = 1, channels: bool = True
) -> Path:
    """One simulated drive recorded through the protocol's real decoder (with lap channels)."""
    track = load_track(track_file)
    path = LanePath(track)
    sectors = timing_sectors(track, path)
    sim = Simulation(path, laps=laps, rate_hz=60.0, seed=seed, sectors_m=sectors)
    files = record_simulation(
        sim,
        make_encoder(protocol, TrackInfo(track.name, path.length_m, sectors, laps), seed=seed),
        out,
        protocol=protocol,
        derived=[lap_channels_for(track, source=protocol, protocol=protocol)] if channels else [],
        metadata={**METADATA, "Track": track.name},
    )
    (file,) = files
    return file


@pytest.fixture(scope="session")
def forza_road(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Forza FM2023 packets of a simulated car, 2 laps of the road course, lap channels on."""
    return simulated(tmp_path_factory.mktemp("forza_road"), "forza", ROAD)


@pytest.fixture(scope="session")
def forza_oval(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Forza FM2023 packets of a simulated car, 2 laps of the oval, lap channels on (a fifth of
    forza_road's frames, for tests that check every message with a pure-Python oracle)."""
    return simulated(tmp_path_factory.mktemp("forza_oval"), "forza", OVAL)


@pytest.fixture(scope="session")
def f1_oval(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """F1 2024 packets of a simulated car, 3 laps of the oval, lap channels on."""
    return simulated(tmp_path_factory.mktemp("f1_oval"), "f1", OVAL, laps=3, seed=5)


def nmea_samples(log: Path, source: str = "gps") -> list[Sample]:
    """A real receiver's log through the real NMEA decoder, stamped with its own fix times."""
    dec = NmeaDecoder()
    out: list[Sample] = []
    first: int | None = None
    for line in log.read_bytes().splitlines():
        if not line.strip() or line.startswith(b"#"):
            continue
        try:
            d = dec.decode(line.strip() + b"\r\n")
        except DecodeError:
            continue
        if d is None or d.source_time_ns is None:
            continue
        first = d.source_time_ns if first is None else first
        out.append(Sample.from_decoded(source, T0_NS + d.source_time_ns - first, d))
    return out


@pytest.fixture(scope="session")
def gps_drive(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real 5 Hz receiver (Quectel L76K, gpsd's regression log) recorded at 10 Hz: every other
    tick is dropped, positions are float64 degrees, fix times uint64 microseconds."""
    from wrtfd.recorder import RecorderPolicy, SourceSpec, replay

    samples = nmea_samples(shared_data / "nmea" / "quectel-l76k-nmea.log")
    assert len(samples) > 100
    spec = SourceSpec("gps", NmeaDecoder().definition)
    paths = replay(
        samples,
        [spec],
        RecorderPolicy(output_dir=tmp_path_factory.mktemp("gps"), rate_hz=10),
        start_timestamp_us=START_US,
        metadata={"Driver": "GPS walker"},
    )
    return paths[0]
