"""Invariants of the scheduler on arbitrary (hostile) sample streams (hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.scheduler.helpers import T0_NS, drive, dtype_for
from wrtfd.decoders.base import Sample
from wrtfd.scheduler import FrameBlock, SessionEnded, SessionStarted, SourcePlan

DT = dtype_for({"a": [("x", "<f4"), ("k", "<i8")], "b": [("y", "<f8"), ("k", "<i8")]})
PLANS = [SourcePlan("a"), SourcePlan("b", drives_frames=False, stale_after_s=0.2)]


@st.composite
def streams(draw: st.DrawFn) -> list[Sample]:
    n = draw(st.integers(1, 400))
    rx = T0_NS
    src = {"a": 0, "b": 10**12}
    out = []
    for k in range(n):
        rx += draw(st.one_of(st.integers(0, 40_000_000), st.integers(0, 9_000_000_000)))
        name = draw(st.sampled_from(["a", "a", "b", "zz"]))
        clock = draw(st.sampled_from([None, "step", "reset", "jump"]))
        st_ns = None
        if clock is not None and name in src:
            src[name] = {
                "step": src[name] + draw(st.integers(0, 50_000_000)),
                "reset": 0,
                "jump": src[name] + 10**12,
            }[clock]
            st_ns = src[name]
        values: dict[str, object] = {"x" if name != "b" else "y": draw(st.floats(allow_nan=True)), "k": k}
        if draw(st.booleans()):
            values["junk"] = "?"
        out.append(Sample(name, rx, values, source_time_ns=st_ns, new_session=draw(st.integers(0, 30)) == 0))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    samples=streams(),
    merge=st.sampled_from(["last", "first"]),
    idle=st.sampled_from([None, 1.0, 5.0]),
    max_s=st.sampled_from([None, 2.0]),
)
def test_frames_sessions_and_counters_stay_consistent(
    samples: list[Sample], merge: str, idle: float | None, max_s: float | None
) -> None:
    run = drive(samples, PLANS, DT, merge=merge, session_idle_s=idle, max_session_s=max_s)
    again = drive(samples, PLANS, DT, merge=merge, session_idle_s=idle, max_session_s=max_s)
    assert run.frames.tobytes() == again.frames.tobytes()  # deterministic
    starts = [e for e in run.events if isinstance(e, SessionStarted)]
    ends = [e for e in run.events if isinstance(e, SessionEnded)]
    assert len(starts) == len(ends)
    order = [type(e).__name__ for e in run.events if not isinstance(e, FrameBlock)]
    assert order == ["SessionStarted", "SessionEnded"] * len(ends)  # properly nested
    for end in ends:
        f = run.session_frames(end.session)
        ticks = f["tick"].astype(np.int64)
        assert len(f) == end.frames > 0 and ticks[0] == 0 and np.all(np.diff(ticks) >= 1)
        assert end.last_tick == ticks[-1]
        assert end.dropped_ticks == ticks[-1] + 1 - len(f)  # N10
        if max_s is not None:
            assert ticks[-1] < max_s * 60
    sched = run.scheduler
    assert sched.pending_samples() == 0
    assert sched.unknown_source == sum(1 for s in samples if s.source == "zz")
    for name, c in sched.counters().items():
        pushed = sum(1 for s in samples if s.source == name)
        skipped = c.superseded if merge == "first" else 0
        assert c.samples == pushed == c.applied + c.late + skipped
    a_frames = sum(e.frames for e in ends)
    assert a_frames == sched.counters()["a"].ticks_emitted
    if len(run.frames):
        stale_b = run.frames["stale"]["b"]
        assert np.all(np.isnan(run.frames["b"]["y"][stale_b]))  # stale means NaN
