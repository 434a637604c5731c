"""SLCAN through a pty: decoded frames/s and CPU vs reading the raw bytes from the same pty.

    python bench/bench_slcan.py [--quick] [--dbc PATH --log PATH]

The device side runs in a child process (so its CPU is not counted) and writes the Subaru
candump log (../shared/data/can/subaru) as SLCAN lines with timestamps, cycled as needed:

* ``max``: as fast as the pty takes them -> frames/s the reader sustains;
* ``8000/s``: paced like a fully loaded 1 Mbit/s bus (8-byte frames, ~8,000 frames/s) -> CPU of
  the reading process as % of one core, and whether every frame arrived (zero loss).

Each load is read twice in the same process: ``raw`` (pyserial-asyncio transport, bytes
counted, nothing else) and ``decode`` (SlcanSource: framer, SLCAN parse, cantools DBC decode
of every mapped frame, Sample to a sink). The goal is zero loss and <= 15 % of one core at
8,000 frames/s.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import sys
import time
import tty
from pathlib import Path

import anyio

from wrtfd.decoders.can_dbc import CanFrame
from wrtfd.decoders.candump import iter_candump
from wrtfd.decoders.slcan import SlcanDecoder, encode_slcan
from wrtfd.sources.serial import SerialLink, SerialSettings
from wrtfd.sources.slcan import SlcanSource

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "can" / "subaru"


def build_stream(frames: list[CanFrame], count: int) -> bytes:
    lines = []
    for i in range(count):
        frame = frames[i % len(frames)]
        lines.append(encode_slcan(frame, timestamp_ms=(i // 8) % 60000))
    return b"".join(lines)


def writer(master: int, data: bytes, frames: int, rate_fps: float | None, go: multiprocessing.Event) -> None:
    go.wait()
    per_frame = len(data) / frames
    batch_s = 0.005
    start = time.monotonic()
    pos = 0
    view = memoryview(data)
    while pos < len(data):
        if rate_fps is None:
            end = len(data)
        else:
            due_frames = (time.monotonic() - start + batch_s) * rate_fps
            end = min(len(data), int(due_frames * per_frame))
            nl = data.rfind(b"\r", pos, end)
            end = nl + 1 if nl >= pos else pos
            if end == pos:
                time.sleep(batch_s / 2)
                continue
        while pos < end:
            pos += os.write(master, view[pos:end])
        if rate_fps is not None:
            time.sleep(batch_s)
    os._exit(0)


async def read_raw(path: str, total: int) -> None:
    seen = 0
    done = asyncio.Event()

    def on_data(data: bytes) -> None:
        nonlocal seen
        seen += len(data)
        if seen >= total:
            done.set()

    link = await SerialLink.open(SerialSettings(path=path, baudrate=921600), on_data)
    try:
        await done.wait()
    finally:
        await link.aclose()


async def read_decoded(path: str, total: int, dbc: Path, result: dict[str, object]) -> None:
    samples = 0

    def sink(sample: object) -> None:
        nonlocal samples
        samples += 1

    source = SlcanSource(
        "can", SerialSettings(path=path, baudrate=921600), SlcanDecoder(dbc=dbc), command_gap_s=0
    )
    async with anyio.create_task_group() as tg:
        await tg.start(source.run, sink)
        while source.stats.bytes < total:  # noqa: ASYNC110 - polling a counter is enough here
            await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    result["received"] = source.stats.received
    result["samples"] = samples
    result["dropped"] = source.stats.dropped.as_dict()


def run_once(mode: str, data: bytes, frames: int, rate_fps: float | None, dbc: Path) -> dict[str, object]:
    master, slave = os.openpty()
    tty.setraw(slave)
    tty.setraw(master)
    path = os.ttyname(slave)
    go = multiprocessing.Event()
    proc = multiprocessing.Process(target=writer, args=(master, data, frames, rate_fps, go))
    proc.start()
    result: dict[str, object] = {}

    async def main() -> None:
        # Open first, so the pyserial open (which flushes input) happens before any byte.
        started = asyncio.get_running_loop().create_future()

        async def reader() -> None:
            started.set_result(None)
            if mode == "raw":
                await read_raw(path, len(data))
            else:
                await read_decoded(path, len(data), dbc, result)

        task = asyncio.ensure_future(reader())
        await started
        await asyncio.sleep(0.2)
        cpu0, wall0 = time.process_time(), time.monotonic()
        go.set()
        await task
        result["cpu_s"] = time.process_time() - cpu0
        result["wall_s"] = time.monotonic() - wall0

    asyncio.run(main())
    proc.join()
    os.close(master)
    os.close(slave)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 s per run instead of 10 s")
    parser.add_argument("--dbc", type=Path, default=SHARED / "sample_can_spec.dbc")
    parser.add_argument("--log", type=Path, default=SHARED / "can_sample.log")
    args = parser.parse_args(argv)
    if not args.dbc.exists() or not args.log.exists():
        sys.stderr.write(f"bench_slcan: need {args.dbc} and {args.log}\n")
        return 2
    frames = list(iter_candump(args.log))
    seconds = 2 if args.quick else 10
    rate = 8000.0
    n_paced = int(rate * seconds)
    n_max = 20_000 if args.quick else 100_000
    can = SlcanDecoder(dbc=args.dbc).can
    mapped = [f for f in frames if can.is_mapped(f.arbitration_id, f.is_extended)]
    loads = [
        ("max", None, n_max, frames),
        ("8000/s", rate, n_paced, frames),
        ("8000/s*", rate, n_paced, mapped),
    ]
    print(f"SLCAN over a pty, {args.log.name} frames cycled, DBC {args.dbc.name}")
    header = (
        "load",
        "reader",
        "frames",
        "wall s",
        "frames/s",
        "CPU %core",
        "frames/CPU-s",
        "CPU vs raw",
        "loss",
    )
    print("{:>8} {:>7} {:>8} {:>7} {:>9} {:>9} {:>12} {:>10} {:>5}".format(*header))
    for load, fps, count, source_frames in loads:
        data = build_stream(source_frames, count)
        raw = run_once("raw", data, count, fps, args.dbc)
        dec = run_once("decode", data, count, fps, args.dbc)
        for name, r in (("raw", raw), ("decode", dec)):
            wall = float(r["wall_s"])  # type: ignore[arg-type]
            cpu = float(r["cpu_s"])  # type: ignore[arg-type]
            ratio = cpu / float(raw["cpu_s"]) if name == "decode" else 1.0  # type: ignore[arg-type]
            loss = "-" if name == "raw" else str(count - int(r["received"]))  # type: ignore[call-overload]
            row = (
                load,
                name,
                count,
                wall,
                count / wall,
                100 * cpu / wall,
                count / max(cpu, 1e-9),
                ratio,
                loss,
            )
            print("{:>8} {:>7} {:>8} {:>7.2f} {:>9.0f} {:>9.1f} {:>12.0f} {:>9.1f}x {:>5}".format(*row))
        print(f"{'':>8} decode: samples {dec['samples']}, dropped {dec['dropped']}")
    print("* only frames with mapped DBC signals (every frame goes through cantools)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
