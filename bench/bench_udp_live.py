"""The live UDP path on loopback: sustained datagrams/s, and CPU of a real game feed.

    python bench/bench_udp_live.py [--quick]

1. Throughput: a sender process blasts F1 2024 Car Telemetry datagrams at fixed rates into one
   ``UdpSource`` (F1 decoder, counting sink). Reported per rate: received, decoded, drops by
   the application (anything but the kernel's) and by the kernel (socket buffer overflow,
   counted through SO_RXQ_OVFL), and the receiving process's CPU.
2. Feed: a 360 Hz F1 stream (6 packet types per 60 Hz game frame) and a 60 Hz Forza stream,
   recorded together by two ``UdpSource`` and a ``LiveRecorder`` into a WRTF file. The CPU of
   the recording process is shown next to a baseline in the same process: a bare asyncio
   datagram protocol that only counts the same datagrams.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pickle
import resource
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from wrtfd.decoders.base import Sample
from wrtfd.decoders.f1 import F1Decoder
from wrtfd.decoders.forza import ForzaDecoder
from wrtfd.recorder import LiveRecorder, RecorderPolicy, SourceSpec
from wrtfd.sources.udp import DEFAULT_READ_INTERVAL_S, UdpSource

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "udp"

#: Sender process: sends streams (address, packets, rate_hz, per_tick) for a duration, paced in
#: 1 ms slices on an absolute schedule; prints how many it sent.
SENDER = r"""
import pickle, socket, sys, time
streams, duration = pickle.load(open(sys.argv[1], "rb"))
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
t0 = time.monotonic()
sent = [0] * len(streams)
while True:
    now = time.monotonic() - t0
    if now >= duration:
        break
    for k, (addr, packets, rate, per_tick) in enumerate(streams):
        due = int(min(now, duration) * rate) * per_tick
        while sent[k] < due:
            sock.sendto(packets[sent[k] % len(packets)], addr)
            sent[k] += 1
    time.sleep(0.0005)
