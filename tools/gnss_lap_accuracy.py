"""GNSS lap timing against the simulator's own laps, over many seeds (docs/circuits.md figures).

The sessions of tests/tracks/test_gnss_delta.py (road.trk, 5 laps a seed, NAV-PVT at 10 or 25 Hz
with 1 m of white position noise and the receiver's few cm/s on the velocity, decoded), timed as
live (the filter forward only) and as ``wrtfd laps`` times them (smoothed both ways). Prints the
mean and the worst lap and sector error per rate.

    python tools/gnss_lap_accuracy.py --seeds 12 [--noise-m 3] [--velocity-noise 0.05]
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
from wrtfd.tracks import load_track  # noqa: E402
from wrtfd.tracks.circuit import circuit_from_track  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=12, help="seeds 0..N-1, 5 laps each")
    p.add_argument("--rates", default="10,25", help="fix rates in Hz, comma-separated")
    p.add_argument("--noise-m", type=float, default=1.0, help="white position noise per fix, m")
    p.add_argument("--velocity-noise", type=float, help="the filter's NAV-PVT velocity noise, m/s")
    args = p.parse_args()
    if args.velocity_noise is not None:
        gnsslaps.DOPPLER_VELOCITY_NOISE_MPS = args.velocity_noise
    circuit = circuit_from_track(load_track(ROAD))
    sys.stdout.write(
        f"{args.noise_m} m of noise, velocity noise {gnsslaps.DOPPLER_VELOCITY_NOISE_MPS} m/s, "
        f"seeds 0-{args.seeds - 1}\n"
    )
    for rate in (int(r) for r in args.rates.split(",")):
        for smooth in (False, True):
            laps_ms: list[float] = []
            sectors_ms: list[float] = []
            counted = True
            for seed in range(args.seeds):
                frames, times, drive = _session(rate, seed, args.noise_m)
                laps, _ = gnsslaps.gnss_session_laps(frames, times, circuit, smooth=smooth)
                counted &= [lap.number for lap in laps] == [lap.number for lap in drive.laps]
                for got, want in zip(laps, drive.laps, strict=False):
                    laps_ms.append(abs(got.time_s - want.time_s) * 1000)
                    sectors_ms += [
                        abs(a - b) * 1000
                        for a, b in zip(got.sector_times_s, want.sector_times_s, strict=False)
                    ]
            how = "smoothed" if smooth else "live    "
            sys.stdout.write(
                f"{rate:2d} Hz {how} {len(laps_ms)} laps: mean {np.mean(laps_ms):.1f} ms, worst "
                f"{max(laps_ms):.1f} ms; {len(sectors_ms)} sectors: mean {np.mean(sectors_ms):.1f} ms, "
                f"worst {max(sectors_ms):.1f} ms{'' if counted else '; LAPS MISSED OR COUNTED TWICE'}\n"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
