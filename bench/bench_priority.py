"""What the unit's ``Nice=-5`` costs a sim, and what it buys the recording (docs/daemon.md, "Priority").

    sudo python bench/bench_priority.py [--seconds N] [--hogs N] [--rounds N]

A stand-in for a sim: ``--hogs`` CPU-bound processes (default: twice the cores) counting loop
iterations at niceness 0. Beside them the daemon records the 60 Hz Forza + F1 feed of
``bench_daemon.py``, in alternating windows at niceness 0 and at the unit's -5 (every thread
reniced between windows; one daemon throughout). The feed and the file watcher run at -10, so
that only the daemon's priority changes between windows. Per window:

- the hogs' iterations per second (the sim's share of the machine), as a ratio against the
  windows with the daemon at 0 (the baseline, side by side in the same run);
- the daemon's CPU (``/proc/<pid>/stat``);
- the longest time the recording's file went without growing (its size polled every 10 ms):
  the daemon writes every ``read_interval_s`` (0.2 s), and the crash bound needs it on time.

Needs root (a negative niceness). ../shared/data supplies the feed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench_daemon import feeder, start_daemon, terminate
from common import cpu_s

HOG = (
    "import sys, time\n"
    "end = time.monotonic() + float(sys.argv[1]); n = 0\n"
    "while True:\n"
    "    for _ in range(100_000): n += 1\n"
    "    if time.monotonic() >= end: break\n"
    "print(n)\n"
)


def renice(pid: int, niceness: int) -> None:
    """Every thread of ``pid`` at ``niceness`` (Linux: the priority is per thread)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        os.setpriority(os.PRIO_PROCESS, int(tid), niceness)


def hogs_per_second(count: int, seconds: float) -> float:
    """``count`` hogs for ``seconds``; their iterations per second, all together."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", HOG, str(seconds)],
            stdout=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: os.setpriority(os.PRIO_PROCESS, 0, 0),
        )
        for _ in range(count)
    ]
    return sum(int(p.communicate()[0]) for p in procs) / seconds


def longest_still(files: Path, stop: threading.Event, out: list[float]) -> None:
    """Poll the recording's size every 10 ms; append the longest time it did not grow."""
    last_size, last_change, longest = -1, time.monotonic(), 0.0
    while not stop.is_set():
        size = sum(p.stat().st_size for p in files.glob("*.wrtf"))
        now = time.monotonic()
        if size != last_size:
            longest = max(longest, now - last_change) if last_size >= 0 else longest
            last_size, last_change = size, now
        time.sleep(0.01)
    out.append(max(longest, time.monotonic() - last_change))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="each window (default 20 s)")
    ap.add_argument("--hogs", type=int, default=2 * (os.cpu_count() or 1), help="CPU-bound processes")
    ap.add_argument("--rounds", type=int, default=2, help="pairs of windows (0, then -5)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root: a negative niceness (sudo python bench/bench_priority.py)", file=sys.stderr)
        return 2
    os.setpriority(os.PRIO_PROCESS, 0, -10)  # the feed and the watcher, steady in every window
    rows: list[tuple[int, float, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="wrtfd-bench-") as tmpdir:
        tmp = Path(tmpdir)
        rec, fz_port, f1_port, _ = start_daemon(tmp, "recording")
        stop = threading.Event()
        total_s = 3.0 + 2 * args.rounds * (args.seconds + 1.0) + 5.0
        feed = threading.Thread(target=feeder, args=([(fz_port, f1_port)], total_s, stop))
        feed.start()
        try:
            time.sleep(3.0)
            for _ in range(args.rounds):
                for niceness in (0, -5):
                    renice(rec.pid, niceness)
                    time.sleep(1.0)
                    watch_stop, still = threading.Event(), []
                    watched = (tmp / "recording", watch_stop, still)
                    watcher = threading.Thread(target=longest_still, args=watched)
                    watcher.start()
                    before, t0 = cpu_s(rec.pid), time.monotonic()
                    rate = hogs_per_second(args.hogs, args.seconds)
                    cpu = 100.0 * (cpu_s(rec.pid) - before) / (time.monotonic() - t0)
                    watch_stop.set()
                    watcher.join()
                    rows.append((niceness, rate, cpu, still[0]))
        finally:
            stop.set()
            feed.join()
            terminate([rec])
    base = sum(r[1] for r in rows if r[0] == 0) / args.rounds
    print(f"{args.hogs} hogs at niceness 0 beside the daemon recording Forza + F1 at 60 Hz,", end=" ")
    print(f"{args.seconds:g} s windows")
    head = ("daemon nice", "hogs Mit/s", "vs nice 0", "daemon CPU %", "longest no write s")
    print(f"{head[0]:>11}{head[1]:>12}{head[2]:>11}{head[3]:>14}{head[4]:>20}")
    for niceness, rate, cpu, still_s in rows:
        print(f"{niceness:>11}{rate / 1e6:>12.2f}{rate / base:>11.3f}{cpu:>14.2f}{still_s:>20.3f}")
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
