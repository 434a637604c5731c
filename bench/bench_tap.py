"""The raw tap's extra CPU in the daemon at rig load: tap on next to tap off, in one run.

    python bench/bench_tap.py [--quick] [--seconds N]

Three ``wrtfd run`` processes record the same feed over the same window, on loopback: Forza
(60 datagrams/s) and F1 2023 (motion, lap data, car telemetry, car status and motion-ex, each
60/s: 300 datagrams/s), the feed of ``bench_daemon.py``:

- ``tap off`` and ``tap off (2)``: two identical daemons without a tap; the gap between them is
  the measurement's noise on this machine;
- ``tap on``: the same config with ``recorder.raw_tap = true``: every datagram also goes into a
  pcapng file beside the WRTF file.

CPU is read from ``/proc/<pid>/stat`` (all threads) at the start and end of the window, as a
percentage of one core. Goal: tap on <= tap off + 0.3 %. The per-datagram parts measured in this
process (the source's hook, the writer's block) and the writer thread's turns per second say
where the difference comes from.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_daemon import (  # noqa: E402
    cpu_s,
    feeder,
    load_feeds,
    start_daemon,
    status,
    terminate,
    window_seconds,
)

from wrtfd.recorder.tap import RawTap, TapInterface  # noqa: E402

GOAL_PCT = 0.3
DATAGRAMS_PER_S = 360


def in_process_rows(tmp: Path) -> list[tuple[str, float]]:
    """(what, us per datagram): the hook on the event loop, the writer thread's work per packet."""
    forza, f1 = load_feeds()
    feed = [forza[i % len(forza)] if i % 6 == 0 else f1[i % len(f1)] for i in range(30_000)]
    tap = RawTap([TapInterface("f1", "main", "udp", "bench")], output_dir=tmp / "inproc", max_bytes=1 << 30)
    sink = tap.sink_for("f1")
    src, dst = ("127.0.0.1", 40000), ("127.0.0.1", 20777)
    t0 = time.perf_counter()
    for i, d in enumerate(feed):
        sink(i, src, dst, d)
    hook_us = (time.perf_counter() - t0) / len(feed) * 1e6
    t0 = time.perf_counter()
    tap.close()  # no thread: the caller writes the queue (what the thread does per turn)
    write_us = (time.perf_counter() - t0) / len(feed) * 1e6
    return [("source hook (append to the queue)", hook_us), ("writer: pcapng block + write()", write_us)]


def main() -> int:
    window_s = window_seconds(__doc__.split("\n")[0], 15.0)
    warmup_s = 3.0
    with tempfile.TemporaryDirectory(prefix="wrtfd-bench-tap-") as tmpdir:
        tmp = Path(tmpdir)
        names = ("tap off", "tap off (2)", "tap on")
        extras = ("", "", "raw_tap = true\n")
        started = []
        try:
            for i, extra in enumerate(extras):
                started.append(start_daemon(tmp, f"d{i}", recorder_extra=extra))
        except BaseException:
            for proc, *_ in started:
                proc.kill()
            raise
        procs = {name: s[0] for name, s in zip(names, started, strict=True)}
        targets = [(s[1], s[2]) for s in started]
        stop = threading.Event()
        sent: list[int] = []
        th = threading.Thread(target=lambda: sent.append(feeder(targets, warmup_s + window_s + 1, stop)))
        th.start()
        try:
            time.sleep(warmup_s)
            tap_before = status(started[2][3])["tap"]
            before = {k: cpu_s(p.pid) for k, p in procs.items()}
            t0 = time.monotonic()
            time.sleep(window_s)
            elapsed = time.monotonic() - t0
            after = {k: cpu_s(p.pid) for k, p in procs.items()}
            snaps = {name: status(s[3]) for name, s in zip(names, started, strict=True)}
        finally:
            stop.set()
            th.join()
            terminate(list(procs.values()))
        pct = {k: 100.0 * (after[k] - before[k]) / elapsed for k in before}
        taps = sorted((tmp / "d2").glob("*.pcapng"))
        tap_bytes = sum(p.stat().st_size for p in taps)
        rows = in_process_rows(tmp)
    tap = snaps["tap on"]["tap"]
    assert isinstance(tap, dict) and isinstance(tap_before, dict)
    turns_per_s = (int(tap["turns"]) - int(tap_before["turns"])) / elapsed
    off = (pct["tap off"] + pct["tap off (2)"]) / 2
    extra = pct["tap on"] - off
    noise = abs(pct["tap off"] - pct["tap off (2)"])
    print(f"raw tap CPU, {window_s:.0f} s window, Forza 60 Hz + F1 2023 300 datagrams/s, loopback")
    received = {}
    for name, snap in snaps.items():
        sources = snap["sources"]
        assert isinstance(sources, dict)
        received[name] = sum(int(s["received"]) for s in sources.values())
    print(
        f"datagrams per daemon: sent {sent[0] if sent else 0}, received {received}; tap: "
        f"{tap['packets']} packets in {len(taps)} file(s), {tap_bytes / 1e6:.1f} MB, "
        f"dropped {tap['dropped_total']}, writer turns {turns_per_s:.1f}/s"
    )
    print()
    print(f"{'process':<24}{'CPU % of one core':>18}{'vs tap off':>12}")
    for name in names:
        print(f"{name:<24}{pct[name]:>18.3f}{pct[name] - off:>+12.3f}")
    print(f"{'noise (off vs off 2)':<24}{noise:>18.3f}")
    print()
    print("per-datagram work of the tap, measured in this process (CPU % = us x 360/s / 1e4):")
    print(f"{'step':<40}{'us/datagram':>12}{'CPU %':>8}")
    for what, us in rows:
        print(f"{what:<40}{us:>12.2f}{us * DATAGRAMS_PER_S / 1e4:>8.3f}")
    verdict = "meets" if extra <= GOAL_PCT else "MISSES"
    print(f"\ngoal: tap on <= tap off + {GOAL_PCT:.2f} % of one core: {verdict}", end=" ")
    print(f"({extra:+.3f} %, noise {noise:.3f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
