"""The lifecycle journal: its lines, the observer contract (no I/O in notify, writer-thread events
logged on the loop), its bound and its rate limit. The daemon's own stderr is checked end to end
in tests/e2e/test_daemon_journal.py."""

from __future__ import annotations

import asyncio
import logging
import threading

import numpy as np
import pytest

from wrtfd.daemon.journal import Journal, describe
from wrtfd.recorder.observe import (
    DiskSpaceChanged,
    FileClosed,
    FileOpened,
    LiveFrames,
    MarkerAdded,
    ObserverHub,
    SessionEnded,
    SessionStarted,
    SourceStateChanged,
)

INFO, WARNING = logging.INFO, logging.WARNING


@pytest.mark.parametrize(
    ("event", "level", "line"),
    [
        (SessionStarted("main", "first", 0), INFO, "session started in group main (first data)"),
        (SessionStarted("car", "request", 0), INFO, "session started in group car (requested, SIGHUP)"),
        (SessionStarted("car", "new_session", 0), INFO, "session started in group car (new game session)"),
        (
            SessionStarted("car", "idle", 0),
            INFO,
            "session started in group car (data again after an idle pause)",
        ),
        (
            SessionEnded("main", "idle", 3678, 2, 61.3, 2, 28.4167),
            INFO,
            "session ended in group main (idle): 61.3 s, 3678 frames, 2 dropped ticks, 2 laps, best 28.417 s",
        ),
        (
            SessionEnded("main", "request", 60, 0, 1.0, 1, 11.65),
            INFO,
            "session ended in group main (requested, SIGHUP): 1.0 s, 60 frames, 0 dropped ticks, 1 lap,"
            " best 11.650 s",
        ),
        (
            SessionEnded("gps", "stop", 10, 0, 1.0),  # no lap channels: no laps
            INFO,
            "session ended in group gps (stopping): 1.0 s, 10 frames, 0 dropped ticks",
        ),
        (FileOpened("main", "/r/a.wrtf", 0), INFO, "file opened for group main: /r/a.wrtf"),
        (
            FileOpened("main", "/r/b.wrtf", 0, "rotate"),
            INFO,
            "file rotated for group main: now writing /r/b.wrtf",
        ),
        (
            FileOpened("main", "/r/c.wrtf", 0, "resume"),
            INFO,
            "file opened for group main after an I/O error: /r/c.wrtf",
        ),
        (
            FileClosed("main", "/r/a.wrtf", 900, 369_152, True),
            INFO,
            "file closed for group main: /r/a.wrtf, 900 frames, 360.5 KiB, complete",
        ),
        (
            FileClosed("main", "/r/a.wrtf", 9, 3 << 20, False),
            WARNING,
            "file closed for group main: /r/a.wrtf, 9 frames, 3.0 MiB,"
            " incomplete (wrtfd repair finalizes it)",
        ),
        (SourceStateChanged("gps", "first_sample", 0), INFO, "source gps: first sample"),
        (SourceStateChanged("gps", "silent", 0, 10.44), WARNING, "source gps: silent for 10.4 s"),
        (
            SourceStateChanged("gps", "back", 0, 12.0),
            INFO,
            "source gps: receiving again after about 12.0 s of silence",
        ),
        (
            DiskSpaceChanged("/var/lib/wrtfd", True, 150 << 20, 200 << 20, 0),
            WARNING,
            "disk low: 150 MiB free on /var/lib/wrtfd (below 200 MiB)",
        ),
        (
            DiskSpaceChanged("/var/lib/wrtfd", False, 300 << 20, 200 << 20, 0),
            INFO,
            "disk space ok again: 300 MiB free on /var/lib/wrtfd",
        ),
        (MarkerAdded("main", 120, 0, "pit in"), INFO, "marker in group main at tick 120: pit in"),
    ],
)
def test_each_event_is_one_line(event: object, level: int, line: str) -> None:
    described = describe(event)  # type: ignore[arg-type]
    assert described is not None
    assert described[:2] == (level, line)


