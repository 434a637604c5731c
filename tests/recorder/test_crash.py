"""kill -9 at random moments: every fsynced frame is recovered and ``wrtfd repair`` makes the file valid."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from tests.crashstate.check import TIMING_SLACK_S
from tests.recorder.crash_child import POLICY
from wrtfd.format import Reader, validate_file
from wrtfd.recorder.durability import loss_bound

CHILD = Path(__file__).with_name("crash_child.py")
REPO = Path(__file__).resolve().parents[2]
RATE = 100
# The documented bound (wrtfd.recorder.durability, docs/durability.md) for the child's policy
# (crash_child.POLICY); its source is in-process, so no UDP read interval; + settle_s at the start.
_BOUND = loss_bound(**{k: v for k, v in POLICY.items() if k != "bunch_s"}, read_interval_s=0.0)  # type: ignore[arg-type]
CRASH_BOUND_S = _BOUND.crash_s + _BOUND.session_start_s
POWER_CUT_BOUND_S = _BOUND.power_cut_s + _BOUND.session_start_s


def _trial(tmp: Path, delay_s: float) -> dict[str, float]:
    out = tmp / "rec"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, str(CHILD), str(out)]
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    time.sleep(delay_s)  # a random moment to kill the recorder (test pacing, not logic)
    child.send_signal(signal.SIGKILL)
    lines = child.stdout.read().splitlines()
    child.wait(timeout=10)
    synced = max([int(x.split()[1]) for x in lines if x.startswith("synced")], default=0)
    produced = max([int(x.split()[1]) for x in lines if x.startswith("produced")], default=-1)
    files = sorted(out.glob("*.wrtf")) if out.exists() else []
    if not files:
        assert synced == 0
        return {"synced": 0, "recovered": 0, "loss_s": (produced + 1) / RATE}
    (path,) = files
    with Reader(path) as r:  # the scanning reader (N11) reads what the crash left
        n = (
            np.concatenate([np.array(r.frames(i)["src"]["n"]) for i in range(len(r.sessions))])
            if r.sessions
            else np.zeros(0, np.uint32)
        )
        halves = (
            np.concatenate([np.array(r.frames(i)["src"]["half"]) for i in range(len(r.sessions))])
            if r.sessions
            else np.zeros(0)
        )
    assert len(n) >= synced, f"lost fsynced frames: {len(n)} < {synced}"
    assert np.all(np.diff(n.astype(np.int64)) >= 1), "frames out of order"
    assert np.array_equal(halves, n / 2), "a recovered frame has wrong contents"
    # the real command line, as a user would run it after the crash
    res = subprocess.run(
        [sys.executable, "-m", "wrtfd", "repair", str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert validate_file(path) == []
    with Reader(path) as r:
        assert r.complete and r.total_frames == len(n)
    last = int(n[-1]) if len(n) else -1
    return {"synced": synced, "recovered": len(n), "loss_s": max(0, produced - last) / RATE}


@pytest.mark.slow
def test_kill_9_at_random_moments_loses_nothing_fsynced(tmp_path: Path) -> None:
    rng = random.Random(20261121)
    delays = [rng.uniform(0.05, 2.0) for _ in range(20)]
    # Two trials at a time (each its own child, directory and moment): they mostly wait.
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda k: _trial(tmp_path / f"t{k}", delays[k]), range(20)))
    worst = max(r["loss_s"] for r in results)
    print(
        f"\ncrash test: 20 trials, worst loss {worst * 1000:.0f} ms of newest data "
        f"(documented bound: crash {CRASH_BOUND_S * 1000:.0f} ms, "
        f"power cut {POWER_CUT_BOUND_S * 1000:.0f} ms); "
        f"frames recovered per trial: {[int(r['recovered']) for r in results]}"
    )
    assert sum(1 for r in results if r["recovered"] > 0) >= 15
    # a process crash keeps what was write()n: the loss stays within the power-cut bound (plus
    # the scheduling slack the crash-state test allows: on a loaded 2-core machine the child's
    # steps can start late while it goes on producing)
    assert worst <= POWER_CUT_BOUND_S + TIMING_SLACK_S, results
