"""Crash states of the real daemon's recordings (issue 13, item 5; ALICE and CrashMonkey).

The daemon runs under strace, fed by the simulator: a SIGTERM run (with a session ended on idle
and the rig at rest), a SIGKILL run, a SIGHUP run, and an older recording whose blocks are the
stale ones of model f. Each file is rebuilt from the recorded calls and compared byte for byte
with the real one; then at every fsync boundary and at seeded random points, every model's
state goes through info, validate, repair, validate of the output and dump. The per-model
table is printed (``pytest -s``) and written to ``crash-states.md`` in pytest's temp directory.

Before the frame check and durable file creation (issue 13), these tests found every problem
the issue lists: frames a recording never held, repairs that did not validate, unreadable new
files, files incomplete at rest, fsync gaps over the interval (docs/crash-states.md).
"""

from __future__ import annotations

import itertools
import os
import signal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from tests.crashstate.campaign import (
    CampaignResult,
    check_rebuild,
    older_content,
    record_all,
    rest_points,
    run_campaign,
)
from tests.crashstate.check import (
    FSYNC_INTERVAL_S,
    LOSS_SLACK_S,
    POWER_CUT_BOUND_S,
    TIMING_SLACK_S,
    ToolRunner,
    run_in_process,
    run_subprocess,
)
from tests.crashstate.models import MODELS, VANISHED, build_content
from tests.crashstate.record import Recording, seccomp_supported, strace_usable
from tests.crashstate.replay import daemon_frames
from tests.priority import SERVICE_NICENESS
from wrtfd.format import Reader
from wrtfd.recorder.durability import READ_INTERVAL_S

#: Seed of the random crash points and of the models' random choices (same seed, same states).
SEED = 20261124
#: Random crash points per file on top of the fsync boundaries.
RANDOM_POINTS = 6


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Recording]:
    root = tmp_path_factory.mktemp("crashstate")
    reason = strace_usable(root)
    if reason is not None:
        pytest.skip(reason)
    return record_all(root, seed=0, seccomp=seccomp_supported(root))


@pytest.fixture(scope="module")
def campaign(recordings: dict[str, Recording], tmp_path_factory: pytest.TempPathFactory) -> CampaignResult:
    runs = {n: r for n, r in recordings.items() if n != "older"}
    root = tmp_path_factory.getbasetemp()
    result = run_campaign(
        runs,
        older_content(recordings["older"]),
        ToolRunner(tmp_path_factory.mktemp("states")),
        seed=SEED,
        random_points=RANDOM_POINTS,
    )
    report = result.tally.report()
    (root / "crash-states.md").write_text(report + "\n")
    print(f"\ncrash states: {result.tally.states} states, {result.tool_runs} distinct contents\n{report}")
    return result


def _findings(result: CampaignResult, kind: str) -> str:
    ex = "\n  ".join(result.tally.examples.get(kind, []))
    return f"{result.tally.counts.get(kind, 0)} {kind} finding(s), e.g.\n  {ex}\n{result.tally.table()}"


# -- the recordings themselves ----------------------------------------------------------------------


def test_every_file_rebuilt_from_the_trace_equals_the_real_one(recordings: dict[str, Recording]) -> None:
    for rec in recordings.values():
        assert rec.histories, f"{rec.name}: the daemon wrote no file"
        assert check_rebuild(rec) == []
    # the SIGKILL run: compared with what the kill left on disk (an incomplete file)
    kill = recordings["sigkill"]
    assert kill.exit.signal == "SIGKILL"
    for path in kill.real_paths().values():
        with Reader(path) as r:
            assert not r.complete and r.total_frames > 0


def test_scenarios_cover_what_they_claim(recordings: dict[str, Recording]) -> None:
    term, hup = recordings["sigterm"], recordings["sighup"]
    assert term.exit.exit_code == 0 and hup.exit.exit_code == 0, term.stderr[-2000:] + hup.stderr[-2000:]
    assert [s for _, s in term.signals] == ["SIGTERM"]
    assert [s for _, s in hup.signals] == ["SIGHUP", "SIGTERM"]
    truths = {n: {i: daemon_frames(h) for i, h in r.histories.items()} for n, r in recordings.items()}
    reasons = {s.footer_end_reason for d in truths["sigterm"].values() for s in d.sessions}
    assert "idle" in reasons, reasons  # a session ended on idle...
    assert rest_points(term, truths["sigterm"]), "...and the rig was at rest 5 s after it"
    starts = {s.header_key for d in truths["sighup"].values() for s in d.sessions}
    assert any('"start_reason":"request"' in k for k in starts), "SIGHUP began a new session"
    for name in ("sigterm", "sigkill", "sighup"):
        fsyncs = [op for op in recordings[name].log.ops if op.kind == "fsync"]
        assert len(fsyncs) >= 2, f"{name}: fsynced only {len(fsyncs)} times"
        assert all(f.synced_seq is not None for d in truths[name].values() for f in d.frames()[:10])


