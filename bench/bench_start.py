"""Memory of a one-source daemon and the start of the offline commands (issue 26 item 4).

    python bench/bench_start.py [--runs N] [--compare-with CHECKOUT]

- **daemon RSS**: ``wrtfd run`` with one Forza UDP source and nothing else configured (the
  status page on, as by default), fed 3 s of simulated 60 Hz Forza so that it has decoded,
  scheduled and written a file; VmRSS and VmHWM from ``/proc/<pid>/status``, then SIGTERM. Once
  with no HTTP request (the page's web stack loads at the first connection), once with
  ``/status`` and the page fetched a second into the feed.
- **start to exit**: wall time of ``wrtfd info``, ``validate`` and ``dump`` on a small file,
  next to ``python -c "import numpy"`` (the floor: the format reads frames with numpy), each the
  median of ``--runs`` runs, interleaved so that load hits every row alike; and their CPU time
  (user + system, from ``getrusage``), which a loaded machine disturbs less than wall time.

``--compare-with`` runs the same from another checkout (``PYTHONPATH`` set to it), e.g. main
before a change.

Measured as installed, with every module's bytecode cached (pip compiles it at install): the
runs may write it (``PYTHONDONTWRITEBYTECODE`` is dropped from their environment) and one
unmeasured daemon run per checkout writes what the daemon imports first. Without a cache every
start compiles its modules: 60.9 MB instead of 55.7 here, and twice the start (docs/daemon.md,
"Bytecode").
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from common import free_port

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from wrtfd.simulate import Simulation, TrackInfo, make_encoder  # noqa: E402
from wrtfd.tracks import LanePath, load_track  # noqa: E402


def env_for(checkout: Path) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(checkout))
    for key in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "PYTHONPROFILEIMPORTTIME", "PYTHONDONTWRITEBYTECODE"):
        env.pop(key, None)
    return env


def forza_datagrams(seconds: float) -> list[bytes]:
    track = load_track(REPO / "config" / "tracks" / "road.trk")
    path = LanePath(track)
    sim = Simulation(path, laps=1, rate_hz=60.0, seed=1)
    encoder = make_encoder("forza", TrackInfo(track.name, path.length_m, (), 1))
    out: list[bytes] = []
    for i, state in enumerate(sim.states()):
        if state.t_s > seconds:
            break
        out.extend(encoder.encode(state, first=i == 0, last=False))
    return out


def status_kb(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0])
    return out


def daemon_memory(checkout: Path, work: Path, *, fetch_page: bool = False) -> dict[str, int]:
    port, status_port = free_port(socket.SOCK_DGRAM), free_port()
    config = work / "forza.toml"
    config.write_text(
        f'[[sources]]\nkind = "udp"\nname = "forza"\nprotocol = "forza"\nhost = "127.0.0.1"\nport = {port}\n'
        f'[recorder]\noutput_dir = "{work / "rec"}"\n[status]\nport = {status_port}\n'
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "wrtfd", "run", "--config", str(config)],
        env=env_for(checkout),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=work,
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "ready:" in line:
                break
        else:
            raise SystemExit(f"the daemon of {checkout} did not start")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for i, d in enumerate(forza_datagrams(3.0)):
                s.sendto(d, ("127.0.0.1", port))
                time.sleep(1 / 60)
                if fetch_page and i == 60:
                    for path in ("/status", "/"):
                        with urllib.request.urlopen(f"http://127.0.0.1:{status_port}{path}", timeout=30) as r:
                            r.read()
        time.sleep(1.0)
        return status_kb(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def wall_cpu_s(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one run of ``argv`` (in ``cwd``: not a
    checkout, whose ``wrtfd`` ``-m`` would import before ``PYTHONPATH``'s)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def start_times(checkout: Path, file: Path, runs: int) -> dict[str, tuple[float, float]]:
    env = env_for(checkout)
    cases = {
        'python -c "import numpy"': [sys.executable, "-c", "import numpy"],
        "wrtfd info": [sys.executable, "-m", "wrtfd", "info", str(file)],
        "wrtfd validate": [sys.executable, "-m", "wrtfd", "validate", str(file)],
        "wrtfd dump": [sys.executable, "-m", "wrtfd", "dump", str(file)],
    }
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, argv in cases.items():
            times[name].append(wall_cpu_s(argv, env, file.parent))
    return {
        name: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t))
        for name, t in times.items()
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--compare-with", type=Path, help="another checkout of wrtfd (e.g. main)")
    args = ap.parse_args()
    checkouts = {"this": REPO}
    if args.compare_with is not None:
        checkouts["other"] = args.compare_with.resolve()
    from tests.format.samples import write_car_file

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        file = work / "run.wrtf"
        write_car_file(file)
        print(f"load average {os.getloadavg()[0]:.2f}; medians of {args.runs} runs")
        print(f"{'what':32s}" + "".join(f"{name:>14s}" for name in checkouts))
        memory, paged = {}, {}
        for name, path in checkouts.items():
            (work / name).mkdir()
            (work / name / "paged").mkdir()
            (work / name / "warm").mkdir()
            daemon_memory(path, work / name / "warm")  # writes the bytecode it imports
            memory[name] = daemon_memory(path, work / name)
            paged[name] = daemon_memory(path, work / name / "paged", fetch_page=True)
        for key in ("VmRSS", "VmHWM"):
            row = "".join(f"{memory[n][key] / 1024:11.1f} MB" for n in checkouts)
            print(f"{'one-Forza daemon ' + key:32s}{row}")
        row = "".join(f"{paged[n]['VmRSS'] / 1024:11.1f} MB" for n in checkouts)
        print(f"{'... page fetched, VmRSS':32s}{row}")
        starts = {name: start_times(path, file, args.runs) for name, path in checkouts.items()}
        for i, what in enumerate(("wall", "cpu")):
            for case in next(iter(starts.values())):
                row = "".join(f"{starts[n][case][i]:12.3f} s" for n in checkouts)
                print(f"{case + ' ' + what:32s}{row}")


if __name__ == "__main__":
    main()
