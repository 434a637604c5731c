"""The tick scheduler: samples in, fixed-rate frames out (pure: no I/O, no sleep, no clock read).

The rules (virtual time, the jitter window, late samples, merging, staleness, sessions) are in
``docs/timing.md``; their default values in :mod:`wrtfd.defaults`.

The caller drives it with an explicit clock: :meth:`TickScheduler.push` a sample, and
:meth:`TickScheduler.advance` to a time ``now`` (the monotonic clock live; each sample's
``rx_ns`` in replay, so the same input always gives the same frames). :meth:`advance` returns
events in order: :class:`SessionStarted`, :class:`FrameBlock` (numpy arrays of the frame dtype,
session-relative ticks) and :class:`SessionEnded`.
"""

from __future__ import annotations

import math
import operator
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from typing import Any

import numpy as np

from wrtfd.decoders.base import Sample
from wrtfd.defaults import ARRIVAL_BUNCH_S, TICK_JITTER_S
from wrtfd.errors import ConfigError
from wrtfd.scheduler.rows import SourceRow
from wrtfd.scheduler.timing import ArrivalClock, SourceClockMap

__all__ = [
    "FrameBlock",
    "MergePolicy",
    "SchedulerConfig",
    "SchedulerEvent",
    "SessionEnded",
    "SessionStarted",
    "SourceCounters",
    "SourcePlan",
    "TickScheduler",
]

STALE_FIELD = "stale"

#: A pushed sample waiting for its tick: (its clock's estimate, epoch, key, v at push, sample);
#: ``estimate(epoch, key)`` is its virtual time now (None: v as pushed).
_Pending = tuple[Callable[[int, int], int | None], int, int, int, Sample]


class MergePolicy(StrEnum):
    """What happens when one source delivers several samples in one tick."""

    LAST = "last"
    FIRST = "first"


@dataclass(frozen=True, slots=True)
class SourcePlan:
    """How the scheduler treats one source (its values live in the frame field ``name``)."""

    name: str
    drives_frames: bool = True
    stale_after_s: float | None = None
    use_source_clock: bool = True
    #: Its ``rx_ns`` is when the daemon read the bytes (a serial port), not when
    #: they arrived: after a stall of the daemon it is late, and the source's own clock is the
    #: better time (see :meth:`TickScheduler.arrival_ns`).
    stamped_on_read: bool = False


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """Tick rate and policies; ``None`` disables a limit."""

    rate_hz: float
    jitter_s: float = TICK_JITTER_S
    bunch_s: float = ARRIVAL_BUNCH_S
    settle_s: float = 0.5
    session_idle_s: float | None = 5.0
    max_session_s: float | None = None
    merge: MergePolicy = MergePolicy.LAST
    batch_frames: int = 4096


@dataclass(frozen=True, slots=True)
class SessionStarted:
    session: int
    start_ns: int  # virtual time of tick 0
    reason: str  # first | idle | new_session | max_duration | request
    info: Mapping[str, Mapping[str, str]]  # latest session_info per source


@dataclass(frozen=True, slots=True)
class FrameBlock:
    session: int
    frames: np.ndarray  # frame dtype, ticks relative to the session start
    dropped_ticks: int  # gaps between frames inside this block and before its first frame


@dataclass(frozen=True, slots=True)
class SessionEnded:
    session: int
    reason: str  # idle | new_session | max_duration | request | end
    frames: int
    dropped_ticks: int
    last_tick: int
    sources: Mapping[str, Mapping[str, int]]  # per-source counters for this session


SchedulerEvent = SessionStarted | FrameBlock | SessionEnded


@dataclass(slots=True)
class SourceCounters:
    """Per-source accounting (cumulative; sessions report differences)."""

    samples: int = 0  # pushed
    applied: int = 0  # stored into the held row
    superseded: int = 0  # replaced by another sample of the same tick (merge policy)
    late: int = 0  # arrived after their tick was closed: dropped
    unknown_channels: int = 0  # channel names not in the definition (ignored)
    bad_values: int = 0  # values that do not fit their channel's type (ignored)
    ticks_emitted: int = 0  # frames this (driving) source triggered
    ticks_dropped: int = 0  # ticks inside a session without a sample of this driving source
    reanchors: int = 0  # timing re-anchors (clock reset/jump, pause too long, burst)
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> samples dropped

    def as_dict(self) -> dict[str, int]:
        return {
            "samples": self.samples,
            "applied": self.applied,
            "superseded": self.superseded,
            "late": self.late,
            "unknown_channels": self.unknown_channels,
            "bad_values": self.bad_values,
            "ticks_emitted": self.ticks_emitted,
            "ticks_dropped": self.ticks_dropped,
            "reanchors": self.reanchors,
            "dropped": sum(self.dropped.values()),
        }


