"""``TickScheduler.feed`` (the live driver's batch call) against the per-sample API it stands for."""

from __future__ import annotations

import dataclasses
from collections import deque

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.scheduler.test_properties import DT, PLANS, streams
from wrtfd.decoders.base import Sample
from wrtfd.scheduler import FrameBlock, SchedulerConfig, SchedulerEvent, SourceTimeline, TickScheduler


def _run(
    batches: list[list[Sample]], *, use_feed: bool, follow: bool = False, **config: object
) -> tuple[list[SchedulerEvent], TickScheduler]:
    """The batches through ``feed`` or ``advance`` + ``push``; ``follow``: each sample placed on
    a timeline that follows source ``a``'s clock first (``recorder.clock = "source"``)."""
    sched = TickScheduler(PLANS, DT, SchedulerConfig(rate_hz=60, **config))  # type: ignore[arg-type]
    timeline = SourceTimeline(frozenset({"a"}), hold_ns=100_000_000) if follow else None
    events: list[SchedulerEvent] = []
    for batch in batches:
        if use_feed:
            intake = deque(batch)
            sched.feed(intake, None if timeline is None else timeline.place)
            assert not intake  # feed empties the intake
        else:
            for s in batch:
                if timeline is not None:
                    s = timeline.place(s)
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
