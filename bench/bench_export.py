"""Export throughput of a 1-hour 60 Hz Forza recording to every format, against CSV.

    python bench/bench_export.py [--quick] [--frames N] [--dir DIR] [--repeats R]

The recording is real Forza FM2023 packets of a simulated car (``wrtfd simulate`` through the
real decoder and recorder, with lap channels), repeated to 216,000 frames (one hour at 60 Hz;
``--quick``: 21,600). Each format is exported in this process with ``export_recording`` (what
``wrtfd export`` runs), best of ``--repeats`` runs, formats interleaved, into the same
directory. CSV is the baseline: the ratio is CSV's time divided by the format's (>1: faster
than CSV). CPU time is the process's own (user + system), which load from other processes
disturbs less than wall time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from wrtfd.exporters import export_recording
from wrtfd.format import Reader
from wrtfd.simulate import Simulation, TrackInfo, make_encoder
from wrtfd.simulate.record import record_simulation, tile_recording
from wrtfd.tracks import LanePath, load_track, timing_sectors
from wrtfd.tracks.lapchannels import lap_channels_for

ROAD = Path(__file__).resolve().parents[1] / "config" / "tracks" / "road.trk"
#: (label, format, MCAP encoding): MCAP in both encodings, the JSON one the baseline of the CDR one.
CASES: tuple[tuple[str, str, str], ...] = (
    ("CSV", "csv", "cdr"),
    ("Parquet", "parquet", "cdr"),
    ("MoTeC .ld", "ld", "cdr"),
    ("MCAP cdr", "mcap", "cdr"),
    ("MCAP json", "mcap", "json"),
    ("MDF4", "mf4", "cdr"),
)


def make_recording(work: Path, frames: int) -> Path:
    track = load_track(ROAD)
    path = LanePath(track)
    sectors = timing_sectors(track, path)
    sim = Simulation(path, laps=3, rate_hz=60.0, seed=7, sectors_m=sectors)
    (lap_file,) = [
        p
        for p in record_simulation(
            sim,
            make_encoder("forza", TrackInfo(track.name, path.length_m, sectors, 3)),
            work / "sim",
            protocol="forza",
            derived=[lap_channels_for(track, source="forza", protocol="forza")],
            metadata={"Track": track.name, "Driver": "bench"},
        )
    ]
    return tile_recording(lap_file, work / "hour.wrtf", frames=frames)


def _size(summary_paths: list[Path]) -> int:
    return sum(p.stat().st_size for p in summary_paths)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="21,600 frames (6 minutes) instead of an hour")
    ap.add_argument("--frames", type=int, help="frames in the recording")
    ap.add_argument("--dir", type=Path, help="work directory (default: a temporary one)")
    ap.add_argument("--repeats", type=int, default=2, help="runs per format, best kept (default 2)")
    args = ap.parse_args()
    frames = args.frames or (21_600 if args.quick else 216_000)
    work = Path(tempfile.mkdtemp(prefix="bench_export_", dir=args.dir))
    try:
        src = make_recording(work, frames)
        with Reader(src) as r:
            print(
                f"recording: {r.total_frames} frames at {r.rate_hz} Hz, {r.schema.frame_size} B/frame, "
                f"{src.stat().st_size / 1e6:.1f} MB ({len(r.schema.frame_leaves)} leaves)"
            )
        best_wall = {label: float("inf") for label, _, _ in CASES}
        best_cpu = {label: float("inf") for label, _, _ in CASES}
        sizes: dict[str, int] = {}
        for _ in range(args.repeats):
            for label, fmt, encoding in CASES:
                out = work / f"out.{fmt}"
                with Reader(src) as r:
                    c0, t0 = os.times(), time.perf_counter()
                    summary = export_recording(r, out, mcap_encoding=encoding)
                    t1, c1 = time.perf_counter(), os.times()
                best_wall[label] = min(best_wall[label], t1 - t0)
                cpu = (c1.user - c0.user) + (c1.system - c0.system)
                best_cpu[label] = min(best_cpu[label], cpu)
                sizes[label] = _size(summary.paths)
                for p in summary.paths:
                    p.unlink()
        base_wall, base_cpu = best_wall["CSV"], best_cpu["CSV"]
        print(f"load average {os.getloadavg()[0]:.1f}")
        print(f"{'format':<10} {'frames/s':>11} {'vs CSV':>7} {'CPU s':>7} {'CPU vs CSV':>10} {'size MB':>8}")
        for label, _, _ in CASES:
            wall, cpu = best_wall[label], best_cpu[label]
            print(
                f"{label:<10} {frames / wall:>11,.0f} {base_wall / wall:>6.2f}x"
                f" {cpu:>7.2f} {base_cpu / cpu:>9.2f}x {sizes[label] / 1e6:>8.1f}"
            )
        cdr, js = best_cpu["MCAP cdr"], best_cpu["MCAP json"]
        print(f"MCAP cdr vs json (CPU): {js / cdr:.1f}x (goal >= 10x)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
