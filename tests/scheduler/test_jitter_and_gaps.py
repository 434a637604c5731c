"""Jitter and bunching never invent gaps; real pauses give exactly their ticks (virtual clock only)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.scheduler.helpers import (
    GAME,
    PERIOD_60_NS,
    T0_NS,
    Run,
    drive,
    dtype_for,
    game_samples,
    gaps,
    jittered,
    windows_bunched,
)
from wrtfd.decoders.base import Sample
from wrtfd.scheduler import SourcePlan

DT = dtype_for({"g": GAME})
PLANS = [SourcePlan("g", use_source_clock=False)]
seeds = st.integers(0, 2**32 - 1)
phases = st.floats(0, PERIOD_60_NS)


def _assert_one_frame_per_tick(run: Run, n_samples: int) -> None:
    ticks = run.frames["tick"].astype(np.int64)
    assert len(run.frames) == n_samples, "a sample was merged into another's tick (or lost)"
    assert ticks[0] == 0
    assert np.array_equal(ticks, np.arange(n_samples)), "ticks must be consecutive: no false gaps"
    # every frame carries the sample of its own tick, in order
    assert np.array_equal(run.frames["g"]["n"], np.arange(n_samples))
    assert run.ends[0].dropped_ticks == 0


@settings(max_examples=25, deadline=None)
@given(seed=seeds, phase=phases)
def test_60hz_feed_with_4ms_jitter_gives_one_frame_per_tick(seed: int, phase: float) -> None:
    times = jittered(range(1200), jitter_ns=4e6, seed=seed, phase_ns=phase)
    run = drive(game_samples(times), PLANS, DT)
    _assert_one_frame_per_tick(run, 1200)


@settings(max_examples=25, deadline=None)
@given(seed=seeds, phase=phases)
def test_windows_15_6ms_bunching_plus_jitter_gives_no_false_gap(seed: int, phase: float) -> None:
    times = windows_bunched(range(1200), jitter_ns=4e6, seed=seed, phase_ns=phase)
    deltas = np.diff(times)
    assert set(np.unique(deltas)) <= {0, 15_625_000, 31_250_000, 46_875_000}  # really bunched
    run = drive(game_samples(times), PLANS, DT)
    _assert_one_frame_per_tick(run, 1200)


@settings(max_examples=25, deadline=None)
@given(seed=seeds, phase=phases, bunched=st.booleans(), pause_s=st.sampled_from([0.5, 1.0, 2.0, 3.25]))
def test_a_real_pause_gives_exactly_the_missing_ticks(
    seed: int, phase: float, bunched: bool, pause_s: float
) -> None:
    missing = round(pause_s * 60)
    indices = [*range(600), *range(600 + missing, 1500)]
    make = windows_bunched if bunched else jittered
    times = make(indices, jitter_ns=4e6, seed=seed, phase_ns=phase)
    run = drive(game_samples(times), PLANS, DT, session_idle_s=10.0)
    assert len(run.ends) == 1
    assert run.ends[0].dropped_ticks == missing
    ticks = run.frames["tick"].astype(np.int64)
    assert gaps(ticks) == missing
    assert np.array_equal(ticks, np.array(indices)), "every sample lands in its own tick"


def test_pause_of_exactly_2s_at_60hz_is_120_dropped_ticks() -> None:
    indices = [*range(300), *range(420, 900)]
    run = drive(game_samples(jittered(indices, jitter_ns=4e6, seed=7)), PLANS, DT, session_idle_s=5.0)
    assert run.ends[0].dropped_ticks == 120
    assert run.scheduler.counters()["g"].ticks_dropped == 120


def _ac_times(shared_data: Path) -> np.ndarray:
    index = shared_data / "udp" / "assetto_corsa" / "AssettoCorsa_monza_A8LMS.raw.index.tsv"
    rows = index.read_text().splitlines()[1:]
    deltas_us = np.array([int(r.split("\t")[2]) for r in rows], dtype=np.int64)
    return T0_NS + np.cumsum(deltas_us) * 1000


def test_assetto_corsa_arrival_times_give_gaps_only_where_the_feed_stopped(shared_data: Path) -> None:
    """Real Windows capture: ~62 Hz, 15.6 ms timer steps, deltas of 0 (bunches) and real outages.

    A dropped tick is only allowed where the arrival stream itself has a hole longer than two
    timer periods (31.25 ms); the bunching (0 / 15.6 / 31.2 ms deltas) must never open one.
    """
    times = _ac_times(shared_data)
    assert len(times) == 8641
    samples = [Sample("g", int(t), {"x": float(i), "n": i}) for i, t in enumerate(times)]
    run = drive(samples, PLANS, DT, session_idle_s=None)
    ticks = run.frames["tick"].astype(np.int64)
    idx = run.frames["g"]["n"].astype(np.int64)
    false_gaps = []
    for i in np.flatnonzero(np.diff(ticks) > 1):
        a, b = idx[i], idx[i + 1]
        if np.max(np.diff(times[a : b + 1])) <= 31_250_000:
            false_gaps.append((int(a), int(ticks[i])))
    assert len(false_gaps) <= 1, f"gaps where the feed did not stop: {false_gaps[:10]}"
    real = [d for d in np.diff(times) if d > 100_000_000]
    assert run.ends[0].dropped_ticks >= sum(int(d // PERIOD_60_NS) - 2 for d in real)  # outages are kept
    # the source is faster than 60 Hz: extra samples share ticks (last wins), never lost silently
    c = run.scheduler.counters()["g"]
    assert c.applied == 8641
    assert c.superseded == 8641 - len(run.frames)


def test_source_slower_than_the_tick_rate_shows_its_real_gaps() -> None:
    times = jittered(range(300), jitter_ns=2e6, seed=3, period_ns=1e9 / 30)  # 30 Hz into 60 Hz
    run = drive(game_samples(times), PLANS, DT)
    ticks = run.frames["tick"].astype(np.int64)
    assert len(run.frames) == 300
    # once its cadence is learnt (a few samples), every other tick has no driving sample
    assert set(np.diff(ticks[10:])) == {2}
    assert run.ends[0].dropped_ticks == 299 == ticks[-1] - 299


@pytest.mark.parametrize("jitter_ms", [0.0, 10.0, 30.0])
def test_source_clock_makes_arrival_jitter_irrelevant(jitter_ms: float) -> None:
    """Forza-style: the game clock (ms resolution) places samples, not the arrival time."""
    n = 900
    src_ns = [round(i * 1e9 / 60 / 1e6) * 1_000_000 for i in range(n)]  # TimestampMS steps of 16/17 ms
    rx = jittered(range(n), jitter_ns=jitter_ms * 1e6, seed=11)
    rx = list(np.maximum.accumulate(np.array(rx) + 20_000_000))  # always after sending, in order
    samples = [
        Sample("g", int(r), {"x": float(i), "n": i}, source_time_ns=s)
        for i, (r, s) in enumerate(zip(rx, src_ns, strict=True))
    ]
    run = drive(samples, [SourcePlan("g")], DT)
    assert np.array_equal(run.frames["tick"].astype(np.int64), np.arange(n))
    assert run.ends[0].dropped_ticks == 0
    assert run.scheduler.clock_modes() == {"g": True}


def test_source_clock_gap_gives_its_exact_ticks_and_a_reset_reanchors() -> None:
    src = [*range(0, 300), *range(420, 600)]  # the game clock skips 2.0 s
    samples = []
    for i, k in enumerate(src):
        t = round(k * PERIOD_60_NS)
        samples.append(Sample("g", T0_NS + t + 5_000_000, {"x": float(i), "n": i}, source_time_ns=t))
    # then the game clock restarts from 0 (a new run), still arriving on time
    base = samples[-1].rx_ns + round(PERIOD_60_NS)
    for j in range(120):
        samples.append(
            Sample(
                "g",
                base + round(j * PERIOD_60_NS),
                {"x": 0.0, "n": 1000 + j},
                source_time_ns=round(j * PERIOD_60_NS),
            )
        )
    run = drive(samples, [SourcePlan("g")], DT, session_idle_s=10.0)
    assert run.ends[0].dropped_ticks == 120
    assert run.scheduler.counters()["g"].reanchors == 1
    ticks = run.frames["tick"].astype(np.int64)
    assert np.all(np.diff(ticks) >= 1)
    assert len(run.frames) == len(samples)  # the reset neither merged nor lost samples


@pytest.mark.parametrize("ppm", [-300, 300, 1000])
def test_a_drifting_source_clock_is_followed_without_false_gaps(ppm: int) -> None:
    """The game clock runs fast or slow against ours (two minutes at 60 Hz, +-4 ms jitter)."""
    n = 60 * 120
    src = [round(i * PERIOD_60_NS * (1 + ppm * 1e-6)) for i in range(n)]
    rx = jittered(range(n), jitter_ns=4e6, seed=5)
    samples = [
        Sample("g", r + 5_000_000, {"x": float(i), "n": i}, source_time_ns=s)
        for i, (r, s) in enumerate(zip(rx, src, strict=True))
    ]
    run = drive(samples, [SourcePlan("g")], DT)
    assert np.array_equal(run.frames["tick"].astype(np.int64), np.arange(n))
    assert run.scheduler.counters()["g"].reanchors == 0
