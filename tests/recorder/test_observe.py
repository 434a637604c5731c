"""The observer hub: what a live recording tells its observers, and that observers can't hurt it."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import numpy as np

from tests.recorder.test_live import GAME, _feed, _policy
from wrtfd.format import Reader
from wrtfd.recorder import LiveRecorder
from wrtfd.recorder.observe import (
    FileClosed,
    FileOpened,
    LiveFrames,
    ObserverHub,
    RecordingEvent,
    SessionEnded,
    SessionStarted,
    SourceStateChanged,
)


class Collect:
    def __init__(self) -> None:
        self.items: list[RecordingEvent | LiveFrames] = []
        self.threads: set[str] = set()

    def notify(self, item: RecordingEvent | LiveFrames) -> None:
        self.items.append(item)
        self.threads.add(threading.current_thread().name)


class Broken:
    calls = 0

    def notify(self, item: RecordingEvent | LiveFrames) -> None:
        Broken.calls += 1
        raise RuntimeError("an observer's bug")


async def test_live_recording_publishes_sessions_files_and_frames(out_dir: Path) -> None:
    hub = ObserverHub()
    seen, broken = Collect(), Broken()
    hub.add(broken)
    hub.add(seen)
    live = LiveRecorder([GAME], _policy(out_dir), hub=hub, group="rig")
    async with anyio.create_task_group() as tg:
        await tg.start(live.run)
        await _feed(live, 60, request_at=30)  # SIGHUP's path: a second session
        await live.stop()

    # The broken observer was called once, removed, and the recording went on.
    assert Broken.calls == 1 and hub.failed == 1
    kinds = [type(i).__name__ for i in seen.items if not isinstance(i, LiveFrames)]
    # The session starts on the event loop before the writer thread opens its file.
    assert kinds[:2] == ["SessionStarted", "FileOpened"] and kinds[-1] == "FileClosed"
    assert kinds.count("SessionStarted") == 2 and kinds.count("SessionEnded") == 2
    starts = [i for i in seen.items if isinstance(i, SessionStarted)]
    ends = [i for i in seen.items if isinstance(i, SessionEnded)]
    assert [s.reason for s in starts] == ["first", "request"]
    assert ends[-1].reason == "stop"
    assert all(i.group == "rig" for i in seen.items if not isinstance(i, SourceStateChanged))

    (path,) = live.recorder.paths
    opened = next(i for i in seen.items if isinstance(i, FileOpened))
    closed = next(i for i in seen.items if isinstance(i, FileClosed))
    assert opened.path == closed.path == str(path) and closed.complete
    with Reader(path) as r:
        assert closed.frames == r.total_frames
        assert [s.frame_count for s in r.sessions] == [e.frames for e in ends]
        assert [s.dropped_ticks for s in r.sessions] == [e.dropped_ticks for e in ends]
        # The frames the observers saw are the frames on disk, with the same times (N9).
        blocks = [i for i in seen.items if isinstance(i, LiveFrames)]
        live_frames = np.concatenate([b.frames for b in blocks])
        live_times = np.concatenate([b.times_us for b in blocks])
        disk = np.concatenate([r.frames(i) for i in range(len(r.sessions))])
        disk_times = np.concatenate([r.frame_times_us(i) for i in range(len(r.sessions))])
    assert live_frames.tobytes() == disk.tobytes()
    assert np.array_equal(live_times, disk_times)
    # File events come from the writer thread, frames and sessions from the event loop.
    assert "wrtfd-writer" in seen.threads and len(seen.threads) == 2


async def test_no_observer_no_copy(out_dir: Path) -> None:
    hub = ObserverHub()
    assert not hub.wants_frames
    events_only, frames_too = Collect(), Collect()
    events_only.wants_frames = False  # type: ignore[attr-defined]  # (the raw tap's way)
    hub.add(events_only)
    assert not hub.wants_frames
    hub.add(frames_too)
    assert hub.wants_frames
    hub.remove(frames_too)
    hub.remove(events_only)
    assert not hub.wants_frames
    live = LiveRecorder([GAME], _policy(out_dir), hub=hub, group="g")
    async with anyio.create_task_group() as tg:
        await tg.start(live.run)
        await _feed(live, 20)
        await live.stop()
    assert hub.failed == 0 and live.recorder.paths
