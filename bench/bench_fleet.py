"""The fleet's costs: daemon CPU with live publishing, upload throughput, rigs per server.

    python bench/bench_fleet.py [--quick] [--skip cpu,upload,rigs]

Three measurements, each against a baseline run in the same script:

1. **Daemon CPU.** Three ``wrtfd run`` daemons side by side over the same window, fed the same
   60 Hz Forza + F1 2023 feed (the real captures, as ``bench_daemon.py``): no ``[fleet]``, live
   publishing at 10 Hz, and at full rate (every frame), both to a local nats-server. CPU from
   ``/proc/<pid>/stat`` (all threads). Goal: fleet at 10 Hz <= no fleet + 0.5 % of one core.
2. **Upload throughput.** A 1 GiB file uploaded by the daemon's uploader (chunks, acks, the
   info message, then verification: ``info``, and ``content`` which reads it all back) to a
   nats-server on loopback, against a plain file copy (read + write + fsync) of the same file.
3. **Rigs per server.** N simulated rigs (each its own NATS connection: 10 Hz live frames of a
   Forza frame, a status every 2 s, a 120 KB file every 5 s uploaded with the real uploader,
   i.e. what a 60 Hz Forza rig records) against one nats-server, with one ``wrtfd collect
   --follow`` mirroring the bucket. N grows until the backlog grows: files recorded but not
   uploaded, or uploaded but not collected, at the end of the window. The rigs' load runs on
   this machine too (2 cores shared), so the figure is a floor for real rigs on their own PCs.

Wall-clock figures are printed, never asserted; compare the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_daemon import feeder, start_daemon  # noqa: E402
from common import cpu_s, free_port  # noqa: E402

TOKEN = "bench-token"


class Server:
    """nats-server -js on loopback with its store in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        directory.mkdir(parents=True, exist_ok=True)
        conf = directory / "nats.conf"
        conf.write_text(
            f"listen: 127.0.0.1:{self.port}\n"
            f'jetstream {{ store_dir: "{directory / "store"}" }}\n'
            f'authorization {{ token: "{TOKEN}" }}\n'
        )
        binary = shutil.which("nats-server") or "/usr/sbin/nats-server"
        self.log = directory / "server.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([binary, "-c", str(conf)], stdout=log, stderr=log)
        deadline = time.monotonic() + 20
        while b"Server is ready" not in self.log.read_bytes():
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise SystemExit(f"nats-server did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)


# --- 0. the live encoding ------------------------------------------------------------------------


def bench_encoding() -> None:
    """Size and CPU of one live message (2 frames: 0.2 s of 60 Hz at 10 Hz) in three encodings."""
    import numpy as np

    from tests.fleet.conftest import forza_frames, forza_schema
    from wrtfd.fleet.encoding import encode_frames, layout_dtype, layout_of

    with tempfile.TemporaryDirectory() as d:
        schema = forza_schema(Path(d))
    layout = layout_of(schema, 60)
    frames, times = forza_frames(schema, 2)
    flat = frames.view(layout_dtype(layout))
    names = [f.name for f in layout.fields if not f.shape]
    rng = np.random.default_rng(1)
    for name in names[1:]:  # telemetry-like values: floats with all their digits, small integers
        kind = flat.dtype[name].kind
        if kind == "f":
            flat[name] = rng.uniform(-300, 300, len(flat))
        elif kind in "iu":
            flat[name] = rng.integers(0, 100, len(flat))

    def binary() -> bytes:
        return next(iter(encode_frames(layout.layout_id, frames, times)))

    def json_values() -> bytes:  # a channel list sent on change, then values in that order
        rows = [[flat[n][i].item() for n in names] for i in range(len(flat))]
        return json.dumps(
            {"l": layout.layout_id, "t": times.tolist(), "v": rows}, separators=(",", ":")
        ).encode()

    def json_named() -> bytes:  # self-describing: every channel by name in every frame
        rows = [{n: flat[n][i].item() for n in names} for i in range(len(flat))]
        return json.dumps({"t": times.tolist(), "f": rows}, separators=(",", ":")).encode()

    print(f"0. one live message: 2 Forza frames ({len(names)} channels, {layout.frame_bytes} B each)")
    print(f"{'encoding':<40}{'bytes':>8}{'us/message':>12}{'vs binary':>11}")
    base = None
    for label, fn in (
        ("binary (wrtfd: the frames' own bytes)", binary),
        ("JSON, values in channel-list order", json_values),
        ("JSON, channels by name", json_named),
    ):
        n = 2000
        t0 = time.perf_counter()
        for _ in range(n):
            payload = fn()
        us = (time.perf_counter() - t0) / n * 1e6
        base = base or us
        print(f"{label:<40}{len(payload):>8}{us:>12.1f}{us / base:>11.1f}")
    print()


# --- 1. daemon CPU -----------------------------------------------------------------------------


def status(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5) as r:
        return dict(json.loads(r.read()))


def bench_cpu(tmp: Path, window_s: float) -> None:
    server = Server(tmp / "nats-cpu")
    fleet = f'[fleet]\nurl = "{server.url}"\ntoken = "{TOKEN}"\nrig = "{{rig}}"\nupload = false\n'
    variants = {
        "no fleet": "",
        "fleet, live 10 Hz": fleet.format(rig="bench-10") + "live_hz = 10\n",
        "fleet, live every frame": fleet.format(rig="bench-full") + "live_hz = 1000\n",
    }
    procs: dict[str, tuple[subprocess.Popen[bytes], int, int, int]] = {}
    try:
        for name, text in variants.items():
            procs[name] = start_daemon(tmp, name.replace(" ", "_").replace(",", ""), text)
        stop = threading.Event()
        targets = [(p[1], p[2]) for p in procs.values()]
        warmup_s = 4.0
        th = threading.Thread(target=feeder, args=(targets, warmup_s + window_s + 2, stop))
        th.start()
        time.sleep(warmup_s)
        before = {k: cpu_s(p[0].pid) for k, p in procs.items()}
        server_before = cpu_s(server.proc.pid)
        t0 = time.monotonic()
        time.sleep(window_s)
        elapsed = time.monotonic() - t0
        after = {k: cpu_s(p[0].pid) for k, p in procs.items()}
        server_after = cpu_s(server.proc.pid)
        snaps = {k: status(p[3]) for k, p in procs.items()}
        stop.set()
        th.join()
    finally:
        for p in procs.values():
            p[0].terminate()
        for p in procs.values():
            p[0].wait(timeout=20)
        server.stop()
    pct = {k: 100.0 * (after[k] - before[k]) / elapsed for k in before}
    base = pct["no fleet"]
    print(f"1. daemon CPU, {window_s:.0f} s window, Forza 60 Hz + F1 2023 60 Hz (5 packets/frame), loopback")
    print(
        f"{'daemon':<28}{'CPU % of one core':>18}{'over no fleet':>15}{'live frames sent':>18}{'bytes/s':>10}"
    )
    for name, value in pct.items():
        live = (snaps[name].get("fleet") or {}).get("live") or {}
        rate = live.get("bytes_sent", 0) / max(1.0, snaps[name]["uptime_s"])
        print(
            f"{name:<28}{value:>18.2f}{value - base:>15.2f}{live.get('frames_sent', '-'):>18}"
            f"{rate if live else 0:>10.0f}"
        )
    print(f"{'nats-server (both fleets)':<28}{100.0 * (server_after - server_before) / elapsed:>18.2f}")
    extra = pct["fleet, live 10 Hz"] - base
    verdict = "meets" if extra <= 0.5 else "MISSES"
    print(f"goal: live at 10 Hz <= 0.50 % of one core over no fleet: {verdict} ({extra:.2f} %)\n")


# --- 2. upload throughput ----------------------------------------------------------------------


def _copy(src: Path, dst: Path) -> None:
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        while chunk := fi.read(1 << 20):
            fo.write(chunk)
        fo.flush()
        os.fsync(fo.fileno())


async def _upload(server: Server, path: Path, verify: str, name: str) -> float:
    from wrtfd.fleet.client import connect
    from wrtfd.fleet.config import ConnectOptions
    from wrtfd.fleet.queue import UploadEntry
    from wrtfd.fleet.upload import ObjectUploader

    nc = await connect(ConnectOptions(servers=(server.url,), token=TOKEN), name="bench")
    up = ObjectUploader(
        nc.jetstream(timeout=30), "wrtfd", verify=verify, new_nuid=lambda: os.urandom(11).hex()
    )

    async def save(entry: UploadEntry) -> UploadEntry:
        return entry

    t0 = time.perf_counter()
    await up.upload(UploadEntry(id=name, path=str(path), object=name, queued_us=0), headers={}, save=save)
    took = time.perf_counter() - t0
    await nc.close()
    return took


def bench_upload(tmp: Path, size: int) -> None:
    src = tmp / "big.wrtf"
    with open(src, "wb") as f:
        block = os.urandom(1 << 20)
        for i in range(size >> 20):
            f.write(hashlib.sha256(block + i.to_bytes(4, "little")).digest() * 32768)
    server = Server(tmp / "nats-upload")
    try:
        t0 = time.perf_counter()
        _copy(src, tmp / "copy.wrtf")
        copy_s = time.perf_counter() - t0
        (tmp / "copy.wrtf").unlink()
        info_s = asyncio.run(_upload(server, src, "info", "bench/info.wrtf"))
        content_s = asyncio.run(_upload(server, src, "content", "bench/content.wrtf"))
    finally:
        server.stop()
        src.unlink()
    mib = size / (1 << 20)
    print(f"2. upload of a {mib:.0f} MiB file to nats-server on loopback (128 KiB chunks, 8 in flight)")
    print(f"{'what':<44}{'seconds':>9}{'MiB/s':>9}{'vs copy':>9}")
    for label, took in (
        ("plain copy (read + write + fsync)", copy_s),
        ("upload, verify = info", info_s),
        ("upload, verify = content (reads it back)", content_s),
    ):
        print(f"{label:<44}{took:>9.2f}{mib / took:>9.1f}{copy_s / took:>9.2f}")
    print()


# --- 3. rigs per server ------------------------------------------------------------------------

RIG_FILE_BYTES = 120_000
RIG_FILE_EVERY_S = 5.0


async def _rig(
    i: int, url: str, out: Path, stop_at: float, stats: dict[str, Any], frames_payload: bytes
) -> None:
    from wrtfd.fleet.client import connect
    from wrtfd.fleet.config import ConnectOptions
    from wrtfd.fleet.queue import UploadEntry
    from wrtfd.fleet.upload import ObjectUploader

    rig = f"sim-{i:03d}"
    nc = await connect(ConnectOptions(servers=(url,), token=TOKEN), name=rig)
    js = nc.jetstream(timeout=30)
    up = ObjectUploader(js, "wrtfd", new_nuid=lambda: os.urandom(11).hex())
    queue: asyncio.Queue[Path] = asyncio.Queue()
    (out / rig).mkdir(parents=True, exist_ok=True)

    async def save(entry: UploadEntry) -> UploadEntry:
        return entry

    async def uploads() -> None:
        while True:
            path = await queue.get()
            entry = UploadEntry(id=path.name, path=str(path), object=f"{rig}/{path.name}", queued_us=0)
            await up.upload(entry, headers={"Wrtfd-Rig": rig}, save=save)
            stats["uploaded"] += 1
            stats["upload_lag_s"].append(time.monotonic() - float(path.stem.split("-")[1]) / 1000)

    uploader = asyncio.create_task(uploads())
    next_file = time.monotonic() + RIG_FILE_EVERY_S * (i % 10) / 10  # spread the rigs' files
    next_status = time.monotonic()
    n = 0
    try:
        while time.monotonic() < stop_at:
            await nc.publish(f"wrtfd.{rig}.main.frames", frames_payload)
            stats["live"] += 1
            now = time.monotonic()
            if now >= next_status:
                next_status += 2.0
                await nc.publish(
                    f"wrtfd.{rig}.status", json.dumps({"rig": rig, "state": "recording"}).encode()
                )
            if now >= next_file:
                next_file += RIG_FILE_EVERY_S
                path = out / rig / f"f{n:05d}-{int(now * 1000)}.wrtf"
                path.write_bytes(os.urandom(RIG_FILE_BYTES))
                n += 1
                stats["recorded"] += 1
                queue.put_nowait(path)
            await asyncio.sleep(0.2)  # two 60 Hz frames decimated to 10 Hz, one message per 0.2 s
    finally:
        uploader.cancel()
        with contextlib.suppress(BaseException):
            await uploader
        await nc.close()


async def _load(url: str, rigs: int, seconds: float, out: Path) -> dict[str, Any]:
    from tests.fleet.conftest import forza_frames, forza_schema
    from wrtfd.fleet.encoding import encode_frames, layout_of

    schema = forza_schema(out)
    layout = layout_of(schema, 60)
    frames, times = forza_frames(schema, 2)
    payload = next(iter(encode_frames(layout.layout_id, frames, times)))
    stats: dict[str, Any] = {"live": 0, "recorded": 0, "uploaded": 0, "upload_lag_s": []}
    stop_at = time.monotonic() + seconds
    await asyncio.gather(*(_rig(i, url, out, stop_at, stats, payload) for i in range(rigs)))
    lag = sorted(stats.pop("upload_lag_s"))
    stats["upload_lag_p95_s"] = lag[int(len(lag) * 0.95)] if lag else None
    stats["live_bytes"] = len(payload)
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    stats["cpu_s"] = usage.ru_utime + usage.ru_stime
    return stats


def bench_rigs(tmp: Path, steps: list[int], window_s: float) -> None:
    print(
        f"3. simulated rigs against one nats-server and one `wrtfd collect --follow`, {window_s:.0f} s each"
    )
    print("   each rig: 10 Hz live frames, a status every 2 s, a 120 KB file every 5 s (a 60 Hz Forza rig)")
    header = (
        f"{'rigs':>5}{'live msg/s':>11}{'files':>7}{'uploaded':>9}{'collected':>10}{'upload p95 s':>13}"
        f"{'server %':>9}{'collect %':>10}{'rigs %':>8}  verdict"
    )
    print(header)
    capacity = 0
    for rigs in steps:
        step = tmp / f"rigs-{rigs}"
        server = Server(step / "nats")
        pit = step / "pit"
        collect = subprocess.Popen(
            [
                *(sys.executable, "-m", "wrtfd", "collect", "--url", server.url, "--token", TOKEN),
                *("--into", str(pit), "--follow"),
            ],
            stderr=(step / "collect.log").open("w"),
        )
        try:
            load = subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--load-worker",
                    server.url,
                    str(rigs),
                    str(window_s),
                    str(step / "rigs"),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            c0 = {"server": cpu_s(server.proc.pid), "collect": cpu_s(collect.pid)}
            t0 = time.monotonic()
            out, _ = load.communicate(timeout=window_s * 4 + 60)
            elapsed = time.monotonic() - t0
            stats = json.loads(out.strip().splitlines()[-1])
            c1 = {"server": cpu_s(server.proc.pid), "collect": cpu_s(collect.pid)}
            settle = time.monotonic() + 20
            collected = 0
            while time.monotonic() < settle:  # what collect still owes, given 20 s more (a missed
                # info is found by collect's reconciliation within 15 s)
                collected = len(list(pit.rglob("*.wrtf"))) if pit.exists() else 0
                if collected >= stats["uploaded"]:
                    break
                time.sleep(0.5)
        finally:
            collect.terminate()
            collect.wait(timeout=20)
            server.stop()
        uploaded_share = stats["uploaded"] / max(1, stats["recorded"])
        keeps_up = stats["recorded"] - stats["uploaded"] <= rigs and collected >= stats["uploaded"]
        if keeps_up:
            capacity = rigs
        server_pct = 100 * (c1["server"] - c0["server"]) / elapsed
        collect_pct = 100 * (c1["collect"] - c0["collect"]) / elapsed
        print(
            f"{rigs:>5}{stats['live'] / window_s:>11.0f}{stats['recorded']:>7}{stats['uploaded']:>9}"
            f"{collected:>10}{stats['upload_lag_p95_s'] or 0:>13.2f}{server_pct:>9.1f}{collect_pct:>10.1f}"
            f"{100 * stats['cpu_s'] / elapsed:>8.1f}  {'keeps up' if keeps_up else 'backlog grows'}"
            f" ({uploaded_share:.0%} uploaded in time)"
        )
        if not keeps_up:
            made = {str(p.relative_to(step / "rigs")) for p in (step / "rigs").rglob("*.wrtf")}
            got = {str(p.relative_to(pit)) for p in pit.rglob("*.wrtf")} if pit.exists() else set()
            log = (step / "collect.log").read_text()
            for name in sorted(made - got)[:10]:
                print(
                    f"   not collected: {name}; collect said: {[ln for ln in log.splitlines() if name in ln]}"
                )
            print("   collect's errors:", [ln for ln in log.splitlines() if "error" in ln][:5])
            if os.environ.get("WRTFD_BENCH_KEEP"):
                shutil.copytree(step, os.environ["WRTFD_BENCH_KEEP"], dirs_exist_ok=True)
            break
        shutil.rmtree(step, ignore_errors=True)
    print(f"one nats-server and one collect kept up with {capacity} simulated rigs on this machine\n")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--load-worker":
        url, rigs, seconds, out = sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), Path(sys.argv[5])
        print(json.dumps(asyncio.run(_load(url, rigs, seconds, out))))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="short windows, a 256 MiB file, fewer rig steps")
    ap.add_argument("--skip", default="", help="comma-separated: encoding, cpu, upload, rigs")
    ap.add_argument("--upload-mib", type=int, help="size of the upload test file (default 1024)")
    ap.add_argument(
        "--rigs", default=None, help="comma-separated rig counts to try (default 10,20,40,80,160)"
    )
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    with tempfile.TemporaryDirectory(prefix="wrtfd-bench-fleet-", dir="/var/tmp") as d:
        tmp = Path(d)
        if "encoding" not in skip:
            bench_encoding()
        if "cpu" not in skip:
            bench_cpu(tmp, 15.0 if args.quick else 60.0)
        if "upload" not in skip:
            bench_upload(tmp, (args.upload_mib or (256 if args.quick else 1024)) << 20)
        if "rigs" not in skip:
            steps = [int(x) for x in (args.rigs or ("10,40" if args.quick else "10,20,40,80,160")).split(",")]
            bench_rigs(tmp, steps, 15.0 if args.quick else 30.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
