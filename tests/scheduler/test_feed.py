"""``TickScheduler.feed`` (the live driver's batch call) against the per-sample API it stands for."""

from __future__ import annotations

import dataclasses
from collections import deque

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.scheduler.helpers import T0_NS
from tests.scheduler.test_properties import DT, PLANS, streams
from wrtfd.decoders.base import Sample
from wrtfd.scheduler import (
    FrameBlock,
    SchedulerConfig,
    SchedulerEvent,
    SourcePlan,
    SourceTimeline,
    TickScheduler,
)


def _run(
    batches: list[list[Sample]], *, use_feed: bool, follow: bool = False, **config: object
) -> tuple[list[SchedulerEvent], TickScheduler]:
    """The batches through ``feed`` or ``advance`` + ``push`` (each batch placed, then in receive
    order: a stable sort); ``follow``: each sample placed on a timeline that follows source
    ``a``'s clock first (``recorder.clock = "source"``)."""
    sched = TickScheduler(PLANS, DT, SchedulerConfig(rate_hz=60, **config))  # type: ignore[arg-type]
    timeline = SourceTimeline(frozenset({"a"}), hold_ns=100_000_000) if follow else None
    events: list[SchedulerEvent] = []
    for batch in batches:
        if use_feed:
            intake = deque(batch)
            sched.feed(intake, None if timeline is None else timeline.place)
            assert not intake  # feed empties the intake
        else:
            placed = batch if timeline is None else [timeline.place(s) for s in batch]
            for s in sorted(placed, key=lambda s: s.rx_ns):
                sched.advance(s.rx_ns, flush=False)
                sched.push(s)
        later = batch[-1].rx_ns + 3_000_000  # the step's own advance, a little later
        events += sched.advance(later if timeline is None else timeline.now(later))
    events += sched.finish()
    return events, sched


def _plain(events: list[SchedulerEvent]) -> list[object]:
    """Events with a block's frames as bytes (numpy arrays do not compare as a whole)."""
    return [
        (e.session, e.frames.tobytes(), e.dropped_ticks) if isinstance(e, FrameBlock) else e for e in events
    ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    samples=streams(),
    cuts=st.lists(st.integers(1, 40), min_size=1, max_size=60),
    stale_every=st.sampled_from([0, 3, 7]),
    merge=st.sampled_from(["last", "first"]),
    idle=st.sampled_from([None, 1.0]),
    follow=st.booleans(),
)
def test_feed_gives_the_events_and_counters_of_advance_and_push(
    samples: list[Sample], cuts: list[int], stale_every: int, merge: str, idle: float | None, follow: bool
) -> None:
    if stale_every:  # some samples flag channels stale (the other branch of applying a sample)
        samples = [
            dataclasses.replace(s, stale=frozenset({"x", "y"})) if i % stale_every == 0 else s
            for i, s in enumerate(samples)
        ]
    batches: list[list[Sample]] = []
    at = 0
    for n in cuts * (len(samples) // max(1, sum(cuts)) + 1):
        if at >= len(samples):
            break
        batches.append(samples[at : at + n])
        at += n
    want, ref = _run(batches, use_feed=False, follow=follow, merge=merge, session_idle_s=idle)
    got, sched = _run(batches, use_feed=True, follow=follow, merge=merge, session_idle_s=idle)
    assert _plain(got) == _plain(want)
    assert {k: c.as_dict() for k, c in sched.counters().items()} == {
        k: c.as_dict() for k, c in ref.counters().items()
    }
    assert sched.unknown_source == ref.unknown_source
    assert sched.now_ns == ref.now_ns


def test_two_sources_read_one_after_the_other_lose_nothing() -> None:
    """Two UDP sources of one group, each read every 0.2 s at the same step: the intake holds
    0.2 s of one source, then 0.2 s of the other (source clocks at 60 Hz, kernel receive times).
    Taken as they came, the first source's later samples closed the ticks of the second's earlier
    ones: the daemon recording Forza and F1 in one group dropped 11 % and 29 % of their samples as
    late (bench/bench_daemon.py's config, before). In arrival order nothing is late, and the frames
    are those of feeding each sample when it arrived (a replay)."""
    plans = [SourcePlan("a"), SourcePlan("b")]
    period = 1e9 / 60
    samples = {
        name: [
            Sample(
                name,
                T0_NS + round(i * period) + offset,
                {"x" if name == "a" else "y": float(i), "k": i},
                source_time_ns=round(i * period),
            )
            for i in range(600)
        ]
        for name, offset in (("a", 1_000_000), ("b", 5_000_000))
    }
    read_ns = 200_000_000
    batches: list[list[Sample]] = []
    for start in range(T0_NS, T0_NS + 10 * 10**9, read_ns):
        batch = [s for name in ("b", "a") for s in samples[name] if start <= s.rx_ns < start + read_ns]
        if batch:
            batches.append(batch)
    sched = TickScheduler(plans, DT, SchedulerConfig(rate_hz=60))
    events: list[SchedulerEvent] = []
    for batch in batches:
        sched.feed(deque(batch))
        events += sched.advance(batch[-1].rx_ns + 3_000_000)
    events += sched.finish()
    counters = sched.counters()
    assert (counters["a"].late, counters["b"].late) == (0, 0)
    replay = TickScheduler(plans, DT, SchedulerConfig(rate_hz=60))
    want: list[SchedulerEvent] = []
    for s in sorted((s for b in batches for s in b), key=lambda s: s.rx_ns):
        want += replay.advance(s.rx_ns)
        replay.push(s)
    want += replay.finish()
    frames = b"".join(e.frames.tobytes() for e in events if isinstance(e, FrameBlock))
    assert frames == b"".join(e.frames.tobytes() for e in want if isinstance(e, FrameBlock))
    assert len(frames) == 600 * DT.itemsize  # one frame a tick, each with both sources' sample
