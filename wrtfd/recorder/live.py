"""The live driver the daemon runs: bounded intake, engine task, writer thread.

::

    sources --sink(sample)--> intake (bounded deque; SinkFull when full)
        engine task (event loop, every ``tick_s``): drain intake -> scheduler -> derived -> ops
        writer task (every ``batch_s``): ops -> anyio.to_thread -> FileSink (write, flush, fsync)

Receiving never waits on disk: the sink only appends to a deque, the engine only does CPU work,
and every write, flush, fsync and close runs in a worker thread. If the disk stalls, frames
queue up to ``max_backlog_s`` of frames and are then dropped (counted); session begin/end
operations are never dropped.

Durability bound
----------------
A sample received at time t is in a closed frame by ``t + jitter_s + 1/rate_hz`` (the tick
stays open for late samples), reaches the writer thread within ``tick_s + batch_s``, and is
written (``write()``, so it survives a crash of the process) right away, then fsynced at the
latest ``fsync_interval_s`` later. So:

* ``kill -9`` or a crash of wrtfd loses at most ``jitter_s + 1/rate + tick_s + batch_s``
  (defaults: 0.1 + 0.017 + 0.005 + 0.05 = about 0.17 s) of the newest data, plus ``settle_s``
  (0.5 s) in the first moments of a session, whose tick grid is fixed only after that long;
* a power cut loses at most that plus ``fsync_interval_s`` (default 1 s): about 1.2 s
  (1.7 s at the very start of a session).

Nothing older is ever at risk: the format writer only appends whole records, a failed write is
truncated back, and ``wrtfd repair`` finalizes a file that lost its footers (N11).

Every shutdown path ends the session and closes the file: :meth:`LiveRecorder.stop`, cancellation
of :meth:`LiveRecorder.run` (SIGTERM in the daemon cancels its task group: the final writes run in
a shielded scope bounded by ``stop_timeout_s``), and an exception inside the recorder.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio

from wrtfd.decoders.base import Sample
from wrtfd.recorder.recorder import FramesOp, Op, Recorder, RecorderPolicy, SourceSpec
from wrtfd.sources.base import SinkFull

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
        tick_s: float = 0.005,
        max_backlog_s: float = 30.0,
        stall_after_s: float = 5.0,
        stop_timeout_s: float = 2.0,
        clock_ns: Callable[[], int] = time.monotonic_ns,
        on_batch: Callable[[Recorder, bool], None] | None = None,
    ) -> None:
        self.recorder = Recorder(sources, policy, derived, metadata=metadata,
                                 clock=lambda: clock_ns() / 1e9)
        self.policy = policy
        self._intake: deque[Sample] = deque()
        self._capacity = max(1, intake_capacity)
        self._tick_s = tick_s
        self._stall_after_s = stall_after_s
        self._stop_timeout_s = stop_timeout_s
        self._clock_ns = clock_ns
        self._on_batch = on_batch
        self._ops: deque[Op] = deque()
        self._backlog_frames = 0
        self._max_backlog = max(1, round(max_backlog_s * policy.rate_hz))
        self._stopping = anyio.Event()
        self._done = anyio.Event()
        self._engine_done = False
        self._writing_since: float | None = None
        self._running = False
        self.samples = 0
        self.intake_dropped = 0
        self.backlog_dropped = 0
        self.progress = 0
        self._rate_t = 0.0
        self._rate_frames = 0
        self._frame_rate = 0.0
        self._fatal: str | None = None

    # -- what sources and the daemon call --------------------------------------------------------

    def sink(self, sample: Sample) -> None:
        """Non-blocking intake; raises :class:`SinkFull` when the bounded intake is full."""
        if len(self._intake) >= self._capacity:
            self.intake_dropped += 1
            raise SinkFull(f"recorder intake full ({self._capacity} samples)")
        self._intake.append(sample)
        self.samples += 1

    def request_new_session(self) -> None:
        """End the current session at the next frame (SIGHUP)."""
        self.recorder.request_new_session()

    async def stop(self) -> None:
        """Finish the session, write the footers, close the file; returns when done."""
        self._stopping.set()
        if self._running:
            with anyio.move_on_after(self._stop_timeout_s + 1.0):
                await self._done.wait()

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Record until :meth:`stop` or cancellation; always closes the file on the way out."""
        rec = self.recorder
        rec.set_origin(self._clock_ns(), time.time_ns() // 1000)
        self._running = True
        self._rate_t = time.monotonic()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._writer_loop)
                task_status.started()
                try:
                    await self._engine_loop()
                except BaseException:
                    self._finish_engine("stop")
                    raise
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(self._stop_timeout_s):
                await self._drain_and_close()
            self._running = False
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
            "progress": self.progress,
            "derived_errors": rec.derived_errors,
            "per_source": {name: c.as_dict() for name, c in counters.items()},
        }

    # -- the two tasks ---------------------------------------------------------------------------

    def _step(self) -> None:
        rec = self.recorder
        intake = self._intake
        ops: list[Op] = []
        while intake:
            sample = intake.popleft()
            rec.advance(sample.rx_ns, flush=False)  # events stay queued until the flush below
            rec.push(sample)
        ops.extend(rec.advance(self._clock_ns()))
        self._queue(ops)
        self.progress += 1

    def _queue(self, ops: list[Op]) -> None:
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

    def _finish_engine(self, reason: str) -> None:
        if self._engine_done:
            return
        self._engine_done = True
        try:
            self._step()
        finally:
            self._queue(self.recorder.finish(reason))

    async def _engine_loop(self) -> None:
        while not self._stopping.is_set():
            with anyio.move_on_after(self._tick_s):
                await self._stopping.wait()
            self._step()
        self._finish_engine("stop")

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

    async def _write_off_loop(self, ops: list[Op]) -> None:
        self._writing_since = time.monotonic()
        try:
            await anyio.to_thread.run_sync(self._write, ops)
        finally:
            self._writing_since = None
        self.progress += 1

    async def _writer_loop(self) -> None:
        """Every ``batch_s``: hand the queued operations to the thread (or just fsync when due)."""
        batch_s = self.policy.batch_s
        sink = self.recorder.sink
        last = time.monotonic()
        while not self._engine_done:
            with anyio.move_on_after(max(0.0, last + batch_s - time.monotonic())):
                await self._stopping.wait()
            if self._engine_done or self._stopping.is_set():
                break
            last = time.monotonic()
            if self._ops or sink.sync_due():
                await self._write_off_loop(self._take_ops())

    async def _drain_and_close(self) -> None:
        if not self._engine_done:
            self._finish_engine("stop")
        ops = self._take_ops()
        rec = self.recorder

        def final() -> None:
            try:
                if ops:
                    rec.apply(ops)
            finally:
                rec.close()

        self._writing_since = time.monotonic()
        try:
            await anyio.to_thread.run_sync(final)
        finally:
            self._writing_since = None
