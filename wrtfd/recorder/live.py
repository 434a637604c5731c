"""The live driver the daemon runs: bounded intake, engine task, writer thread.

::

    sources --sink(sample)--> intake (bounded deque; SinkFull when full)
        engine task (event loop; steps when samples arrive, at most one step per ``tick_s``,
            else every ``close_s`` while anything is pending, asleep when nothing is):
            drain intake -> scheduler -> derived -> ops; every ``batch_s`` (or when an fsync is
            due, and no batch is still being written) it queues them for the writer thread
        writer thread (one, for the life of run()): ops -> FileSink (write, flush, fsync)

Receiving never waits on disk: the sink only appends to a deque, the engine only does CPU work,
and every write, flush, fsync and close runs in the writer thread. If the disk stalls, frames
queue up to ``max_backlog_s`` of frames and are then dropped (counted); session begin/end
operations are never dropped.

CPU: a wake-up of the process costs more than the work it does (a cold interpreter, a thread
hand-off), so there are as few as possible. UDP sources read a steady feed in batches (every
``read_interval_s``, see :mod:`wrtfd.sources.udp`); the engine steps right after a batch arrives,
in the same wake-up of the loop (the sink wakes it), not on a timer of its own; samples that
trickle in (a serial source) are gathered for up to ``tick_s`` (steps sit on a ``tick_s`` grid
of the loop's clock). With no sample arriving it still steps every ``close_s`` while ticks wait
to be closed, a session is open or data waits to be written or fsynced, and sleeps until the
next sample once none of that is left (waking every ``idle_check_s`` for the statistics). The
writer thread gets one batch per ``batch_s`` through a queue and only marks it done: no wake-up
of the loop per write. A sample's time is its receive time, so when the engine steps never
changes a frame. With ``source_clock=True`` (``recorder.clock = "source"``) samples and the
engine's "now" are on the driving source's own clock instead (:mod:`wrtfd.scheduler.follow`):
a feed faster or slower than real time is recorded at its own pace.

Durability
----------
The bound (what a crash or a power cut can lose) is derived and its defaults kept in
:mod:`wrtfd.recorder.durability`, and stated in ``docs/durability.md``. Here: files are created
durable, a session that ends on idle closes its file (fsynced), and the engine wakes when an
fsync falls due (``SYNC_EARLY_S`` before ``fsync_interval_s`` runs out, for the hop to the
writer thread), so two fsyncs are never more than ``fsync_interval_s`` apart (found due only at
the next step, every 0.2 s with a UDP feed, they came up to 0.2 s late).

Every shutdown path ends the session and closes the file: :meth:`LiveRecorder.stop`, cancellation
of :meth:`LiveRecorder.run` (SIGTERM in the daemon cancels its task group: the final writes run in
a shielded scope bounded by ``stop_timeout_s``), and an exception inside the recorder.
"""

from __future__ import annotations

import asyncio
import math
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
import numpy as np

from wrtfd.decoders.base import Sample, SinkFull
from wrtfd.format.records import take_records
from wrtfd.recorder import durability
from wrtfd.recorder.observe import LiveFrames, MarkerAdded, ObserverHub, SessionEnded, SessionStarted
from wrtfd.recorder.recorder import (
    BeginOp,
    EndOp,
    FramesOp,
    Op,
    Recorder,
    RecorderPolicy,
    SourceSpec,
    TriggerPolicy,
)
from wrtfd.scheduler.follow import SourceTimeline

__all__ = ["LiveRecorder"]


