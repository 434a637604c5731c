"""Crash points of recorded runs -> states -> verdicts -> the per-model table.

Shared by the test (a few hundred states) and ``tools/crash_campaign.py`` (thousands). Crash
points of each file: just before and just after every fsync, directory fsync and sync, plus
``random_points`` seeded random ones; at each, every model's state. Points at rest: ``REST_S``
after a session's footer was written on idle, when no datagram came since.
"""

from __future__ import annotations

import bisect
import os
import random
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tests.crashstate.check import REST_S, Feed, Tally, ToolRunner, Verdict, judge
from tests.crashstate.models import MODELS, CrashState, states_at
from tests.crashstate.record import SCENARIOS, Recording, record
from tests.crashstate.replay import DaemonFile, FileHistory, HarnessError, daemon_frames

__all__ = ["CampaignResult", "check_rebuild", "record_all", "run_campaign"]


@dataclass(slots=True)
class CampaignResult:
    tally: Tally
    verdicts: list[Verdict]
    tool_runs: int


def record_all(
    root: Path, names: tuple[str, ...] = tuple(SCENARIOS), *, seed: int = 0, seccomp: bool = True
) -> dict[str, Recording]:
    """The scenarios recorded side by side (each daemon mostly waits for its feed)."""
    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        futures = {n: pool.submit(record, n, root / n, SCENARIOS[n], seed, seccomp) for n in names}
        return {n: f.result() for n, f in futures.items()}


def check_rebuild(rec: Recording) -> list[str]:
    """Every file rebuilt from the trace equals, byte for byte, the file the daemon left."""
    problems = []
    real = rec.real_paths()
    on_disk = sorted(rec.out_dir.glob("*"))
    if sorted(real.values()) != on_disk:
        problems.append(
            f"{rec.name}: files on disk {on_disk} are not the traced ones {sorted(real.values())}"
        )
    for i, h in rec.histories.items():
        if i not in real:
            continue
        rebuilt = h.content(h.last_seq + 1)
        actual = real[i].read_bytes()
        if rebuilt != actual:
            at = next((j for j, (a, b) in enumerate(zip(rebuilt, actual, strict=False)) if a != b), None)
            problems.append(
                f"{rec.name}: {real[i].name} rebuilt {len(rebuilt)} bytes, real {len(actual)}, "
                f"first difference at {at}"
            )
    return problems


def fsync_wait_s(histories: Iterable[FileHistory]) -> float:
    """The longest any written byte waited for the fsync that made it durable."""
    worst = 0.0
    for h in histories:
        dirty_since: float | None = None
        for op in h.ops:
            if op.kind in ("write", "truncate") and op.file == h.file and dirty_since is None:
                dirty_since = op.time_s
            elif op.kind == "sync" or (op.kind == "fsync" and op.file == h.file):
                if dirty_since is not None:
                    worst = max(worst, op.time_s - dirty_since)
                dirty_since = None
    return worst


def is_recording(path: str | None) -> bool:
    """A file a user would take for a recording (a writer's temporary file is not one)."""
    return path is not None and path.endswith(".wrtf") and not os.path.basename(path).startswith(".")


def _feed(rec: Recording, truths: dict[int, DaemonFile]) -> Feed:
    starts = sorted(s.start_us / 1e6 for d in truths.values() for s in d.sessions)
    return Feed(tuple(tuple(p) for p in rec.phases), tuple(starts))


def rest_points(rec: Recording, truths: dict[int, DaemonFile]) -> list[tuple[int, float]]:
    """(k, time) REST_S after each session footer written on idle, if no datagram came since."""
    times = {op.seq: op.time_s for op in rec.log.ops}
    sends = sorted(t for p in rec.phases for t in p)
    op_times = [op.time_s for op in rec.log.ops]
    out = []
    for d in truths.values():
        for s in d.sessions:
            if s.footer_end_reason != "idle" or s.footer_written_seq is None:
                continue
            t_idle = times[s.footer_written_seq]
            t_rest = t_idle + REST_S
            if t_rest > rec.log.end_s:
                continue
            i = bisect.bisect_right(sends, t_idle)
            if i < len(sends) and sends[i] <= t_rest:
                continue  # the rig drove again before: not at rest
            out.append((bisect.bisect_right(op_times, t_rest), t_rest))
    return out


def run_campaign(
    recs: dict[str, Recording],
    older: bytes,
    runner: ToolRunner,
    *,
    seed: int = 0,
    random_points: int = 6,
    models: tuple[str, ...] = MODELS,
    progress: Callable[[int], None] | None = None,
    tally: Tally | None = None,
    keep_verdicts: bool = True,
) -> CampaignResult:
    """Judge every state of ``recs`` (into ``tally``, a new one by default). ``keep_verdicts``
    False keeps only the counts (a long campaign would hold every state's bytes)."""
    tally = Tally() if tally is None else tally
    verdicts: list[Verdict] = []
    judged = 0
    for name, rec in recs.items():
        tally.fsync_wait_s = max(tally.fsync_wait_s, fsync_wait_s(rec.histories.values()))
        truths = {i: daemon_frames(h) for i, h in rec.histories.items()}
        feed = _feed(rec, truths)
        for i, h in rec.histories.items():
            rng = random.Random(f"{seed}/{name}/{i}")
            points = set(h.boundaries())
            lo, hi = h.created_seq + 1, h.last_seq + 1
            points.update(rng.randint(lo, hi) for _ in range(random_points))
            points.add(hi)
            for k in sorted(points):
                if not is_recording(h.path_at(k)):
                    continue
                for state in states_at(name, h, k, random.Random(f"{seed}/{name}/{i}/{k}"), older, models):
                    if not tally.first_time(state, at_rest=False):
                        continue  # another seed built the same state
                    v = judge(state, truths[i], feed, runner)
                    tally.add(v)
                    judged += 1
                    if keep_verdicts:
                        verdicts.append(v)
                    if progress:
                        progress(judged)
        for k, t_rest in rest_points(rec, truths):
            for i, h in rec.histories.items():
                if not is_recording(h.path_at(k)):
                    continue
                rng = random.Random(f"{seed}/{name}/{i}/rest{k}")
                for state in states_at(name, h, k, rng, older, models):
                    rest = CrashState(state.run, state.file, k, t_rest, state.model, state.content, "at rest")
                    if not tally.first_time(rest, at_rest=True):
                        continue
                    v = judge(rest, truths[i], feed, runner, at_rest=True)
                    tally.add(v, at_rest=True)
                    if keep_verdicts:
                        verdicts.append(v)
    return CampaignResult(tally, verdicts, runner.runs)


def older_content(rec: Recording) -> bytes:
    """The largest file of the older recording: its blocks are the stale ones of model f."""
    files = sorted(rec.real_paths().values(), key=lambda p: p.stat().st_size)
    if not files:
        raise HarnessError("the older recording left no file")
    return files[-1].read_bytes()
