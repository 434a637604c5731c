"""A circuit picked at the first fix reaches the file's metadata: the session's header (and so
the file) waits for the GNSS lap plug-in's pick, as it waits for a game's track (``info_wait_s``).

Samples are the simulated u-blox receiver's NAV-PVT (wrtfd.simulate.gnss) through the real
decoder, recorded by the real recorder (``replay``) with the real plug-in picking from the
shipped library; the metadata is read back from the bytes on disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wrtfd.decoders.base import Sample
from wrtfd.decoders.ubx import UbxDecoder, ubx_definition
from wrtfd.format import Reader
from wrtfd.recorder import RecorderPolicy, SourceSpec
from wrtfd.recorder.recorder import replay
from wrtfd.simulate.gnss import Drive, GnssErrors, epochs, nav_pvt_frame
from wrtfd.tracks import load_track
from wrtfd.tracks.circuit import circuit_from_dict, shipped_circuits
from wrtfd.tracks.geodesy import track_plane
from wrtfd.tracks.geometry import LanePath
from wrtfd.tracks.gnsslaps import GnssLapChannels

ROAD = Path(__file__).resolve().parents[2] / "config" / "tracks" / "road.trk"
UTC0_NS = 1_780_000_000 * 10**9


def _samples(no_fix_s: float = 0.0) -> list[Sample]:
    """Half a lap of NAV-PVT at 10 Hz (``no_fix_s``: the receiver has no fix at first)."""
    track = load_track(ROAD)
    plane = track_plane(track.extensions)
    assert plane is not None
    drive = Drive(LanePath(track), plane, laps=1)
    decoder = UbxDecoder()
    out = []
    for i, fix in enumerate(epochs(drive, GnssErrors(seed=1), rate_hz=10, utc_start_ns=UTC0_NS)):
        if i * 0.1 > 20.0:
            break
        if i * 0.1 < no_fix_s:
            fix = type(fix)(**{**{k: getattr(fix, k) for k in fix.__slots__}, "fix_type": 0, "fix_ok": False})
        decoded = decoder.decode(nav_pvt_frame(fix))
        assert decoded is not None
        rx = 1_000_000_000 + i * 100_000_000
        out.append(Sample.from_decoded("gps", rx, decoded))
    return out


def _record(
    tmp_path: Path, info_wait_s: float, no_fix_s: float = 0.0, batch_frames: int = 8192
) -> tuple[dict[str, str], list[str]]:
    told: list[str] = []
    plug = GnssLapChannels(
        None,
        source="gps",
        candidates=shipped_circuits(),
        on_pick=lambda circuit, how: told.append(f"{circuit.name} {how}"),
    )
    (path,) = replay(
        _samples(no_fix_s),
        [SourceSpec("gps", ubx_definition())],
        RecorderPolicy(output_dir=tmp_path, rate_hz=20, info_wait_s=info_wait_s),
        start_timestamp_us=1_780_000_000_000_000,
        derived=[plug],
        batch_frames=batch_frames,
    )
    with Reader(path) as r:
        return dict(r.metadata), told


@pytest.mark.parametrize("batch_frames", [8192, 3])
def test_the_picked_circuit_is_in_the_file(tmp_path: Path, batch_frames: int) -> None:
    meta, told = _record(tmp_path, info_wait_s=3.0, batch_frames=batch_frames)
    assert told == ["Hillside picked, 0.0 km from the first fix"]
    assert meta["Circuit"] == "Hillside"
    hillside = next(c for c in shipped_circuits() if c.name == "Hillside")
    lines = circuit_from_dict(json.loads(meta["CircuitLines"]))
    assert lines.start == hillside.start and lines.sectors == hillside.sectors
    (start, *splits) = meta["vbo.laptiming"].splitlines()
    assert start.startswith("Start ") and len(splits) == len(hillside.sectors)
    # the gate's point: the middle of the line, minutes with longitude west-positive
    lon_w, lat = (float(v) for v in start.split()[1:3])
    assert lat / 60 == pytest.approx(hillside.start.middle[0], abs=1e-8)
    assert -lon_w / 60 == pytest.approx(hillside.start.middle[1], abs=1e-8)
    # the second point stands behind, where the car comes from: it drives east over the line
    # (the simulated car's own velocity there), so the point is 5 m west
    track = load_track(ROAD)
    plane = track_plane(track.extensions)
    assert plane is not None
    drive = Drive(LanePath(track), plane, laps=1)
    ve, vn = drive.at(drive.laps[0].start_s)[4:6]
    assert ve > 20.0 and abs(vn) < 0.5
    behind_lon_w, behind_lat = (float(v) for v in start.split()[3:5])
    assert behind_lat / 60 == pytest.approx(hillside.start.middle[0], abs=1e-6)
    metres_east = (-behind_lon_w / 60 - hillside.start.middle[1]) * 111_320 * 0.7077  # cos 44.9
    assert metres_east == pytest.approx(-5.0, abs=0.05)


def test_without_the_wait_the_file_opens_before_the_pick(tmp_path: Path) -> None:
    meta, told = _record(tmp_path, info_wait_s=0.0)
    assert told == ["Hillside picked, 0.0 km from the first fix"]
    assert "Circuit" not in meta


@pytest.mark.parametrize("batch_frames", [8192, 3])
def test_a_fix_later_than_the_wait_opens_the_file_without_it(tmp_path: Path, batch_frames: int) -> None:
    """The wait is bounded: a receiver without a fix for 5 s (a cold start) does not hold the
    session's frames longer than ``info_wait_s``; the circuit is picked all the same. Decided by
    the tick of the pick, so one large batch (an import) gives the same file as small ones."""
    meta, told = _record(tmp_path, info_wait_s=1.0, no_fix_s=5.0, batch_frames=batch_frames)
    assert told == ["Hillside picked, 0.0 km from the first fix"]
    assert "Circuit" not in meta
