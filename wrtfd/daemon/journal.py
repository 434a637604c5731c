"""The journal that tells the story: one log line per lifecycle event of the recording.

An observer of the :class:`~wrtfd.recorder.observe.ObserverHub`, like every other consumer of the
recording. What an operator reading ``journalctl -u wrtfd`` after a track day sees::

    source forza: first sample
    session started in group main (first data)
    file opened for group main: /var/lib/wrtfd/2026-05-01_10-00-00_forza.wrtf
    session ended in group main (requested, SIGHUP): 61.3 s, 3678 frames, 0 dropped ticks, 2 laps,
        best 28.417 s
    session started in group main (requested, SIGHUP)
    source gps: silent for 10.4 s
    file rotated for group main: now writing /var/lib/wrtfd/..._forza.wrtf
    lap 3 completed in group main: 1:28.417 (sectors 29.102, 31.870, 27.445)
    file closed for group main: /var/lib/wrtfd/..._forza.wrtf, 3678 frames, 1.2 MiB, complete
    disk low: 150 MiB free on /var/lib/wrtfd (below 200 MiB)

Lines are at info; a source going silent, a disk getting full and a file left incomplete are
warnings; a write that failed (ENOSPC, EACCES, the directory removed...) is an error naming the
file and the error, the file it ended is named with the frames it holds (or as removed, when it
held none), and the session-ended line of a session that lost frames that way says they were
not all written::

    write failed for group main: /var/lib/wrtfd/..._forza.wrtf: No space left on device (ENOSPC);
        frames are dropped (counted in wrtfd status) until a new file is tried in 1 s
    file closed for group main: /var/lib/wrtfd/..._forza.wrtf, 983 frames, 0.4 MiB, incomplete
        after a write error (No space left on device (ENOSPC)): wrtfd repair finalizes it
    session ended in group main (stopping): 21.2 s, 1272 frames, 0 dropped ticks; NOT all
        written: a write failed (see the file lines for what the files hold)
 Each kind of line (sessions, files, per group; per source; disk) is rate limited like
the drop lines, with a burst: at most :data:`BURST` lines in any ``logging.repeat_interval_s``,
so a flapping source or a rotation every second cannot flood the journal; the next line that
passes says how many were held back, and so does a last line at shutdown.

The observer contract (:mod:`wrtfd.recorder.observe`): :meth:`Journal.notify` only appends to a
bounded buffer and schedules :meth:`Journal.flush` on the event loop; the log calls run there.
File events come from the writer thread, which must never wait on the journal's pipe, so they
are handed to the loop (``call_soon_threadsafe``) like the others. Events beyond
:data:`CAPACITY` waiting at once are counted and reported in one line.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from wrtfd.daemon.logs import RateLimiter
from wrtfd.recorder.observe import (
    DiskSpaceChanged,
    FileClosed,
    FileOpened,
    LapCompleted,
    LiveFrames,
    MarkerAdded,
    ObserverHub,
    RecordingEvent,
    SessionEnded,
    SessionStarted,
    SourceStateChanged,
    WriteFailed,
)

__all__ = ["BURST", "CAPACITY", "Journal", "describe", "start_journal"]

log = logging.getLogger("wrtfd.journal")

#: Lines of one kind (per group or source) let through in one interval before the limit applies.
BURST = 10
#: Events waiting for the loop at most; more are counted as lost.
CAPACITY = 1024

#: start_reason / end_reason -> words for people.
_STARTED = {
    "first": "first data",
    "idle": "data again after an idle pause",
    "new_session": "new game session",
    "session": "new game session",
    "max_duration": "max_session_s reached",
    "request": "requested, SIGHUP",
    "rotate": "file rotation",
    "resume": "resumed after an I/O error",
}
_ENDED = {
    "idle": "idle",
    "new_session": "new game session",
    "session": "new game session",
    "max_duration": "max_session_s reached",
    "request": "requested, SIGHUP",
    "stop": "stopping",
    "end": "end of data",
}


def _size(n: int) -> str:
    if n < 1 << 20:
        return f"{n / 1024:.1f} KiB"
    if n < 1 << 30:
        return f"{n / (1 << 20):.1f} MiB"
    return f"{n / (1 << 30):.2f} GiB"


def describe(event: RecordingEvent, *, write_failed: bool = False) -> tuple[int, str, str] | None:
    """``(level, line, rate key)`` for an event (pure); None for events the journal skips.

    ``write_failed``: a write of the event's group failed during the session (a session-ended
    line then says that its frames were not all written)."""
    level = logging.INFO
    if isinstance(event, WriteFailed):
        key = f"write:{event.group}"
        level = logging.ERROR
        then = (
            "; the file is left as far as it got"
            if event.retry_s is None
            else "; frames are dropped (counted in wrtfd status) until a new file is tried"
            f" in {event.retry_s:g} s"
        )
        text = f"write failed for group {event.group}: {event.path}: {event.error}{then}"
    elif isinstance(event, SessionStarted | SessionEnded):
        key = f"session:{event.group}"
        if isinstance(event, SessionStarted):
            text = f"session started in group {event.group} ({_STARTED.get(event.reason, event.reason)})"
        else:
            text = (
                f"session ended in group {event.group} ({_ENDED.get(event.reason, event.reason)}):"
                f" {event.duration_s:.1f} s, {event.frames} frames, {event.dropped_ticks} dropped ticks"
            )
            if event.laps is not None:
                text += f", {event.laps} lap{'' if event.laps == 1 else 's'}"
            if event.best_lap_s is not None:
                text += f", best {event.best_lap_s:.3f} s"
            if write_failed:
                level = logging.WARNING
                text += "; NOT all written: a write failed (see the file lines for what the files hold)"
    elif isinstance(event, FileOpened):
        key = f"file:{event.group}"
        if event.reason == "rotate":
            text = f"file rotated for group {event.group}: now writing {event.path}"
        else:
            after = " after an I/O error" if event.reason == "resume" else ""
            text = f"file opened for group {event.group}{after}: {event.path}"
    elif isinstance(event, FileClosed):
        key = f"file:{event.group}"
        text = (
            f"file closed for group {event.group}: {event.path}, {event.frames} frames, {_size(event.bytes)}"
        )
        if event.error and event.frames == 0:
            level = logging.WARNING
            text = f"file removed for group {event.group}: {event.path}: nothing written ({event.error})"
        elif event.error:
            level = logging.WARNING
            text += f", incomplete after a write error ({event.error}): wrtfd repair finalizes it"
        elif event.complete:
            text += ", complete"
        else:
            level = logging.WARNING
            text += ", incomplete (wrtfd repair finalizes it)"
    elif isinstance(event, SourceStateChanged):
        key = f"source:{event.source}"
        gap_s = event.silent_s or 0.0
        if event.state == "first_sample":
            text = f"source {event.source}: first sample"
        elif event.state == "silent":
            level = logging.WARNING
            text = f"source {event.source}: silent for {gap_s:.1f} s"
        elif event.state == "back":
            text = f"source {event.source}: receiving again after about {gap_s:.1f} s of silence"
        else:
            text = f"source {event.source}: {event.state}"
    elif isinstance(event, DiskSpaceChanged):
        key = "disk"
        free = f"{event.free_bytes // (1 << 20)} MiB free on {event.path}"
        if event.low:
            level = logging.WARNING
            text = f"disk low: {free} (below {event.min_free_bytes // (1 << 20)} MiB)"
        else:
            text = f"disk space ok again: {free}"
    elif isinstance(event, LapCompleted):
        key = f"lap:{event.group}"
        from wrtfd.tracks.laps import format_lap_time  # a daemon without laps never loads it

        text = f"lap {event.lap} completed in group {event.group}: {format_lap_time(event.time_s)}"
        if event.sectors_s:
            text += f" (sectors {', '.join(format_lap_time(s) for s in event.sectors_s)})"
        if event.valid is False:
            text += ", invalid (the game says)"
        if event.pit is not None:
            text += f", {event.pit}-lap (through the pit lane)"
    elif isinstance(event, MarkerAdded):
        key = f"marker:{event.group}"
        text = f"marker in group {event.group} at tick {event.tick}" + (
            f": {event.note}" if event.note else ""
        )
    else:
        return None
    return level, text, key


class Journal:
    """The journal observer (see the module docstring); :meth:`start` binds it to the loop.

    ``interval_s`` is ``logging.repeat_interval_s``; ``clock`` (monotonic seconds) is for tests.
    """

    def __init__(
        self,
        logger: logging.Logger = log,
        *,
        interval_s: float = 10.0,
        burst: int = BURST,
        capacity: int = CAPACITY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log = logger
        self._limiter = RateLimiter(interval_s, burst)
        self._clock = clock
        self._capacity = max(1, capacity)
        self._pending: deque[RecordingEvent] = deque()
        self._lock = threading.Lock()
        self._scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self.lost = 0
        self._lost_reported = 0
        # Groups whose writes fail (until a file opens again); groups with a failed write in
        # their current session (its session-ended line says so).
        self._failing: set[str] = set()
        self._failed_in_session: set[str] = set()

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Log on ``loop`` from now on (call it on that loop's thread)."""
        self._loop = loop
        self._loop_thread = threading.get_ident()

    def notify(self, item: RecordingEvent | LiveFrames) -> None:
        if isinstance(item, LiveFrames):
            return
        with self._lock:
            if len(self._pending) >= self._capacity:
                self.lost += 1
                return
            self._pending.append(item)
            if self._scheduled:
                return
            self._scheduled = True
        loop = self._loop
        if loop is None:
            return  # not started: the next flush() logs it
        try:
            if threading.get_ident() == self._loop_thread:
                loop.call_soon(self.flush)
            else:
                loop.call_soon_threadsafe(self.flush)
        except RuntimeError:  # the loop is closed: the daemon's last flush() logs it
            with self._lock:
                self._scheduled = False

    def flush(self, *, final: bool = False) -> None:
        """Log every waiting event (on the loop). ``final``: the daemon is stopping; also say
        how many lines the rate limit held back that no later line reported."""
        with self._lock:
            events = list(self._pending)
            self._pending.clear()
            self._scheduled = False
            lost = self.lost - self._lost_reported
            self._lost_reported = self.lost
        for event in events:
            group = getattr(event, "group", None)
            if isinstance(event, WriteFailed):
                self._failing.add(event.group)
                self._failed_in_session.add(event.group)
            elif isinstance(event, FileOpened):
                self._failing.discard(event.group)  # a new file: writing works again
            elif isinstance(event, SessionStarted) and event.group not in self._failing:
                self._failed_in_session.discard(event.group)
            line = describe(event, write_failed=group in self._failed_in_session)
            if line is None:
                continue
            level, text, key = line
            allowed, held = self._limiter.allow(key, self._clock())
            if allowed:
                more = f" ({held} similar messages suppressed)" if held else ""
                self._log.log(level, "%s%s", text, more)
        if lost:
            self._log.warning("journal: %d lifecycle event(s) not logged (too many at once)", lost)
        if final:
            held_back = self._limiter.take_suppressed()
            if held_back:
                detail = ", ".join(f"{key} x{n}" for key, n in sorted(held_back.items()))
                self._log.info("journal: lines held back by the rate limit: %s", detail)


def start_journal(hub: ObserverHub, *, interval_s: float) -> Journal:
    """A journal observing ``hub``, logging on the running event loop."""
    journal = Journal(interval_s=interval_s)
    journal.start(asyncio.get_running_loop())
    hub.add(journal, frames=False)  # events only: no frame copies for the journal
    return journal
