"""The rig's side of the fleet: an observer of the recording that talks NATS in a thread of its own.

::

    recorder (event loop)  --notify(LiveFrames | session events)-->  bounded deques  (append, return)
    writer thread          --notify(FileOpened | FileClosed)------>  ...
    daemon (event loop)    --offer_status(snapshot) every status_interval_s
                                     |
              fleet thread: its own asyncio loop (nats-py), woken at most live_hz times a second
                 pump:    decimate + encode frames -> wrtfd.<rig>.<group>.frames
                          events -> wrtfd.<rig>.events; status -> wrtfd.<rig>.status
                          FileClosed -> an entry in the upload queue on disk
                 uploads: oldest queued file first -> object store (resumable, verified)
                 connection: connect until it works, reconnect after a loss (nats-py)

The recording never waits for any of it: ``notify`` appends to a bounded deque and returns
(a full live buffer drops the block and counts it); everything else runs in the fleet thread,
whose blocking file work goes to worker threads. A dead or slow server costs at most the live
buffer (:data:`LIVE_BUFFER_BLOCKS` blocks), the events buffer (:data:`EVENT_BUFFER`), nats-py's
pending buffer (2 MiB) and one upload window; live frames are dropped and counted while the
connection is down or its buffer is filling, and uploads simply wait in the queue on disk.

:meth:`snapshot` is what ``/status`` shows under ``fleet``: connection state and last error,
live frames sent and dropped (by reason), the upload backlog (files, bytes, the one in flight).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from wrtfd.errors import WrtfdError
from wrtfd.fleet.client import connect, describe_error, ensure_streams, is_auth_error
from wrtfd.fleet.config import FleetSettings
from wrtfd.fleet.encoding import (
    Decimator,
    Layout,
    encode_frames,
    encode_layout,
    json_line,
    layout_of,
    subject_events,
    subject_frames,
    subject_layout,
    subject_status,
)
from wrtfd.fleet.lapref import BestLapUploader, ReferenceFollower, RefTarget
from wrtfd.fleet.laps import LapForwarder
from wrtfd.fleet.queue import UploadEntry, UploadQueue, object_name
from wrtfd.fleet.status import status_message
from wrtfd.fleet.team import MAX_FETCH as TEAM_MAX_FETCH
from wrtfd.fleet.team import TeamBoard
from wrtfd.fleet.upload import FileGoneError, ObjectUploader
from wrtfd.format import Reader
from wrtfd.recorder.observe import (
    EVENT_KINDS,
    FileClosed,
    FileOpened,
    LapCompleted,
    LiveFrames,
    RecordingEvent,
)

__all__ = ["EVENT_BUFFER", "LIVE_BUFFER_BLOCKS", "FleetPublisher"]

log = logging.getLogger("wrtfd.fleet")

#: Live blocks (one per engine step and group, ~0.1-0.2 s of frames) waiting for the fleet thread.
LIVE_BUFFER_BLOCKS = 64
#: Recording events waiting for the fleet thread, and events waiting for the connection.
EVENT_BUFFER = 1000
#: Live frames are dropped while nats-py holds more than this unsent (a slow link).
LIVE_PENDING_LIMIT = 256 * 1024
#: Layouts are published again this often (a reader that missed them, a server restart).
LAYOUT_REPEAT_S = 30.0
#: A connection down longer than this is a problem in the status line.
DOWN_PROBLEM_S = 10.0
UPLOAD_RETRY_MAX_S = 60.0
CLOSE_FLUSH_S = 1.0
#: The team panel ranks once the laps bucket's records stop coming for this long.
TEAM_BATCH_S = 0.2


class FleetPublisher:
    """One rig's fleet link (see the module docstring). Use: ``hub.add(p)``, :meth:`start`,
    :meth:`run_status` in the daemon's task group, :meth:`close` after the recorder stopped."""

    def __init__(self, settings: FleetSettings, *, output_dir: Path) -> None:
        self.settings = settings
        self.output_dir = output_dir
        self.rig = settings.rig
        self._live_on = settings.live_hz > 0
        self._live: deque[LiveFrames] = deque()
        self._events: deque[RecordingEvent] = deque()
        self._events_lock = threading.Lock()
        self._drain_lock = asyncio.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._done = threading.Event()
        self._sleeping = False
        self.started_ns = time.time_ns()
        # -- counters: each written by one thread, read by anyone ------------------------------
        self.state = "starting"
        self.state_since = time.monotonic()
        self.last_error: str | None = None
        self.last_error_mono: float | None = None
        self.live_dropped_buffer = 0  # frames (daemon loop)
        self.live_dropped_offline = 0  # frames (fleet thread)
        self.live_dropped_slow = 0
        self.live_frames_sent = 0
        self.live_messages_sent = 0
        self.live_bytes_sent = 0
        self.events_dropped = 0
        self.events_sent = 0
        self.status_sent = 0
        self.uploads_queued = 0
        self.uploads_queued_bytes = 0
        self.uploads_done = 0
        self.uploads_done_bytes = 0
        self.upload_failures = 0
        self.uploads_gone = 0
        self.upload_error: str | None = None
        self.uploading: dict[str, Any] | None = None
        self.queue_loaded = False
        # -- fleet thread state ----------------------------------------------------------------
        self._nc: Any = None
        self._js: Any = None
        self._uploader: ObjectUploader | None = None
        self._queue = UploadQueue(settings.queue_dir)
        self._pending: dict[str, UploadEntry] = {}
        self._sizes: dict[str, int] = {}
        self._retry_at: dict[str, float] = {}
        self._open_files: set[str] = set()
        self._layouts: dict[str, tuple[int, Layout]] = {}  # group -> (id(schema), layout)
        self._decimators: dict[str, Decimator] = {}
        self._lap_state: dict[str, tuple[int, float, int]] = {}
        self._rates: dict[str, float] = {}
        self._last_laps: dict[str, tuple[int, int]] = {}
        self._unsent: deque[bytes] = deque(maxlen=EVENT_BUFFER)
        self._status_doc: Mapping[str, Any] | None = None
        self._prev_status: Mapping[str, Any] | None = None
        self._layouts_sent = 0.0
        self._wake_fut: asyncio.Future[None] | None = None
        self._stop: asyncio.Event | None = None
        self._connected: asyncio.Event | None = None
        self._work: asyncio.Event | None = None
        self._setup_done = False
        self._attempt: asyncio.Task[Any] | None = None
        self._logged_error: tuple[str, float] = ("", 0.0)
        #: This rig's best lap per track, car and driver into the object store (wrtfd.fleet.lapref).
        self._best = (
            BestLapUploader(
                output_dir,
                settings.queue_dir / "best_laps.json",
                bucket=settings.best_laps_bucket,
                replicas=settings.replicas,
            )
            if settings.laps and settings.best_laps
            else None
        )
        self._best_wake: asyncio.Event | None = None
        #: Lap records from ``laps.jsonl`` to the laps bucket (store and forward, wrtfd.fleet.laps).
        self._laps = (
            LapForwarder(
                output_dir / "laps.jsonl",
                settings.queue_dir / "laps.offset",
                rig=self.rig,
                bucket=settings.laps_bucket,
                replicas=settings.replicas,
                on_sent=self._sent_record,
            )
            if settings.laps
            else None
        )
        self._laps_wake: asyncio.Event | None = None
        #: The page's team panel: the laps bucket read back and ranked (wrtfd.fleet.team).
        self.team = (
            TeamBoard(settings.laps_bucket, rows=settings.team_rows, rig=self.rig, driver=None)
            if settings.laps and settings.team_rows > 0
            else None
        )
        #: Sources whose delta follows the team's best lap (``reference = "fleet:..."``).
        self._follower: ReferenceFollower | None = None
        self._follow_wake: asyncio.Event | None = None

    def team_hint(self, *, track: str | None, driver: str | None) -> None:
        """Before :meth:`start`: the track the rig times laps on (until a lap says) and its driver."""
        if self.team is not None:
            self.team.track = track
            self.team.me = driver or f"({self.rig})"

    # === the observer side (any thread; returns at once) ======================================

    def notify(self, item: RecordingEvent | LiveFrames) -> None:
        if isinstance(item, LiveFrames):
            if not self._live_on:
                return
            if len(self._live) >= LIVE_BUFFER_BLOCKS:
                self.live_dropped_buffer += len(item.frames)
                return
            self._live.append(item)
        else:
            with self._events_lock:
                if len(self._events) >= EVENT_BUFFER:
                    self.events_dropped += 1
                    return
                self._events.append(item)
        if self._sleeping:
            self._sleeping = False
            loop, fut = self._loop, self._wake_fut
            if loop is not None and fut is not None:
                with contextlib.suppress(RuntimeError):  # the loop is closing
                    loop.call_soon_threadsafe(_resolve, fut)

    # === the daemon's side ====================================================================

    def follow_references(self, targets: list[RefTarget]) -> None:
        """Sources with ``reference = "fleet:..."`` (before :meth:`start`)."""
        for t in targets:
            log.info(
                "source %s: reference %s: the session's best lap until the team's is fetched",
                t.source,
                t.spec,
            )
        if targets:
            self._follower = ReferenceFollower(
                targets,
                self.settings.queue_dir / "refs",
                laps_bucket=self.settings.laps_bucket,
                bucket=self.settings.best_laps_bucket,
                poll_s=self.settings.reference_poll_s,
                local_lap=None if self._best is None else self._best.local_lap,
            )

    def start(self) -> None:
        """Start the fleet thread (before the recorder runs, so no file event is missed)."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._thread_main, name="wrtfd-fleet", daemon=True)
        self._thread.start()
        self._ready.wait(5.0)

    async def run_status(self, snapshot: Callable[[], Mapping[str, Any]]) -> None:
        """In the daemon's task group: hand the fleet thread a status snapshot every interval."""
        import anyio

        while True:
            self.offer_status(snapshot())
            await anyio.sleep(self.settings.status_interval_s)

    def offer_status(self, snapshot: Mapping[str, Any]) -> None:
        self._call(self._take_status, snapshot)

    async def close(self, timeout_s: float = 2.0) -> None:
        """Queue what the last files need, let queued uploads run for ``stop_upload_s``, send the
        last events and status, disconnect; bounded by ``timeout_s`` plus that upload time."""
        import anyio

        if self._thread is None:
            return
        if self.settings.upload:
            timeout_s += self.settings.stop_upload_s
        stop = self._stop
        if stop is not None:
            self._call(stop.set)
        deadline = time.monotonic() + timeout_s
        while not self._done.is_set() and time.monotonic() < deadline:  # noqa: ASYNC110
            await anyio.sleep(0.02)
        if not self._done.is_set():
            log.warning(
                "fleet: not finished within %.1f s; pending uploads resume at the next start", timeout_s
            )

    def snapshot(self) -> dict[str, Any]:
        """The fleet part of ``/status``."""
        now = time.monotonic()
        return {
            "url": self.settings.connect.shown,
            # the node of the list the link is on now (a cluster: it moves when one goes away)
            "server": _connected_url(self._nc),
            "rig": self.rig,
            "state": self.state,
            "state_for_s": round(now - self.state_since, 1),
            "last_error": self.last_error,
            "last_error_age_s": None
            if self.last_error_mono is None
            else round(now - self.last_error_mono, 1),
            "live": {
                "hz": self.settings.live_hz,
                "frames_sent": self.live_frames_sent,
                "messages_sent": self.live_messages_sent,
                "bytes_sent": self.live_bytes_sent,
                "dropped": {
                    "buffer_full": self.live_dropped_buffer,
                    "disconnected": self.live_dropped_offline,
                    "slow_link": self.live_dropped_slow,
                },
                "dropped_total": self.live_dropped_buffer
                + self.live_dropped_offline
                + self.live_dropped_slow,
            },
            "events": {"sent": self.events_sent, "dropped": self.events_dropped, "unsent": len(self._unsent)},
            "status_sent": self.status_sent,
            "laps": None if self._laps is None else self._laps.snapshot(),
            "team": None if self.team is None else self.team.snapshot(),
            "best_laps": None if self._best is None else self._best.snapshot(),
            "references": None if self._follower is None else self._follower.snapshot(),
            "uploads": {
                "enabled": self.settings.upload,
                "bucket": self.settings.bucket,
                # the queue on disk has been read and the recording directory scanned
                "loaded": self.queue_loaded,
                "queued": self.uploads_queued,
                "queued_bytes": self.uploads_queued_bytes,
                "current": None if self.uploading is None else dict(self.uploading),
                "done": self.uploads_done,
                "done_bytes": self.uploads_done_bytes,
                "failures": self.upload_failures,
                "missing_files": self.uploads_gone,
                "bad_queue_entries": self._queue.bad_entries,
                "last_error": self.upload_error,
            },
        }

    def problem(self) -> str | None:
        """A short phrase for the daemon's status line when the fleet link is not working."""
        if self.state == "refused":
            return "refused by the server"
        if (
            self.state in ("connecting", "disconnected")
            and time.monotonic() - self.state_since > DOWN_PROBLEM_S
        ):
            return f"{self.state} ({self.last_error or 'no answer'})"
        if self.state == "failed":
            return "failed"
        return None

    # === the fleet thread =====================================================================

    def _call(self, fn: Callable[..., Any], *args: Any) -> None:
        loop = self._loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(fn, *args)

    def _thread_main(self) -> None:
        try:
            asyncio.run(self._main())
        except Exception as exc:  # a bug: the fleet stops, the recording goes on
            self._set_state("failed", f"{type(exc).__name__}: {exc}")
            log.exception("fleet: stopped by an error; the recording goes on")
        finally:
            self._ready.set()
            self._done.set()

    def _set_state(self, state: str, error: str | None = None) -> None:
        if state != self.state:
            self.state = state
            self.state_since = time.monotonic()
        if error is not None:
            self.last_error = error
            self.last_error_mono = time.monotonic()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._connected, self._work = asyncio.Event(), asyncio.Event()
        self._ready.set()
        if self.settings.upload:
            await self._open_queue()
        tasks = [asyncio.create_task(self._connection()), asyncio.create_task(self._pump())]
        if self.settings.upload:
            tasks.append(asyncio.create_task(self._uploads()))
        if self._laps is not None:
            self._laps_wake = asyncio.Event()
            tasks.append(
                asyncio.create_task(self._laps.run(lambda: self._js, lambda: self._online, self._laps_wake))
            )
        if self.team is not None:
            tasks.append(asyncio.create_task(self._team_loop()))
        if self._best is not None:
            self._best_wake = asyncio.Event()
            tasks.append(asyncio.create_task(self._best_laps()))
        if self._follower is not None:
            await asyncio.to_thread(self._follower.load_cached)
            self._follow_wake = asyncio.Event()
            tasks.append(
                asyncio.create_task(
                    self._follower.run(
                        lambda: self._js, lambda: self._online, self._follow_wake, lambda: self._nc
                    )
                )
            )
        try:
            await self._stop.wait()
            await self._finish()
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            if self._nc is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._nc.close(), CLOSE_FLUSH_S)
            self._set_state("stopped")

    async def _finish(self) -> None:
        """The last files into the queue, queued uploads for up to ``stop_upload_s``, the last
        events and a 'stopped' status out."""
        await self._drain()
        await self._last_uploads()
        await self._drain()
        if self._laps is not None and self._online:  # the last laps (the rest: at the next start)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._laps.forward(self._js), CLOSE_FLUSH_S)
        if self._prev_status is not None:
            doc = dict(self._prev_status)
            doc["state"] = "stopped"
            doc["time_us"] = time.time_ns() // 1000
            await self._publish(subject_status(self.rig), json_line(doc))
        if self._nc is not None and self._nc.is_connected:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._nc.flush(), CLOSE_FLUSH_S)

    async def _team_loop(self) -> None:
        """Follow the laps bucket for the page's team panel while the link is up; after a failure
        (shown, not fatal) again ``team_refresh_s`` later."""
        team = self.team
        assert team is not None
        while True:
            if self._online and self._js is not None and self._nc is not None:
                try:
                    await self._team_follow(team, self._js, self._nc)
                    continue  # a reconnect: read what was stored meanwhile
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    team.last_error = describe_error(exc)
            await asyncio.sleep(self.settings.team_refresh_s)

    async def _team_follow(self, team: TeamBoard, js: Any, nc: Any) -> None:
        """A plain subscription to the bucket's subjects (each record as the server stores it: no
        polling, no consumer while idle), then what was stored since the last read caught up;
        ranked in a worker (a big team's laps must not hold up the live frames) when something
        changed. Returns after a reconnect."""
        import nats.errors

        reconnects = nc.stats.get("reconnects", 0)
        sub = await nc.subscribe(f"$KV.{team.bucket}.>", pending_msgs_limit=4096)
        try:
            while await team.read(js) >= TEAM_MAX_FETCH:
                pass  # a big bucket read at first: all of it now, a batch at a time
            team.last_error = None
            await asyncio.to_thread(team.rank)
            while nc.stats.get("reconnects", 0) == reconnects:
                try:
                    msg = await sub.next_msg(timeout=self.settings.team_refresh_s)
                except nats.errors.TimeoutError:
                    continue
                while True:  # the records that came with it, then one ranking
                    deleted = (msg.headers or {}).get("KV-Operation") in ("DEL", "PURGE")
                    team.add(msg.subject, msg.data or b"", deleted)
                    try:
                        msg = await sub.next_msg(timeout=TEAM_BATCH_S)
                    except nats.errors.TimeoutError:
                        break
                await asyncio.to_thread(team.rank)
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def _last_uploads(self) -> None:
        """Let the upload task work through the queue (oldest first) while the link is up, until
        it is empty or ``stop_upload_s`` ran out; an upload cut short resumes at the next start."""
        if not self.settings.upload or self.settings.stop_upload_s <= 0:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.stop_upload_s
        if self._pending:
            log.info(
                "fleet: stopping; up to %.1f s for %d queued upload(s)",
                self.settings.stop_upload_s,
                len(self._pending),
            )
        while loop.time() < deadline:
            due, _ = self._next_entry()
            if due is None and self.uploading is None:
                return  # nothing left, or only uploads waiting for a retry
            if not (self._connected is not None and self._connected.is_set() and self._online):
                return  # no link: the queue waits on disk for the next start
            await asyncio.sleep(0.02)
        if self._pending:
            log.info(
                "fleet: %d upload(s) left after %.1f s; they resume at the next start",
                len(self._pending),
                self.settings.stop_upload_s,
            )

    # --- connection -------------------------------------------------------------------------

    async def _connection(self) -> None:
        self._set_state("connecting")
        log.info("fleet: connecting to %s as rig %s", self.settings.connect.shown, self.rig)
        nc = await connect(
            self.settings.connect,
            name=f"wrtfd {self.rig}",
            forever=True,
            error_cb=self._on_error,
            disconnected_cb=self._on_disconnected,
            reconnected_cb=self._on_reconnected,
        )
        self._nc = nc
        self._js = nc.jetstream(timeout=10.0)
        await self._on_connected("connected")

    async def _on_connected(self, what: str) -> None:
        assert self._connected is not None and self._work is not None
        self._set_state("connected")
        log.info("fleet: %s to %s", what, self.settings.connect.shown)
        await self._setup()
        self._layouts_sent = 0.0  # send them again now
        while self._unsent and self._online:
            await self._nc.publish(subject_events(self.rig), self._unsent.popleft())
            self.events_sent += 1
        self._connected.set()
        self._work.set()

    async def _setup(self) -> None:
        """The streams and the bucket (created where missing); retried until it works."""
        self._setup_done = False
        try:
            await ensure_streams(self._js, replicas=self.settings.replicas)
            if self.settings.upload:
                self._uploader = ObjectUploader(
                    self._js,
                    self.settings.bucket,
                    chunk_bytes=self.settings.chunk_bytes,
                    rate_bytes_s=self.settings.upload_rate_bytes_s,
                    verify=self.settings.verify,
                    new_nuid=self._new_nuid,
                    replicas=self.settings.replicas,
                )
                await self._uploader.ensure_bucket()
            self._setup_done = True
        except Exception as exc:
            self._note_error(f"JetStream setup: {describe_error(exc)}", "setup")

    def _new_nuid(self) -> str:
        assert self._nc is not None
        return str(self._nc._nuid.next().decode())

    async def _on_error(self, exc: Exception) -> None:
        text = describe_error(exc)
        if is_auth_error(exc):
            self._set_state("refused", text)
        elif self.state == "refused":
            return  # the server drops the refused connection: the refusal is what to show
        else:
            self._set_state(self.state if self.state != "connected" else "disconnected", text)
        self._note_error(text, "connection")

    def _note_error(self, text: str, kind: str) -> None:
        self.last_error = text
        self.last_error_mono = time.monotonic()
        previous, when = self._logged_error
        if text != previous or time.monotonic() - when > 60.0:
            self._logged_error = (text, time.monotonic())
            log.warning(
                "fleet: %s: %s; the recording goes on, retrying every %g s",
                self.settings.connect.shown,
                text,
                self.settings.connect.reconnect_wait_s,
            )

    async def _on_disconnected(self) -> None:
        assert self._connected is not None
        if self._stop is not None and self._stop.is_set():
            return
        self._connected.clear()
        self._set_state("disconnected")
        log.warning(
            "fleet: lost the connection to %s; live frames are dropped until it is back",
            self.settings.connect.shown,
        )
        if self._attempt is not None:
            self._attempt.cancel()

    async def _on_reconnected(self) -> None:
        await self._on_connected("reconnected")

    @property
    def _online(self) -> bool:
        nc = self._nc
        return nc is not None and nc.is_connected

    async def _publish(self, subject: str, payload: bytes) -> bool:
        if not self._online:
            return False
        try:
            await self._nc.publish(subject, payload)
        except Exception as exc:  # the connection went away between the check and the publish
            self._note_error(describe_error(exc), "publish")
            return False
        return True

    # --- the pump: events, live frames, status -----------------------------------------------

    async def _pump(self) -> None:
        """Drain the buffers, then sleep until a notify (or a status offer) wakes it; at most
        one drain per ``1/live_hz``, so blocks that come faster go out together."""
        loop = asyncio.get_running_loop()
        gap_s = 0.25 if not self._live_on else min(0.25, max(0.05, 1.0 / self.settings.live_hz))
        while True:
            await self._drain()
            drained_at = loop.time()
            if not (self._live or self._events):
                fut: asyncio.Future[None] = loop.create_future()
                self._wake_fut = fut
                self._sleeping = True
                if not (self._live or self._events):  # else it came between the check and the flag
                    handle = loop.call_later(LAYOUT_REPEAT_S, _resolve, fut)
                    try:
                        await fut
                    finally:
                        handle.cancel()
                self._sleeping = False
                self._wake_fut = None
            wait_s = drained_at + gap_s - loop.time()
            if wait_s > 0:
                await asyncio.sleep(wait_s)

    async def _drain(self) -> None:
        # One drain at a time: the stop's waits for an event the pump is still handling (a closed
        # file being put in the upload queue), or that file would miss the last uploads.
        async with self._drain_lock:
            await self._drain_now()

    async def _drain_now(self) -> None:
        while self._events:
            with self._events_lock:
                item = self._events.popleft()
            await self._on_event(item)
        blocks = []
        while self._live:
            blocks.append(self._live.popleft())
        for block in blocks:
            await self._send_live(block)
        doc = self._status_doc
        if doc is not None:
            self._status_doc = None
            await self._send_status(doc)
        if self._online and time.monotonic() - self._layouts_sent >= LAYOUT_REPEAT_S:
            self._layouts_sent = time.monotonic()
            for group, (_, layout) in list(self._layouts.items()):
                await self._publish(
                    subject_layout(self.rig, group), encode_layout(layout, rig=self.rig, group=group)
                )

    def _sent_record(self, record: dict[str, Any]) -> None:
        """A lap record the server acknowledged: a new best of this rig is put as a lap file."""
        if self._best is not None and self._best.consider(record) and self._best_wake is not None:
            self._best_wake.set()

    async def _best_laps(self) -> None:
        """Put this rig's new best laps (woken by a new best; a lap whose last frames are not on
        disk yet is tried again every second)."""
        best, wake = self._best, self._best_wake
        assert best is not None and wake is not None
        retry_s = 1.0
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), 1.0 if best.pending() else None)
            wake.clear()
            if not best.pending() or not self._online:
                continue
            try:
                await best.put_pending(self._js)
                best.last_error = None
                retry_s = 1.0
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                best.last_error = describe_error(exc)
                await asyncio.sleep(retry_s)
                retry_s = min(30.0, retry_s * 2)

    async def _on_event(self, item: RecordingEvent) -> None:
        if isinstance(item, LapCompleted) and self._laps_wake is not None:
            self._laps_wake.set()  # its record is (about to be) in laps.jsonl
        if isinstance(item, LapCompleted) and self.team is not None:
            track = dict(item.info).get("track")
            if track:
                self.team.track = track  # what the records of this rig say from now on
        if isinstance(item, LapCompleted) and self._follower is not None:
            self._follower.saw_lap(item.group, dict(item.info))
        if isinstance(item, FileOpened):
            self._open_files.add(item.path)
        elif isinstance(item, FileClosed):
            self._open_files.discard(item.path)
            if self.settings.upload:
                await self._enqueue(
                    Path(item.path), group=item.group, frames=item.frames, complete=item.complete
                )
        await self._send_event(_event_doc(item))

    async def _send_event(self, doc: dict[str, Any]) -> None:
        doc = {"v": 1, "rig": self.rig, **doc}
        payload = json_line(doc)
        if await self._publish(subject_events(self.rig), payload):
            self.events_sent += 1
        else:
            if len(self._unsent) == self._unsent.maxlen:
                self.events_dropped += 1
            self._unsent.append(payload)

    def _layout(self, block: LiveFrames) -> tuple[Layout, bool]:
        known = self._layouts.get(block.group)
        if known is not None and known[0] == id(block.schema):
            return known[1], False
        from wrtfd.format.schema import Schema

        schema = block.schema
        assert isinstance(schema, Schema)
        rate = self._rate_of(block)
        layout = layout_of(schema, rate)
        self._layouts[block.group] = (id(schema), layout)
        return layout, True

    def _rate_of(self, block: LiveFrames) -> float:
        """The group's frame rate, from ticks and wall times (N9: time = start + tick / rate)."""
        known = self._rates.get(block.group)
        if known:
            return known
        ticks = block.frames["tick"].astype(np.int64)
        if len(ticks) >= 2 and ticks[-1] > ticks[0] and block.times_us[-1] > block.times_us[0]:
            rate = float((ticks[-1] - ticks[0]) * 1e6 / (block.times_us[-1] - block.times_us[0]))
            self._rates[block.group] = known = round(rate, 3)
            return known
        return 0.0

    async def _send_live(self, block: LiveFrames) -> None:
        frames = block.frames
        if len(frames) == 0:
            return
        self._rate_of(block)
        lap = self._completed_lap(block)
        if lap is not None:
            self._last_laps[block.group] = (lap["lap"], lap["lap_ms"])
            await self._send_event(
                {"type": "lap", "group": block.group, "time_us": time.time_ns() // 1000, **lap}
            )
        decimator = self._decimators.get(block.group)
        if decimator is None:
            decimator = self._decimators[block.group] = Decimator(self.settings.live_hz)
        keep = decimator.select(block.times_us)
        if len(keep) == 0:
            return
        if not self._online:
            self.live_dropped_offline += len(keep)
            return
        if self._nc.pending_data_size > LIVE_PENDING_LIMIT:
            self.live_dropped_slow += len(keep)
            return
        layout, new = self._layout(block)
        if new:
            await self._publish(
                subject_layout(self.rig, block.group), encode_layout(layout, rig=self.rig, group=block.group)
            )
        subject = subject_frames(self.rig, block.group)
        index = keep if len(keep) != len(frames) else None
        max_bytes = int(self._nc.max_payload)
        for payload in encode_frames(
            layout.layout_id, frames, block.times_us, index=index, max_bytes=max_bytes
        ):
            if await self._publish(subject, payload):
                self.live_messages_sent += 1
                self.live_bytes_sent += len(payload)
        self.live_frames_sent += len(keep)

    def _completed_lap(self, block: LiveFrames) -> dict[str, Any] | None:
        """A lap completed inside this block (full rate, before decimation), from the lap channels.

        The line was crossed between the last frame of lap n and the first of lap n+1: the lap
        took the first one's ``lap_time`` plus the time between the two frames minus the second
        one's ``lap_time`` (the time since the crossing), as the lap detector interpolated it.
        """
        frames = block.frames
        if "laps" not in (frames.dtype.names or ()):
            return None
        laps = frames["laps"]
        if not {"lap_number", "lap_time"} <= set(laps.dtype.names or ()):
            return None
        numbers = laps["lap_number"].astype(np.int64)
        times = laps["lap_time"].astype(np.float64)
        ticks = frames["tick"].astype(np.int64)
        prev = self._lap_state.get(block.group)
        self._lap_state[block.group] = (int(numbers[-1]), float(times[-1]), int(ticks[-1]))
        if prev is not None:
            numbers = np.concatenate(([prev[0]], numbers))
            times = np.concatenate(([prev[1]], times))
            ticks = np.concatenate(([prev[2]], ticks))
        # lap 0 is the way to the line: the first crossing completes no timed lap
        ups = np.flatnonzero((np.diff(numbers) == 1) & (np.diff(ticks) > 0) & (numbers[:-1] >= 1))
        rate = self._rates.get(block.group, 0.0)
        if len(ups) == 0 or rate <= 0:
            return None
        i = int(ups[-1])
        lap_s = float(times[i]) + float(ticks[i + 1] - ticks[i]) / rate - float(times[i + 1])
        if not 0 < lap_s < 86400:
            return None
        return {"lap": int(numbers[i]), "lap_ms": round(lap_s * 1000)}

    async def _send_status(self, snapshot: Mapping[str, Any]) -> None:
        doc = status_message(
            snapshot,
            rig=self.rig,
            fleet=self.snapshot(),
            last_laps=self._last_laps,
            interval_s=self.settings.status_interval_s,
        )
        self._prev_status = doc
        if await self._publish(subject_status(self.rig), json_line(doc)):
            self.status_sent += 1

    def _take_status(self, snapshot: Mapping[str, Any]) -> None:
        self._status_doc = snapshot
        if self._sleeping and self._wake_fut is not None:
            self._sleeping = False
            _resolve(self._wake_fut)

    # --- the upload queue -------------------------------------------------------------------

    async def _open_queue(self) -> None:
        try:
            entries = await asyncio.to_thread(self._queue.open)
        except OSError as exc:
            self.upload_error = f"upload queue {self._queue.directory}: {exc.strerror or exc}"
            log.error("fleet: %s; uploads are off until it can be created", self.upload_error)
            return
        for entry in entries:
            self._track(entry, _size_of(entry.path))
        if entries:
            log.info(
                "fleet: %d upload(s) waiting from before (%d bytes)", len(entries), self.uploads_queued_bytes
            )
        if self.settings.upload_existing:
            found = await asyncio.to_thread(
                self._queue.scan,
                self.output_dir,
                before_ns=self.started_ns - 1_000_000_000,
                exclude=set(self._open_files),
                pending=[e.path for e in self._pending.values()],
            )
            for path in found:
                frames, complete = await asyncio.to_thread(_recording_state, path)
                await self._enqueue(path, frames=frames, complete=complete)
            if found:
                log.info("fleet: queued %d finished file(s) found in %s", len(found), self.output_dir)
        self.queue_loaded = True

    def _track(self, entry: UploadEntry, size: int) -> None:
        old = self._sizes.get(entry.id)
        if old is not None:
            self.uploads_queued_bytes -= old
        else:
            self.uploads_queued += 1
        self._pending[entry.id] = entry
        self._sizes[entry.id] = size
        self.uploads_queued_bytes += size

    def _untrack(self, entry: UploadEntry) -> None:
        if self._pending.pop(entry.id, None) is not None:
            self.uploads_queued -= 1
            self.uploads_queued_bytes -= self._sizes.pop(entry.id, 0)
        self._retry_at.pop(entry.id, None)

    async def _enqueue(
        self, path: Path, *, group: str = "", frames: int = -1, complete: bool | None = None
    ) -> None:
        try:
            rel = str(path.relative_to(self.output_dir))
        except ValueError:
            rel = path.name
        try:
            entry = await asyncio.to_thread(
                self._queue.add,
                path,
                object_name=object_name(self.rig, rel),
                group=group,
                frames=frames,
                complete=complete,
            )
        except OSError as exc:
            self.upload_error = f"cannot queue {path}: {exc.strerror or exc}"
            log.error("fleet: %s", self.upload_error)
            return
        self._track(entry, _size_of(str(path)))
        if self._work is not None:
            self._work.set()

    async def _save(self, entry: UploadEntry) -> UploadEntry:
        await asyncio.to_thread(self._queue.save, entry)
        self._pending[entry.id] = entry
        return entry

    def _next_entry(self) -> tuple[UploadEntry | None, float]:
        """The oldest entry due now, or (None, seconds until the next one is due)."""
        now = time.monotonic()
        wait = 3600.0
        for entry in sorted(self._pending.values(), key=lambda e: (e.queued_us, e.id)):
            due = self._retry_at.get(entry.id, 0.0)
            if due <= now:
                return entry, 0.0
            wait = min(wait, due - now)
        return None, wait

    async def _uploads(self) -> None:
        assert self._connected is not None and self._work is not None
        while True:
            await self._connected.wait()
            entry, wait = self._next_entry()
            if entry is None or not self._setup_done or self._uploader is None:
                self._work.clear()
                if not self._setup_done:
                    wait = min(wait, 5.0)
                    if self._online:
                        await self._setup()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._work.wait(), wait)
                continue
            await self._upload_one(entry)

    async def _upload_one(self, entry: UploadEntry) -> None:
        assert self._uploader is not None
        size = self._sizes.get(entry.id, 0)
        self.uploading = {"object": entry.object, "path": entry.path, "sent_bytes": 0, "size": size}

        def progress(sent: int, total: int) -> None:
            if self.uploading is not None:
                self.uploading["sent_bytes"] = sent
                self.uploading["size"] = total

        headers = {"Wrtfd-Rig": self.rig}
        if entry.group:
            headers["Wrtfd-Group"] = entry.group
        if entry.frames >= 0:
            headers["Wrtfd-Frames"] = str(entry.frames)
        if entry.complete is not None:
            headers["Wrtfd-Complete"] = "true" if entry.complete else "false"
        self._attempt = asyncio.create_task(
            self._uploader.upload(entry, headers=headers, save=self._save, progress=progress)
        )
        try:
            result = await self._attempt
        except FileGoneError as exc:
            self.uploads_gone += 1
            log.warning("fleet: %s; dropped from the upload queue", exc)
            await asyncio.to_thread(self._queue.drop, entry)
            self._untrack(entry)
            return
        except asyncio.CancelledError:
            if self._stop is not None and self._stop.is_set():
                raise
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise
            await self._failed(entry, "the connection was lost during the upload")
            return
        except Exception as exc:
            await self._failed(entry, describe_error(exc))
            return
        finally:
            self._attempt = None
            self.uploading = None
        entry = self._pending.get(entry.id, result.entry)
        try:
            await asyncio.to_thread(
                self._queue.done, entry, size=result.size, mtime_ns=result.mtime_ns, sha256=result.sha256
            )
        except OSError as exc:
            self.upload_error = f"upload queue: {exc.strerror or exc}"
            log.error("fleet: %s", self.upload_error)
            return
        self._untrack(entry)
        self.uploads_done += 1
        self.uploads_done_bytes += result.size
        how = (
            "already there"
            if result.resumed_at_chunk < 0
            else (f"resumed at chunk {result.resumed_at_chunk}" if result.resumed_at_chunk else "uploaded")
        )
        log.info(
            "fleet: %s -> %s/%s (%d bytes, %s, verified)",
            entry.path,
            self.settings.bucket,
            entry.object,
            result.size,
            how,
        )
        deleted = False
        if self.settings.delete_after_upload:
            try:
                await asyncio.to_thread(os.unlink, entry.path)
                deleted = True
            except OSError as exc:
                log.warning("fleet: uploaded but cannot delete %s: %s", entry.path, exc.strerror or exc)
        await self._send_event(
            {
                "type": "file_uploaded",
                "time_us": time.time_ns() // 1000,
                "group": entry.group,
                "path": entry.path,
                "object": entry.object,
                "bucket": self.settings.bucket,
                "bytes": result.size,
                "sha256": result.sha256,
                "deleted_locally": deleted,
            }
        )

    async def _failed(self, entry: UploadEntry, text: str) -> None:
        self.upload_failures += 1
        attempts = entry.attempts + 1
        self.upload_error = f"{entry.object}: {text}"
        delay = min(UPLOAD_RETRY_MAX_S, 2.0 ** min(attempts, 6))
        self._retry_at[entry.id] = time.monotonic() + delay
        log.warning(
            "fleet: upload of %s failed (attempt %d): %s; retrying in %.0f s",
            entry.path,
            attempts,
            text,
            delay,
            extra={"rate_key": f"fleet-upload:{entry.id}"},
        )
        current = self._pending.get(entry.id, entry)
        new = replace(current, attempts=attempts, last_error=text[:500])
        self._pending[entry.id] = new
        with contextlib.suppress(OSError):
            await asyncio.to_thread(self._queue.save, new)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _recording_state(path: Path) -> tuple[int, bool]:
    """(frames, complete) of a recording found on disk: a file left without its document footer
    (a crash, a power cut) is incomplete, and so is one the reader cannot open (-1 frames)."""
    try:
        with Reader(path) as r:
            return sum(s.frame_count for s in r.sessions), bool(r.complete)
    except (OSError, WrtfdError):
        return -1, False


def _connected_url(nc: Any) -> str | None:
    url = getattr(nc, "connected_url", None) if nc is not None and nc.is_connected else None
    if url is None:
        return None
    return f"{url.scheme}://{url.hostname}:{url.port}"


def _size_of(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _event_doc(item: RecordingEvent) -> dict[str, Any]:
    doc: dict[str, Any] = {"type": EVENT_KINDS.get(type(item), type(item).__name__)}
    doc.update(asdict(item))
    doc.setdefault("time_us", time.time_ns() // 1000)
    return doc
