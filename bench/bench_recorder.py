"""CPU cost of the scheduler + recorder path, next to writing the same frames directly.

Load: a 1 kHz recording of 256 float32 channels fed by 4 sources (64 channels each, every
source at 1 kHz; two placed by their own clock, two by arrival time with +-0.2 ms jitter), over
60 s of virtual time (10 s with ``--quick``). The recorder path is what the live driver runs: per
sample ``advance(rx)`` + ``push`` (scheduler, timing estimators, sample-and-hold), every 5 ms an
``advance(now)`` that emits frame blocks, every 50 ms the file sink writing them through
``wrtfd.format.Writer`` (flushed: one write() per batch). Baselines in
the same run: ``Writer.write_frames`` of the very same frames (the format library alone) and a
raw ``os.write`` of their bytes.

    python bench/bench_recorder.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from wrtfd.decoders.base import Sample
from wrtfd.format import Reader, Writer
from wrtfd.recorder import Recorder, RecorderPolicy, SourceSpec

RATE = 1000
SOURCES = 4
CHANNELS = 64
T0_NS = 1_000_000_000_000


def _definition(name: str) -> dict[str, object]:
    return {
        "version": "1.0",
        "session": {
            "description": "d",
            "header": {
                "description": "h",
                "fields": [{"name": "start_timestamp", "type": "uint64", "description": "t"}],
            },
        },
        "frame": {
            "description": name,
            "fields": [
                {"name": f"c{i:02d}", "type": "float32", "description": f"channel {i}"}
                for i in range(CHANNELS)
            ],
        },
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="10 s of virtual time instead of 60 s")
    args = ap.parse_args()
    seconds = 10 if args.quick else 60
    names = [f"s{k}" for k in range(SOURCES)]
    specs = [SourceSpec(n, _definition(n), use_source_clock=k < 2) for k, n in enumerate(names)]
    chans = [f"c{i:02d}" for i in range(CHANNELS)]
    rng = random.Random(1)
    pools = [[{c: float(j * 0.5 + i) for i, c in enumerate(chans)} for j in range(16)] for _ in names]
    tmp = Path(tempfile.mkdtemp(prefix="wrtfd-bench-"))
    rec = Recorder(
        specs,
        RecorderPolicy(
            output_dir=tmp / "rec",
            rate_hz=RATE,
            jitter_s=0.02,
            bunch_s=0.005,
            settle_s=0.05,
            session_idle_s=None,
        ),
        origin=(T0_NS, 1_700_000_000_000_000),
        flush_each_batch=True,
    )
    period = 1_000_000_000 // RATE
    total_ticks = seconds * RATE
    chunk = 1000  # samples are built outside the timed region, one second at a time
    cpu = 0.0
    samples_done = 0
    for start in range(0, total_ticks, chunk):
        batch = []
        for t in range(start, min(start + chunk, total_ticks)):
            base = T0_NS + t * period
            for k, n in enumerate(names):
                rx = base + 300_000 + k * 50_000 + rng.randint(-200_000, 200_000)
                src = base + k * 50_000 if k < 2 else None
                batch.append(Sample(n, rx, pools[k][t % 16], source_time_ns=src))
        batch.sort(key=lambda s: s.rx_ns)
        c0 = time.process_time()
        # as the live driver does: every 5 ms (tick_s) drain the intake, advance to "now";
        # every 50 ms (batch_s) hand the operations to the file sink
        step_ns, batch_ns = 5_000_000, 50_000_000
        ops: list[object] = []
        next_step = batch[0].rx_ns - batch[0].rx_ns % step_ns + step_ns
        next_batch = batch[0].rx_ns - batch[0].rx_ns % batch_ns + batch_ns
        for s in batch:
            while s.rx_ns >= next_step:
                ops += rec.advance(next_step)
                next_step += step_ns
                if next_step > next_batch:
                    rec.apply(ops)  # type: ignore[arg-type]
                    ops = []
                    next_batch += batch_ns
            rec.advance(s.rx_ns, flush=False)
            rec.push(s)
        ops += rec.advance(batch[-1].rx_ns)
        rec.apply(ops)  # type: ignore[arg-type]
        cpu += time.process_time() - c0
        samples_done += len(batch)
    c0 = time.process_time()
    rec.apply(rec.finish("end"))
    rec.close()
    cpu += time.process_time() - c0
    (path,) = rec.paths
    with Reader(path) as r:
        frames = np.array(r.frames(0))
        schema = r.schema
    n_frames = len(frames)
    size = path.stat().st_size

    # baseline 1: the format library writing the same frames directly, 1000 per call
    direct = tmp / "direct.wrtf"
    c0 = time.process_time()
    with Writer(direct, schema, rate_hz=RATE, start_timestamp_us=1_700_000_000_000_000) as w:
        w.begin_session({"start_timestamp": 1_700_000_000_000_000})
        for i in range(0, n_frames, 1000):
            w.write_frames(frames[i : i + 1000])
            w.flush()
        w.end_session()
    cpu_direct = time.process_time() - c0
    # baseline 2: raw write() of the frame bytes
    raw = frames.tobytes()
    c0 = time.process_time()
    fd = os.open(tmp / "raw.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    step = 1000 * frames.dtype.itemsize
    for i in range(0, len(raw), step):
        os.write(fd, raw[i : i + step])
    os.fsync(fd)
    os.close(fd)
    cpu_raw = time.process_time() - c0

    rows = [
        ("scheduler+recorder (whole path)", cpu),
        ("format Writer.write_frames only", cpu_direct),
        ("raw os.write of frame bytes", cpu_raw),
    ]
    out = sys.stdout
    out.write(
        f"load: {RATE} Hz x {SOURCES * CHANNELS} float32 channels, {SOURCES} sources at {RATE} Hz, "
        f"{seconds} s virtual; {samples_done} samples -> {n_frames} frames "
        f"({frames.dtype.itemsize} B each, file {size / 1e6:.1f} MB)\n"
    )
    out.write(
        f"{'path':34} {'CPU s':>8} {'us/frame':>9} {'us/sample':>10} {'frames/s':>10} "
        f"{'% core @1kHz':>13} {'x direct':>9}\n"
    )
    for name, c in rows:
        out.write(
            f"{name:34} {c:8.3f} {c / n_frames * 1e6:9.2f} {c / samples_done * 1e6:10.2f} "
            f"{n_frames / c:10.0f} {100 * c / seconds:12.1f}% {c / cpu_direct:9.1f}\n"
        )
    out.write(
        f"goal: whole path <= 10% of one core -> {'met' if 100 * cpu / seconds <= 10 else 'NOT met'} "
        f"({100 * cpu / seconds:.1f}%)\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
