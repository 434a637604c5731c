"""GNSS lap timing against the simulator's own laps, over many seeds (docs/circuits.md figures).

The sessions of tests/tracks/test_gnss_delta.py (road.trk, 5 laps a seed, NAV-PVT at 10 or 25 Hz
with 1 m of white position noise and the receiver's few cm/s on the velocity, decoded), timed as
live (the filter forward only: the lap shown at the line), live refined (each crossing timed again
``refine_lag_s`` of fixes later, smoothed both ways over them: the lap the page, the lap records and
the journal end up with) and as ``wrtfd laps`` times them (smoothed both ways over the session).
Prints the mean and the worst lap and sector error per rate; ``--lags`` one refined row per lag.

    python tools/gnss_lap_accuracy.py --seeds 12 [--lag 30] [--lags 5,10,20,30,40] [--noise-m 3]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

import wrtfd.tracks.gnsslaps as gnsslaps  # noqa: E402
from tests.tracks.test_gnss_delta import ROAD, _session  # noqa: E402
from wrtfd.simulate.gnss import Drive  # noqa: E402
from wrtfd.tracks import load_track  # noqa: E402
from wrtfd.tracks.circuit import Circuit, circuit_from_track  # noqa: E402
from wrtfd.tracks.laps import Lap  # noqa: E402


def _row(what: str, runs: list[tuple[list[Lap], Drive]]) -> str:
    laps_ms: list[float] = []
    sectors_ms: list[float] = []
    counted = True
    for laps, drive in runs:
        counted &= [lap.number for lap in laps] == [lap.number for lap in drive.laps]
        for got, want in zip(laps, drive.laps, strict=False):
            laps_ms.append(abs(got.time_s - want.time_s) * 1000)
            sectors_ms += [
                abs(a - b) * 1000 for a, b in zip(got.sector_times_s, want.sector_times_s, strict=False)
            ]
    return (
        f"{what} {len(laps_ms)} laps: mean {np.mean(laps_ms):.1f} ms, worst "
        f"{max(laps_ms):.1f} ms; {len(sectors_ms)} sectors: mean {np.mean(sectors_ms):.1f} ms, "
        f"worst {max(sectors_ms):.1f} ms{'' if counted else '; LAPS MISSED OR COUNTED TWICE'}\n"
    )


def _live(
    circuit: Circuit, rate: int, seeds: int, noise_m: float, lag: float
) -> tuple[list[tuple[list[Lap], Drive]], list[tuple[list[Lap], Drive]]]:
    """As timed at the line and as refined ``lag`` s later, per seed."""
    provisional, refined = [], []
    for seed in range(seeds):
        frames, times, drive = _session(rate, seed, noise_m)
        laps, plug = gnsslaps.gnss_session_laps(frames, times, circuit, smooth=False, refine_lag_s=lag)
        provisional.append((plug.provisional, drive))
        refined.append((laps, drive))
    return provisional, refined


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=12, help="seeds 0..N-1, 5 laps each")
    p.add_argument("--rates", default="10,25", help="fix rates in Hz, comma-separated")
    p.add_argument("--noise-m", type=float, default=1.0, help="white position noise per fix, m")
    p.add_argument("--velocity-noise", type=float, help="the filter's NAV-PVT velocity noise, m/s")
    p.add_argument("--lag", type=float, default=gnsslaps.REFINE_LAG_S, help="refine_lag_s, s")
    p.add_argument("--lags", help="instead: one refined row per lag (s, comma-separated)")
    args = p.parse_args()
    if args.velocity_noise is not None:
        gnsslaps.DOPPLER_VELOCITY_NOISE_MPS = args.velocity_noise
    circuit = circuit_from_track(load_track(ROAD))
    sys.stdout.write(
        f"{args.noise_m} m of noise, velocity noise {gnsslaps.DOPPLER_VELOCITY_NOISE_MPS} m/s, "
        f"seeds 0-{args.seeds - 1}, refine_lag_s {args.lag:g}\n"
    )
    for rate in (int(r) for r in args.rates.split(",")):
        if args.lags:
            for lag in (float(x) for x in args.lags.split(",")):
                _, refined = _live(circuit, rate, args.seeds, args.noise_m, lag)
                sys.stdout.write(_row(f"{rate:2d} Hz live, refined {lag:4g} s", refined))
            continue
        provisional, refined = _live(circuit, rate, args.seeds, args.noise_m, args.lag)
        smoothed = []
        for seed in range(args.seeds):
            frames, times, drive = _session(rate, seed, args.noise_m)
            laps, _ = gnsslaps.gnss_session_laps(frames, times, circuit)
            smoothed.append((laps, drive))
        sys.stdout.write(_row(f"{rate:2d} Hz live         ", provisional))
        sys.stdout.write(_row(f"{rate:2d} Hz live, refined", refined))
        sys.stdout.write(_row(f"{rate:2d} Hz smoothed     ", smoothed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