class _Src:
    """Runtime state of one source."""

    __slots__ = (
        "arrival",
        "arrival_estimate",
        "clock",
        "clock_estimate",
        "clocked",
        "counters",
        "drives",
        "index",
        "info",
        "info_since",
        "last_k",
        "last_update_ns",
        "name",
        "pending",
        "row",
        "session_base",
        "stale",
        "stale_after_ns",
        "stale_view",
        "use_clock",
    )

    def __init__(
        self,
        plan: SourcePlan,
        index: int,
        row: SourceRow,
        stale_view: np.ndarray | None,
        arrival: ArrivalClock,
        clock: SourceClockMap,
    ) -> None:
        self.name = plan.name
        self.index = index
        self.drives = plan.drives_frames
        self.use_clock = plan.use_source_clock
        self.stale_after_ns = None if plan.stale_after_s is None else round(plan.stale_after_s * 1e9)
        self.row = row
        self.stale_view = stale_view
        self.arrival = arrival
        self.clock = clock
        # The estimates are bound once: a pending entry holds its clock's (one lookup less a sample).
        self.clock_estimate = clock.estimate
        self.arrival_estimate = arrival.estimate
        self.pending: deque[_Pending] = deque()
        self.counters = SourceCounters()
        self.session_base: dict[str, int] = {}
        self.info: dict[str, str] = {}
        self.info_since: dict[str, int] = {}  # key -> rx_ns of the sample that set its value
        self.last_k: int | None = None  # grid tick of the last sample applied (current grid)
        self.last_update_ns: int | None = None
        self.stale = True
        self.clocked = False  # the last sample was placed by the source's own clock


_RX_NS = operator.attrgetter("rx_ns")


