"""Markers written into frames by the recorder: at their tick, durable as frames, published live."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import numpy as np
import pytest

from tests.recorder.conftest import GAME_DEF, START_US, T0_NS, game_stream
from tests.recorder.test_live import GAME as LIVE_GAME
from tests.recorder.test_live import _policy
from tests.recorder.test_observe import Collect
from wrtfd.decoders.base import Sample
from wrtfd.format import Reader, validate_file
from wrtfd.format.markers import Marker, read_markers
from wrtfd.recorder import LiveRecorder, Recorder, RecorderPolicy, SourceSpec, replay
from wrtfd.recorder.markers import MAX_PENDING, TooManyMarkersError
from wrtfd.recorder.observe import MarkerAdded, ObserverHub

GAME = SourceSpec("game", GAME_DEF)
S = 1_000_000_000


def test_markers_land_at_their_tick_even_back_to_back(out_dir: Path) -> None:
    marks = [
        (T0_NS + 10 * S, "first"),
        (T0_NS + 10 * S + 1_000_000, "second, 1 ms later"),
        (T0_NS + 25 * S, ""),
    ]
    (path,) = replay(
        game_stream(40 * 60),
        [GAME],
        RecorderPolicy(output_dir=out_dir),
        start_timestamp_us=START_US,
        marks=marks,
    )
    assert validate_file(path) == []
    with Reader(path) as r:
        found = read_markers(r, 0)
        times = r.frame_times_us(0)
        ids = np.array(r.frames(0)["marker"]["id"])
    assert found == [
        Marker(600, START_US + 10_000_000, "first"),
        Marker(600, START_US + 10_001_000, "second, 1 ms later"),
        Marker(1500, START_US + 25_000_000, ""),
    ]
    for m in found:  # the frame at the marker's tick is the moment it was asked for (within a tick)
        assert abs(times[m.tick] - m.wall_us) <= 1_000_000 / 60
    # the marker bytes are in frames after the tick only, and nowhere else
    assert set(np.flatnonzero(ids).tolist()) <= set(range(600, 620)) | set(range(1500, 1510))


def test_a_marker_outside_a_session_is_refused_and_one_whose_session_ends_is_dropped(out_dir: Path) -> None:
    rec = Recorder([GAME], RecorderPolicy(output_dir=out_dir, session_idle_s=1.0))
    rec.set_origin(T0_NS, START_US)
    assert rec.mark(T0_NS, START_US, "nothing recording") is None
    for s in game_stream(120):
        rec.push(s)
        rec.apply(rec.advance(s.rx_ns))
    # in a session now; the marker's tick (10 s later than now) will never be written
    assert rec.mark(T0_NS + 10 * S, START_US, "too late") is not None
    rec.apply(rec.advance(T0_NS + 5 * S))  # idle: the session ends
    assert rec.markers.dropped == 1 and rec.markers.placed == 0
    rec.apply(rec.finish())
    rec.close()


def test_pending_markers_are_bounded(out_dir: Path) -> None:
    rec = Recorder([GAME], RecorderPolicy(output_dir=out_dir))
    rec.set_origin(T0_NS, START_US)
    for s in game_stream(60):
        rec.push(s)
        rec.advance(s.rx_ns)
    accepted = [rec.mark(T0_NS + 100 * S, START_US, str(i)) for i in range(MAX_PENDING)]
    assert all(a is not None for a in accepted)
    for _ in range(5):  # refused as such (not "no session"), and counted
        with pytest.raises(TooManyMarkersError):
            rec.mark(T0_NS + 100 * S, START_US, "one too many")
    assert rec.markers.refused == 5 and rec.markers.requested == MAX_PENDING
    rec.close()


def test_a_session_rotated_mid_record_keeps_the_marker_in_the_first_file(out_dir: Path) -> None:
    policy = RecorderPolicy(output_dir=out_dir, rotate_s=10.0)
    marks = [(T0_NS + 10 * S - 50_000_000, "x" * 60)]  # its record spreads over the rotation
    paths = replay(game_stream(20 * 60), [GAME], policy, start_timestamp_us=START_US, marks=marks)
    assert len(paths) == 2
    found = []
    for p in paths:
        with Reader(p) as r:
            found.append([m.note for i in range(len(r.sessions)) for m in read_markers(r, i)])
    assert found[0] == [] or found[0][0].startswith("x")
    assert sum(len(f) for f in found) == 1  # once, never twice


async def test_live_marker_is_written_and_published(out_dir: Path) -> None:
    hub = ObserverHub()
    seen = Collect()
    hub.add(seen)
    live = LiveRecorder([LIVE_GAME], _policy(out_dir), hub=hub, group="rig")
    tick = None
    async with anyio.create_task_group() as tg:
        await tg.start(live.run)
        t0 = time.monotonic()
        for i in range(90):
            live.sink(Sample("game", time.monotonic_ns(), {"speed": float(i), "gear": 1, "n": i}))
            if i == 45:
                wall = time.time_ns() // 1000
                tick = live.mark("pit entry")
            await anyio.sleep(max(0.0, t0 + (i + 1) / 60 - time.monotonic()))
        await live.stop()
    assert tick is not None
    (added,) = [i for i in seen.items if isinstance(i, MarkerAdded)]
    assert (added.group, added.tick, added.note) == ("rig", tick, "pit entry")
    (path,) = live.recorder.paths
    with Reader(path) as r:
        (m,) = read_markers(r, 0)
        n = np.array(r.frames(0)["game"]["n"])
        ticks = np.array(r.frames(0)["tick"])
    assert (m.tick, m.note) == (tick, "pit entry") and abs(m.wall_us - wall) < 50_000
    assert abs(int(n[np.searchsorted(ticks, tick)]) - 45) <= 3  # the frame of that moment
    assert live.stats_snapshot()["markers"] == 1