print(sum(sent))
"""


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def f1_packets() -> dict[int, bytes]:
    found: dict[int, bytes] = {}
    path = DATA / "f1" / "2024.jsonl"
    if path.exists():
        for line in path.read_text().splitlines():
            msg = json.loads(line)["message"]
            raw = bytes(msg["data"] if isinstance(msg, dict) else msg)
            found.setdefault(raw[6], raw)
    sizes = {0: 1349, 1: 753, 2: 1285, 6: 1352, 7: 1239, 13: 237}
    for pid, size in sizes.items():  # synthetic stand-ins when the captures are absent
        if pid not in found:
            head = struct.pack("<HBBBBBQfIIBB", 2024, 24, 1, 0, 1, pid, 7, 1.0, 1, 1, 0, 255)
            found[pid] = head + bytes(size - len(head))
    return found


def forza_packets() -> list[bytes]:
    path = DATA / "forza_fm2023" / "fm2023_dash_331B_x1793.bin"
    raw = path.read_bytes() if path.exists() else bytes(331) * 60
    return [raw[i : i + 331] for i in range(0, len(raw), 331)]


def start_sender(streams: list[tuple[tuple[str, int], list[bytes], float, int]], duration_s: float,
                 tmp: Path) -> subprocess.Popen[str]:  # fmt: skip
    spec = tmp / "streams.pickle"
    with spec.open("wb") as fh:
        pickle.dump((streams, duration_s), fh)
    return subprocess.Popen([sys.executable, "-c", SENDER, str(spec)], stdout=subprocess.PIPE, text=True)


async def throughput(rate: int, duration_s: float, tmp: Path) -> dict[str, Any]:
    telemetry = f1_packets()[6]
    count = [0]

    def sink(_sample: Sample) -> None:
        count[0] += 1

    source = UdpSource("f1", F1Decoder(), host="127.0.0.1", port=0, rcvbuf_bytes=1 << 22)
    async with anyio.create_task_group() as tg:
        await tg.start(source.run, sink)
        addr = source.local_address
        if addr is None:
            raise SystemExit("source did not bind")
        c0, t0 = cpu_s(), time.monotonic()
        proc = start_sender([(addr, [telemetry], rate / 10, 10)], duration_s, tmp)
        out, _ = await anyio.to_thread.run_sync(proc.communicate)
        sent = int(out.strip() or 0)
        with anyio.move_on_after(2):
            while source.stats.received + source.stats.dropped.as_dict().get("kernel_overflow", 0) < sent:  # noqa: ASYNC110
                await anyio.sleep(0.01)
        c1, t1 = cpu_s(), time.monotonic()
        tg.cancel_scope.cancel()
    drops = source.stats.dropped.as_dict()
    kernel = drops.pop("kernel_overflow", 0)
    cpu_pct = 100 * (c1 - c0) / (t1 - t0)
    return {"rate": rate, "sent": sent, "received": source.stats.received, "decoded": count[0],
            "app_drops": sum(drops.values()), "kernel_drops": kernel, "cpu_pct": cpu_pct}  # fmt: skip


def feed_streams(f1_addr: tuple[str, int], forza_addr: tuple[str, int]) -> list[Any]:
    f1 = f1_packets()
    frame = [f1[pid] for pid in (0, 2, 6, 7, 13, 1)]  # 6 datagrams per game frame: 360/s at 60 Hz
    return [(f1_addr, frame, 60.0, 6), (forza_addr, forza_packets(), 60.0, 1)]


async def feed_recorded(
    duration_s: float, tmp: Path, *, record: bool, read_interval_s: float | None = None
) -> dict[str, Any]:
    """The feed into two UdpSources, then a LiveRecorder (``record``) or a counting sink.

    ``read_interval_s``: the sources' batched reads (None: their default; 0: read on arrival).
    """
    f1_dec, forza_dec = F1Decoder(), ForzaDecoder()
    out_dir = tmp / f"rec-{record}-{read_interval_s}"
    out_dir.mkdir(exist_ok=True)
    policy = RecorderPolicy(output_dir=out_dir, rate_hz=60)
    specs = [SourceSpec("f1", f1_dec.definition), SourceSpec("forza", forza_dec.definition)]
    live = LiveRecorder(specs, policy)
    interval = DEFAULT_READ_INTERVAL_S if read_interval_s is None else read_interval_s
    counted = [0]

    def count(_sample: Sample) -> None:
        counted[0] += 1

    sink = live.sink if record else count
    f1_src = UdpSource("f1", f1_dec, host="127.0.0.1", port=0, read_interval_s=interval)
    forza_src = UdpSource("forza", forza_dec, host="127.0.0.1", port=0, read_interval_s=interval)
    async with anyio.create_task_group() as tg:
        if record:
            await tg.start(live.run)
        await tg.start(f1_src.run, sink)
        await tg.start(forza_src.run, sink)
        if f1_src.local_address is None or forza_src.local_address is None:
            raise SystemExit("sources did not bind")
        await anyio.sleep(0.5)
        c0, t0 = cpu_s(), time.monotonic()
        proc = start_sender(feed_streams(f1_src.local_address, forza_src.local_address), duration_s, tmp)
        out, _ = await anyio.to_thread.run_sync(proc.communicate)
        c1, t1 = cpu_s(), time.monotonic()
        if record:
            await live.stop()
        tg.cancel_scope.cancel()
    received = f1_src.stats.received + forza_src.stats.received
    drops = f1_src.stats.dropped.total() + forza_src.stats.dropped.total()
    files = sorted(out_dir.rglob("*.wrtf"))
    return {"sent": int(out.strip() or 0), "received": received, "drops": drops,
            "cpu_pct": 100 * (c1 - c0) / (t1 - t0), "files": len(files),
            "bytes": sum(f.stat().st_size for f in files), "samples": counted[0] or live.samples}  # fmt: skip


class _Counter(asyncio.DatagramProtocol):
    def __init__(self) -> None:
        self.n = 0

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.n += 1


async def feed_baseline(duration_s: float, tmp: Path) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    t_a, p_a = await loop.create_datagram_endpoint(_Counter, local_addr=("127.0.0.1", 0))
    t_b, p_b = await loop.create_datagram_endpoint(_Counter, local_addr=("127.0.0.1", 0))
    c0, t0 = cpu_s(), time.monotonic()
    proc = start_sender(
        feed_streams(t_a.get_extra_info("sockname"), t_b.get_extra_info("sockname")), duration_s, tmp
    )
    out, _ = await anyio.to_thread.run_sync(proc.communicate)
    c1, t1 = cpu_s(), time.monotonic()
    t_a.close()
    t_b.close()
    return {"sent": int(out.strip() or 0), "received": p_a.n + p_b.n, "cpu_pct": 100 * (c1 - c0) / (t1 - t0)}


async def run(quick: bool) -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        rates = [20_000, 50_000] if quick else [20_000, 50_000, 100_000, 150_000]
        seconds = 1.0 if quick else 3.0
        print("1. throughput: F1 car telemetry -> UdpSource(F1Decoder) -> counting sink")
        head = f"{'rate/s':>8} {'sent':>8} {'received':>9} {'decoded':>8} {'app drops':>9}"
        print(f"{head} {'kernel drops':>12} {'cpu %':>6}")
        for rate in rates:
            r = await throughput(rate, seconds, tmp)
            print(f"{r['rate']:>8} {r['sent']:>8} {r['received']:>9} {r['decoded']:>8} {r['app_drops']:>9} "
                  f"{r['kernel_drops']:>12} {r['cpu_pct']:>6.1f}")  # fmt: skip
        feed_s = 5.0 if quick else 20.0
        print(f"\n2. feed: F1 360 Hz + Forza 60 Hz for {feed_s:.0f} s, % of one core of this process")
        base = await feed_baseline(feed_s, tmp)
        rows = [
            ("UdpSource x2 -> counting sink", await feed_recorded(feed_s, tmp, record=False)),
            ("UdpSource x2 + LiveRecorder -> WRTF", await feed_recorded(feed_s, tmp, record=True)),
            (
                "  same, UdpSource(read_interval_s=0)",
                await feed_recorded(feed_s, tmp, record=True, read_interval_s=0.0),
            ),
        ]
        print(f"{'pipeline':<40} {'sent':>6} {'received':>9} {'drops':>6} {'cpu %':>6} {'ratio':>6}")
        print(f"{'baseline: asyncio protocol, count only':<40} {base['sent']:>6} {base['received']:>9} "
              f"{'-':>6} {base['cpu_pct']:>6.2f} {1.0:>6.2f}")  # fmt: skip
        for label, r in rows:
            ratio = r["cpu_pct"] / max(base["cpu_pct"], 1e-9)
            counts = f"{r['sent']:>6} {r['received']:>9} {r['drops']:>6}"
            print(f"{label:<40} {counts} {r['cpu_pct']:>6.2f} {ratio:>6.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short runs")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYTHONHASHSEED", "0")
    anyio.run(run, args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
