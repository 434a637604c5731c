"""``TickScheduler.feed`` (the live driver's batch call) against the per-sample API it stands for."""

from __future__ import annotations

import dataclasses
from collections import deque

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.scheduler.test_properties import DT, PLANS, streams
from wrtfd.decoders.base import Sample
from wrtfd.scheduler import FrameBlock, SchedulerConfig, SchedulerEvent, TickScheduler


def _run(
    batches: list[list[Sample]], *, use_feed: bool, **config: object
) -> tuple[list[SchedulerEvent], TickScheduler]:
    sched = TickScheduler(PLANS, DT, SchedulerConfig(rate_hz=60, **config))  # type: ignore[arg-type]
    events: list[SchedulerEvent] = []
    for batch in batches:
        if use_feed:
            intake = deque(batch)
            sched.feed(intake)
            assert not intake  # feed empties the intake
        else:
            for s in batch:
                sched.advance(s.rx_ns, flush=False)
                sched.push(s)
        events += sched.advance(batch[-1].rx_ns + 3_000_000)  # the step's own advance, a little later
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
)
def test_feed_gives_the_events_and_counters_of_advance_and_push(
    samples: list[Sample], cuts: list[int], stale_every: int, merge: str, idle: float | None
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
    want, ref = _run(batches, use_feed=False, merge=merge, session_idle_s=idle)
    got, sched = _run(batches, use_feed=True, merge=merge, session_idle_s=idle)
    assert _plain(got) == _plain(want)
    assert {k: c.as_dict() for k, c in sched.counters().items()} == {
        k: c.as_dict() for k, c in ref.counters().items()
    }
    assert sched.unknown_source == ref.unknown_source
    assert sched.now_ns == ref.now_ns