def test_the_walk_of_the_daemons_bytes_agrees_with_the_reader(recordings: dict[str, Recording]) -> None:
    """The harness's own walk (its ground truth) and the reader agree on a complete file."""
    rec = recordings["sigterm"]
    for i, path in rec.real_paths().items():
        truth = daemon_frames(rec.histories[i])
        with Reader(path) as r:
            assert r.complete
            assert len(r.sessions) == len(truth.sessions)
            for s, t in zip(r.sessions, truth.sessions, strict=True):
                frames = r.frames(s.index)
                assert [f.tick for f in t.frames.values()] == frames["tick"].tolist()
                raw = np.ascontiguousarray(frames).view(np.uint8).reshape(len(frames), -1)
                assert [f.data for f in t.frames.values()] == [bytes(row) for row in raw]
                times = r.frame_times_us(s.index).tolist()
                assert [f.time_us for f in t.frames.values()] == times


def test_models_leave_fsynced_bytes_alone(recordings: dict[str, Recording], tmp_path: Path) -> None:
    """Every model keeps the durable prefix and differs from it only past it (real traces)."""
    import random

    older = older_content(recordings["older"])
    for name in ("sigterm", "sigkill", "sighup"):
        for h in recordings[name].histories.values():
            for k in h.boundaries():
                base, _ = h.synced(k)
                for m in MODELS:
                    content, _ = build_content(h, k, m, random.Random(k), older)
                    assert content[: len(base)] == base[: len(content)], (name, k, m)
                    if m != "b":
                        assert len(content) == len(h.content(k)), (name, k, m)


def test_in_process_tools_match_real_subprocesses(campaign: CampaignResult, tmp_path: Path) -> None:
    """A handful of calls through ``python -m wrtfd`` too: same exit codes, output, errors."""
    picks: dict[str, bytes] = {}
    for v in campaign.verdicts:
        c = v.state.content
        if c is not None:
            picks.setdefault("unreadable" if v.unreadable else v.state.model, c)
    wanted = (
        ("unreadable", ("info", "validate")),
        ("e", ("validate", "repair", "dump")),
        ("a", ("info", "dump")),
    )
    calls = []
    for kind, names in wanted:
        if kind not in picks:
            continue  # (no unreadable state once new files are fsynced at creation)
        path = tmp_path / f"{kind}.wrtf"
        path.write_bytes(picks[kind])
        for name in names:
            extra = ["-o", str(tmp_path / f"{kind}.out.wrtf")] if name == "repair" else []
            calls.append([name, str(path), *extra])
    assert {c[0] for c in calls} == {"info", "validate", "repair", "dump"}
    with ThreadPoolExecutor(max_workers=2) as pool:
        real = list(pool.map(run_subprocess, calls))
    for argv, sub in zip(calls, real, strict=True):
        if argv[0] == "repair":
            Path(argv[3]).unlink(missing_ok=True)
        here = run_in_process(argv)
        assert (here.rc, here.out, here.err) == (sub.rc, sub.out, sub.err), argv
    assert any(r.rc == 0 and r.out for r in real)


# -- the assertions on every state ------------------------------------------------------------------


def test_a_few_hundred_states_of_every_model(campaign: CampaignResult) -> None:
    rows = campaign.tally.rows
    assert campaign.tally.states >= 200
    assert all(rows[m].states >= 20 for m in MODELS), {m: r.states for m, r in rows.items()}
    assert rows[VANISHED].states > 0  # new files whose directory was not fsynced yet


def test_no_traceback_and_only_documented_exit_codes(campaign: CampaignResult) -> None:
    """Including: ``validate`` exits 2 on a file ``info`` cannot read (empty, not WRTF, cut)."""
    found = campaign.tally.total("tool_errors")
    assert found == 0, _findings(campaign, "tool")


