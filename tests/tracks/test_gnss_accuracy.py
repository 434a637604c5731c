"""Lap and sector times from the GNSS simulator's own receiver model, through the real decoders.

wrtfd.simulate.gnss drives the car round road.trk laid on the map; its receiver (GnssErrors: a
slowly wandering position offset, ``noise_m`` per axis, plus a little white jitter, and a
Doppler velocity good to a few cm/s) reports each epoch as a NAV-PVT frame (or NMEA RMC+GGA),
which the live decoder reads; the daemon's GNSS timing (GnssLapChannels, default settings) times
the laps; the car's own laps (truth_laps) are the answer.

What a lap timer can and cannot do with this model (docs/circuits.md, "Accuracy"): an offset
that holds through a lap cancels out of the lap time, so the lap times meet the issue's bounds
(10 ms at 10 Hz, 5 ms at 25 Hz) when it holds; when it wanders (the default time constant, 600
s), the offset moves by ~0.36 m in a 40 s lap and the line seems to move with it: 17 ms at the
car's 21 m/s, which no timer can see (it moves the fixes, and the Doppler velocity does not
know it). Sector times never cancel it: the offset projects differently on lines facing
different ways (up to 2 x 1 m / 21 m/s). So the realistic case is checked on what the timer
adds: its error less the receiver's own along-track error at the two crossings (taken from the
fixes and the car's true path, not from the timer).

tests/tracks/test_gnss_delta.py times white (independent per fix) noise, the case of the issue's
bounds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache
from itertools import accumulate

import numpy as np
import pytest

from tests.tracks.sim_recording import ROAD, UTC0
from wrtfd.decoders.nmea import NmeaDecoder
from wrtfd.decoders.ubx import UbxDecoder
from wrtfd.simulate.gnss import Drive, Fix, GnssErrors, epochs, nav_pvt_frame, nmea_epoch, truth_laps
from wrtfd.tracks import LanePath, load_track, timing_sectors
from wrtfd.tracks.circuit import Circuit, circuit_from_track
from wrtfd.tracks.geodesy import track_plane
from wrtfd.tracks.gnsslaps import NO_FIX, GnssLapChannels
from wrtfd.tracks.laps import Lap

LAPS = 5


@cache
def road() -> tuple[Drive, Circuit, list[dict[str, object]]]:
    track = load_track(ROAD)
    plane = track_plane(track.extensions)
    assert plane is not None
    path = LanePath(track, 0)
    drive = Drive(path, plane, laps=LAPS, seed=7, sectors_m=timing_sectors(track, path))
    return drive, circuit_from_track(track), truth_laps(drive, UTC0)


def _decoded(fix: Fix, protocol: str, decoder: UbxDecoder | NmeaDecoder) -> dict[str, object] | None:
    if protocol == "ubx":
        out = decoder.decode(nav_pvt_frame(fix))
        return None if out is None else dict(out.values)
    values = None
    for line in nmea_epoch(fix).split(b"\r\n"):
        if line:
            out = decoder.decode(line)
            values = None if out is None else dict(out.values)
    return values


Shift = Callable[[float, int], float]


def _normals(drive: Drive, circuit: Circuit) -> list[tuple[float, float]]:
    """Each timing line's unit normal (start/finish, then the sector lines) in the drive's plane."""
    out = []
    for line in [circuit.start, *circuit.sectors]:
        ax, ay = drive.plane.to_xy(*line.a)
        bx, by = drive.plane.to_xy(*line.b)
        dx, dy = float(bx - ax), float(by - ay)
        norm = math.hypot(dx, dy)
        out.append((dy / norm, -dx / norm))
    return out


def timed(
    rate_hz: int, noise_m: float, seed: int, *, tau_s: float = 600.0, protocol: str = "ubx"
) -> tuple[list[Lap], Shift]:
    """The laps timed from the receiver's messages, and the crossing-time shift the receiver's
    own offset makes at drive time t on line k: the error across the line over the car's speed
    across it (from the fixes before encoding and the car's true path)."""
    drive, circuit, _ = road()
    decoder: UbxDecoder | NmeaDecoder = UbxDecoder() if protocol == "ubx" else NmeaDecoder()
    plug = GnssLapChannels(circuit, source="gps")
    times, errors = [], []
    errs = GnssErrors(seed=seed, noise_m=noise_m, tau_s=tau_s)
    for fix in epochs(drive, errs, rate_hz=rate_hz, utc_start_ns=UTC0):
        v = _decoded(fix, protocol, decoder)
        assert v is not None
        if v["fix_mode"] == NO_FIX:
            continue
        fix_s = int(v["fix_time_utc_us"]) / 1e6  # type: ignore[call-overload]
        if protocol == "ubx":
            ve, vn = float(v["vel_e_mps"]), float(v["vel_n_mps"])  # type: ignore[arg-type]
        else:
            speed, course = float(v["speed_mps"]), math.radians(float(v["course_deg"]))  # type: ignore[arg-type]
            ve, vn = speed * math.sin(course), speed * math.cos(course)
        plug.feed(fix_s, float(v["lat_deg"]), float(v["lon_deg"]), fix_s, ve, vn)  # type: ignore[arg-type]
        t = (fix.utc_ns - UTC0) / 1e9
        x, z = drive.plane.to_xy(fix.lat_deg, fix.lon_deg)
        tx, tz = drive.at(t)[:2]
        times.append(t)
        errors.append((float(x) - tx, float(z) - tz))
    ts, es = np.array(times), np.array(errors)

    normals = _normals(drive, circuit)

    def shift(t: float, k: int) -> float:
        # the offset, not the jitter (which the filter averages away): the mean error over +-1 s
        near = np.abs(ts - t) <= 1.0
        ex, ez = (float(v) for v in es[near].mean(axis=0))
        nx, ny = normals[k % len(normals)]
        _, _, _, _, ve, vn, _ = drive.at(t)
        return -(ex * nx + ez * ny) / (ve * nx + vn * ny)

    return plug.laps, shift


def _crossings(lap: dict[str, object]) -> list[float]:
    sectors = lap["sectors_s"]
    assert isinstance(sectors, list)
    return list(accumulate(sectors, initial=float(lap["start_s"])))  # type: ignore[arg-type]


def _errors(laps: list[Lap], shift: Shift, *, residual: bool) -> tuple[float, float]:
    """The worst lap and sector error (ms), less the receiver's own share when ``residual``."""
    _, _, truth = road()
    assert [lap.number for lap in laps] == [lap["lap"] for lap in truth] == list(range(1, LAPS + 1))
    worst_lap = worst_sector = 0.0
    for got, want in zip(laps, truth, strict=True):
        marks = _crossings(want)
        own = shift(marks[-1], 0) - shift(marks[0], 0) if residual else 0.0
        worst_lap = max(worst_lap, abs(got.time_s - float(want["time_s"]) - own))  # type: ignore[arg-type]
        assert len(got.sector_times_s) == len(marks) - 1 == 3
        for k, (a, b) in enumerate(zip(got.sector_times_s, want["sectors_s"], strict=True)):  # type: ignore[call-overload]
            own = shift(marks[k + 1], k + 1) - shift(marks[k], k) if residual else 0.0
            worst_sector = max(worst_sector, abs(a - b - own))
    return worst_lap * 1000, worst_sector * 1000


SEEDS = [1, 2, 3, 4]


@pytest.mark.parametrize(("rate_hz", "bound_ms"), [(10, 10.0), (25, 5.0)])
@pytest.mark.parametrize("seed", SEEDS)
def test_laps_within_the_issue_bounds_when_the_offset_holds(rate_hz: int, bound_ms: float, seed: int) -> None:
    """1 m of offset that holds through the session (and the white jitter): the lap times are
    the car's within 10 ms at 10 Hz, 5 ms at 25 Hz (measured, seeds 1-8: 7.3 and 3.1 ms; 1.7 and
    1.6 ms measured earlier with the velocity trusted to 0.5 m/s); the sector times likewise once the
    offset's projection on each line is taken off (9.9, 4.4 ms; with it: 172 ms)."""
    laps, shift = timed(rate_hz, 1.0, seed, tau_s=1e9)
    lap_ms, _ = _errors(laps, shift, residual=False)
    assert lap_ms < bound_ms
    # the sectors carry the offset's projection on each line (not the timer's doing)
    _, sector_ms = _errors(laps, shift, residual=True)
    assert sector_ms < bound_ms


@pytest.mark.parametrize(
    ("rate_hz", "protocol", "lap_ms", "own_lap_ms", "own_sector_ms"),
    [(10, "ubx", 20.0, 30.0, 34.0), (25, "ubx", 30.0, 40.0, 48.0), (10, "nmea", 20.0, 30.0, 34.0)],
)
@pytest.mark.parametrize("seed", SEEDS)
def test_with_a_wandering_offset(
    rate_hz: int, protocol: str, lap_ms: float, own_lap_ms: float, own_sector_ms: float, seed: int
) -> None:
    """The default model (1 m offset wandering with a 600 s time constant): every lap counted
    once; the lap times' error bounded, and the timer's error less the receiver's own share at
    the lines. Measured over seeds 1-8 (NAV-PVT's velocity trusted to 0.03 m/s, the filter
    averaging ~30 s), worst laps / less the share / sectors less the share: 16.7 / 26.5 / 30.0 ms
    at 10 Hz, 25.5 / 35.5 / 43.6 ms at 25 Hz. Trusting the velocity to 0.1 m/s the filter follows
    the offset more closely (less the share: 14.0 / 14.2 ms at 10 Hz) and the laps are further
    from the car's (21.3 ms at 10 Hz, 39.3 ms at 25 Hz). The brief's 10 / 5 ms are not met with
    this model (docs/circuits.md)."""
    laps, shift = timed(rate_hz, 1.0, seed, protocol=protocol)
    assert _errors(laps, shift, residual=False)[0] < lap_ms
    own_lap, own_sector = _errors(laps, shift, residual=True)
    assert own_lap < own_lap_ms
    assert own_sector < own_sector_ms


@pytest.mark.parametrize("rate_hz", [10, 25])
@pytest.mark.parametrize("seed", range(5))
def test_3m_noise_counts_every_lap_and_sector_once(rate_hz: int, seed: int) -> None:
    """3 m of offset: no lap counted twice or missed, every sector line crossed once a lap; the
    times then carry the receiver's share (up to 3 x 2 m / 21 m/s on a sector)."""
    laps, _ = timed(rate_hz, 3.0, seed)
    _, _, truth = road()
    assert [lap.number for lap in laps] == list(range(1, LAPS + 1))
    for got, want in zip(laps, truth, strict=True):
        assert abs(got.time_s - float(want["time_s"])) < 0.3  # type: ignore[arg-type]
        assert len(got.sector_times_s) == 3
        for a, b in zip(got.sector_times_s, want["sectors_s"], strict=True):  # type: ignore[call-overload]
            assert abs(a - b) < 0.6
