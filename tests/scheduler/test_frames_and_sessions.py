"""Sample-and-hold frames from several sources, late samples, merging, staleness, sessions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.scheduler.helpers import GAME, PERIOD_60_NS, T0_NS, drive, dtype_for, game_samples, jittered
from wrtfd.decoders.base import Sample
from wrtfd.errors import ConfigError
from wrtfd.scheduler import FrameBlock, SchedulerConfig, SessionEnded, SourcePlan, TickScheduler

GAME_ONLY = dtype_for({"g": GAME})
THREE = {"game": GAME, "gps": [("lat", "<f8"), ("n", "<i4")], "can": [("rpm", "<f4"), ("n", "<i4")]}
ARRIVAL = [SourcePlan("g", use_source_clock=False)]


def _multi_rate_samples() -> tuple[list[Sample], np.ndarray, np.ndarray]:
    """60 Hz game (arrival times) + 10 Hz GPS and 100 Hz CAN (own clocks, 2 ms delivery delay)."""
    samples = []
    game_rx = [T0_NS + round(n * PERIOD_60_NS) for n in range(600)]
    samples += [Sample("game", t, {"x": float(n), "n": n}) for n, t in enumerate(game_rx)]
    gps_src = np.array([j * 100_000_000 + 3_000_000 for j in range(100)], dtype=np.int64)
    can_src = np.array([i * 10_000_000 + 1_000_000 for i in range(1000)], dtype=np.int64)
    for j, s in enumerate(gps_src):
        samples.append(
            Sample(
                "gps",
                T0_NS + int(s) + 2_000_000,
                {"lat": 45.0 + j, "n": j},
                source_time_ns=int(s) + 77_000_000_000,
            )
        )
    for i, s in enumerate(can_src):
        samples.append(
            Sample("can", T0_NS + int(s) + 2_000_000, {"rpm": float(1000 + i), "n": i}, source_time_ns=int(s))
        )
    samples.sort(key=lambda s: s.rx_ns)
    return samples, gps_src + T0_NS + 2_000_000, can_src + T0_NS + 2_000_000


def test_three_sources_at_different_rates_are_combined_into_one_frame() -> None:
    dt = dtype_for(THREE)
    samples, gps_v, can_v = _multi_rate_samples()
    plans = [
        SourcePlan("game", use_source_clock=False),
        SourcePlan("gps", drives_frames=False),
        SourcePlan("can", drives_frames=False),
    ]
    run = drive(samples, plans, dt)
    f = run.frames
    assert len(f) == 600 and run.ends[0].dropped_ticks == 0
    assert np.array_equal(f["tick"].astype(np.int64), np.arange(600))
    assert np.array_equal(f["game"]["n"], np.arange(600))
    # tick k covers [first game sample - P/2 + kP, ... + P): each frame holds the latest value of
    # every channel that arrived (by its own clock) before the end of the tick: sample-and-hold.
    tick_end = T0_NS + (np.arange(600) + 0.5) * PERIOD_60_NS
    exp_gps = np.searchsorted(gps_v, tick_end, side="left") - 1
    exp_can = np.searchsorted(can_v, tick_end, side="left") - 1
    assert np.array_equal(f["gps"]["n"], exp_gps)
    assert np.array_equal(f["can"]["n"], exp_can)
    assert np.array_equal(f["gps"]["lat"], 45.0 + exp_gps)
    assert not f["stale"]["gps"].any() and not f["stale"]["can"].any()
    c = run.scheduler.counters()
    assert c["gps"].applied == 100 and c["can"].applied == 1000 and c["game"].ticks_emitted == 600
    assert run.scheduler.clock_modes() == {"game": False, "gps": True, "can": True}


def test_same_input_gives_the_same_frames() -> None:
    dt = dtype_for(THREE)
    plans = [
        SourcePlan("game", use_source_clock=False),
        SourcePlan("gps", drives_frames=False),
        SourcePlan("can", drives_frames=False),
    ]
    a = drive(_multi_rate_samples()[0], plans, dt)
    b = drive(_multi_rate_samples()[0], plans, dt)
    assert a.frames.tobytes() == b.frames.tobytes()
    assert [type(e).__name__ for e in a.events] == [type(e).__name__ for e in b.events]


def test_late_sample_is_counted_and_never_rewrites_a_written_frame() -> None:
    samples = game_samples(jittered(range(300), jitter_ns=3e6, seed=5))
    sched = TickScheduler(ARRIVAL, GAME_ONLY, SchedulerConfig(rate_hz=60))
    reference = drive(samples, ARRIVAL, GAME_ONLY)
    events = []
    for i, s in enumerate(samples):
        events += sched.advance(s.rx_ns)
        sched.push(s)
        if i == 200:
            # a sample received 0.5 s ago, only delivered now (its tick closed long ago)
            sched.push(Sample("g", s.rx_ns - 500_000_000, {"x": -1.0, "n": 99_999}))
    events += sched.finish()
    frames = np.concatenate([e.frames for e in events if isinstance(e, FrameBlock)])
    assert sched.counters()["g"].late == 1
    assert sched.counters()["g"].dropped == {"late": 1}
    assert frames.tobytes() == reference.frames.tobytes()


@pytest.mark.parametrize(("merge", "expected_first"), [("last", 1), ("first", 0)])
def test_several_samples_in_one_tick_last_wins_by_default(merge: str, expected_first: int) -> None:
    # two samples per 60 Hz tick by the source's own clock (at +2 ms and +6 ms)
    src = [round((k // 2) * PERIOD_60_NS) + (2_000_000 if k % 2 == 0 else 6_000_000) for k in range(240)]
    samples = [
        Sample("g", T0_NS + s + 1_000_000, {"x": float(k), "n": k}, source_time_ns=s)
        for k, s in enumerate(src)
    ]
    run = drive(samples, [SourcePlan("g")], GAME_ONLY, merge=merge)
    assert len(run.frames) == 120
    assert np.array_equal(run.frames["g"]["n"], np.arange(120) * 2 + expected_first)
    assert run.scheduler.counters()["g"].superseded == 120


def test_a_stale_source_turns_nan_and_flags_until_it_delivers_again() -> None:
    dt = dtype_for({"game": GAME, "gps": [("lat", "<f8"), ("sats", "<u1")]})
    samples = [Sample("game", T0_NS + round(n * PERIOD_60_NS), {"x": float(n), "n": n}) for n in range(360)]
    gps_times = [*range(0, 120, 6), *range(240, 360, 6)]  # 10 Hz, silent from tick 120 to 240
    samples += [
        Sample("gps", T0_NS + round(k * PERIOD_60_NS) + 1_000_000, {"lat": 45.0 + k, "sats": 9})
        for k in gps_times
    ]
    samples.sort(key=lambda s: s.rx_ns)
    plans = [
        SourcePlan("game", use_source_clock=False),
        SourcePlan("gps", drives_frames=False, stale_after_s=0.5, use_source_clock=False),
    ]
    f = drive(samples, plans, dt).frames
    ticks = f["tick"].astype(np.int64)
    lat, stale = f["gps"]["lat"], f["stale"]["gps"]
    held = (ticks >= 114) & (ticks <= 114 + 30)  # last sample at 114, valid for 0.5 s = 30 ticks
    assert np.all(lat[held] == 45.0 + 114) and not stale[held].any()
    gone = (ticks > 114 + 31) & (ticks < 240)
    assert np.all(np.isnan(lat[gone])) and stale[gone].all()
    assert np.all(f["gps"]["sats"][gone] == 9)  # non-float channels keep their last value
    back = ticks >= 241
    assert not stale[back].any() and not np.isnan(lat[back]).any()


def test_channels_marked_stale_by_the_source_are_nan() -> None:
    dt = dtype_for({"g": [("a", "<f4"), ("b", "<f4")]})
    samples = [Sample("g", T0_NS + round(n * PERIOD_60_NS), {"a": 1.0, "b": 2.0}) for n in range(10)]
    samples[5] = Sample("g", samples[5].rx_ns, {"a": 3.0}, stale=frozenset({"b"}))
    samples[7] = Sample("g", samples[7].rx_ns, {}, stale=frozenset({"a", "b"}))
    f = drive(samples, [SourcePlan("g", use_source_clock=False)], dt).frames
    assert f["g"]["a"][5] == 3.0 and math.isnan(f["g"]["b"][5]) and not f["stale"]["g"][5]
    assert math.isnan(f["g"]["a"][7]) and f["stale"]["g"][7]  # every channel marked: source stale
    assert f["g"]["b"][8] == 2.0 and not f["stale"]["g"][8]


def test_source_never_heard_from_is_nan_and_stale() -> None:
    dt = dtype_for({"g": GAME, "gps": [("lat", "<f8")]})
    f = drive(
        game_samples(jittered(range(30), jitter_ns=0, seed=1)),
        [*ARRIVAL, SourcePlan("gps", drives_frames=False)],
        dt,
    ).frames
    assert np.all(np.isnan(f["gps"]["lat"])) and f["stale"]["gps"].all() and not f["stale"]["g"].any()


def test_bad_values_and_unknown_channels_are_counted_not_fatal() -> None:
    samples = game_samples(jittered(range(20), jitter_ns=0, seed=1))
    samples[3] = Sample("g", samples[3].rx_ns, {"x": "fast", "n": 3, "warp": 9})
    samples[4] = Sample("g", samples[4].rx_ns, {"x": 4.0, "n": -5})  # -5 does not fit uint32
    run = drive([*samples, Sample("nobody", samples[-1].rx_ns, {"x": 1.0})], ARRIVAL, GAME_ONLY)
    c = run.scheduler.counters()["g"]
    assert c.bad_values == 2 and c.unknown_channels == 1
    assert run.frames["g"]["n"][3] == 3 and run.frames["g"]["x"][3] == 2.0  # x held from frame 2
    assert run.frames["g"]["n"][4] == 3 and run.frames["g"]["x"][4] == 4.0
    assert run.scheduler.unknown_source == 1
    assert len(run.frames) == 20


def test_idle_gap_ends_the_session_and_ticks_restart_at_zero() -> None:
    idx = [*range(300), *range(300 + 600, 300 + 600 + 120)]  # a 10 s silence, idle limit 5 s
    times = jittered(idx, jitter_ns=3e6, seed=2)
    run = drive(game_samples(times), ARRIVAL, GAME_ONLY, session_idle_s=5.0)
    assert [e.reason for e in run.ends] == ["idle", "end"]
    assert [e.reason for e in run.starts] == ["first", "idle"]
    assert [e.frames for e in run.ends] == [300, 120] and [e.dropped_ticks for e in run.ends] == [0, 0]
    second = run.session_frames(1)
    assert np.array_equal(second["tick"].astype(np.int64), np.arange(120))
    assert np.array_equal(second["g"]["n"], np.arange(300, 420))
    gap_s = (run.starts[1].start_ns - run.starts[0].start_ns) / 1e9
    assert gap_s == pytest.approx(900 / 60, abs=0.02)


def test_a_new_session_signal_splits_at_its_tick_and_carries_the_new_info() -> None:
    times = jittered(range(600), jitter_ns=3e6, seed=4)
    samples = [
        Sample("g", t, {"x": float(n), "n": n}, session_info={"track": "Monza"} if n == 0 else None)
        for n, t in enumerate(times)
    ]
    samples[400] = Sample(
        "g", times[400], {"x": 400.0, "n": 400}, new_session=True, session_info={"track": "Spa"}
    )
    run = drive(samples, ARRIVAL, GAME_ONLY)
    assert [e.reason for e in run.ends] == ["new_session", "end"]
    assert [e.frames for e in run.ends] == [400, 200]
    assert run.starts[0].info == {"g": {"track": "Monza"}}
    assert run.starts[1].info == {"g": {"track": "Spa"}} and run.starts[1].reason == "new_session"
    second = run.session_frames(1)
    assert second["tick"][0] == 0 and second["g"]["n"][0] == 400
    assert run.starts[1].start_ns - run.starts[0].start_ns == pytest.approx(400 * PERIOD_60_NS, abs=2)


def test_max_session_duration_and_requests_split_sessions() -> None:
    samples = game_samples(jittered(range(900), jitter_ns=2e6, seed=8))
    run = drive(samples, ARRIVAL, GAME_ONLY, max_session_s=5.0)
    assert [e.frames for e in run.ends] == [300, 300, 300]
    assert [e.reason for e in run.ends] == ["max_duration", "max_duration", "end"]
    sched = TickScheduler(ARRIVAL, GAME_ONLY, SchedulerConfig(rate_hz=60))
    events = []
    for i, s in enumerate(samples[:200]):
        events += sched.advance(s.rx_ns)
        sched.push(s)
        if i == 100:
            sched.request_new_session()
    events += sched.finish("stop")
    ends = [e for e in events if isinstance(e, SessionEnded)]
    assert [e.reason for e in ends] == ["request", "stop"]
    assert sum(e.frames for e in ends) == 200


def test_configuration_errors_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        TickScheduler([SourcePlan("nope")], GAME_ONLY, SchedulerConfig(rate_hz=60))
    with pytest.raises(ConfigError):
        TickScheduler([SourcePlan("g", drives_frames=False)], GAME_ONLY, SchedulerConfig(rate_hz=60))
    with pytest.raises(ConfigError):
        TickScheduler(ARRIVAL, GAME_ONLY, SchedulerConfig(rate_hz=0))
    with pytest.raises(ConfigError):
        TickScheduler(ARRIVAL, GAME_ONLY, SchedulerConfig(rate_hz=60, jitter_s=0.01, bunch_s=0.05))
