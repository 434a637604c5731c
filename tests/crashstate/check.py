"""Run the tools on a crash state and judge what they made of it.

Each state's bytes go through ``wrtfd info``, ``validate``, ``repair -o OUT``, ``validate OUT``,
``dump`` and ``dump OUT``, called in-process through the CLI entry point (the real argument
parsing and error handling; a subprocess per call would not fit CI's budget, and
:func:`run_subprocess` proves both paths print the same). Identical bytes are run once.

The judgement (:func:`judge`), per state:

* no traceback, exit codes only from the documented set, ``validate`` exits 2 where ``info``
  finds the file unreadable;
* a file that exists is readable (``info`` exits 0): the "unreadable new file" finding;
* every frame the last fsync made durable is in the repaired output and in the state's dump;
* every frame of the dump of the state, of the dump of the output and of the output's bytes is
  one the daemon wrote to this file: the same session header, the same tick, the same bytes;
* ``repair`` exits 0 only with an output that validates;
* the newest data lost is within the documented bound (:data:`CRASH_BOUND_S` for model ``a``,
  :data:`POWER_CUT_BOUND_S` otherwise, plus :data:`SETTLE_S` early in a session);
* a file at rest (5 s after its session ended on idle) validates without repair.
"""

from __future__ import annotations

import bisect
import contextlib
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import traceback
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.crashstate.models import MODEL_TEXT, MODELS, VANISHED, CrashState
from tests.crashstate.replay import DaemonFile, FrameTruth, canonical, dump_text, text_digest
from wrtfd.cli.main import main as wrtfd_main
from wrtfd.format.spec import (
    DOC_END_MAGIC,
    DOC_FOOTER_TAIL,
    DOC_START_MAGIC,
    FILE_HEADER,
    FILE_MAGIC,
    METADATA_LEN,
    SESSION_ENTRY,
    SESSION_FOOTER_MAGIC,
    SESSION_MAGIC,
    U64,
    pad8,
)
from wrtfd.recorder import durability
from wrtfd.recorder.durability import loss_bound

__all__ = [
    "CRASH_BOUND_S",
    "EXIT_CODES",
    "FSYNC_INTERVAL_S",
    "LOSS_SLACK_S",
    "POWER_CUT_BOUND_S",
    "REST_S",
    "SETTLE_S",
    "TIMING_SLACK_S",
    "Feed",
    "Tally",
    "ToolResult",
    "ToolRunner",
    "Verdict",
    "judge",
    "run_in_process",
    "run_subprocess",
]

# --- THE DOCUMENTED DURABILITY BOUND: its one home, wrtfd.recorder.durability (docs/durability.md) ---
_BOUND = loss_bound()
FSYNC_INTERVAL_S = durability.FSYNC_INTERVAL_S  # the test config's default
CRASH_BOUND_S = _BOUND.crash_s
POWER_CUT_BOUND_S = _BOUND.power_cut_s
SETTLE_S = _BOUND.session_start_s
#: Issue 13's target: a rig switched off at the wall this long after a session ended on idle
#: leaves only files that validate.
REST_S = 5.0
#: The bound assumes the daemon gets the CPU when it asks; on a loaded 2-core CI machine its
#: steps can start late. The test allows this much on top of the bound; the table shows the raw
#: worst loss against the bound.
TIMING_SLACK_S = 0.15
#: The loss check's own slack: the newest data is stamped by the test's sender, a process of its
#: own, so both its delay and the daemon's count; a whole suite beside it (three workers on two
#: cores) once put a SIGHUP state 0.2 s over the bound (0.614 s / 0.417 s; alone it passes).
#: The write and fsync spacing checks keep TIMING_SLACK_S.
LOSS_SLACK_S = 0.25
# ---------------------------------------------------------------------------------------------------

#: Exit codes each command documents (README "Working with recordings", cli/main.py).
EXIT_CODES = {
    "info": {0, 2},
    "validate": {0, 1, 2},
    "repair": {0, 1, 2},
    "dump": {0, 1, 2},  # 1: frames that fail the frame check were left out (said on stderr)
}
#: Examples kept per finding kind (the counts are complete; the messages are a sample).
_EXAMPLES = 4


# -- running the tools ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolResult:
    argv: tuple[str, ...]
    rc: int
    out: str
    err: str

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.err


