"""The timeline that follows a source's clock (``recorder.clock = "source"``), driven the way the
live recorder drives it: every sample placed then pushed, the scheduler advanced to the
timeline's present at each engine step."""

from __future__ import annotations

import random
from collections.abc import Iterable

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.scheduler.helpers import GAME, T0_NS, dtype_for
from wrtfd.decoders.base import Sample
from wrtfd.scheduler import (
    FrameBlock,
    SchedulerConfig,
    SchedulerEvent,
    SessionEnded,
    SessionStarted,
    SourcePlan,
    SourceTimeline,
    TickScheduler,
)

RATE = 60
PERIOD_NS = 1e9 / RATE
JITTER_NS = 100_000_000
DTYPE = dtype_for({"g": GAME, "gps": [("lat", "<f8")]})
PLANS = [SourcePlan("g"), SourcePlan("gps", drives_frames=False)]


class Live:
    """The live recorder's engine without its I/O: timeline, scheduler, steps on the mono clock."""

    def __init__(self, **config: object) -> None:
        self.timeline = SourceTimeline(frozenset({"g"}), hold_ns=JITTER_NS)
        cfg = SchedulerConfig(rate_hz=RATE, jitter_s=JITTER_NS / 1e9, **config)  # type: ignore[arg-type]
        self.sched = TickScheduler(PLANS, DTYPE, cfg)
        self.events: list[SchedulerEvent] = []

    def feed(self, samples: Iterable[Sample]) -> None:
        for s in samples:
            placed = self.timeline.place(s)
            assert placed.source_time_ns == s.source_time_ns and placed.values is s.values
            self.events += self.sched.advance(placed.rx_ns)
            self.sched.push(placed)
            self.events += self.sched.advance(self.timeline.now(s.rx_ns))

    def step_until(self, mono_ns: int, step_ns: int = 100_000_000) -> None:
        """Engine steps with no sample arriving (every ``close_s``), up to ``mono_ns``."""
        t = self.timeline._mono_last
        while t < mono_ns:
            t += step_ns
            self.events += self.sched.advance(self.timeline.now(t))

    def frames(self) -> np.ndarray:
        blocks = [e.frames for e in self.events if isinstance(e, FrameBlock)]
        return np.concatenate(blocks) if blocks else np.zeros(0, DTYPE)

    @property
    def late(self) -> int:
        return self.sched.counters()["g"].late + self.sched.counters()["gps"].late


def game(
    n: int, *, speed: float, src0_ns: int = 7_000_000_000, mono0_ns: int = T0_NS, jitter_ns: int = 0
) -> list[Sample]:
    """``n`` samples one source tick apart (game time) sent ``speed`` times faster than real time."""
    rng = random.Random(n)
    out: list[Sample] = []
    mono = mono0_ns
    for i in range(n):
        src = src0_ns + round(i * PERIOD_NS)
        # delayed by up to jitter_ns; one flow keeps its order, so a late one holds the next back
        delay = rng.randrange(jitter_ns) if jitter_ns else 0
        mono = max(mono, mono0_ns + round(i * PERIOD_NS / speed) + delay)
        out.append(Sample("g", mono, {"x": float(i), "n": i}, source_time_ns=src))
    return out


def test_an_accelerated_feed_gets_one_frame_per_source_tick() -> None:
    live = Live()
    live.feed(game(600, speed=10.0))  # 10 s of game time in 1 s
    live.step_until(T0_NS + 2_000_000_000)
    frames = live.frames()
    assert len(frames) == 600 and live.late == 0
    assert frames["tick"].tolist() == list(range(600))  # game time, not arrival time
    assert frames["g"]["n"].tolist() == list(range(600))
    assert live.timeline.clock_source == "g" and live.timeline.reanchors == 0


def test_a_feed_slower_than_real_time_is_stretched_back_to_game_time() -> None:
    live = Live()
    live.feed(game(120, speed=0.8, jitter_ns=10_000_000))  # late, bunched arrivals within the window
    live.step_until(T0_NS + 4_000_000_000)
    frames = live.frames()
    assert frames["tick"].tolist() == list(range(120)) and live.late == 0


def test_silence_runs_on_the_monotonic_clock_and_ends_the_session_on_idle() -> None:
    live = Live(session_idle_s=5.0)
    live.feed(game(300, speed=20.0))  # 5 s of game time in 0.25 s
    live.step_until(T0_NS + 2_000_000_000)  # 1.75 s of silence: every tick closed, session open
    assert len(live.frames()) == 300
    assert not any(isinstance(e, SessionEnded) for e in live.events)
    live.step_until(T0_NS + 6_000_000_000)  # 5 s of real silence since the hold
    (end,) = [e for e in live.events if isinstance(e, SessionEnded)]
    assert end.reason == "idle" and end.frames == 300 and end.dropped_ticks == 0