def test_a_new_file_is_gone_or_readable(campaign: CampaignResult) -> None:
    found = campaign.tally.total("unreadable")
    assert found == 0, _findings(campaign, "unreadable")


def test_no_fsynced_frame_lost(campaign: CampaignResult) -> None:
    found = campaign.tally.total("fsynced_lost")
    assert found == 0, _findings(campaign, "fsynced")


def test_no_frame_the_daemon_never_wrote(campaign: CampaignResult) -> None:
    found = campaign.tally.total("silent")
    assert found == 0, _findings(campaign, "silent")


def test_repair_exits_0_only_with_an_output_that_validates(campaign: CampaignResult) -> None:
    found = campaign.tally.total("repair_invalid")
    assert found == 0, _findings(campaign, "repair")


def test_files_at_rest_validate_without_repair(campaign: CampaignResult) -> None:
    assert campaign.tally.total("at_rest") > 0
    found = campaign.tally.total("at_rest_invalid")
    assert found == 0, _findings(campaign, "rest")


def test_loss_within_the_documented_bound(campaign: CampaignResult) -> None:
    over = [v for v in campaign.verdicts if v.loss_s > v.bound_s + LOSS_SLACK_S]
    worst = max(campaign.verdicts, key=lambda v: v.loss_s - v.bound_s)
    assert not over, _findings(campaign, "bound")
    # the measure is live: a crash just before a file's first fsync loses about a second
    assert max(v.loss_s for v in campaign.verdicts if v.state.model != "a") > 0.5 * POWER_CUT_BOUND_S
    assert worst.loss_s <= worst.bound_s + LOSS_SLACK_S


def test_written_data_is_fsynced_within_the_documented_interval(campaign: CampaignResult) -> None:
    """Today: ~1.2 s while driving, and a footer written on idle waits until the next session."""
    wait = campaign.tally.fsync_wait_s
    assert wait <= FSYNC_INTERVAL_S + TIMING_SLACK_S, f"written data waited {wait:.2f} s for its fsync"


def test_the_daemon_ran_as_the_unit_runs_it(recordings: dict[str, Recording]) -> None:
    """At the unit's ``Nice=`` where the test may set it (root): the bounds hold on time."""
    if os.geteuid() != 0:
        pytest.skip("not root: the daemon runs at the test's own niceness")
    assert {rec.niceness for rec in recordings.values()} == {SERVICE_NICENESS}


def test_signals_reached_the_daemon_not_strace(recordings: dict[str, Recording]) -> None:
    for rec in recordings.values():
        delivered = [s for _, _, s in rec.trace.signals]  # to whichever of its threads
        for _, name in rec.signals:
            if name != signal.Signals.SIGKILL.name:  # SIGKILL is never seen delivered
                assert name in delivered, (rec.name, delivered)


def test_frames_are_written_at_every_read_while_driving(recordings: dict[str, Recording]) -> None:
    """While the feed is steady, frames go to ``write()`` at every batched read of the UDP
    source (every ``read_interval_s``), fsyncs included: an fsync between two batches used to
    restart the batch clock, so the next batch waited a whole read more (0.4 s between writes,
    kill -9 then lost 0.52 s against the 0.42 s bound)."""
    limit = READ_INTERVAL_S + TIMING_SLACK_S
    gaps: list[tuple[float, str]] = []
    for name in ("sigterm", "sigkill", "sighup"):
        rec = recordings[name]
        writes = [op.time_s for op in rec.log.ops if op.kind == "write"]
        for phase in rec.phases:
            # the steady part: past the first second (a session settles, a file is created)
            lo, hi = phase[0] + 1.0, phase[-1]
            during = [t for t in writes if lo <= t <= hi]
            gaps += [(b - a, name) for a, b in itertools.pairwise(during)]
    assert len(gaps) >= 30, len(gaps)  # about 5 a second over the runs' steady driving
    # That defect delayed the batch after every fsync (each second: a fifth of the gaps); a loaded
    # machine delays a step now and then (one gap of 0.383 s in a clean-clone run of the suite).
    over = sorted((round(gap, 3), name) for gap, name in gaps if gap > limit)
    assert len(over) <= max(1, len(gaps) // 20), f"gaps between two writes while driving: {over}"
    worst, name = max(gaps)
    assert worst <= 2 * READ_INTERVAL_S, f"{name}: {worst:.3f} s between two writes while driving"
