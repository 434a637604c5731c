"""A stalled daemon and a source stamped on read (a GNSS receiver on a serial port): the port
keeps the bytes while the daemon does not run, and they are read at once when it runs again.
Their receive times are then the read's; their own clock says where they belong."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from tests.scheduler.helpers import T0_NS, dtype_for
from wrtfd.decoders.base import Sample
from wrtfd.scheduler import FrameBlock, SchedulerConfig, SchedulerEvent, SourcePlan, TickScheduler
from wrtfd.scheduler.timing import SourceClockMap

DT = dtype_for({"g": [("x", "<f4"), ("n", "<u4")]})
RATE_HZ = 20  # ticks; the receiver gives 10 fixes a second
FIX_NS = 100_000_000
DELAY_NS = 3_000_000  # from the fix's time to the daemon's read, when it runs
STEP_NS = 100_000_000  # the live engine's step
STALL = range(40, 55)  # the fixes the daemon does not read while it stalls (1.5 s)


def fixes(n: int = 100) -> list[Sample]:
    """Fixes every 100 ms; those of the stall read together with the first one after it."""
    read_after_stall = T0_NS + STALL.stop * FIX_NS + DELAY_NS
    out = []
    for i in range(n):
        rx = read_after_stall if i in STALL else T0_NS + i * FIX_NS + DELAY_NS
        out.append(Sample("g", rx, {"x": float(i), "n": i}, source_time_ns=i * FIX_NS))
    return out


def live(samples: list[Sample], plan: SourcePlan) -> tuple[np.ndarray, TickScheduler]:
    """The live engine: a step every 100 ms feeds what was read and closes ticks; no step runs
    while the daemon stalls (between the stall's first fix and the read after it)."""
    sched = TickScheduler([plan], DT, SchedulerConfig(rate_hz=RATE_HZ, session_idle_s=10.0))
    stall_from = T0_NS + STALL.start * FIX_NS
    stall_to = samples[STALL.start].rx_ns
    events: list[SchedulerEvent] = []
    intake: deque[Sample] = deque()
    todo = deque(samples)
    now = T0_NS
    while todo:
        now += STEP_NS
        if stall_from <= now < stall_to:
            continue
        while todo and todo[0].rx_ns <= now:
            intake.append(todo.popleft())
        sched.feed(intake)
        events += sched.advance(now)
    events += sched.finish()
    return _frames(events), sched


def replayed(samples: list[Sample], plan: SourcePlan) -> np.ndarray:
    """A replay of the same samples (what ``wrtfd import`` of the raw tap does): each advanced
    to before being pushed."""
    sched = TickScheduler([plan], DT, SchedulerConfig(rate_hz=RATE_HZ, session_idle_s=10.0))
    events: list[SchedulerEvent] = []
    for s in samples:
        events += sched.advance(sched.arrival_ns(s))
        sched.push(s)
    return _frames(events + sched.finish())


def _frames(events: list[SchedulerEvent]) -> np.ndarray:
    return np.concatenate([e.frames for e in events if isinstance(e, FrameBlock)])


def test_fixes_read_late_after_a_stall_keep_their_own_ticks() -> None:
    samples = fixes()
    frames, sched = live(samples, SourcePlan("g", stamped_on_read=True))
    c = sched.counters()["g"]
    assert (c.late, c.reanchors, c.superseded) == (0, 0, 0)
    # every fix in a frame of its own, two ticks apart: nothing piled up, nothing lost
    assert frames["g"]["n"].tolist() == list(range(len(samples)))
    assert np.array_equal(np.diff(frames["tick"].astype(np.int64)), np.full(len(samples) - 1, 2))
    # a replay of the same receive times (the raw tap) gives the same frames
    assert replayed(samples, SourcePlan("g", stamped_on_read=True)).tobytes() == frames.tobytes()


def test_a_source_stamped_on_arrival_is_placed_as_before() -> None:
    """Without the flag (a UDP source: kernel receive times) a delay beyond the jitter window
    re-anchors the clock at the arrival, as a paused game whose clock stopped needs: the stall's
    fixes share the tick of their read, and all but the last of them are superseded."""
    samples = fixes()
    frames, sched = live(samples, SourcePlan("g"))
    c = sched.counters()["g"]
    assert c.reanchors >= 1 and c.superseded == len(STALL) - 1
    assert [n for n in STALL if n in frames["g"]["n"]] == [STALL.stop - 1]


@pytest.mark.parametrize("delay_ms", [150, 5000])
def test_the_clock_map_keeps_a_late_sample_while_its_tick_is_open(delay_ms: int) -> None:
    jitter = 100_000_000
    clock = SourceClockMap(jitter_ns=jitter)
    assert clock.observe(T0_NS, 0) == (1, T0_NS)
    src, rx = FIX_NS, T0_NS + FIX_NS + delay_ms * 1_000_000
    # its own place (T0 + 100 ms) still open: the same mapping, the sample where its clock says
    assert clock.observe(rx, src, open_from_ns=T0_NS + 50_000_000) == (1, T0_NS + FIX_NS)
    assert clock.reanchors == 0
    # the next one, its place already closed: a new mapping, placed at its arrival
    src, rx = 2 * FIX_NS, rx + FIX_NS
    assert clock.observe(rx, src, open_from_ns=T0_NS + 3 * FIX_NS) == (2, rx)
    assert clock.reanchors == 1