def run_in_process(argv: Sequence[str]) -> ToolResult:
    """``wrtfd ARGV`` through the CLI entry point in this process; an escaping exception is a
    traceback on stderr, as the interpreter would print it."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = wrtfd_main(list(argv))
        except SystemExit as exc:  # argparse
            rc = exc.code if isinstance(exc.code, int) else 2
        except Exception:
            traceback.print_exc(file=err)
            rc = 1
    return ToolResult(tuple(argv), rc, out.getvalue(), err.getvalue())


def run_subprocess(argv: Sequence[str]) -> ToolResult:
    """The same command as a real ``python -m wrtfd`` process."""
    env = {k: v for k, v in os.environ.items() if k != "WRTFD_DEBUG"}
    proc = subprocess.run(
        [sys.executable, "-m", "wrtfd", *argv], capture_output=True, text=True, timeout=120, env=env
    )
    return ToolResult(tuple(argv), proc.returncode, proc.stdout, proc.stderr)


@dataclass(frozen=True, slots=True)
class DumpFrame:
    header_key: str | None
    tick: int
    #: digest of the frame's ``data`` JSON text as printed
    data: bytes


_FRAME_LINE = re.compile(r'\{"kind":"frame","session":(\d+),"tick":(\d+),"time_us":-?\d+,"data":(.*)\}\Z')


def dump_frames(text: str) -> list[DumpFrame]:
    """The frames of ``wrtfd dump`` output, each under its session's header."""
    frames: list[DumpFrame] = []
    sessions: dict[int, str] = {}
    for line in text.splitlines():
        m = _FRAME_LINE.match(line)
        if m is not None:  # the common case, read without a JSON parse
            frames.append(DumpFrame(sessions.get(int(m.group(1))), int(m.group(2)), text_digest(m.group(3))))
            continue
        obj = json.loads(line)
        if obj["kind"] == "session":
            sessions[obj["session"]] = canonical(obj["header"])
        else:
            frames.append(
                DumpFrame(sessions.get(obj["session"]), obj["tick"], text_digest(dump_text(obj["data"])))
            )
    return frames


@dataclass(frozen=True, slots=True)
class DumpResult:
    rc: int
    err: str
    frames: tuple[DumpFrame, ...]


@dataclass(slots=True)
class ToolOutcome:
    """What the tools made of one content (shared by every state with these bytes)."""

    info: ToolResult
    validate: ToolResult
    repair: ToolResult
    validate_out: ToolResult | None
    dump: DumpResult
    dump_out: DumpResult | None
    #: (session header bytes, tick, frame bytes) read through the output's document footer
    out_frames: list[tuple[bytes, int, bytes]] | None
    out_exists: bool

    @property
    def dump_frames(self) -> tuple[DumpFrame, ...]:
        return self.dump.frames

    @property
    def dump_out_frames(self) -> tuple[DumpFrame, ...]:
        return () if self.dump_out is None else self.dump_out.frames

    def results(self) -> list[tuple[str, int, str, str]]:
        """(command, exit code, stderr, what) of each call."""
        out = [
            ("info", self.info.rc, self.info.err, "info"),
            ("validate", self.validate.rc, self.validate.err, "validate"),
            ("repair", self.repair.rc, self.repair.err, "repair"),
            ("dump", self.dump.rc, self.dump.err, "dump"),
        ]
        if self.validate_out is not None:
            out.append(("validate", self.validate_out.rc, self.validate_out.err, "validate of the output"))
        if self.dump_out is not None:
            out.append(("dump", self.dump_out.rc, self.dump_out.err, "dump of the output"))
        return out


def indexed_frames(buf: bytes, daemon: DaemonFile) -> list[tuple[bytes, int, bytes]] | None:
    """Frames of a complete file located through its document footer alone (no scanning), with
    the daemon's layout; None when the footer does not index whole sessions of that layout."""
    schema = daemon.schema
    size = len(buf)
    if size < FILE_HEADER.size + 24 or buf[:8] != FILE_MAGIC or buf[-8:] != DOC_END_MAGIC:
        return None
    count = FILE_HEADER.unpack_from(buf, 0)[4]
    pos = FILE_HEADER.size
    for _ in range(2 * count):
        if pos + 4 > size:
            return None
        (n,) = METADATA_LEN.unpack_from(buf, pos)
        pos = pad8(pos + 4 + n)
    n_sessions, _ = DOC_FOOTER_TAIL.unpack_from(buf, size - 16)
    start = size - 24 - 24 * n_sessions
    if start < pos or buf[start : start + 8] != DOC_START_MAGIC:
        return None
    out = []
    for i in range(n_sessions):
        off, foff, n = SESSION_ENTRY.unpack_from(buf, start + 8 + 24 * i)
        frames_at = off + 8 + schema.header_size
        if not pos <= off < foff <= start or buf[off : off + 8] != SESSION_MAGIC:
            return None
        if buf[foff : foff + 8] != SESSION_FOOTER_MAGIC or foff - frames_at != n * schema.frame_size:
            return None
        header = buf[off + 8 : frames_at]
        for j in range(n):
            p = frames_at + j * schema.frame_size
            out.append((header, U64.unpack_from(buf, p)[0], buf[p : p + schema.frame_size]))
    return out