class TickScheduler:
    """Pure fixed-rate frame scheduler; see the module docstring for the timing model.

    ``frame_dtype`` is the file's frame dtype: ``tick`` then one struct field per source named
    after it (its channels), optionally a ``stale`` struct with one bool per source, and any
    other fields (derived channels), which the scheduler leaves at zero.
    """

    def __init__(
        self, plans: Sequence[SourcePlan], frame_dtype: np.dtype[Any], config: SchedulerConfig
    ) -> None:
        if config.rate_hz <= 0 or not math.isfinite(config.rate_hz):
            raise ConfigError(f"rate_hz must be positive, got {config.rate_hz}")
        self.config = config
        rate = Fraction(config.rate_hz).limit_denominator(1_000_000)
        self._rn = rate.numerator
        self._rd = rate.denominator * 1_000_000_000  # tick = (t * rn) // rd
        self._period_ns = self._rd / self._rn
        self._jitter_ns = round(config.jitter_s * 1e9)
        self._back_ticks = max(1, math.floor(config.bunch_s * rate))
        if config.bunch_s > config.jitter_s:
            raise ConfigError(f"bunch_s ({config.bunch_s}) must not exceed jitter_s ({config.jitter_s})")
        self._settle_ns = max(0, round(config.settle_s * 1e9) - self._jitter_ns)
        self._idle_ticks = None if config.session_idle_s is None else math.ceil(config.session_idle_s * rate)
        self._max_ticks = None if config.max_session_s is None else math.ceil(config.max_session_s * rate)
        self._first = MergePolicy(config.merge) == MergePolicy.FIRST
        self.frame_dtype = np.dtype(frame_dtype)
        self._held = np.zeros(1, dtype=self.frame_dtype)
        names = self.frame_dtype.names or ()
        stale_struct = self._held[STALE_FIELD] if STALE_FIELD in names else None
        self._sources: list[_Src] = []
        self._by_name: dict[str, _Src] = {}
        for i, plan in enumerate(plans):
            if plan.name not in names or not self.frame_dtype.fields[plan.name][0].names:  # type: ignore[index]
                raise ConfigError(f"frame dtype has no struct field for source {plan.name!r}")
            if plan.name in self._by_name:
                raise ConfigError(f"source {plan.name!r} given twice")
            row = SourceRow(self._held, plan.name)
            stale_view = None
            if stale_struct is not None and plan.name in (stale_struct.dtype.names or ()):
                stale_view = stale_struct[plan.name]
            src = _Src(
                plan,
                i,
                row,
                stale_view,
                ArrivalClock(period_ns=self._period_ns, back_ticks=self._back_ticks),
                SourceClockMap(jitter_ns=self._jitter_ns),
            )
            row.mark_stale()
            if stale_view is not None:
                stale_view[0] = True
            self._sources.append(src)
            self._by_name[plan.name] = src
        self._drivers = [s for s in self._sources if s.drives]
        #: the sources whose samples :meth:`arrival_ns` may move earlier (empty: none, the usual)
        self.read_stamped = frozenset(p.name for p in plans if p.stamped_on_read and p.use_source_clock)
        self._quiet = any(s.row.casts_in_numpy for s in self._sources)
        if not self._drivers:
            raise ConfigError("at least one source must drive frame emission")
        cap = max(16, config.batch_frames)
        self._out = np.zeros(cap, dtype=self.frame_dtype)
        self._out_bytes = self._out.view(np.uint8).reshape(cap, self.frame_dtype.itemsize)
        self._out_ticks = self._out["tick"]
        self._held_bytes = self._held.view(np.uint8)
        self._out_n = 0
        self._out_dropped = 0
        self._events: list[SchedulerEvent] = []
        self.unknown_source = 0
        self._seq = 0
        self._now: int | None = None
        self._wake_ns: int | None = None  # advance() to before this: no tick closes (None: unknown)
        self._closed_end: int | None = None  # every sample with v below this has been consumed
        # session state
        self._t0: int | None = None  # grid origin (None: no session)
        self._next_k = 0
        self._base: int | None = None  # grid tick of the session's tick 0
        self._last_frame_k = -1
        self._session = -1
        self._session_frames = 0
        self._session_dropped = 0
        self._start_reason = "first"
        self._split_request: str | None = None
        self._signal = False

    # -- public API ----------------------------------------------------------------------------

    @property
    def period_ns(self) -> float:
        return self._period_ns

    @property
    def in_session(self) -> bool:
        return self._base is not None

    @property
    def session_frames(self) -> int:
        return self._session_frames

    @property
    def session_dropped_ticks(self) -> int:
        return self._session_dropped

    @property
    def now_ns(self) -> int | None:
        return self._now

    @property
    def quiet_until_ns(self) -> int | None:
        """:meth:`advance` to a time before this closes no tick and returns no new event (None:
        unknown), so a caller that flushes later may skip those calls (replay, every sample)."""
        return self._wake_ns

    def counters(self) -> dict[str, SourceCounters]:
        return {s.name: s.counters for s in self._sources}

    def session_info(self) -> dict[str, dict[str, str]]:
        """The latest session info of each source that has sent any (what a session started
        now would get in its :class:`SessionStarted`)."""
        return {s.name: dict(s.info) for s in self._sources if s.info}

    def info_since(self, source: str, key: str) -> int | None:
        """When (receive time, ns) ``source``'s session info ``key`` got its value; None: never."""
        src = self._by_name.get(source)
        return None if src is None else src.info_since.get(key)

    def clock_modes(self) -> dict[str, bool]:
        """Per source: True when its latest sample was placed by its own clock."""
        return {s.name: s.clocked for s in self._sources}

    def pending_samples(self) -> int:
        return sum(len(s.pending) for s in self._sources)

    def push(self, sample: Sample) -> None:
        """Take one sample (non-blocking, O(1)); it is placed when its tick closes."""
        src = self._by_name.get(sample.source)
        if src is None:
            self.unknown_source += 1
            return
        c = src.counters
        c.samples += 1
        if sample.session_info:
            info, since = src.info, src.info_since
            for name, text in sample.session_info.items():
                if info.get(name) != text:
                    info[name] = text
                    since[name] = sample.rx_ns
        rx = sample.rx_ns
        st = sample.source_time_ns
        if st is not None and src.use_clock:
            src.clocked = True
            clock = src.clock
            before = clock.reanchors
            epoch, v = clock.observe(rx, st, self._closed_end)
            entry: _Pending = (src.clock_estimate, epoch, st, v, sample)
            if clock.reanchors != before:
                c.reanchors += clock.reanchors - before
        else:
            src.clocked = False
            arrival = src.arrival
            before = arrival.reanchors
            epoch, key, v = arrival.observe(rx)
            entry = (src.arrival_estimate, epoch, key, v, sample)
            if arrival.reanchors != before:
                c.reanchors += arrival.reanchors - before
        closed = self._closed_end
        if closed is not None and (v < closed or rx < closed):
            c.late += 1
            c.dropped["late"] = c.dropped.get("late", 0) + 1
            return
        src.pending.append(entry)

    def arrival_ns(self, sample: Sample) -> int:
        """The time to :meth:`advance` to before pushing ``sample``: its ``rx_ns``, except for a
        source stamped on read (:attr:`SourcePlan.stamped_on_read`) whose own clock places the
        sample more than a jitter window before it. Then at most that place plus the window:
        bytes the daemon read late (it stalled, the port kept them) go where the source's clock
        puts them, instead of closing their ticks first and piling up in one tick."""
        rx = sample.rx_ns
        st = sample.source_time_ns
        if st is None or sample.source not in self.read_stamped:
            return rx
        off = self._by_name[sample.source].clock.offset_ns
        if off is None:
            return rx
        latest = st + off + self._jitter_ns
        return latest if latest < rx else rx

    def feed(self, intake: deque[Sample], place: Callable[[Sample], Sample] | None = None) -> None:
        """Take every sample of ``intake`` (emptying it), ``place(sample)`` first if given (a
        :class:`SourceTimeline`'s), in arrival order (:meth:`arrival_ns`, a stable sort):
        :meth:`advance` to its arrival with ``flush=False``, then :meth:`push` it. The live
        driver's loop, one call a batch; the advance is left out where it would only move the
        clock (before the wake time).

        Why sorted: a batch holds each source's reads one after the other (two UDP sources read
        at the same step: 0.2 s of one, then 0.2 s of the other). Taken as they came, the first
        source's later samples closed the ticks of the second's earlier ones, which were dropped
        as late; in arrival order each is placed as if fed when it arrived, as a replay does."""
        batch = list(intake) if place is None else [place(s) for s in intake]
        intake.clear()
        arrival = self.arrival_ns if self.read_stamped else _RX_NS
        batch.sort(key=arrival)
        push = self.push
        for sample in batch:
            rx = arrival(sample)
            now = self._now
            if now is None or rx > now:
                now = rx
            wake = self._wake_ns
            if wake is None or now >= wake:
                self.advance(rx, flush=False)
            else:
                self._now = now
            push(sample)

    def advance(self, now_ns: int, *, flush: bool = True) -> list[SchedulerEvent]:
        """Move the clock to ``now_ns`` and close every tick a jitter window older than it.

        With ``flush=False`` the events are kept (and frames gathered into bigger blocks) until
        a later call with ``flush=True`` returns them all, in order.
        """
        now = self._now
        if now is None or now_ns > now:
            self._now = now = now_ns
        wake = self._wake_ns
        if wake is None or now >= wake:
            self._close(now - self._jitter_ns)
            # Until ``now`` reaches the end of tick ``_next_k`` plus the window, :meth:`_close`
            # has nothing to do (on a grid it looks at nothing else): most samples skip it.
            t0 = self._t0
            self._wake_ns = (
                None if t0 is None else t0 - ((-(self._next_k + 1) * self._rd) // self._rn) + self._jitter_ns
            )
        if not flush:
            return []
        return self._take_events() if self._out_n or self._events else []

    def request_new_session(self, reason: str = "request") -> None:
        """End the current session at the next frame; the next one starts at that frame."""
        if self._base is not None:
            self._split_request = reason

    def finish(self, reason: str = "end") -> list[SchedulerEvent]:
        """Place every pending sample, end the session (end of a replay, or shutdown)."""
        horizon: int | None = None
        for s in self._sources:
            for entry in s.pending:
                v = self._v(entry)
                horizon = v if horizon is None or v > horizon else horizon
        if horizon is not None:
            self._close(horizon + 2 * round(self._period_ns) + 1, settle=False)
        if self._base is not None:
            self._end_session(reason)
        self._t0 = None
        self._wake_ns = None
        return self._take_events()

    # -- internals -----------------------------------------------------------------------------

    def _take_events(self) -> list[SchedulerEvent]:
        self._flush_block()
        events = self._events
        self._events = []
        return events

    @staticmethod
    def _v(entry: _Pending) -> int:
        estimate, epoch, key, v, _ = entry
        e = estimate(epoch, key)
        return v if e is None else e

    def _tick_of(self, v: int) -> int:
        return ((v - (self._t0 or 0)) * self._rn) // self._rd

    def _start_of(self, k: int) -> int:
        return (self._t0 or 0) + -((-k * self._rd) // self._rn)

    def _close(self, horizon: int, *, settle: bool = True) -> None:
        while True:
            if self._t0 is None and not self._anchor(horizon, self._settle_ns if settle else 0):
                return
            t0, rn, rd = self._t0 or 0, self._rn, self._rd
            last = ((horizon - t0) * rn) // rd - 1  # last tick whose end <= horizon (_tick_of, inline)
            if self._next_k > last:
                return
            kmin: int | None = None
            for s in self._sources:
                if s.pending:
                    estimate, epoch, key, v, _ = s.pending[0]  # _tick_of(_v(entry)), inline
                    e = estimate(epoch, key)
                    k = (((v if e is None else e) - t0) * rn) // rd
                    if kmin is None or k < kmin:
                        kmin = k
            if kmin is not None and kmin < self._next_k:
                kmin = self._next_k
            idle = self._idle_ticks
            if kmin is None or kmin > last:
                if idle is not None and self._base is not None and last - self._last_frame_k > idle:
                    self._end_session("idle")
                    continue
                self._next_k = last + 1
                self._closed_end = self._start_of(self._next_k)
                return
            if idle is not None and self._base is not None and kmin - self._last_frame_k > idle:
                self._end_session("idle")
                continue
            if self._quiet:
                with np.errstate(over="ignore", invalid="ignore"):  # 1e300 into float32 is inf, quietly
                    self._close_tick(kmin)
            else:  # no row stores through numpy casts on its common path (0.8 us a tick saved)
                self._close_tick(kmin)
            self._next_k = kmin + 1
            self._closed_end = self._start_of(self._next_k)

    def _anchor(self, horizon: int, settle_ns: int) -> bool:
        """No session grid: start one at the earliest driving sample older than ``horizon``."""
        vd: int | None = None
        for s in self._drivers:
            if s.pending:
                v = self._v(s.pending[0])
                if vd is None or v < vd:
                    vd = v
        settled = horizon - settle_ns
        if vd is None:
            limit = horizon
        elif vd > settled:
            limit = min(horizon, vd)
        else:
            limit = vd - round(self._period_ns / 2)
        # Samples older than the session start only update the held values.
        for s in self._sources:
            dq = s.pending
            while dq:
                v = self._v(dq[0])
                if v >= limit:
                    break
                with np.errstate(over="ignore", invalid="ignore"):
                    self._apply(s, dq.popleft()[4], v, None)
        if self._closed_end is None or limit > self._closed_end:
            self._closed_end = limit
        if vd is None or vd > settled:
            return False
        self._t0 = vd - self._rd // (2 * self._rn)
        self._next_k = 0
        self._last_frame_k = -1
        for s in self._sources:
            s.last_k = None
        return True

    def _apply(self, s: _Src, sample: Sample, v: int, k: int | None) -> None:
        c = s.counters
        unknown, bad = s.row.apply(sample.values)
        if unknown or bad:
            c.unknown_channels += unknown
            c.bad_values += bad
        c.applied += 1
        stale = sample.stale
        if stale:
            s.row.mark_stale(stale)
            all_stale = s.row.all_names <= stale
            if s.stale != all_stale:
                s.stale = all_stale
                if s.stale_view is not None:
                    s.stale_view[0] = all_stale
        elif s.stale:  # a sample without stale channels: the source is fresh again
            s.stale = False
            if s.stale_view is not None:
                s.stale_view[0] = False
        s.last_update_ns = v
        s.last_k = k

    def _close_tick(self, k: int) -> None:
        end = self._start_of(k + 1)
        drove = False
        first = self._first
        for s in self._sources:
            dq = s.pending
            if not dq:
                continue
            prev_k = s.last_k
            got = False
            c = s.counters
            row_apply = s.row.apply
            while dq:
                estimate, epoch, key, v, sample = dq[0]
                e = estimate(epoch, key)
                if e is not None:
                    v = e
                if v >= end:
                    break
                dq.popleft()
                got = True
                if s.last_k == k:
                    c.superseded += 1
                    if first:
                        continue
                if sample.stale or s.stale:
                    self._apply(s, sample, v, k)
                else:  # what _apply does for a sample of a fresh source (one call less a sample)
                    unknown, bad = row_apply(sample.values)
                    if unknown or bad:
                        c.unknown_channels += unknown
                        c.bad_values += bad
                    c.applied += 1
                    s.last_update_ns = v
                    s.last_k = k
                if sample.new_session:
                    self._signal = True  # kept until the next frame (a non-driving source may signal)
            if got and s.drives:
                drove = True
                c.ticks_emitted += 1
                if prev_k is not None and self._base is not None and k - prev_k > 1:
                    c.ticks_dropped += k - prev_k - 1
        if drove:
            signal, self._signal = self._signal, False
            self._emit(k, signal)

    def _emit(self, k: int, signal: bool) -> None:
        if self._base is None:
            self._begin_session(k)
        else:
            reason = None
            if signal:
                reason = "new_session"
            elif self._split_request is not None:
                reason = self._split_request
            elif self._max_ticks is not None and k - self._base >= self._max_ticks:
                reason = "max_duration"
            if reason is not None:
                self._split_request = None
                self._end_session(reason, keep_grid=True)
                self._start_reason = reason
                self._begin_session(k)
            elif k - self._last_frame_k > 1:
                gap = k - self._last_frame_k - 1
                self._session_dropped += gap
                self._out_dropped += gap
        start_k = self._start_of(k)
        for s in self._sources:
            after = s.stale_after_ns
            if (
                after is not None
                and not s.stale
                and s.last_update_ns is not None
                and start_k - s.last_update_ns > after
            ):
                s.stale = True
                s.row.mark_stale()
                if s.stale_view is not None:
                    s.stale_view[0] = True
        n = self._out_n
        if n == len(self._out):
            self._flush_block()
            n = 0
        self._out_bytes[n] = self._held_bytes
        self._out_ticks[n] = k - (self._base or 0)
        self._out_n = n + 1
        self._last_frame_k = k
        self._session_frames += 1

    def _begin_session(self, k: int) -> None:
        self._flush_block()
        self._session += 1
        self._base = k
        self._last_frame_k = k - 1
        self._session_frames = 0
        self._session_dropped = 0
        self._out_dropped = 0
        info = self.session_info()
        self._events.append(SessionStarted(self._session, self._start_of(k), self._start_reason, info))
        self._start_reason = "first"

    def _end_session(self, reason: str, *, keep_grid: bool = False) -> None:
        self._flush_block()
        base = self._base or 0
        per_source: dict[str, dict[str, int]] = {}
        for s in self._sources:
            now = s.counters.as_dict()
            per_source[s.name] = {key: now[key] - s.session_base.get(key, 0) for key in now}
            s.session_base = now  # the next session counts from here (samples between sessions too)
        self._events.append(
            SessionEnded(
                self._session,
                reason,
                self._session_frames,
                self._session_dropped,
                self._last_frame_k - base,
                per_source,
            )
        )
        self._base = None
        self._split_request = None
        if not keep_grid:
            self._t0 = None
            self._start_reason = reason if reason in ("idle",) else "first"

    def _flush_block(self) -> None:
        n = self._out_n
        if n:
            # A byte copy: numpy copies padded nested structs field by field (100x slower), and
            # even allocating an array of a wide nested dtype costs more than this copy.
            # np.frombuffer, not .view(): view() vets a nested dtype in Python (~10 us per block).
            block = np.frombuffer(self._out_bytes[:n].copy(), dtype=self.frame_dtype)
            self._events.append(FrameBlock(self._session, block, self._out_dropped))
            self._out_n = 0
            self._out_dropped = 0
