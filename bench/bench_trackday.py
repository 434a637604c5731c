"""CPU cost of GNSS lap timing and the live delta: ``wrtfd run`` recording 25 Hz u-blox NAV-PVT
from the pty simulator, with lap timing (``circuit = "auto"``: Hillside picked, laps, sectors and
the predictive delta) and without (no circuit), side by side in the same window.

    python bench/bench_trackday.py [--seconds 30] [--rounds 2]

Two simulators (``wrtfd simulate --protocol ubx --pty``, the same seed: the same drive round
road.trk, 1 m of noise) each feed one daemon; each daemon sets its receiver up (25 Hz, 115200
baud, NMEA off) and records at 50 Hz. Once both record and the circuit is picked, CPU is read
from ``/proc/<pid>/stat`` (utime + stime, all threads) at the start and end of each window, as a
percentage of one core. The goal: laps + delta <= no laps + 0.3 % of one core.
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
from typing import Any

from common import cpu_s, free_port

REPO = Path(__file__).resolve().parent.parent
ROAD = REPO / "config" / "tracks" / "road.trk"


def status(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5) as r:
        return dict(json.loads(r.read()))


def start(tmp: Path, name: str, laps: bool, drive_laps: int) -> tuple[subprocess.Popen[bytes], ...]:
    """A simulator on a pty and a daemon reading it; returns (simulator, daemon, status port)."""
    link = tmp / f"{name}-gnss"
    sim = subprocess.Popen(
        [
            *(sys.executable, "-m", "wrtfd", "simulate", "--protocol", "ubx", "--pty", "--generation", "m10"),
            *("--track", str(ROAD), "--link", str(link), "--laps", str(drive_laps), "--seed", "1"),
            *("--wait", "120"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=(tmp / f"{name}-sim.log").open("w"),
    )
    deadline = time.monotonic() + 60
    while not link.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"{name}: the simulator's pty did not appear")
        time.sleep(0.1)
    port = free_port()
    cfg = tmp / f"{name}.toml"
    cfg.write_text(
        f'[[sources]]\nkind = "serial"\nname = "gps"\nprotocol = "ubx"\ndevice = "{link}"\nbaudrate = 9600\n'
        + ('circuit = "auto"\n' if laps else "")
        + "[sources.ubx]\nrate_hz = 25\nbaud = 115200\nnmea_off = true\n"
        f'[recorder]\noutput_dir = "{tmp / name}"\nrate_hz = 50\n[status]\nport = {port}\n'
        '[logging]\nlevel = "warning"\n'
    )
    daemon = subprocess.Popen(
        [sys.executable, "-m", "wrtfd", "run", "--config", str(cfg)],
        stderr=(tmp / f"{name}.log").open("w"),
        cwd=tmp,
    )
    return sim, daemon, port  # type: ignore[return-value]


def recording(port: int, laps: bool) -> bool:
    """Receiving NAV-PVT at 25 Hz (and, with laps, the circuit picked)."""
    try:
        st = status(port)
    except OSError:
        return False
    src = st["sources"]["gps"]  # type: ignore[index]
    if float(src.get("rate_hz") or 0) < 24:
        return False
    if not laps:
        return True
    live = st.get("recorder", {}).get("laps_live", {}).get("laps") or {}  # type: ignore[union-attr]
    return live.get("circuit") == "Hillside"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=30.0, help="measurement window (default 30 s)")
    ap.add_argument("--rounds", type=int, default=2, help="windows measured one after another (default 2)")
    args = ap.parse_args()
    drive_laps = max(3, int((args.seconds * args.rounds + 90) / 38) + 1)  # the drive outlasts the windows
    with tempfile.TemporaryDirectory(prefix="wrtfd-bench-") as tmpdir:
        tmp = Path(tmpdir)
        procs: list[subprocess.Popen[bytes]] = []
        try:
            sim_a, laps_d, laps_port = start(tmp, "laps", True, drive_laps)
            sim_b, plain_d, plain_port = start(tmp, "plain", False, drive_laps)
            procs = [laps_d, plain_d, sim_a, sim_b]  # type: ignore[list-item]
            deadline = time.monotonic() + 120
            while not (recording(laps_port, True) and recording(plain_port, False)):  # type: ignore[arg-type]
                if time.monotonic() > deadline:
                    raise SystemExit("the daemons did not start recording: " + str(tmp))
                time.sleep(0.5)
            time.sleep(3.0)  # warm-up
            rows = []
            for r in range(args.rounds):
                a0, b0, t0 = cpu_s(laps_d.pid), cpu_s(plain_d.pid), time.monotonic()
                time.sleep(args.seconds)
                a1, b1, t1 = cpu_s(laps_d.pid), cpu_s(plain_d.pid), time.monotonic()
                load = os.getloadavg()
                a = 100.0 * (a1 - a0) / (t1 - t0)
                b = 100.0 * (b1 - b0) / (t1 - t0)
                rows.append((r + 1, a, b, load))
            st = status(laps_port)  # type: ignore[arg-type]
            laps_done = st["recorder"]["derived"]["laps"]["lap_count"]  # type: ignore[index]
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
    print(f"25 Hz NAV-PVT from the pty simulator, frames at 50 Hz, {args.seconds:.0f} s windows")
    print(f"{'round':>5}  {'laps+delta %':>12}  {'no laps %':>9}  {'extra %':>8}  {'ratio':>6}  load avg")
    for r, a, b, load in rows:
        print(
            f"{r:>5}  {a:>12.2f}  {b:>9.2f}  {a - b:>+8.2f}  {a / b if b else float('nan'):>6.3f}"
            f"  {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
        )
    mean_extra = sum(a - b for _, a, b, _ in rows) / len(rows)
    print(f"mean extra: {mean_extra:+.2f} % of one core (goal <= +0.3 %); laps timed in the run: {laps_done}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
