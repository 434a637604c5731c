"""A long crash-state campaign: the test's harness (tests/crashstate) on many more states.

Records ``--recordings`` sets of the daemon runs (SIGTERM, SIGKILL, SIGHUP, and an older
recording for model f) under strace, then judges the states of every fsync boundary and of
``--random-points`` random crash points per file, for each of ``--seeds`` seeds, and prints the
per-model table (``--out FILE`` also writes it, with examples of each finding). Exit status 1
when a must-be-zero column is not (silent corruption, fsynced frames lost, repair outputs not
valid, unreadable files, tool errors, files not valid at rest) or a loss exceeds the bound.

    python tools/crash_campaign.py --recordings 2 --seeds 10 --random-points 30 --out crash.md
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO)]

from tests.crashstate.campaign import check_rebuild, older_content, record_all, run_campaign  # noqa: E402
from tests.crashstate.check import Tally, ToolRunner  # noqa: E402
from tests.crashstate.record import seccomp_supported, strace_usable  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--recordings", type=int, default=1, help="sets of daemon runs to record (default 1)")
    p.add_argument("--seeds", type=int, default=10, help="seeds per set (default 10)")
    p.add_argument("--random-points", type=int, default=30, help="random crash points per file and seed")
    p.add_argument("--workdir", type=Path, help="keep traces and recordings here (default: a temp dir)")
    p.add_argument("--out", type=Path, help="also write the table and examples to this file")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="wrtfd-crash-") as tmp:
        root = args.workdir or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        reason = strace_usable(root)
        if reason is not None:
            sys.stderr.write(f"cannot run: {reason}\n")
            return 2
        seccomp = seccomp_supported(root)
        tally = Tally()
        runner = ToolRunner(root / "states")
        started = time.monotonic()
        for n in range(args.recordings):
            t0 = time.monotonic()
            recs = record_all(root / f"set{n}", seed=n, seccomp=seccomp)
            for rec in recs.values():
                problems = check_rebuild(rec)
                if problems:
                    sys.stderr.write("\n".join(problems) + "\n")
                    return 2
            older = older_content(recs.pop("older"))
            sys.stderr.write(
                f"set {n}: recorded and rebuilt byte for byte in {time.monotonic() - t0:.1f} s\n"
            )
            for seed in range(args.seeds):
                run_campaign(
                    recs,
                    older,
                    runner,
                    seed=seed,
                    random_points=args.random_points,
                    tally=tally,
                    keep_verdicts=False,
                )
                sys.stderr.write(
                    f"set {n} seed {seed}: {tally.states} states so far, {runner.runs} distinct contents, "
                    f"{time.monotonic() - started:.0f} s\n"
                )
    report = f"{tally.report()}\n\n{tally.states} states\n"
    sys.stdout.write(report)
    if args.out:
        args.out.write_text(report)
    return 1 if tally.failed() else 0


if __name__ == "__main__":
    sys.exit(main())
