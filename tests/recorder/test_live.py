"""The live driver on the real monotonic clock: intake, writer thread, stop and cancellation."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from tests.recorder.conftest import GAME_DEF
from wrtfd.decoders.base import Sample
from wrtfd.format import EnumDef, Reader, validate_file
from wrtfd.recorder import LiveRecorder, RecorderPolicy, SourceSpec
from wrtfd.sources.base import SinkFull

GAME = SourceSpec("game", GAME_DEF, use_source_clock=False)


def _policy(d: Path, **kw: object) -> RecorderPolicy:
    return RecorderPolicy(output_dir=d, jitter_s=0.05, settle_s=0.1, fsync_interval_s=0.2, **kw)  # type: ignore[arg-type]


async def _feed(live: LiveRecorder, n: int, *, request_at: int | None = None) -> None:
    """A 60 Hz source on the real clock (sleeps are the source's pacing, not test logic)."""
    t0 = time.monotonic()
    for i in range(n):
        live.sink(
            Sample(
                "game",
                time.monotonic_ns(),
                {"speed": float(i), "gear": 1, "n": i},
                session_info={"track": "Monza"} if i == 0 else None,
            )
        )
        if request_at == i:
            live.request_new_session()
        await anyio.sleep(max(0.0, t0 + (i + 1) / 60 - time.monotonic()))


async def test_live_recording_stop_finalizes_the_file(out_dir: Path) -> None:
    live = LiveRecorder([GAME], _policy(out_dir))
    async with anyio.create_task_group() as tg:
        await tg.start(live.run)
        await _feed(live, 90)
        snap = live.stats_snapshot()
        assert snap["state"] == "ok" and snap["samples"] == 90 and snap["progress"] > 0
        await live.stop()
    (path,) = live.recorder.paths
    assert validate_file(path) == []
    with Reader(path) as r:
        assert r.complete
        frames = sum(s.frame_count for s in r.sessions)
        n = [int(x) for i in range(len(r.sessions)) for x in r.frames(i)["game"]["n"]]
    assert n == sorted(n) and n[-1] == 89  # nothing pending was lost on stop
    assert frames >= 85  # an event-loop hiccup may merge two samples into one tick, never reorder
    snap = live.stats_snapshot()
    assert snap["state"] == "stopped" and snap["frames_written"] == frames and snap["file"] is None
    for key in (
        "frames",
        "dropped_ticks",
        "bytes_written",
        "sessions",
        "files",
        "intake_dropped",
        "fsync_lag_s",
        "frame_rate_hz",
        "error",
        "per_source",
    ):
        assert key in snap


async def test_cancellation_still_ends_the_session_and_closes_the_file(out_dir: Path) -> None:
    live = LiveRecorder([GAME], _policy(out_dir))
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            await tg.start(live.run)
            await _feed(live, 45)
            scope.cancel()  # what SIGTERM does to the daemon's task group
    (path,) = live.recorder.paths
    with Reader(path) as r:
        assert r.complete and r.sessions[-1].footer is not None
        assert int(r.frames(len(r.sessions) - 1)["game"]["n"][-1]) == 44


async def test_request_new_session_splits_the_live_recording(out_dir: Path) -> None:
    live = LiveRecorder([GAME], _policy(out_dir))
    async with anyio.create_task_group() as tg:
        await tg.start(live.run)
        await _feed(live, 60, request_at=30)
        await live.stop()
    (path,) = live.recorder.paths
    with Reader(path) as r:
        assert len(r.sessions) == 2
        assert all(r.frames(i)["tick"][0] == 0 for i in range(2))


def test_the_sink_never_blocks_it_refuses_when_full(out_dir: Path) -> None:
    live = LiveRecorder([GAME], _policy(out_dir), intake_capacity=4)
    for i in range(4):
        live.sink(Sample("game", i, {"n": i}))
    with pytest.raises(SinkFull):
        live.sink(Sample("game", 5, {"n": 5}))
    assert live.intake_dropped == 1 and live.stats_snapshot()["intake_queued"] == 4


class SourceDied(Exception):
    pass


async def test_a_fatal_error_in_a_source_still_closes_the_file(out_dir: Path) -> None:
    live = LiveRecorder([GAME], _policy(out_dir))

    async def failing_source() -> None:
        await _feed(live, 40)
        raise SourceDied("serial device unplugged")

    with pytest.raises(BaseExceptionGroup) as info:
        async with anyio.create_task_group() as tg:
            await tg.start(live.run)
            tg.start_soon(failing_source)
    assert info.group_contains(SourceDied)
    (path,) = live.recorder.paths
    with Reader(path) as r:
        assert r.complete
        assert int(r.frames(len(r.sessions) - 1)["game"]["n"][-1]) == 39


async def test_an_idle_recorder_sleeps_and_steps_only_for_samples(out_dir: Path) -> None:
    """No timer turns the engine while nothing arrives; samples wake it, and all of them land."""
    live = LiveRecorder([GAME], _policy(out_dir), idle_check_s=30.0)
    async with anyio.create_task_group() as tg:
        await tg.start(live.run)
        await anyio.sleep(0.3)  # idle: nothing to record (test pacing, not logic)
        assert live.progress == 0 and live.recorder.paths == []
        await _feed(live, 30)
        assert live.progress > 0
        await live.stop()
    (path,) = live.recorder.paths
    with Reader(path) as r:
        assert [int(x) for x in r.frames(0)["game"]["n"]][-1] == 29


async def test_source_clock_records_an_accelerated_feed_at_game_time(out_dir: Path) -> None:
    """``recorder.clock = "source"``: ten game seconds sent in one real second become ten
    seconds of frames, one per game tick; the session then ends on the monotonic clock."""
    clocked = SourceSpec("game", GAME_DEF)
    # jitter_s 0.5 (not _policy's 0.05): a feeding loop stalled by a loaded machine must not look
    # like the source stopping (the clock would fall back to the monotonic one for a moment).
    policy = RecorderPolicy(
        output_dir=out_dir, jitter_s=0.5, settle_s=0.1, fsync_interval_s=0.2, session_idle_s=1.0
    )
    live = LiveRecorder([clocked], policy, source_clock=True)
    n = 600
    async with anyio.create_task_group() as tg:
        await tg.start(live.run)
        t0 = time.monotonic()
        for i in range(n):  # 600 samples per real second, 60 per game second (the feed's pacing)
            live.sink(
                Sample("game", time.monotonic_ns(), {"n": i}, source_time_ns=5_000_000_000 + i * 10**9 // 60)
            )
            if i % 20 == 19:
                await anyio.sleep(max(0.0, t0 + (i + 1) / 600 - time.monotonic()))
        with anyio.fail_after(10):  # the idle end comes from the monotonic clock: the feed stopped
            while live.stats_snapshot()["in_session"] or live.stats_snapshot()["sessions"] == 0:  # noqa: ASYNC110
                await anyio.sleep(0.05)
        await live.stop()
    (path,) = live.recorder.paths
    with Reader(path) as r:
        assert len(r.sessions) == 1 and r.sessions[0].footer is not None
        ends = r.schema.types["wrtfd__end_reason"]
        assert isinstance(ends, EnumDef)
        assert ends.name_of(int(r.sessions[0].footer["end_reason"])) == "idle"
        frames = r.frames(0)
        assert frames["tick"].tolist() == list(range(n))
        assert frames["game"]["n"].tolist() == list(range(n))