_CACHE_ENTRIES = 512


def _remember(cache: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    """Bounded memory: identical contents come close together (models of one crash point)."""
    cache[key] = value
    if len(cache) > _CACHE_ENTRIES:
        cache.popitem(last=False)


class ToolRunner:
    """Runs the six tool calls on a content once, in ``workdir``, and keeps the outcome.

    ``dump`` is a function of the bytes alone (it prints no path), so one dump serves every
    state and every repaired output with the same bytes.
    """

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self._cache: OrderedDict[tuple[str, int], ToolOutcome] = OrderedDict()
        self._dumps: OrderedDict[str, DumpResult] = OrderedDict()
        self.runs = 0

    def _dump(self, path: Path, digest: str) -> DumpResult:
        hit = self._dumps.get(digest)
        if hit is None:
            r = run_in_process(["dump", str(path)])
            # exit 1: frames that fail the check were left out, the rest is printed
            hit = DumpResult(r.rc, r.err, tuple(dump_frames(r.out)) if r.rc in (0, 1) else ())
            _remember(self._dumps, digest, hit)
        return hit

    def outcome(self, content: bytes, daemon: DaemonFile) -> ToolOutcome:
        digest = hashlib.sha256(content).hexdigest()[:24]
        key = (digest, id(daemon))
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        self.runs += 1
        path = self.workdir / f"{digest}.wrtf"
        out = self.workdir / f"{digest}.repaired.wrtf"
        path.write_bytes(content)
        out.unlink(missing_ok=True)
        info = run_in_process(["info", str(path)])
        validate = run_in_process(["validate", str(path)])
        dump = self._dump(path, digest)
        repair = run_in_process(["repair", str(path), "-o", str(out)])
        if path.read_bytes() != content:
            raise AssertionError(f"repair -o changed its input {path}")
        exists = out.exists()
        validate_out = dump_out = out_frames = None
        if exists:
            repaired = out.read_bytes()
            validate_out = run_in_process(["validate", str(out)])
            dump_out = self._dump(out, hashlib.sha256(repaired).hexdigest()[:24])
            out_frames = indexed_frames(repaired, daemon)
        result = ToolOutcome(info, validate, repair, validate_out, dump, dump_out, out_frames, exists)
        path.unlink()
        out.unlink(missing_ok=True)
        _remember(self._cache, key, result)
        return result


# -- judging ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Feed:
    """What the rig sent during a run: send times (wall clock, s), split into drive phases."""

    phases: tuple[tuple[float, ...], ...]
    #: wall-clock times (s) at which sessions began (their tick 0), from the daemon's files
    session_starts: tuple[float, ...] = ()

    def phase_of(self, t_s: float, slack_s: float = 0.5) -> int | None:
        for i, p in enumerate(self.phases):
            if p and p[0] - slack_s <= t_s <= p[-1] + slack_s:
                return i
        return None

    def bound_s(self, model: str, t_s: float) -> float:
        bound = CRASH_BOUND_S if model == "a" else POWER_CUT_BOUND_S
        early = any(0 <= t_s - s < SETTLE_S + bound for s in self.session_starts)
        return bound + (SETTLE_S if early else 0.0)


def loss_s(feed: Feed, daemon: DaemonFile, recovered: list[FrameTruth], t_s: float) -> float:
    """Newest data lost by a crash at ``t_s``: per drive phase this file records, the newest
    datagram sent by then minus the newest frame recovered (or the phase's start)."""
    claimed = {feed.phase_of(f.time_us / 1e6) for f in daemon.frames()} - {None}
    newest_kept: dict[int, float] = {}
    for f in recovered:
        p = feed.phase_of(f.time_us / 1e6)
        if p is not None:
            newest_kept[p] = max(newest_kept.get(p, 0.0), f.time_us / 1e6)
    worst = 0.0
    for p in claimed:
        assert p is not None
        sends = feed.phases[p]
        i = bisect.bisect_right(sends, t_s)
        if i == 0:
            continue
        newest = sends[i - 1]
        worst = max(worst, newest - newest_kept.get(p, sends[0]))
    return worst


@dataclass(slots=True)
class Verdict:
    state: CrashState
    silent: int = 0
    fsynced_lost: int = 0
    repair_invalid: bool = False
    unreadable: bool = False
    tool_errors: int = 0
    at_rest_invalid: bool = False
    loss_s: float = 0.0
    bound_s: float = 0.0
    messages: list[tuple[str, str]] = field(default_factory=list)

    def note(self, kind: str, text: str) -> None:
        self.messages.append((kind, f"{self.state.label}: {text}"))

    @property
    def over_bound(self) -> bool:
        return self.loss_s > self.bound_s


def _genuine(frame: DumpFrame, daemon: DaemonFile) -> FrameTruth | None:
    session = daemon.session_by_key().get(frame.header_key or "")
    if session is None:
        return None
    truth = session.frames.get(frame.tick)
    if truth is None or session.frames_json[frame.tick] != frame.data:
        return None
    return truth


def judge(
    state: CrashState, daemon: DaemonFile, feed: Feed, runner: ToolRunner, *, at_rest: bool = False
) -> Verdict:
    v = Verdict(state)
    fsynced = {(f.session, f.tick) for f in daemon.frames() if f.durable_at(state.k)}
    recovered: list[FrameTruth] = []
    if state.content is not None:
        o = runner.outcome(state.content, daemon)
        for name, rc, err, what in o.results():
            if "Traceback (most recent call last)" in err or rc not in EXIT_CODES[name]:
                v.tool_errors += 1
                last = (err.strip().splitlines() or ["(no stderr)"])[-1]
                v.note("tool", f"{what} exit {rc}: {last}")
        if o.info.rc != 0:
            v.unreadable = True
            v.note("unreadable", f"info exit {o.info.rc}: {o.info.err.strip()[:160]}")
            if o.validate.rc != 2:
                v.tool_errors += 1
                v.note("tool", f"validate exits {o.validate.rc} on a file info cannot read (want 2)")
        seen_state: set[tuple[int, int]] = set()
        for where, frames in (("dump", o.dump_frames), ("dump of repaired", o.dump_out_frames)):
            bad = 0
            for fr in frames:
                truth = _genuine(fr, daemon)
                if truth is None:
                    bad += 1
                    if bad == 1:
                        v.note(
                            "silent", f"{where}: tick {fr.tick} is not a frame the daemon wrote to this file"
                        )
                elif where == "dump":
                    seen_state.add((truth.session, truth.tick))
                else:
                    recovered.append(truth)
            v.silent += bad
        if o.out_frames is not None:
            # bytes the dump cannot show (padding, NaN payloads): genuine header and tick and
            # the same values in the dump, yet other bytes
            sessions = {s.header: s for s in daemon.sessions}
            dumped = {(f.header_key, f.tick): f.data for f in o.dump_out_frames}
            for header, tick, data in o.out_frames:
                s = sessions.get(header)
                t = None if s is None else s.frames.get(tick)
                if s is None or t is None or t.data == data:
                    continue  # not genuine at all (counted above from the dump), or equal
                if dumped.get((s.header_key, tick)) == s.frames_json[tick]:
                    v.silent += 1
                    v.note("silent", f"repaired output: tick {tick} has the daemon's values but other bytes")
        if o.repair.rc == 0 and (not o.out_exists or o.validate_out is None or o.validate_out.rc != 0):
            v.repair_invalid = True
            first = "" if o.validate_out is None else (o.validate_out.out.splitlines() or [""])[0]
            v.note("repair", f"repair exit 0, output does not validate: {first[:160]}")
        kept = {(f.session, f.tick) for f in recovered}
        lost = (fsynced - kept) | (fsynced - seen_state)
        if at_rest and o.validate.rc != 0:
            v.at_rest_invalid = True
            v.note("rest", f"at rest, validate exit {o.validate.rc}: {o.validate.out.splitlines()[-1:]}")
    else:
        lost = fsynced
    if lost:
        v.fsynced_lost = len(lost)
        v.note("fsynced", f"{len(lost)} fsynced frames lost (e.g. session/tick {min(lost)})")
    v.loss_s = loss_s(feed, daemon, recovered, state.time_s)
    v.bound_s = feed.bound_s(state.model, state.time_s)
    if v.over_bound:
        v.note("bound", f"lost {v.loss_s:.3f} s of newest data, bound {v.bound_s:.3f} s")
    return v


# -- the table --------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Row:
    states: int = 0
    silent: int = 0
    fsynced_lost: int = 0
    repair_invalid: int = 0
    unreadable: int = 0
    tool_errors: int = 0
    at_rest: int = 0
    at_rest_invalid: int = 0
    over_bound: int = 0
    worst_loss_s: float = 0.0
    worst_bound_s: float = 0.0


@dataclass(slots=True)
class Tally:
    rows: dict[str, _Row] = field(default_factory=lambda: {m: _Row() for m in (*MODELS, VANISHED)})
    examples: dict[str, list[str]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    seen: set[tuple[object, ...]] = field(default_factory=set)
    #: the longest a written byte waited for its fsync, over the recordings judged
    fsync_wait_s: float = 0.0

    def first_time(self, state: CrashState, *, at_rest: bool) -> bool:
        """False for a state judged before (same run, file, point, model and bytes)."""
        digest = None if state.content is None else hashlib.blake2b(state.content, digest_size=16).digest()
        key = (state.run, state.file, state.k, state.model, digest, at_rest)
        if key in self.seen:
            return False
        self.seen.add(key)
        return True

    def add(self, v: Verdict, *, at_rest: bool = False) -> None:
        r = self.rows[v.state.model]
        r.states += 1
        r.silent += v.silent
        r.fsynced_lost += v.fsynced_lost
        r.repair_invalid += v.repair_invalid
        r.unreadable += v.unreadable
        r.tool_errors += v.tool_errors
        r.at_rest += at_rest
        r.at_rest_invalid += v.at_rest_invalid
        r.over_bound += v.over_bound
        if v.loss_s / v.bound_s > (r.worst_loss_s / r.worst_bound_s if r.worst_bound_s else -1):
            r.worst_loss_s, r.worst_bound_s = v.loss_s, v.bound_s
        for kind, text in v.messages:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            ex = self.examples.setdefault(kind, [])
            if len(ex) < _EXAMPLES:
                ex.append(text)

    def total(self, attr: str) -> int:
        return int(sum(getattr(r, attr) for r in self.rows.values()))

    @property
    def states(self) -> int:
        return self.total("states")

    def failed(self) -> bool:
        return any(
            self.total(a)
            for a in (
                "silent",
                "fsynced_lost",
                "repair_invalid",
                "unreadable",
                "tool_errors",
                "at_rest_invalid",
            )
        ) or bool(self.total("over_bound"))

    def table(self) -> str:
        head = (
            "| model | states | silent-corruption frames | fsynced frames lost | repair outputs not valid "
            "| unreadable files | tool errors | not valid at rest | over the bound | worst loss / bound |"
        )
        lines = [head, "|" + " --- |" * 10]
        for m, r in self.rows.items():
            if not r.states:
                continue
            rest = f"{r.at_rest_invalid} of {r.at_rest}" if r.at_rest else "-"
            lines.append(
                f"| ({m}) {MODEL_TEXT[m]} | {r.states} | {r.silent} | {r.fsynced_lost} | {r.repair_invalid} "
                f"| {r.unreadable} | {r.tool_errors} | {rest} | {r.over_bound} "
                f"| {r.worst_loss_s:.2f} s / {r.worst_bound_s:.2f} s |"
            )
        return "\n".join(lines)

    def report(self) -> str:
        out = [
            self.table(),
            "",
            f"longest wait of written data for its fsync: {self.fsync_wait_s:.2f} s "
            f"(fsync_interval_s is {FSYNC_INTERVAL_S} s; bounds: kill -9 {CRASH_BOUND_S:.2f} s, power cut "
            f"{POWER_CUT_BOUND_S:.2f} s, +{SETTLE_S} s in the first moments of a session)",
            "",
        ]
        for kind, ex in sorted(self.examples.items()):
            out.append(f"{kind}: {self.counts[kind]} finding(s), e.g.")
            out += [f"  {e}" for e in ex]
        return "\n".join(out)
