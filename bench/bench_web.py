"""CPU cost of the pit-wall page: the daemon recording with 100 pages open, next to one with none.

    python bench/bench_web.py [--quick] [--seconds N] [--pages N]

Two daemons run side by side over the same window, each recording a car that ``wrtfd simulate``
drives round the oval at 60 Hz (Forza packets, lap channels on):

- ``no pages``: nobody looks at it;
- ``N pages``: a client process holds N pushed-update streams (``/api/events``, what N phones
  with the page open receive) and reads every update.

CPU is read from ``/proc/<pid>/stat`` (utime + stime, all threads) of each daemon at the start
and end of the window, as a percentage of one core. The goal: N = 100 pages add at most 2 % of
one core. The table also shows the updates the pages received (the push rate drops with many
pages, to a budget of sends per second: see docs/web.md).
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path

from common import cpu_s, free_port

REPO = Path(__file__).resolve().parent.parent
OVAL = REPO / "config" / "tracks" / "oval.trk"


def start_daemon(work: Path, name: str) -> tuple[subprocess.Popen[bytes], int, int]:
    udp, http = free_port(socket.SOCK_DGRAM), free_port(socket.SOCK_STREAM)
    config = work / f"{name}.toml"
    config.write_text(
        textwrap.dedent(
            f"""
            [[sources]]
            kind = "udp"
            name = "forza"
            protocol = "forza"
            host = "127.0.0.1"
            port = {udp}
            track = "{OVAL}"
            [recorder]
            output_dir = "{work / name}"
            [status]
            port = {http}
            [web]
            max_pages = 1000
            max_connections = 1100
            [logging]
            level = "warning"
            """
        )
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "wrtfd", "run", "--config", str(config)], stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{http}/healthz", timeout=2):
                break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"daemon {name} did not start") from None
            time.sleep(0.2)
    return proc, udp, http


def simulate(udp: int, seconds: float) -> subprocess.Popen[bytes]:
    laps = max(3, int(seconds / 10) + 3)
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "wrtfd", "simulate", "--protocol", "forza", "--track", str(OVAL)),
            *("--to", f"127.0.0.1:{udp}", "--laps", str(laps)),
        ],
        stderr=subprocess.DEVNULL,
    )


PAGES_CLIENT = r"""
import asyncio, sys
port, n, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
counts = [0] * n
async def page(i):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n")
    await writer.drain()
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                return
            counts[i] += data.count(b"event: update")
    finally:
        writer.close()
async def main():
    tasks = [asyncio.create_task(page(i)) for i in range(n)]
    print("ready", flush=True)
    await asyncio.sleep(seconds)
    print(sum(counts), min(counts), flush=True)
    for t in tasks:
        t.cancel()
asyncio.run(main())
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--pages", type=int, default=100)
    ap.add_argument("--quick", action="store_true", help="a 10 s window")
    args = ap.parse_args()
    seconds = 10.0 if args.quick else args.seconds
    warmup = 4.0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        quiet, q_udp, _ = start_daemon(work, "quiet")
        busy, b_udp, b_http = start_daemon(work, "busy")
        sims = [simulate(q_udp, seconds + warmup + 5), simulate(b_udp, seconds + warmup + 5)]
        client = subprocess.Popen(
            [sys.executable, "-c", PAGES_CLIENT, str(b_http), str(args.pages), str(seconds + warmup + 5)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert client.stdout is not None
            if client.stdout.readline().strip() != "ready":
                raise SystemExit("the page client did not start")
            time.sleep(warmup)
            c0 = {p.pid: cpu_s(p.pid) for p in (quiet, busy)}
            t0 = time.monotonic()
            time.sleep(seconds)
            dt = time.monotonic() - t0
            c1 = {p.pid: cpu_s(p.pid) for p in (quiet, busy)}
            with urllib.request.urlopen(f"http://127.0.0.1:{b_http}/status", timeout=5) as r:
                pages_open = json.loads(r.read()).get("web", {}).get("pages")
            total, least = (int(x) for x in client.stdout.readline().split())
        finally:
            for p in (client, *sims, quiet, busy):
                if p.poll() is None:
                    p.terminate()
            for p in (client, *sims, quiet, busy):
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
    q = 100 * (c1[quiet.pid] - c0[quiet.pid]) / dt
    b = 100 * (c1[busy.pid] - c0[busy.pid]) / dt
    per_page = total / args.pages / (seconds + warmup + 5)
    print(f"window {dt:.1f} s; pages asked {args.pages}, open during the window {pages_open}")
    print(f"{'daemon':<22}{'CPU % of a core':>16}{'ratio':>8}")
    print(f"{'recording, no pages':<22}{q:>16.2f}{1.0:>8.2f}")
    print(f"{f'recording, {args.pages} pages':<22}{b:>16.2f}{b / q if q else float('nan'):>8.2f}")
    print(
        f"added by the pages: {b - q:+.2f} % of a core (goal <= +2.00); "
        f"updates per page per s: {per_page:.2f} (least page: {least})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
