"""The observer hub: what a live recording tells its observers, and that observers can't hurt it."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import numpy as np

from tests.recorder.conftest import START_US, game_stream
from tests.recorder.test_live import GAME, _feed, _policy
from wrtfd.format import Reader
from wrtfd.recorder import LiveRecorder, Recorder, RecorderPolicy
from wrtfd.recorder.observe import (
    DiskSpaceChanged,
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


class Unwatched(Collect):
    def __init__(self) -> None:
        super().__init__()
        self.wants_frames = False


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
    assert all(
        i.group == "rig" for i in seen.items if not isinstance(i, SourceStateChanged | DiskSpaceChanged)
    )

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
    # Field by field: the disk's frames also carry the frame check, which the writer adds.
    assert live_frames.dtype.names is not None
    for name in live_frames.dtype.names:
        assert live_frames[name].tobytes() == disk[name].tobytes(), name
    assert np.array_equal(live_times, disk_times)
    # File events come from the writer thread, frames and sessions from the event loop.
    assert "wrtfd-writer" in seen.threads and len(seen.threads) == 2


async def test_no_observer_no_copy(out_dir: Path) -> None:
    hub = ObserverHub()
    assert not hub.wants_frames
    events_only, frames_too = Collect(), Collect()
    hub.add(events_only, frames=False)  # the raw tap's and the journal's way
    assert not hub.wants_frames
    hub.add(frames_too)
    assert hub.wants_frames
    hub.remove(frames_too)
    unwatched = Unwatched()  # a frame observer with nobody behind it for now (a page, a client)
    hub.add(unwatched)
    assert not hub.wants_frames
    unwatched.wants_frames = True
    assert hub.wants_frames
    hub.remove(unwatched)
    hub.remove(events_only)
    assert not hub.wants_frames
    live = LiveRecorder([GAME], _policy(out_dir), hub=hub, group="g")
    async with anyio.create_task_group() as tg:
        await tg.start(live.run)
        await _feed(live, 20)
        await live.stop()
    assert hub.failed == 0 and live.recorder.paths


async def test_an_events_only_observer_gets_no_frames_and_costs_no_copies(out_dir: Path) -> None:
    hub = ObserverHub()
    events = Collect()
    hub.add(events, frames=False)  # what the journal does
    assert not hub.wants_frames
    live = LiveRecorder([GAME], _policy(out_dir), hub=hub, group="g")
    async with anyio.create_task_group() as tg:
        await tg.start(live.run)
        await _feed(live, 20)
        await live.stop()
    kinds = {type(i).__name__ for i in events.items}
    assert kinds == {"SessionStarted", "SessionEnded", "FileOpened", "FileClosed"}
    frames = Collect()
    hub.add(frames)
    assert hub.wants_frames
    hub.remove(frames)
    assert not hub.wants_frames


def _record_with_events(out_dir: Path, samples: list, **policy: object) -> list[RecordingEvent | LiveFrames]:
    """Drive a Recorder as replay() does, with the sink's file events collected."""
    seen = Collect()
    rec = Recorder([GAME], RecorderPolicy(output_dir=out_dir, **policy))  # type: ignore[arg-type]
    rec.sink.on_event = seen.notify
    rec.sink.group = "g"
    rec.set_origin(samples[0].rx_ns, START_US)
    try:
        for s in samples:
            rec.apply(rec.advance(s.rx_ns))
            rec.push(s)
        rec.apply(rec.finish("end"))
    finally:
        rec.close()
    return seen.items


def test_file_events_say_which_opening_is_a_rotation(out_dir: Path) -> None:
    by_size = _record_with_events(out_dir / "size", game_stream(600), rotate_s=2.0)
    opened = [e for e in by_size if isinstance(e, FileOpened)]
    closed = [e for e in by_size if isinstance(e, FileClosed)]
    assert [e.reason for e in opened] == ["first", "rotate", "rotate", "rotate", "rotate"]
    assert [e.path for e in opened] == [e.path for e in closed]  # each closed once, in order
    assert sum(e.frames for e in closed) == 600 and all(e.complete for e in closed)
    # rotate_sessions: the file after the first session is a rotation too
    by_sessions = _record_with_events(
        out_dir / "sessions", game_stream(600, new_session_at=300), rotate_sessions=1
    )
    assert [e.reason for e in by_sessions if isinstance(e, FileOpened)] == ["first", "rotate"]
