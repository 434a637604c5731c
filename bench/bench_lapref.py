"""Cost of lap records and the team's-best reference on a recording rig, with and without, in the
same run.

    python bench/bench_lapref.py [--laps N] [--speed-scale X]

1. Two real daemons at once (each ``wrtfd run``, one Forza source timing laps on the oval at
   60 Hz, ``[fleet]`` to one local nats-server), each driven by its own ``wrtfd simulate`` (same
   seed, real time by default):

   - ``with``: lap records sent to the laps bucket (``laps = true``), its best laps cut and put
     in the object store (``best_laps = true``) and ``reference = "fleet:best"`` on the source
     (the rig follows the team's best: here its own, so every improvement is cut, put, fetched
     and taken);
   - ``without``: ``laps = false``, ``best_laps = false``, no reference (the session's best).

   CPU seconds of each process (``/proc``, all threads) over the drive; the difference is the
   cost, in % of one core. Both run at once, so the machine's load hits both alike; on a shared
   machine the difference is within the noise of a few tenths of a percent: (2) is the precise
   figure.
2. In process, the parts timed one by one (CPU time of this process, median of 8 laps; the
   nats-server's own is not counted): the lap's record line, sending it, cutting and putting the
   lap file, the follower taking a record, fetching and loading a lap file as the reference;
   the idle cost (the follower's subscription, the forwarder looking at ``laps.jsonl``) over
   30 s; and the delta per frame with the fleet's reference against the session's. Per second of
   recording: the per-lap parts once per lap (every lap a new best, the worst case) + idle.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_fleet import TOKEN, Server  # noqa: E402
from common import cpu_s, free_port  # noqa: E402

OVAL = REPO / "config" / "tracks" / "oval.trk"
RATE_HZ = 60


def start(
    tmp: Path, name: str, server: Server, *, with_refs: bool
) -> tuple[subprocess.Popen[bytes], int, int]:
    import socket

    port, status = free_port(socket.SOCK_DGRAM), free_port()
    ref = 'reference = "fleet:best"\n' if with_refs else ""
    on = "true" if with_refs else "false"
    cfg = tmp / f"{name}.toml"
    cfg.write_text(
        f'[[sources]]\nkind = "udp"\nprotocol = "forza"\nhost = "127.0.0.1"\nport = {port}\n'
        f'track = "{OVAL}"\n{ref}'
        f'[recorder]\noutput_dir = "{tmp / name}"\n[status]\nport = {status}\n[logging]\nlevel = "info"\n'
        f'[fleet]\nurl = "{server.url}"\ntoken = "{TOKEN}"\nrig = "{name}"\n'
        f"laps = {on}\nbest_laps = {on}\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "wrtfd", "run", "--config", str(cfg)],
        stderr=(tmp / f"{name}.log").open("w"),
        cwd=tmp,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{status}/status", timeout=2) as r:
                if json.loads(r.read()).get("fleet", {}).get("state") == "connected":
                    return proc, port, status
        except OSError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"{name} did not come up: {(tmp / f'{name}.log').read_text()[-2000:]}")


def fleet_of(status_port: int) -> dict[str, object]:
    with urllib.request.urlopen(f"http://127.0.0.1:{status_port}/status", timeout=5) as r:
        return dict(json.loads(r.read()).get("fleet") or {})


def daemons(laps: int, speed: float) -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        server = Server(tmp / "nats")
        procs = []
        try:
            with_p, with_port, with_status = start(tmp, "with", server, with_refs=True)
            procs.append(with_p)
            without_p, without_port, _ = start(tmp, "without", server, with_refs=False)
            procs.append(without_p)
            time.sleep(2.0)  # start-up settled
            c0 = {p.pid: cpu_s(p.pid) for p in procs}
            t0 = time.monotonic()
            sims = [
                subprocess.Popen(
                    [
                        *(
                            sys.executable,
                            "-m",
                            "wrtfd",
                            "simulate",
                            "--protocol",
                            "forza",
                            "--track",
                            str(OVAL),
                        ),
                        *("--to", f"127.0.0.1:{port}", "--laps", str(laps), "--seed", "4"),
                        *("--speed-scale", str(speed)),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for port in (with_port, without_port)
            ]
            for sim in sims:
                sim.wait(timeout=3600)
            time.sleep(2.0)  # the last lap's cut, put and fetch
            elapsed = time.monotonic() - t0
            used = {p.pid: cpu_s(p.pid) - c0[p.pid] for p in procs}
            fleet = fleet_of(with_status)
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(timeout=20)
            server.stop()
        a, b = used[with_p.pid], used[without_p.pid]
        best = fleet.get("best_laps") or {}
        refs = fleet.get("references") or [{}]
        print(
            f"1. two daemons, {laps} simulated laps of the oval at {RATE_HZ} Hz, {elapsed:.1f} s (same run)"
        )
        print(f"   {'daemon':<44}{'CPU s':>8}{'% of one core':>16}")
        print(f"   {'with (records, best laps, fleet:best)':<44}{a:>8.2f}{100 * a / elapsed:>16.2f}")
        print(f"   {'without':<44}{b:>8.2f}{100 * b / elapsed:>16.2f}")
        print(f"   {'difference':<44}{a - b:>8.2f}{100 * (a - b) / elapsed:>16.2f}")
        print(f"   ratio with/without {a / b:.3f}")
        print(
            f"   the with-rig put {best.get('put')} best lap(s), follows "  # type: ignore[union-attr]
            f"{refs[0].get('lap_time_s')} s ({refs[0].get('state')})"  # type: ignore[index,union-attr]
        )


def in_process() -> None:
    import asyncio
    import math

    from wrtfd.daemon.laprecords import lap_record
    from wrtfd.fleet.lapref import ReferenceFollower, RefTarget, cut_lap
    from wrtfd.format import Reader
    from wrtfd.recorder.observe import LapCompleted
    from wrtfd.simulate import Simulation, TrackInfo, make_encoder
    from wrtfd.simulate.record import record_simulation
    from wrtfd.tracks import LanePath, load_track, timing_sectors
    from wrtfd.tracks.delta import Reference
    from wrtfd.tracks.lapchannels import lap_channels_for

    track = load_track(OVAL)
    path = LanePath(track)
    sectors = timing_sectors(track, path)
    info = TrackInfo(track.name, path.length_m, sectors, 3)

    def per_call(fn: object, n: int) -> float:
        c = time.process_time()
        for _ in range(n):
            fn()  # type: ignore[operator]
        return (time.process_time() - c) / n

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (file,) = record_simulation(
            Simulation(path, laps=3, rate_hz=float(RATE_HZ), seed=7, sectors_m=sectors),
            make_encoder("forza", info),
            tmp / "rec",
            protocol="forza",
            derived=[lap_channels_for(track, source="forza", protocol="forza")],
        )
        with Reader(file) as r:
            si = next(i for i in range(len(r.sessions)) if (r.frames(i)["laps"]["lap_number"] == 2).any())
            f = r.frames(si)
            on = f["tick"][f["laps"]["lap_number"] == 2]
            first, last = int(on[0]), int(on[-1])
            frames = f.copy()
        lap_s = (last - first + 1) / RATE_HZ
        ev = LapCompleted("main", 2, lap_s, (3.0, 4.0, 4.7), 12.0, 12.0 + lap_s, first, last, 1, 2, None, ())
        record = lap_record(ev, rig="rig-1", file=file.name, session=si)
        t_record = per_call(
            lambda: (json.dumps(lap_record(ev, rig="rig-1", file=file.name, session=si)) + "\n").encode(),
            2000,
        )
        dest = tmp / "lap.wrtf"
        t_cut = per_call(lambda: cut_lap(file, si, first, last, dest, metadata={"Track": track.name}), 20)
        offers: list[Reference] = []
        target = RefTarget(
            "forza", "main", "fleet:best", None, track.name, None, path.length_m, offers.append
        )
        follow = ReferenceFollower([target], tmp / "refs", laps_bucket="x")
        line = json.dumps({**record, "track": track.name, "time_s": 99.0}).encode()  # slower: no change
        t_take = per_call(lambda: follow._take("rig-1.x", line), 5000)
        t_load = per_call(lambda: follow._load(target, record, dest), 20)

        def delta_us(fleet_ref: bool) -> float:
            plug = lap_channels_for(track, source="forza", protocol="forza")
            if fleet_ref:
                plug.delta.offer(Reference.from_file(dest, length_m=path.length_m))
            plug.start_session()
            rows = frames.copy()
            c = time.process_time()
            for i in range(len(rows)):
                plug.compute(rows[i], i / RATE_HZ)
            return (time.process_time() - c) / len(rows) * 1e6

        fleet_us = min(delta_us(True) for _ in range(3))
        session_us = min(delta_us(False) for _ in range(3))
        server = Server(tmp / "nats")
        try:
            t_send, t_put, t_fetch, t_own, idle = asyncio.run(
                over_nats(server, tmp, file, record, track.name, path.length_m)
            )
        finally:
            server.stop()
    common = t_record + t_send + t_take
    setter = common + t_put + t_own  # this rig drives the team's new best every lap
    follower = common + t_fetch  # another rig does, every lap
    print(f"\n2. in process (CPU), a lap of {lap_s:.1f} s at {RATE_HZ} Hz ({last - first + 3} frames)")
    print(f"   {'part':<52}{'per lap ms':>12}")
    for name, t in (
        ("the lap record (dict + JSON line)", t_record),
        ("send it to the laps bucket (nats-py, acknowledged)", t_send),
        ("  of which: cut the lap file", t_cut),
        ("cut + put the lap file (a new best of this rig)", t_put),
        ("the follower takes a record of the laps bucket", t_take),
        ("  of which: load a lap file as the reference", t_load),
        ("fetch + cache + load + offer (another rig's best)", t_fetch),
        ("cache + load + offer (this rig's own best, just put)", t_own),
    ):
        print(f"   {name:<52}{t * 1e3:>12.3f}")
    print(f"   {'a lap, no new best (record, send, take)':<52}{common * 1e3:>12.3f}")
    print(f"   {'a lap, the new best of this rig and of the team':<52}{setter * 1e3:>12.3f}")
    print(f"   {'a lap, and a new best of another rig to fetch':<52}{follower * 1e3:>12.3f}")
    print(f"   idle (the bucket followed, records looked for): {idle:.4f} % of one core")
    print(f"   % of one core: {'lap':>6}{'no new best':>14}{'own best':>12}{'other best':>12}  (every lap)")
    for lap in (lap_s, 30.0, 90.0):
        row = [100 * x / lap + idle for x in (common, setter, follower)]
        print(f"                  {lap:5.0f}s{row[0]:>14.4f}{row[1]:>12.4f}{row[2]:>12.4f}")
    diff = fleet_us - session_us
    print(f"   delta per frame: fleet reference {fleet_us:.2f} us, session's best {session_us:.2f} us")
    print(f"   difference at {RATE_HZ} Hz: {100 * diff * RATE_HZ / 1e6:+.4f} % of one core")
    if not math.isfinite(diff):
        raise SystemExit("no figure")


async def over_nats(
    server: Server, tmp: Path, file: Path, record: dict[str, object], track: str, length_m: float
) -> tuple[float, float, float, float, float]:
    """CPU of the parts that talk NATS (this process's, not the server's), best of several laps:
    send a record, cut and put a new best, fetch and take it; and the idle cost per second."""
    import asyncio
    import time

    from wrtfd.fleet.client import connect
    from wrtfd.fleet.config import ConnectOptions
    from wrtfd.fleet.lapref import BestLapUploader, ReferenceFollower, RefTarget
    from wrtfd.fleet.laps import LapForwarder

    nc = await connect(ConnectOptions(servers=(server.url,), token=TOKEN), name="bench")
    js = nc.jetstream(timeout=10.0)
    laps = tmp / "laps.jsonl"
    laps.write_text("")
    up = BestLapUploader(file.parent, tmp / "state" / "best_laps.json")
    fwd = LapForwarder(laps, tmp / "state" / "laps.offset", rig="rig-1", on_sent=up.consider)
    await fwd.ensure_bucket(js)
    sends, puts, fetches, owns = [], [], [], []
    for i in range(8):
        rec = {**record, "id": f"{i + 1:024x}", "track": track, "time_s": 60.0 - i}  # each a new best
        with laps.open("a") as f:
            f.write(json.dumps(rec) + "\n")
        c = time.process_time()
        await fwd.forward(js)
        sends.append(time.process_time() - c)
        c = time.process_time()
        await up.put_pending(js)
        puts.append(time.process_time() - c)
        target = RefTarget("forza", "main", "fleet:best", None, track, None, length_m, lambda r: None)
        follow = ReferenceFollower([target], tmp / f"refs{i}", laps_bucket="wrtfd-laps")
        target.wanted = rec
        c = time.process_time()
        await follow._settle(js)
        fetches.append(time.process_time() - c)
        assert target.state == "fetched", target.error
        mine = RefTarget("forza", "main", "fleet:best", None, track, None, length_m, lambda r: None)
        own = ReferenceFollower([mine], tmp / f"own{i}", laps_bucket="wrtfd-laps", local_lap=up.local_lap)
        mine.wanted = rec
        c = time.process_time()
        await own._settle(js)
        owns.append(time.process_time() - c)
        assert mine.state == "fetched", mine.error
    # idle: the follower's subscription and the forwarder's look at laps.jsonl, 30 s
    follow = ReferenceFollower([target], tmp / "refs-idle", laps_bucket="wrtfd-laps")
    tasks = [
        asyncio.create_task(follow.run(lambda: js, lambda: True, asyncio.Event(), lambda: nc)),
        asyncio.create_task(fwd.run(lambda: js, lambda: True, asyncio.Event())),
    ]
    await asyncio.sleep(2.0)
    c, w = time.process_time(), time.monotonic()
    await asyncio.sleep(30.0)
    idle = 100 * (time.process_time() - c) / (time.monotonic() - w)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await nc.close()
    mid = len(sends) // 2
    return sorted(sends)[mid], sorted(puts)[mid], sorted(fetches)[mid], sorted(owns)[mid], idle


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--laps", type=int, default=4, help="simulated laps per daemon (default 4)")
    ap.add_argument("--speed-scale", type=float, default=1.0, help="simulated seconds per second (default 1)")
    ap.add_argument("--no-daemons", action="store_true", help="only the in-process parts")
    args = ap.parse_args()
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    if not args.no_daemons:
        daemons(args.laps, args.speed_scale)
    in_process()


if __name__ == "__main__":
    main()