def test_a_clock_that_goes_back_reanchors_instead_of_dropping_late_samples() -> None:
    live = Live()
    live.feed(game(180, speed=10.0))
    # the game restarts its clock (a new session) 0.3 s later on the wall clock
    restart = game(120, speed=10.0, src0_ns=0, mono0_ns=T0_NS + 300_000_000 + round(180 * PERIOD_NS / 10))
    live.feed(restart)
    live.step_until(restart[-1].rx_ns + 1_000_000_000)
    assert live.late == 0 and live.timeline.reanchors == 1
    frames = live.frames()
    assert len(frames) == 300 and frames["g"]["n"].tolist() == list(range(180)) + list(range(120))


def test_samples_after_a_silence_continue_after_the_silence() -> None:
    live = Live(session_idle_s=30.0)
    first = game(60, speed=10.0)
    live.feed(first)
    # 3 s of real silence; the game's clock stood still (a pause menu) and resumes where it was
    last_src = first[-1].source_time_ns
    assert last_src is not None
    later = game(
        60,
        speed=10.0,
        src0_ns=last_src + round(PERIOD_NS),
        mono0_ns=first[-1].rx_ns + 3_000_000_000,
    )
    live.step_until(later[0].rx_ns - 50_000_000)
    live.feed(later)
    live.step_until(later[-1].rx_ns + 1_000_000_000)
    frames = live.frames()
    assert live.late == 0 and len(frames) == 120
    ticks = frames["tick"].astype(np.int64)
    gap = int(ticks[60] - ticks[59]) - 1
    # the silence the timeline ran through (3 s less the hold), in ticks, not the game's 0 s
    assert abs(gap - round((3.0 - 0.1) * RATE)) <= 2
    assert np.all(np.diff(ticks[:60]) == 1) and np.all(np.diff(ticks[60:]) == 1)


def test_other_sources_ride_along_at_the_timelines_present() -> None:
    live = Live()
    samples = game(600, speed=10.0)
    merged: list[Sample] = []
    for i, s in enumerate(samples):
        merged.append(s)
        if i % 10 == 5:  # a GPS at 6 Hz of real time (60 Hz of game time / 10)
            merged.append(Sample("gps", s.rx_ns + 1, {"lat": float(i)}))
    live.feed(merged)
    live.step_until(T0_NS + 2_000_000_000)
    frames = live.frames()
    assert len(frames) == 600 and live.late == 0
    lat = frames["gps"]["lat"]
    # each GPS value appears at the tick of the game sample it arrived with, give or take the
    # arrival-time estimator's bunching window (2 ticks), never ten ticks off as raw arrival
    # times at ten times real time would put it
    for i in range(5, 600, 10):
        first = int(np.flatnonzero(lat == float(i))[0])
        assert i - 2 <= first <= i + 1, (i, first)


def test_a_source_time_leap_far_ahead_reanchors() -> None:
    live = Live(session_idle_s=5.0)
    live.feed(game(60, speed=10.0))
    leap = game(60, speed=10.0, src0_ns=7_000_000_000 + 3_600 * 10**9, mono0_ns=T0_NS + 200_000_000)
    live.feed(leap)
    live.step_until(leap[-1].rx_ns + 1_000_000_000)
    assert live.timeline.reanchors == 1 and len(live.frames()) == 120
    assert [type(e).__name__ for e in live.events if not isinstance(e, FrameBlock)] == ["SessionStarted"]


@settings(max_examples=40, deadline=None)
@given(
    speed=st.floats(min_value=0.9, max_value=50.0),
    n=st.integers(min_value=30, max_value=400),
    jitter_ms=st.integers(min_value=0, max_value=40),
)
def test_ticks_follow_game_time_at_any_speed(speed: float, n: int, jitter_ms: int) -> None:
    """Whatever the speed and arrival jitter (within the window), ticks are the game's own."""
    live = Live()
    live.feed(game(n, speed=speed, jitter_ns=jitter_ms * 1_000_000 + 1))
    live.step_until(live.timeline._mono_last + 1_000_000_000)
    frames = live.frames()
    assert live.late == 0
    assert frames["tick"].tolist() == list(range(n))
    starts = [e for e in live.events if isinstance(e, SessionStarted)]
    assert len(starts) == 1