class LiveRecorder:
    """Runs a :class:`Recorder` live on the monotonic clock (see module docstring)."""

    def __init__(
        self,
        sources: Sequence[SourceSpec],
        policy: RecorderPolicy,
        derived: Sequence[Any] = (),
        *,
        metadata: Mapping[str, str] | None = None,
        intake_capacity: int = 4096,
        tick_s: float = durability.TICK_S,
        close_s: float = durability.CLOSE_S,
        idle_check_s: float = 1.0,
        max_backlog_s: float = 30.0,
        stall_after_s: float = 5.0,
        stop_timeout_s: float = 2.0,
        clock_ns: Callable[[], int] = time.monotonic_ns,
        on_batch: Callable[[Recorder, bool], None] | None = None,
        hub: ObserverHub | None = None,
        group: str = "",
        source_clock: bool = False,
        trigger: TriggerPolicy | None = None,
        wall_offset_ns: int | None = None,
    ) -> None:
        self._tick_s = max(1e-4, tick_s)
        #: wall ns = ``clock_ns()`` + this (the daemon's one offset, shared with its raw tap);
        #: None: read both clocks when the recording starts.
        self._wall_offset_ns = wall_offset_ns
        self._close_s = max(self._tick_s, close_s)
        self.recorder = Recorder(
            sources,
            policy,
            derived,
            metadata=metadata,
            clock=lambda: clock_ns() / 1e9,
            trigger=trigger,
            live=True,
            sync_early_s=min(durability.SYNC_EARLY_S, policy.fsync_interval_s / 2),
        )
        # recorder.clock = "source": samples and "now" on the driving source's own clock.
        self._timeline = (
            SourceTimeline(
                frozenset(s.name for s in sources if s.drives_frames), hold_ns=round(policy.jitter_s * 1e9)
            )
            if source_clock
            else None
        )
        self.policy = policy
        self._intake: deque[Sample] = deque()
        self._capacity = max(1, intake_capacity)
        self._last_step = -1e18  # loop time of the last engine step
        self._idle_check_s = max(self._tick_s, idle_check_s)
        self._stall_after_s = stall_after_s
        self._stop_timeout_s = stop_timeout_s
        self._clock_ns = clock_ns
        self._on_batch = on_batch
        self._ops: deque[Op] = deque()
        self._backlog_frames = 0
        self._max_backlog = max(1, round(max_backlog_s * policy.rate_hz))
        self._stopping = anyio.Event()
        self._done = anyio.Event()
        # While the engine sleeps waiting for a sample: what wakes it (the sink calls it once).
        self._wake: Callable[[], None] | None = None
        self._asleep = False
        self._last_write = 0.0
        # The writer thread: batches in, one at a time (``_writing_since`` is set while one is
        # in flight and cleared by the thread); an exception it met is re-raised by the engine.
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._write_error: BaseException | None = None
        self._writes = 0
        self._engine_done = False
        self._writing_since: float | None = None
        # A batch fell due while the thread was busy (an fsync, a slow disk): the thread hands
        # the loop a call to queue it as soon as it is free, not a whole step later.
        self._batch_waiting = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._running = False
        self.samples = 0
        self.intake_dropped = 0
        self.backlog_dropped = 0
        self.progress = 0
        self._rate_t = 0.0
        self._rate_frames = 0
        self._frame_rate = 0.0
        self._fatal: str | None = None
        self.hub = hub
        self.group = group
        if hub is not None:
            self.recorder.collect_laps = True  # LapCompleted for the observers (lap records)
            self.recorder.sink.on_event = hub.publish
            self.recorder.sink.group = group
            if trigger is not None:
                # A triggered group's frames go out before its gate: the page shows its channels
                # while it waits for a trigger (without sessions: none is recorded yet). Other
                # groups publish frames with their sessions, in order (see _publish).
                self.recorder.on_frames = self._publish_frames
        # The session being published to the hub: tick-0 wall time, frames, first/last tick.
        self._pub_start_us = 0
        self._pub_header: Mapping[str, Any] = {}
        self._pub_open = False
        self._pub_frames = 0
        self._pub_first: int | None = None
        self._pub_last: int | None = None

    # -- what sources and the daemon call --------------------------------------------------------

    def sink(self, sample: Sample) -> None:
        """Non-blocking intake; raises :class:`SinkFull` when the bounded intake is full."""
        if len(self._intake) >= self._capacity:
            self.intake_dropped += 1
            raise SinkFull(f"recorder intake full ({self._capacity} samples)")
        self._intake.append(sample)
        self.samples += 1
        if self._asleep:  # the first sample while the engine waits for one: wake it
            self._asleep = False
            if self._wake is not None:
                self._wake()

    def request_new_session(self) -> None:
        """End the current session at the next frame (SIGHUP)."""
        self.recorder.request_new_session()

    def mark(self, note: str = "", *, wall_us: int | None = None) -> int | None:
        """A marker at this moment (on the event loop: the engine's thread). Returns its session
        tick, or None when no session is in progress (nothing is being recorded to mark).

        :raises TooManyMarkersError: too many markers wait for their frame already.
        """
        wall = time.time_ns() // 1000 if wall_us is None else wall_us
        return self.recorder.mark(self._clock_ns(), wall, note)

    async def stop(self) -> None:
        """Finish the session, write the footers, close the file; returns when done."""
        self._stopping.set()
        self._poke()
        if self._running:
            with anyio.move_on_after(self._stop_timeout_s + 1.0):
                await self._done.wait()

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Record until :meth:`stop` or cancellation; always closes the file on the way out."""
        rec = self.recorder
        if self._wall_offset_ns is not None:
            rec.set_wall_offset(self._wall_offset_ns)
        else:
            rec.set_origin(self._clock_ns(), time.time_ns() // 1000)
        self._running = True
        self._rate_t = self._last_write = time.monotonic()
        # A daemon thread: a disk hung in the kernel must not keep the process alive at exit.
        self._thread = threading.Thread(target=self._writer_thread, name="wrtfd-writer", daemon=True)
        self._thread.start()
        try:
            task_status.started()
            try:
                await self._engine_loop()
            except BaseException:
                self._finish_engine("stop")
                raise
        finally:
            closed = False
            try:
                with anyio.CancelScope(shield=True), anyio.move_on_after(self._stop_timeout_s):
                    closed = await self._drain_and_close()
            finally:
                self._jobs.put(None)  # the thread ends after what it was given
                self._running = False
                if closed:  # else the writer is stuck (a hung disk): stop() must not say "done"
                    self._done.set()

    def stats_snapshot(self) -> dict[str, Any]:
        """Counters for status and metrics (read on the event loop; cheap)."""
        rec = self.recorder
        st = rec.sink.state()
        pending = None if self._writing_since is None else time.monotonic() - self._writing_since
        if self._fatal is not None or st.failing:
            state = "failing"
        elif pending is not None and pending > self._stall_after_s:
            state = "stalled"
        elif self._done.is_set():
            state = "stopped"
        else:
            state = "ok"
        counters = rec.scheduler.counters()
        return {
            "state": state,
            "error": self._fatal or st.last_error,
            "errors": st.errors,
            "file": st.path,
            "files": st.files,
            "session": rec.sessions_started - 1 if rec.scheduler.in_session else None,
            "in_session": rec.scheduler.in_session,
            "sessions": rec.sessions_started,
            "session_frames": rec.scheduler.session_frames,
            "frames": rec.frames_out,
            "frames_written": st.frames,
            "frames_lost": st.frames_lost + self.backlog_dropped,
            "dropped_ticks": rec.dropped_ticks,
            "bytes": st.bytes,
            "bytes_written": st.bytes_total,
            "samples": self.samples,
            "intake_dropped": self.intake_dropped,
            "intake_queued": len(self._intake),
            "backlog_frames": self._backlog_frames,
            "fsync_lag_s": st.unsynced_since_s or 0.0,
            "write_pending_s": pending,
            "frame_rate_hz": self._frame_rate,
            "progress": self.progress + self._writes,
            "derived_errors": rec.derived_errors,
            "derived": rec.session_summaries(),
            "rate_hz": self.policy.rate_hz,
            "session_start_us": self._pub_start_us if self._pub_open else None,
            "laps_live": rec.live_summaries(),
            "markers": rec.markers.placed,
            "markers_dropped": rec.markers.dropped,
            "markers_refused": rec.markers.refused,
            "trigger": {"record": "continuous"} if rec.gate is None else rec.gate.stats(),
            "per_source": {name: c.as_dict() for name, c in counters.items()},
        }

    # -- the two tasks ---------------------------------------------------------------------------

    def _step(self) -> None:
        rec = self.recorder
        intake = self._intake
        timeline = self._timeline
        if intake:
            # Straight to the scheduler: what Recorder.advance(flush=False) + push do, without
            # two extra calls per sample. Events stay queued until the flush below.
            rec.scheduler.feed(intake, None if timeline is None else timeline.place)
        now_ns = self._clock_ns()
        self._queue(rec.advance(now_ns if timeline is None else timeline.now(now_ns)))
        self.progress += 1

    def _queue(self, ops: list[Op]) -> None:
        if self.hub is not None and ops:
            self._publish(self.hub, ops)
        if self.hub is not None and self.recorder.laps_waiting:
            self._publish_laps(self.hub)
        for op in ops:
            if isinstance(op, FramesOp):
                n = len(op.frames)
                self._rate_frames += n
                if self._backlog_frames + n > self._max_backlog:
                    self.backlog_dropped += n
                    continue
                self._backlog_frames += n
            self._ops.append(op)
        now = time.monotonic()
        dt = now - self._rate_t
        if dt >= 1.0:
            self._frame_rate = self._rate_frames / dt
            self._rate_frames = 0
            self._rate_t = now

    def _publish_frames(self, frames: np.ndarray, start_us: int) -> None:
        """Every frame block the engine made (before any trigger gate), to the observers."""
        hub = self.hub
        if hub is None or not hub.wants_frames or len(frames) == 0:
            return
        rate = self.policy.rate_hz
        ticks = frames["tick"]
        times = start_us + (ticks.astype(np.int64) * 1_000_000 + rate // 2) // rate
        # the file's bytes (padding zero, as the writer stores it), in a copy of the observers' own
        hub.publish(LiveFrames(self.group, self.recorder.schema, take_records(frames), times))

    def _publish(self, hub: ObserverHub, ops: list[Op]) -> None:
        """Tell the observers what goes to the files (sessions, markers), before it reaches the disk."""
        rate = self.policy.rate_hz
        for op in ops:
            if isinstance(op, FramesOp):
                ticks = op.frames["tick"]
                if len(ticks) == 0:
                    continue
                if self._pub_first is None:
                    self._pub_first = int(ticks[0])
                self._pub_last = int(ticks[-1])
                self._pub_frames += len(ticks)
                if self.recorder.gate is None:
                    self._publish_frames(op.frames, self._pub_start_us)
                for m in op.marks:
                    hub.publish(MarkerAdded(self.group, m.tick, m.wall_us, m.note))
            elif isinstance(op, BeginOp):
                self._pub_start_us = op.start_us
                self._pub_header = op.header
                self._pub_open = True
                self._pub_frames, self._pub_first, self._pub_last = 0, None, None
                reason = str(op.header.get("start_reason", "first"))
                hub.publish(SessionStarted(self.group, reason, op.start_us))
            elif isinstance(op, EndOp):
                self._pub_open = False
                span = (
                    0
                    if self._pub_first is None or self._pub_last is None
                    else (self._pub_last - self._pub_first + 1)
                )
                laps = op.footer.get("laps")
                lap_count = best_s = None
                if isinstance(laps, Mapping):
                    lap_count = int(laps.get("lap_count", 0))
                    best_ms = int(laps.get("best_lap_ms", 0))
                    best_s = best_ms / 1000 if best_ms else None
                hub.publish(
                    SessionEnded(
                        self.group,
                        str(op.footer.get("end_reason", "end")),
                        self._pub_frames,
                        span - self._pub_frames,
                        span / rate,
                        lap_count,
                        best_s,
                    )
                )

    def _publish_laps(self, hub: ObserverHub) -> None:
        """The laps just completed, as ``LapCompleted`` (lap records, docs/lap-records.md)."""
        from wrtfd.recorder.observe import LapCompleted

        rate = self.policy.rate_hz
        start_us = self._pub_start_us
        header, meta = self._pub_header, self.recorder.sink.metadata
        for lap, plugin in self.recorder.take_laps():
            # the track the lap was timed on (the plug-in's track or circuit, the files' Track)
            # before the game's own name for it
            timed_on = getattr(getattr(plugin, "track", None), "name", None) or getattr(
                getattr(plugin, "circuit", None), "name", None
            )
            known = {
                "track": timed_on or meta.get("Track") or header.get("track"),
                "car": header.get("car") or meta.get("Car"),
                "session_type": header.get("session_type"),
                "driver": meta.get("Driver"),
            }
            info = tuple(sorted((k, str(v)) for k, v in known.items() if isinstance(v, str) and v))
            start_s, end_s = float(lap.start_s), float(lap.end_s)
            facts = getattr(plugin, "lap_facts", None)
            valid, conditions = (
                facts.get(lap.number, (None, None)) if isinstance(facts, dict) else (None, None)
            )
            hub.publish(
                LapCompleted(
                    group=self.group,
                    lap=int(lap.number),
                    time_s=end_s - start_s,
                    sectors_s=tuple(float(x) for x in lap.sector_times_s),
                    start_s=start_s,
                    end_s=end_s,
                    # the frames at or after the crossing that began it, before the one ending it
                    first_tick=math.ceil(start_s * rate - 1e-6),
                    last_tick=math.ceil(end_s * rate - 1e-6) - 1,
                    session_start_us=start_us,
                    wall_us=start_us + round(end_s * 1e6),
                    valid=valid,
                    info=info,
                    pit=getattr(lap, "pit", None),
                    conditions=None if not conditions else tuple(sorted(conditions.items())),
                )
            )

    def _finish_engine(self, reason: str) -> None:
        if self._engine_done:
            return
        self._engine_done = True
        try:
            self._step()
        finally:
            self._queue(self.recorder.finish(reason))

    def _poke(self) -> None:
        """Wake the engine (stop)."""
        if self._wake is not None:
            self._wake()

    def _quiet(self) -> bool:
        """Nothing for the engine to do until a sample arrives (so no timer is needed)."""
        rec = self.recorder
        sched = rec.scheduler
        if (
            self._intake
            or self._ops
            or sched.in_session
            or self._writing_since is not None
            or sched.pending_samples()
        ):
            return False
        return rec.sink.state().unsynced_since_s is None

    async def _engine_loop(self) -> None:
        stopping = self._stopping
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # another anyio backend
            loop = None
        self._loop = loop
        clock = loop.time if loop is not None else anyio.current_time
        while not stopping.is_set():
            if self._quiet():
                if not await self._wait_for_sample(loop, self._idle_check_s):
                    continue  # a sample (or stop): handled below, on the next turn
            elif self._intake:
                if clock() - self._last_step < self._tick_s / 2:
                    await self._sleep_to_grid(loop, clock())  # stepped just now: batch these
            else:
                now = clock()
                step_in = self._next_grid(self._last_step + self._close_s) - now
                sync_in = self._sync_due_in()
                if sync_in is not None and sync_in < step_in:
                    # An fsync falls due first: queue it, but do not step. Steps come right
                    # after a source's batched read, so that no tick closes while its samples
                    # still wait in a socket (a step at any other time could make them late).
                    if await self._wait_for_sample(loop, sync_in):
                        self._want_write()
                    continue
                if not await self._wait_for_sample(loop, step_in):
                    continue  # a sample: step on the next turn (rate-limited above)
            if stopping.is_set():
                break
            if self._write_error is not None:
                raise self._write_error
            now = clock()
            if now - self._last_step > self._close_s + self._tick_s and self.recorder.scheduler.read_stamped:
                # Late (the loop stalled: a starved machine, SIGSTOP). A port read on arrival
                # holds what came meanwhile: let its read go first (a timer, not a bare yield:
                # the loop polls for I/O before it runs the timers), or this step would close
                # the ticks of those samples (docs/timing.md, "A stalled daemon").
                await self._sleep(loop, now, now + STALL_READ_S)
            self._last_step = clock()
            self._step()
            self._want_write()
        self._finish_engine("stop")

    def _sync_due_in(self) -> float | None:
        """Seconds until an fsync falls due, on the sink's schedule (steps alone could find it
        0.2 s late); None: nothing waits. Once due while a batch is being written (that batch
        syncs, or the step after it queues the sync), None: the loop must not wake again and
        again before the writer thread is done."""
        due_in = self.recorder.sink.sync_due_in()
        if due_in is not None and due_in <= 0 and self._writing_since is not None:
            return None
        return due_in

    def _next_grid(self, t: float) -> float:
        """The first point of the ``tick_s`` grid (on the loop's clock) at or after ``t``."""
        tick = self._tick_s
        return math.ceil(t / tick) * tick

    async def _wait_for_sample(self, loop: asyncio.AbstractEventLoop | None, timeout_s: float) -> bool:
        """Sleep until a sample arrives (or stop); True when ``timeout_s`` passed first.

        On asyncio: one future and one timer handle (a cancel scope and an event cost several
        times more, on every wake-up of the daemon)."""
        if self._stopping.is_set():
            return False
        timeout_s = max(0.0, timeout_s)
        if loop is None:
            event = anyio.Event()
            self._wake = event.set
            self._asleep = True
            try:
                with anyio.move_on_after(timeout_s) as scope:
                    await event.wait()
            finally:
                self._asleep = False
                self._wake = None
            return scope.cancelled_caught
        fut: asyncio.Future[bool] = loop.create_future()
        self._wake = lambda: _resolve(fut, False)
        self._asleep = True
        handle = loop.call_at(loop.time() + timeout_s, _resolve, fut, True)
        try:
            return await fut
        finally:
            handle.cancel()
            self._asleep = False
            self._wake = None

    async def _sleep_to_grid(self, loop: asyncio.AbstractEventLoop | None, now: float) -> None:
        """Sleep to the next point of the ``tick_s`` grid (stop waits for it: one tick at most);
        an fsync that falls due meanwhile is queued on time."""
        deadline = (math.floor(now / self._tick_s) + 1) * self._tick_s
        sync_in = self._sync_due_in()
        if sync_in is not None and now + sync_in < deadline:
            await self._sleep(loop, now, now + sync_in)
            self._want_write()
            now = now + sync_in
        await self._sleep(loop, now, deadline)

    @staticmethod
    async def _sleep(loop: asyncio.AbstractEventLoop | None, now: float, deadline: float) -> None:
        if loop is not None:
            await _sleep_until(loop, deadline)
        else:
            await anyio.sleep(max(0.0, deadline - now))

    def _want_write(self) -> None:
        """Queue a batch for the writer thread when one is due (``batch_s`` since the last one)
        or an fsync is, unless the previous batch is still being written (ops keep queueing)."""
        if self._thread is None or self._engine_done:  # after the engine: the drain's job
            return
        if self._writing_since is not None:
            self._batch_waiting = bool(self._ops)
            return
        self._batch_waiting = False
        now = time.monotonic()
        # (a few ms of slack: steps land on a grid, and batch_s is usually a multiple of it)
        due = now - self._last_write >= self.policy.batch_s - min(0.01, self.policy.batch_s / 2)
        if (self._ops and due) or self.recorder.sink.sync_due():
            if due and self._ops:  # an fsync alone does not restart the batch clock (the
                self._last_write = now  # next batch would wait a whole step more)
            ops = self._take_ops()
            self._writing_since = now
            self._jobs.put(lambda: self._write(ops))

    def _take_ops(self) -> list[Op]:
        ops = list(self._ops)
        self._ops.clear()
        self._backlog_frames = 0
        return ops

    def _write(self, ops: list[Op]) -> None:
        """Runs in a worker thread: the only place that touches the disk."""
        rec = self.recorder
        if ops:
            rec.apply(ops)
        synced = rec.sync_if_due()
        if self._on_batch is not None:
            self._on_batch(rec, synced)

    def _writer_thread(self) -> None:
        """The writer thread's loop: one job at a time, in order, until the None job."""
        jobs = self._jobs
        while True:
            job = jobs.get()
            if job is None:
                return
            try:
                job()
            except BaseException as exc:  # handed to the engine, which raises it on the loop
                self._write_error = exc
            finally:
                self._writes += 1
                self._writing_since = None
                loop = self._loop
                if self._batch_waiting and loop is not None and not loop.is_closed():
                    self._batch_waiting = False
                    try:
                        loop.call_soon_threadsafe(self._want_write)
                    except RuntimeError:  # the loop closed meanwhile: nothing left to queue
                        pass

    async def _drain_and_close(self) -> bool:
        """The last operations and the close, on the writer thread; True once they are done."""
        if not self._engine_done:
            self._finish_engine("stop")
        rec = self.recorder
        done = threading.Event()

        def final() -> None:
            ops = self._take_ops()  # on the writer thread: after the batch in flight, if any
            try:
                if ops:
                    rec.apply(ops)
            finally:
                try:
                    rec.close()
                finally:
                    done.set()

        if self._thread is None or not self._thread.is_alive():
            final()
            return True
        self._write_error = None
        self._writing_since = time.monotonic()
        self._jobs.put(final)
        # A short poll, only at shutdown, cancelled by the caller's deadline (a hung disk): no
        # thread is left blocked behind (one would hold up the interpreter's exit).
        while not done.is_set():  # noqa: ASYNC110 - a threading.Event set by the writer thread
            await anyio.sleep(0.01)
        if self._write_error is not None:
            raise self._write_error
        return True


#: How long a late step waits for the reads of ports stamped on read (one loop turn is enough).
STALL_READ_S = 0.002


def _resolve(fut: asyncio.Future[Any], value: Any) -> None:
    if not fut.done():
        fut.set_result(value)


async def _sleep_until(loop: asyncio.AbstractEventLoop, deadline: float) -> None:
    """Sleep until ``deadline`` on the loop's clock, exactly: a timer at the same grid point as
    a UDP source's batched read fires in the same wake-up, and since the timer only wakes this
    task (which runs one pass later), the source's samples are in the intake before the step."""
    fut: asyncio.Future[None] = loop.create_future()
    handle = loop.call_at(deadline, _resolve, fut, None)
    try:
        await fut
    finally:
        handle.cancel()