class Lines(logging.Handler):
    """Collects (message, thread id) of every record."""

    def __init__(self) -> None:
        super().__init__()
        self.got: list[tuple[str, int]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.got.append((record.getMessage(), record.thread or 0))

    @property
    def messages(self) -> list[str]:
        return [m for m, _ in self.got]


@pytest.fixture
def lines() -> Lines:
    logger = logging.getLogger("test.journal")
    logger.handlers[:] = []
    handler = Lines()
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return handler


def _frames() -> LiveFrames:
    return LiveFrames("main", None, np.zeros(3, dtype=[("tick", "<u8")]), np.zeros(3, dtype=np.int64))


async def test_notify_only_queues_and_the_loop_logs(lines: Lines) -> None:
    journal = Journal(logging.getLogger("test.journal"))
    journal.start(asyncio.get_running_loop())
    hub = ObserverHub()
    hub.add(journal)
    hub.publish(SessionStarted("main", "first", 0))
    hub.publish(_frames())  # frames are not the journal's business
    assert lines.got == []  # nothing written inside notify
    await asyncio.sleep(0)
    assert lines.messages == ["session started in group main (first data)"]
    assert hub.failed == 0


async def test_writer_thread_events_are_logged_on_the_loop_in_order(lines: Lines) -> None:
    journal = Journal(logging.getLogger("test.journal"))
    journal.start(asyncio.get_running_loop())
    loop_thread = threading.get_ident()
    queued = threading.Event()

    def writer() -> None:  # what FileSink does on the writer thread
        journal.notify(FileClosed("main", "/r/a.wrtf", 1, 4096, True))
        journal.notify(FileOpened("main", "/r/b.wrtf", 0, "rotate"))
        queued.set()

    thread = threading.Thread(target=writer)
    thread.start()
    thread.join()
    assert queued.is_set() and lines.got == []
    for _ in range(100):
        if len(lines.got) == 2:
            break
        await asyncio.sleep(0.01)
    assert lines.messages == [
        "file closed for group main: /r/a.wrtf, 1 frames, 4.0 KiB, complete",
        "file rotated for group main: now writing /r/b.wrtf",
    ]
    assert {t for _, t in lines.got} == {loop_thread}


def test_bounded_and_lost_events_are_reported(lines: Lines) -> None:
    journal = Journal(logging.getLogger("test.journal"), capacity=3)  # not started: flush() logs
    for i in range(5):
        journal.notify(SourceStateChanged(f"s{i}", "first_sample", 0))
    assert journal.lost == 2
    journal.flush()
    assert lines.messages == [
        "source s0: first sample",
        "source s1: first sample",
        "source s2: first sample",
        "journal: 2 lifecycle event(s) not logged (too many at once)",
    ]


def test_rate_limited_with_a_burst_and_held_back_lines_reported_at_the_end(lines: Lines) -> None:
    now = [0.0]
    journal = Journal(logging.getLogger("test.journal"), interval_s=10.0, burst=2, clock=lambda: now[0])
    for state in ("silent", "back", "silent", "back"):  # a flapping source
        journal.notify(SourceStateChanged("gps", state, 0, 1.0))
    journal.notify(SessionStarted("main", "first", 0))  # another kind: its own limit
    journal.flush()
    assert lines.messages == [
        "source gps: silent for 1.0 s",
        "source gps: receiving again after about 1.0 s of silence",
        "session started in group main (first data)",
    ]
    now[0] = 11.0
    journal.notify(SourceStateChanged("gps", "silent", 0, 3.0))
    journal.notify(SourceStateChanged("gps", "back", 0, 3.0))
    journal.notify(SourceStateChanged("gps", "silent", 0, 3.0))
    journal.flush(final=True)
    assert lines.messages[3:] == [
        "source gps: silent for 3.0 s (2 similar messages suppressed)",
        "source gps: receiving again after about 3.0 s of silence",
        "journal: lines held back by the rate limit: source:gps x1",
    ]
