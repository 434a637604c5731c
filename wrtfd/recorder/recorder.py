"""The recorder: scheduler events -> sessions, derived channels, file operations.

:class:`Recorder` is split in two halves so that the live daemon never blocks on disk:

* the *engine* (:meth:`Recorder.push`, :meth:`Recorder.advance`, :meth:`Recorder.finish`) runs
  where samples arrive (the event loop). It drives the :class:`~wrtfd.scheduler.TickScheduler`,
  runs the derived-channel plug-ins on every frame, builds session headers and footers and
  returns *operations* (:class:`BeginOp`, :class:`FramesOp`, :class:`EndOp`). No I/O;
* the *sink* (:meth:`Recorder.apply`, :meth:`Recorder.sync_if_due`, :meth:`Recorder.close`)
  executes operations with :class:`~wrtfd.recorder.files.FileSink` (the writer thread in the
  daemon, inline in :func:`replay`).

Virtual times (the scheduler's nanoseconds: monotonic live, recorded when replaying) become
wall-clock microseconds through one fixed origin ``(virtual_ns, wall_us)`` taken when recording
starts, so frame times inside a recording never jump with NTP. :func:`replay` takes the origin
from ``start_timestamp_us`` and the first sample, so the same input gives the same bytes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from wrtfd.decoders.base import Sample
from wrtfd.defaults import ARRIVAL_BUNCH_S, INFO_WAIT_S
from wrtfd.errors import ConfigError, SchemaError
from wrtfd.format import Schema
from wrtfd.recorder import durability
from wrtfd.recorder.compose import END_REASONS, FOOTER_SOURCE_COUNTERS, TEXT_BYTES, compose_definition
from wrtfd.recorder.files import DEFAULT_TEMPLATE, FileSink, check_template, join_records
from wrtfd.recorder.markers import MAX_PENDING, MarkerStamper, TooManyMarkersError
from wrtfd.recorder.ops import BeginOp, EndOp, FramesOp, Op
from wrtfd.recorder.trigger import TriggerGate, TriggerPolicy
from wrtfd.scheduler import (
    FrameBlock,
    MergePolicy,
    SchedulerConfig,
    SchedulerEvent,
    SessionEnded,
    SessionStarted,
    SourcePlan,
    TickScheduler,
)

__all__ = [
    "BeginOp",
    "EndOp",
    "FramesOp",
    "Op",
    "Recorder",
    "RecorderPolicy",
    "Replayer",
    "SourceSpec",
    "TriggerPolicy",
    "replay",
]

_INFO_KEYS = ("track", "car", "session_type", "driver")


@dataclass(frozen=True, slots=True)
class SourceSpec:
    """One source of a recording; ``definition`` is its WRTF definition (a dict)."""

    name: str
    definition: Mapping[str, Any]
    drives_frames: bool = True
    stale_after_s: float | None = None
    use_source_clock: bool = True
    #: Its receive times are read times (a serial port), not arrival times (:class:`SourcePlan`).
    stamped_on_read: bool = False
    #: Session info keys the source reports shortly after a session starts (a game that names
    #: its track in a packet of its own): a new session's header waits for them (``info_wait_s``).
    awaits_info: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RecorderPolicy:
    """Where and how to record. Times in seconds; ``None`` disables a limit.

    ``jitter_s``: how long a tick stays open for late or bunched samples (the frames' latency).
    ``bunch_s``: the arrival delay an arrival-stamped source may accumulate before a gap counts
    as a real pause. ``settle_s``: how long the first samples are watched before a session's
    tick grid is fixed. ``batch_s``: (live) how often frames are handed to the writer thread.
    ``info_wait_s``: how much session time a new session's header (and file) waits for the
    session info a source promises (:attr:`SourceSpec.awaits_info`); 0: never waits.
    """

    output_dir: Path
    rate_hz: int = durability.RATE_HZ
    file_template: str = DEFAULT_TEMPLATE
    session_idle_s: float | None = 5.0
    max_session_s: float | None = None
    rotate_bytes: int | None = None
    rotate_s: float | None = None
    rotate_sessions: int | None = None
    fsync_interval_s: float = durability.FSYNC_INTERVAL_S
    jitter_s: float = durability.JITTER_S
    bunch_s: float = ARRIVAL_BUNCH_S
    settle_s: float = durability.SETTLE_S
    info_wait_s: float = INFO_WAIT_S
    merge: str = "last"
    batch_s: float = durability.BATCH_S
    retry_s: float = 1.0
    retry_max_s: float = 30.0
    metadata: Mapping[str, str] = field(default_factory=dict)

    def check(self) -> None:
        """:raises ConfigError: a value out of range, naming the policy key."""
        rate = self.rate_hz
        if not isinstance(rate, int) or isinstance(rate, bool) or not 1 <= rate <= 100_000:
            raise ConfigError(f"recorder.rate_hz: a whole number of Hz from 1 to 100000, got {rate!r}")
        for key in ("session_idle_s", "max_session_s", "rotate_s"):
            v = getattr(self, key)
            if v is not None and not v > 0:
                raise ConfigError(f"recorder.{key}: must be > 0 or unset, got {v!r}")
        for key in ("fsync_interval_s", "jitter_s", "bunch_s", "batch_s", "retry_s", "retry_max_s"):
            v = getattr(self, key)
            if not v > 0:
                raise ConfigError(f"recorder.{key}: must be > 0, got {v!r}")
        for key in ("settle_s", "info_wait_s"):
            v = getattr(self, key)
            if not v >= 0:
                raise ConfigError(f"recorder.{key}: must be >= 0, got {v!r}")
        if self.bunch_s > self.jitter_s:
            raise ConfigError(f"recorder.bunch_s ({self.bunch_s}) must not exceed jitter_s ({self.jitter_s})")
        if self.merge not in ("last", "first"):
            raise ConfigError(f"recorder.merge: 'last' or 'first', got {self.merge!r}")
        if self.rotate_sessions is not None and self.rotate_sessions < 1:
            raise ConfigError(f"recorder.rotate_sessions: must be >= 1, got {self.rotate_sessions}")
        check_template(self.file_template)


def _text(value: object) -> str:
    """``value`` as text that fits a header text field (cut on a UTF-8 character boundary)."""
    raw = str(value).replace("\0", " ").encode("utf-8", "replace")[:TEXT_BYTES]
    return raw.decode("utf-8", errors="ignore")


class Recorder:
    """Scheduler + derived channels + file sink for one recording (see module docstring).

    ``schema`` is the recording's definition (what ``recorder.schema`` pins); its files carry
    the frame check on top (:mod:`wrtfd.format.check`). ``live=True`` (the live driver) makes a
    new file and each new session's header durable at once, closes the file when a session
    ends on idle (so that a rig switched off afterwards leaves only complete files) and syncs
    ``sync_early_s`` before the fsync interval runs out. ``salt_seed`` derives the files' check
    salts from it (replay: the same input gives the same bytes); by default each file draws
    random ones.

    :raises ConfigError: bad policy, source or plug-in names, or a definition that does not compose.
    """

    def __init__(
        self,
        sources: Sequence[SourceSpec],
        policy: RecorderPolicy,
        derived: Sequence[Any] = (),
        *,
        metadata: Mapping[str, str] | None = None,
        origin: tuple[int, int] | None = None,
        flush_each_batch: bool = True,
        clock: Callable[[], float] = time.monotonic,
        trigger: TriggerPolicy | None = None,
        live: bool = False,
        sync_early_s: float = 0.0,
        salt_seed: bytes | None = None,
    ) -> None:
        policy.check()
        self.policy = policy
        self.sources = list(sources)
        self.derived = list(derived)
        definition = compose_definition([(s.name, s.definition) for s in self.sources], self.derived)
        try:
            self.schema = Schema.from_dict(definition)
        except SchemaError as exc:  # the message names the path inside the definition
            raise ConfigError(f"the recording's definition is invalid: {exc}") from exc
        self.scheduler = TickScheduler(
            [
                SourcePlan(s.name, s.drives_frames, s.stale_after_s, s.use_source_clock, s.stamped_on_read)
                for s in self.sources
            ],
            self.schema.frame_dtype,
            SchedulerConfig(
                rate_hz=policy.rate_hz,
                jitter_s=policy.jitter_s,
                bunch_s=policy.bunch_s,
                settle_s=policy.settle_s,
                session_idle_s=policy.session_idle_s,
                max_session_s=policy.max_session_s,
                merge=MergePolicy(policy.merge),
            ),
        )
        meta = {"wrtfd.sources": ", ".join(s.name for s in self.sources)}
        for d in self.derived:  # a plug-in's own (the lap channels' timing sectors)
            meta.update(getattr(d, "metadata", None) or {})
        meta.update(policy.metadata)
        meta.update(metadata or {})
        drivers = [s.name for s in self.sources if s.drives_frames]
        self.sink = FileSink(
            self.schema,
            output_dir=policy.output_dir,
            rate_hz=policy.rate_hz,
            template=policy.file_template,
            metadata=meta,
            source_label="+".join(drivers),
            rotate_bytes=policy.rotate_bytes,
            rotate_s=policy.rotate_s,
            rotate_sessions=policy.rotate_sessions,
            fsync_interval_s=policy.fsync_interval_s,
            flush_each_batch=flush_each_batch,
            retry_s=policy.retry_s,
            retry_max_s=policy.retry_max_s,
            clock=clock,
            sync_starts=live,
            close_on_idle=live,
            sync_early_s=sync_early_s,
            salt_seed=salt_seed,
        )
        #: (virtual ns, wall-clock ns at that virtual time): wall times to the nanosecond.
        self._origin = None if origin is None else (origin[0], origin[1] * 1000)
        self._rate = policy.rate_hz
        self._drivers = drivers
        self.sessions_started = 0
        self.derived_errors = 0
        self.frames_out = 0
        self.dropped_ticks = 0
        #: Markers asked for and written into the frames (see :meth:`mark`).
        self.markers = MarkerStamper()
        self._session_start_ns: int | None = None
        #: Sources whose session info a new session's header waits for: name -> keys.
        self._awaited = {s.name: s.awaits_info for s in self.sources if s.awaits_info}
        self._info_wait_ticks = round(policy.info_wait_s * policy.rate_hz)
        #: The session start and frames held while the header waits (None: not waiting).
        self._held: list[Op] | None = None
        self._held_start_us = 0
        self._held_start_ns = 0
        self._held_reason = ""
        self._held_info: Mapping[str, Mapping[str, str]] = {}
        #: The held session waits for a plug-in's file metadata; the tick it came at.
        self._held_meta = False
        self._meta_tick: int | None = None
        #: ``record = "triggered"``: the gate between these operations and the sink.
        self.gate = (
            None
            if trigger is None
            else TriggerGate(
                trigger,
                rate_hz=policy.rate_hz,
                frame_dtype=self.schema.frame_dtype,
                summaries=self._summaries,
            )
        )
        #: Keep the laps the plug-ins complete for :meth:`take_laps` (the live recorder with
        #: observers: lap records); off, nothing is kept (replay, import).
        self.collect_laps = False
        self._new_laps: list[Any] = []
        self._laps_seen: list[int] = [0] * len(self.derived)
        #: Told of every frame block before the gate (live views); ``(frames, session tick-0 us)``.
        self.on_frames: Callable[[np.ndarray, int], None] | None = None
        self._live_start_us = 0

    # -- engine (no I/O) -------------------------------------------------------------------------

    def set_origin(self, virtual_ns: int, wall_us: int) -> None:
        """Fix the mapping of virtual time to wall-clock time (once, before the first frame)."""
        if self._origin is None:
            self._origin = (virtual_ns, wall_us * 1000)

    def set_wall_offset(self, offset_ns: int) -> None:
        """Fix the mapping as wall ns = virtual ns + ``offset_ns`` (once, before the first frame):
        the daemon's one offset, which its raw tap also stamps packets with, so an import of the
        tap (whose times are the packets') finds the same wall times to the microsecond."""
        if self._origin is None:
            self._origin = (0, offset_ns)

    def wall_us(self, virtual_ns: int) -> int:
        if self._origin is None:
            self._origin = (virtual_ns, time.time_ns())
        v0, w0 = self._origin
        return (w0 + virtual_ns - v0) // 1000

    def push(self, sample: Sample) -> None:
        self.scheduler.push(sample)

    def advance(self, now_ns: int, *, flush: bool = True) -> list[Op]:
        """Move the clock; ``flush=False`` keeps the operations for a later ``flush=True`` call
        (bigger frame blocks: what replay and the live driver do between batches)."""
        if not flush:  # nothing to turn into operations (the per-sample call of a replay)
            self.scheduler.advance(now_ns, flush=False)
            return []
        return self._ops(self.scheduler.advance(now_ns))

    def finish(self, reason: str = "end") -> list[Op]:
        """Place everything pending and end the session (end of input, stop, shutdown)."""
        return self._ops(self.scheduler.finish(reason if reason in END_REASONS else "end"))

    def request_new_session(self) -> None:
        self.scheduler.request_new_session("request")

    def mark(self, now_ns: int, wall_us: int, note: str = "") -> int | None:
        """Ask for a marker at the tick of ``now_ns`` (the engine's clock) in the session in
        progress; it is written into the frames from that tick on. Returns the tick, or None when
        no session is in progress (nothing to mark).

        :raises TooManyMarkersError: :data:`~wrtfd.recorder.markers.MAX_PENDING` markers wait for
            their frame already (refused, counted in ``markers.refused``).
        """
        start = self._session_start_ns
        if start is None or not self.scheduler.in_session:
            return None
        tick = max(0, (now_ns - start) * self.policy.rate_hz // 1_000_000_000)
        if not self.markers.request(tick, wall_us, note):
            raise TooManyMarkersError(f"{MAX_PENDING} markers wait for their frame already")
        return tick

    def _header(self, reason: str, info: Mapping[str, Mapping[str, str]]) -> dict[str, Any]:
        header: dict[str, Any] = {"start_reason": reason}
        order = self._drivers + [s.name for s in self.sources if s.name not in self._drivers]
        for key in _INFO_KEYS:
            for name in order:
                value = info.get(name, {}).get(key)
                if value:
                    header[key] = _text(value)
                    break
        modes = self.scheduler.clock_modes()
        header["sources"] = {n: ("source_clock" if m else "arrival") for n, m in modes.items()}
        return header

    def _footer(self, ev: SessionEnded) -> dict[str, Any]:
        footer: dict[str, Any] = {"end_reason": ev.reason if ev.reason in END_REASONS else "end"}
        footer["sources"] = {
            name: {k: int(c.get(k, 0)) for k in FOOTER_SOURCE_COUNTERS} for name, c in ev.sources.items()
        }
        footer.update(self._summaries())
        return footer

    def session_summaries(self) -> dict[str, Any]:
        """The derived channels' footer values of the session in progress, so far (laps:
        ``lap_count``, ``best_lap_ms``, ...); empty outside a session. For status, not files."""
        return self._summaries() if self.scheduler.in_session else {}

    def live_summaries(self) -> dict[str, Any]:
        """What derived plug-ins with a ``live()`` method say now (laps: last and best lap with
        sectors), for the page; empty outside a session. Never part of a file."""
        if not self.scheduler.in_session:
            return {}
        return {d.name: said for d, said in self._ask_plugins("live")}

    def _ask_plugins(
        self, method: str, then: Callable[[Any], Any] = lambda said: said
    ) -> list[tuple[Any, Any]]:
        """Each derived plug-in that has the optional ``method``: it and ``then(method())``. A
        plug-in's exception is counted (``derived_errors``) and that plug-in left out: a
        plug-in's bug must not stop the recording."""
        out: list[tuple[Any, Any]] = []
        for d in self.derived:
            call = getattr(d, method, None)
            if call is None:
                continue
            try:
                out.append((d, then(call())))
            except Exception:
                self.derived_errors += 1
        return out

    def _summaries(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for d in self.derived:
            if getattr(d, "footer_fields", None):
                try:
                    out[d.name] = dict(d.summary())
                except Exception:  # a plug-in's bug must not stop the recording
                    self.derived_errors += 1
        return out

    def _ops(self, events: list[SchedulerEvent]) -> list[Op]:
        ops: list[Op] = []
        for ev in events:
            if isinstance(ev, FrameBlock):
                frames = ev.frames
                if self.derived:
                    self._derive(frames)
                    self._plugin_marks()
                    if self.collect_laps:
                        self._look_for_laps()
                marks = self.markers.stamp(frames)
                self.frames_out += len(frames)
                self.dropped_ticks += ev.dropped_ticks
                if self.on_frames is not None:
                    self.on_frames(frames, self._live_start_us)
                op = FramesOp(frames, None, tuple(marks))
                held = self._held
                if held is None:
                    ops.append(op)
                    continue
                held.append(op)
                if self._waiting() and int(frames["tick"][-1]) < self._info_wait_ticks:
                    continue
                ops.extend(self._release())
            elif isinstance(ev, SessionStarted):
                self.sessions_started += 1
                self.markers.reset()
                self._session_start_ns = ev.start_ns
                self._laps_seen = [0] * len(self.derived)
                for d in self.derived:
                    try:
                        d.start_session()
                    except Exception:  # a plug-in's bug must not stop the recording
                        self.derived_errors += 1
                self._live_start_us = self.wall_us(ev.start_ns)
                self._held_meta = self._info_wait_ticks > 0 and self._metadata_awaited()
                self._meta_tick = None
                if self._info_wait_ticks > 0 and (self._info_missing(ev.info) or self._held_meta):
                    self._held = []
                    self._held_start_us, self._held_reason = self._live_start_us, ev.reason
                    self._held_start_ns, self._held_info = ev.start_ns, ev.info
                    continue
                ops.append(
                    BeginOp(self._header(ev.reason, ev.info), self._live_start_us, self._learnt_metadata())
                )
            else:
                self._end_derived()
                if self._held is not None:
                    ops.extend(self._release())
                self.markers.reset()
                self._session_start_ns = None
                ops.append(EndOp(self._footer(ev)))
        if self._held is not None and not self._waiting():
            ops.extend(self._release())
        return ops if self.gate is None else self.gate.feed(ops)

    def _waiting(self) -> bool:
        """Whether the held session still waits: for a source's session info, or for a plug-in's
        file metadata (a GNSS lap plug-in's circuit, picked at the first fix)."""
        return self._info_arrival() == "missing" or (self._held_meta and self._meta_tick is None)

    def _metadata_awaited(self) -> bool:
        return any(getattr(d, "awaits_metadata", False) for d in self.derived)

    def _learnt_metadata(self) -> dict[str, str] | None:
        """What plug-ins learnt for the file metadata while recording (``file_metadata()``),
        except what ``recorder.metadata`` sets. For a session that waited for it: only when it
        came within the wait, by the tick it came at (as for session info, the same input gives
        the same file however the frames are batched)."""
        if self._held_meta and (self._meta_tick is None or self._meta_tick >= self._info_wait_ticks):
            return None
        out: dict[str, str] = {}
        for _, learnt in self._ask_plugins("file_metadata", dict):
            out.update(learnt)
        fixed = self.policy.metadata
        return {k: v for k, v in out.items() if k not in fixed} or None

    def _info_missing(self, info: Mapping[str, Mapping[str, str]] | None = None) -> bool:
        """Whether a source has not yet reported session info it promises (see ``info_wait_s``)."""
        if not self._awaited:
            return False
        if info is None:
            info = self.scheduler.session_info()
        return any(not info.get(name, {}).get(key) for name, keys in self._awaited.items() for key in keys)

    def _info_arrival(self) -> str:
        """Of the held session: whether the awaited info is still ``missing``, arrived ``in_time``
        (received within ``info_wait_s`` of the session's start) or ``late``. Decided by the
        receive times, not by when this is asked: the same input gives the same header however
        often the engine flushes (live: every batch; an import: every 1024 samples)."""
        deadline = self._held_start_ns + self._info_wait_ticks * 1_000_000_000 // self._rate
        since = self.scheduler.info_since
        times = [since(name, key) for name, keys in self._awaited.items() for key in keys]
        if any(t is None for t in times) or self._info_missing():
            return "missing"
        return "late" if any(t is not None and t > deadline for t in times) else "in_time"

    def _release(self) -> list[Op]:
        """The held session start, with its header, and its held frames. The header has the
        session info known now when the awaited info came in time, else what was known at the
        start (a track that came later belongs to no header: the session is under way)."""
        held, self._held = self._held or [], None
        info = self.scheduler.session_info() if self._info_arrival() == "in_time" else self._held_info
        begin = BeginOp(self._header(self._held_reason, info), self._held_start_us, self._learnt_metadata())
        return [begin, *held]

    def _derive(self, frames: np.ndarray) -> None:
        ticks = frames["tick"]
        rate = float(self._rate)
        # a held session waiting for a plug-in's metadata: note the tick it came at
        watch = self._held is not None and self._held_meta and self._meta_tick is None
        for i in range(len(frames)):
            row = frames[i]
            t = float(ticks[i]) / rate
            for d in self.derived:
                try:
                    d.compute(row, t)
                except Exception:  # a plug-in's bug must not stop the recording
                    self.derived_errors += 1
            if watch and not self._metadata_awaited():
                self._meta_tick = int(ticks[i])
                watch = False

    def _plugin_marks(self) -> None:
        """Markers a plug-in asks for (``take_marks()``: the GNSS lap plug-in's laid line), at
        the tick of the frame it asked at; the stamper writes them into this block on."""
        for _, asked in self._ask_plugins("take_marks", list):
            for time_s, note in asked:
                tick = max(0, round(float(time_s) * self._rate))
                self.markers.request(tick, self._live_start_us + round(float(time_s) * 1e6), str(note))

    def _end_derived(self) -> None:
        """The session ends: plug-ins with an ``end_session()`` settle what waits (the GNSS lap
        channels refine the laps still waiting), before the footer and the last look for laps."""
        self._ask_plugins("end_session")
        if self.collect_laps:
            self._look_for_laps()

    def _look_for_laps(self) -> None:
        """New entries in a plug-in's ``final_laps`` (the GNSS lap channels: each lap once, when its
        time is final), else its ``laps`` (LapChannels): one look per frame block, not per frame."""
        for i, d in enumerate(self.derived):
            laps = getattr(d, "final_laps", None)
            if laps is None:
                laps = getattr(d, "laps", None)
            if not isinstance(laps, list) or len(laps) <= self._laps_seen[i]:
                continue
            self._new_laps.extend((lap, d) for lap in laps[self._laps_seen[i] :])
            self._laps_seen[i] = len(laps)

    @property
    def laps_waiting(self) -> bool:
        return bool(self._new_laps)

    def take_laps(self) -> list[tuple[Any, Any]]:
        """The laps completed since the last call, oldest first: ``(Lap, the plug-in)``."""
        out, self._new_laps = self._new_laps, []
        return out

    # -- sink (I/O: the writer thread live, inline in replay) --------------------------------------

    def apply(self, ops: Iterable[Op]) -> None:
        sink = self.sink
        for op in _coalesce(ops):
            if isinstance(op, FramesOp):
                sink.frames_block(op.frames, op.summary)
            elif isinstance(op, BeginOp):
                sink.begin(op.header, op.start_us, op.metadata)
            else:
                sink.end(op.footer)

    def sync_if_due(self, *, force: bool = False) -> bool:
        return self.sink.sync_if_due(force=force)

    def close(self) -> None:
        self.sink.close()

    @property
    def paths(self) -> list[Path]:
        return list(self.sink.paths)


def _coalesce(ops: Iterable[Op]) -> list[Op]:
    """Join consecutive frame operations into one array (one write instead of many)."""
    out: list[Op] = []
    run: list[np.ndarray] = []
    for op in ops:
        if isinstance(op, FramesOp) and op.summary is None:
            run.append(op.frames)
            continue
        if run:
            out.append(FramesOp(run[0] if len(run) == 1 else join_records(run)))
            run = []
        out.append(op)
    if run:
        out.append(FramesOp(run[0] if len(run) == 1 else join_records(run)))
    return out


class Replayer:
    """Records samples pushed one at a time (in receive order) as the daemon would: what
    :func:`replay` does, for callers that route samples to several recordings (an import of a
    capture holding several games). Driven by the samples' ``rx_ns`` only.

    ``start_timestamp_us`` is the wall-clock time of the first sample's ``rx_ns``.
    ``wall_offset_ns``: wall ns = ``rx_ns`` + this, to the nanosecond (``start_timestamp_us``
    is then only the files' check seed): the live daemon's mapping, and a capture's (its times
    are wall times), so the same times give the same session start, microsecond for microsecond.

    :raises ConfigError: a bad policy or definition, or a start too close to 0 for the tick grid.
    """

    def __init__(
        self,
        sources: Sequence[SourceSpec],
        policy: RecorderPolicy,
        *,
        start_timestamp_us: int,
        metadata: Mapping[str, str] | None = None,
        derived: Sequence[Any] = (),
        batch_frames: int = 8192,
        trigger: TriggerPolicy | None = None,
        wall_offset_ns: int | None = None,
    ) -> None:
        half_tick_us = -(-500_000 // policy.rate_hz)
        if start_timestamp_us < half_tick_us:
            raise ConfigError(
                f"start_timestamp_us must be at least {half_tick_us} at {policy.rate_hz} Hz "
                "(tick 0 starts half a tick before the first sample)"
            )
        # Deterministic check salts: the same samples give the same bytes (see replay()).
        seed = json.dumps([start_timestamp_us, sorted((metadata or {}).items())]).encode()
        self.recorder = Recorder(
            sources,
            policy,
            derived,
            metadata=metadata,
            flush_each_batch=False,
            trigger=trigger,
            salt_seed=seed,
        )
        if wall_offset_ns is not None:
            self.recorder.set_wall_offset(wall_offset_ns)
        self._start_us = start_timestamp_us
        self._batch_frames = batch_frames
        self._pending: list[Op] = []
        self._queued = 0
        self._count = 0

    def start_at(self, rx_ns: int) -> None:
        """Fix the origin (``start_timestamp_us`` is the wall time of ``rx_ns``); once."""
        if self.recorder._origin is None:
            self.recorder.set_origin(rx_ns, self._start_us)

    def push(self, sample: Sample) -> None:
        rec = self.recorder
        rx_ns = sample.rx_ns
        if rec._origin is None:
            rec.set_origin(rx_ns, self._start_us)
        flush = self._count & 1023 == 1023
        sched = rec.scheduler
        if sched.read_stamped:  # as the live driver's feed() does
            rx_ns = sched.arrival_ns(sample)
        quiet = sched.quiet_until_ns
        if flush or quiet is None or rx_ns >= quiet:
            ops = rec.advance(rx_ns, flush=flush)
            if ops:
                self._take(ops)
        self._count += 1
        rec.scheduler.push(sample)

    def mark(self, rx_ns: int, note: str) -> None:
        """A marker asked for at ``rx_ns`` (as ``POST /api/mark`` would be), after :meth:`start_at`."""
        rec = self.recorder
        self._take(rec.advance(rx_ns, flush=True))
        try:
            rec.mark(rx_ns, rec.wall_us(rx_ns), note)
        except TooManyMarkersError:
            pass  # refused and counted (markers.refused), as the live daemon refuses it

    def _take(self, ops: list[Op]) -> None:
        if ops:
            self._pending.extend(ops)
            self._queued += sum(len(o.frames) for o in ops if isinstance(o, FramesOp))
            if self._queued >= self._batch_frames:
                self.recorder.apply(self._pending)
                self._pending, self._queued = [], 0

    def finish(self) -> list[Path]:
        """End the session, write everything, close the file; returns the files written."""
        try:
            self._pending.extend(self.recorder.finish("end"))
            self.recorder.apply(self._pending)
            self._pending = []
        finally:
            self.recorder.close()
        return self.recorder.paths

    def close(self) -> None:
        """Close without finishing (an error elsewhere): what was written stays a valid prefix."""
        self.recorder.close()


def replay(
    samples: Iterable[Sample],
    sources: Sequence[SourceSpec],
    policy: RecorderPolicy,
    *,
    start_timestamp_us: int,
    metadata: Mapping[str, str] | None = None,
    derived: Sequence[Any] = (),
    batch_frames: int = 8192,
    marks: Sequence[tuple[int, str]] = (),
    trigger: TriggerPolicy | None = None,
    wall_offset_ns: int | None = None,
) -> list[Path]:
    """Record ``samples`` (in receive order) as the daemon would; returns the files written.

    Driven by the samples' ``rx_ns`` only: the same samples and ``start_timestamp_us`` give the
    same bytes (the files' check salts are derived from the definition, the metadata and
    ``start_timestamp_us``). ``start_timestamp_us`` is the wall-clock time of the first
    sample's ``rx_ns``. Unlike the live daemon, a session that ends on idle does not close its
    file (nobody switches a replay off at the wall; an import writes one file). ``marks`` are
    markers ``(rx_ns, note)`` asked for at those times (as ``POST /api/mark`` would be);
    ``trigger`` records as a ``record = "triggered"`` group does; ``wall_offset_ns`` maps
    receive times to wall times as the live daemon does (see :class:`Replayer`).

    :raises ConfigError: a bad policy or definition, or a start too close to 0 for the tick grid.
    """
    replayer = Replayer(
        sources,
        policy,
        start_timestamp_us=start_timestamp_us,
        metadata=metadata,
        derived=derived,
        batch_frames=batch_frames,
        trigger=trigger,
        wall_offset_ns=wall_offset_ns,
    )
    todo = sorted(marks)
    try:
        for sample in samples:
            replayer.start_at(sample.rx_ns)
            while todo and todo[0][0] <= sample.rx_ns:
                replayer.mark(*todo.pop(0))
            replayer.push(sample)
    except BaseException:
        replayer.close()
        raise
    return replayer.finish()
