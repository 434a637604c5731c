"""Pre-trigger capture: the gate between the engine and the sink (recorder/trigger.py).

Driven by the recorded clock (replay, or the Recorder stepped by hand), so a 10-minute feed
takes a second and every assertion is exact.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.recorder.conftest import GAME_DEF, START_US, T0_NS, game_stream
from wrtfd.decoders.base import Sample
from wrtfd.errors import ConfigError
from wrtfd.format import Reader, validate_file
from wrtfd.format.markers import read_markers
from wrtfd.recorder import Recorder, RecorderPolicy, SourceSpec, replay
from wrtfd.recorder.trigger import TriggerPolicy, parse_condition

GAME = SourceSpec("game", GAME_DEF)
RATE = 60


def speed_stream(seconds: float, fast: tuple[float, float] | None, *, t0_ns: int = T0_NS) -> list[Sample]:
    """60 Hz game samples; speed 10 inside ``fast`` (seconds from the first sample), else 0."""
    samples = game_stream(round(seconds * RATE), t0_ns=t0_ns)
    for s in samples:
        values = cast(dict[str, Any], s.values)  # the stream's own dicts
        values["speed"] = 10.0 if fast is not None and fast[0] <= values["n"] / RATE < fast[1] else 0.0
    return samples


def sessions(path: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    with Reader(path) as r:
        for i, s in enumerate(r.sessions):
            f = r.frames(i)
            out.append(
                {
                    "ticks": np.array(f["tick"], dtype=np.int64),
                    "n": np.array(f["game"]["n"], dtype=np.int64),
                    "times_s": (r.frame_times_us(i) - START_US) / 1e6,
                    "dropped": s.dropped_ticks,
                    "start_reason": int(s.header["start_reason"]),
                    "end_reason": None if s.footer is None else int(s.footer["end_reason"]),
                    "markers": read_markers(r, i),
                }
            )
    return out


TRIGGER, END_TRIGGER = 7, 9  # START_REASONS / END_REASONS index of "trigger" (compose.py)


@pytest.mark.parametrize("step_samples", [6, None], ids=["live-sized-blocks", "replay-blocks"])
def test_trigger_at_20s_writes_from_5s_before_without_gap_or_duplicate(
    out_dir: Path, step_samples: int | None
) -> None:
    samples = speed_stream(60, (20.0, 25.0))
    policy = TriggerPolicy(pre_s=5, post_s=3, condition="speed > 5", on_marker=False, on_session=False)
    if step_samples is None:
        paths = replay(
            samples, [GAME], RecorderPolicy(output_dir=out_dir), start_timestamp_us=START_US, trigger=policy
        )
    else:
        paths = drive(samples, policy, out_dir, every=step_samples)
    assert len(paths) == 1 and validate_file(paths[0]) == []
    (s,) = sessions(paths[0])
    trigger_s = 20.0 - 0.5 / RATE  # frame time of the first fast sample (tick 0 sits half a tick early)
    assert abs(s["times_s"][0] - (trigger_s - 5.0)) <= 1 / RATE  # first frame: 5 s before, within a tick
    ticks, n = s["ticks"], s["n"]
    assert ticks[0] == 0 and np.all(np.diff(ticks) == 1) and s["dropped"] == 0  # no gap, no duplicate
    assert np.all(np.diff(n) == 1)  # every sample in order: the buffer boundary is invisible
    assert n[0] == 15 * RATE and n[-1] == 28 * RATE - 1  # 5 s before 20 s ... 3 s after 25 s
    assert (s["start_reason"], s["end_reason"]) == (TRIGGER, END_TRIGGER)


def drive(samples: list[Sample], policy: TriggerPolicy, out_dir: Path, *, every: int) -> list[Path]:
    """The live path's shape: small blocks, ops applied as they come."""
    rec = Recorder([GAME], RecorderPolicy(output_dir=out_dir), trigger=policy)
    rec.set_origin(samples[0].rx_ns, START_US)
    try:
        for i, s in enumerate(samples):
            rec.push(s)
            if i % every == every - 1:
                rec.apply(rec.advance(s.rx_ns))
        rec.apply(rec.finish("end"))
    finally:
        rec.close()
    return rec.paths


def test_nothing_is_written_without_a_trigger(out_dir: Path) -> None:
    samples = speed_stream(30, None)
    policy = TriggerPolicy(pre_s=5, post_s=3, condition="speed > 5")
    assert (
        replay(
            samples, [GAME], RecorderPolicy(output_dir=out_dir), start_timestamp_us=START_US, trigger=policy
        )
        == []
    )
    assert list(out_dir.iterdir()) == []


def test_two_triggers_give_two_sessions_that_never_share_a_frame(out_dir: Path) -> None:
    samples = speed_stream(80, None)
    for s in samples:
        values = cast(dict[str, Any], s.values)  # the stream's own dicts
        t = values["n"] / RATE
        values["speed"] = 10.0 if 20 <= t < 21 or 40 <= t < 41 or 43 <= t < 44 else 0.0
    policy = TriggerPolicy(pre_s=5, post_s=2, condition="speed > 5", on_marker=False, on_session=False)
    (path,) = replay(
        samples, [GAME], RecorderPolicy(output_dir=out_dir), start_timestamp_us=START_US, trigger=policy
    )
    a, b = sessions(path)
    assert (a["n"][0], a["n"][-1]) == (15 * RATE, 23 * RATE - 1)
    # The second: 5 s before 40 s; the condition again at 43 s keeps it going until 46 s.
    assert (b["n"][0], b["n"][-1]) == (35 * RATE, 46 * RATE - 1)
    for part in (a, b):
        assert part["ticks"][0] == 0 and np.all(np.diff(part["ticks"]) == 1)


def test_a_marker_triggers_and_is_in_the_file_at_its_tick(out_dir: Path) -> None:
    samples = speed_stream(60, None)
    policy = TriggerPolicy(pre_s=5, post_s=4, condition=None)
    mark_ns = T0_NS + 30 * 1_000_000_000
    (path,) = replay(
        samples,
        [GAME],
        RecorderPolicy(output_dir=out_dir),
        start_timestamp_us=START_US,
        trigger=policy,
        marks=[(mark_ns, "oil on turn 3")],
    )
    (s,) = sessions(path)
    (marker,) = s["markers"]
    assert marker.note == "oil on turn 3" and marker.wall_us == START_US + 30_000_000
    assert abs(s["times_s"][marker.tick] - 30.0) <= 1 / RATE  # the marker's tick is 30 s
    assert abs(s["times_s"][0] - 25.0) <= 1 / RATE and abs(s["times_s"][-1] - 34.0) <= 1 / RATE


def test_a_game_session_start_triggers(out_dir: Path) -> None:
    samples = game_stream(40 * RATE, new_session_at=20 * RATE)
    policy = TriggerPolicy(pre_s=5, post_s=2, condition=None, on_marker=False, on_session=True)
    (path,) = replay(
        samples, [GAME], RecorderPolicy(output_dir=out_dir), start_timestamp_us=START_US, trigger=policy
    )
    (s,) = sessions(path)
    # the new session's first frame is the trigger; no pre-trigger frames exist in it yet
    assert s["n"][0] == 20 * RATE and s["n"][-1] == 22 * RATE


def test_memory_stays_within_the_cap_over_ten_minutes_without_a_trigger(out_dir: Path) -> None:
    cap = 64 << 10
    policy = TriggerPolicy(pre_s=60, post_s=5, condition="speed > 5", max_buffer_bytes=cap)
    rec = Recorder([GAME], RecorderPolicy(output_dir=out_dir), trigger=policy)
    gate = rec.gate
    assert gate is not None
    frame_bytes = rec.schema.frame_size
    assert 60 * RATE * frame_bytes > cap  # the cap binds before pre_s does

    def feed() -> Iterator[Sample]:  # generated as it goes: only the recorder's memory is traced
        for i in range(10 * 60 * RATE):
            yield Sample("game", T0_NS + round(i * 1e9 / RATE), {"speed": 0.0, "gear": 3, "n": i})

    rec.set_origin(T0_NS, START_US)
    worst = 0
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for i, s in enumerate(feed()):
            rec.push(s)
            if i % 12 == 11:
                assert rec.advance(s.rx_ns) == []  # nothing for the sink
                worst = max(worst, gate.buffer_bytes)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert worst <= cap and gate.buffer_peak_bytes <= cap
    assert gate.stats()["buffer_bytes"] <= cap and gate.stats()["buffer_max_bytes"] == cap
    assert gate.frames_trimmed > 9 * 60 * RATE  # nearly everything went
    assert peak < cap + (1 << 20)  # the buffer plus the engine's small working set
    assert list(out_dir.iterdir()) == []


def test_stats_report_armed_buffer_then_recording(out_dir: Path) -> None:
    rec = Recorder(
        [GAME], RecorderPolicy(output_dir=out_dir), trigger=TriggerPolicy(pre_s=2, condition="speed>5")
    )
    rec.set_origin(T0_NS, START_US)
    samples = speed_stream(10, (8.0, 9.0))
    for s in samples[: 6 * RATE]:
        rec.push(s)
        rec.advance(s.rx_ns)
    st_ = rec.gate.stats() if rec.gate else {}
    assert st_["state"] == "armed" and 1.8 <= st_["buffer_s"] <= 2.3 and st_["buffer_bytes"] > 0
    for s in samples[6 * RATE :]:
        rec.push(s)
        rec.apply(rec.advance(s.rx_ns))
    assert rec.gate is not None and rec.gate.stats()["state"] == "recording" and rec.gate.triggers == 1
    rec.apply(rec.finish())
    rec.close()


DT = np.dtype(
    [("tick", "<u8"), ("game", [("speed", "<f4"), ("gear", "i1"), ("n", "<u4")]), ("gps", [("speed", "<f8")])]
)


def test_conditions_evaluate_per_frame() -> None:
    f = np.zeros(5, dtype=DT)
    f["game"]["speed"] = [0, 4, 6, np.nan, 10]
    f["game"]["gear"] = [0, 1, 2, 3, 0]
    f["gps"]["speed"] = [1, 1, 1, 1, 1]

    def ev(text: str) -> list[bool]:
        return parse_condition(text, DT).evaluate(f).tolist()

    assert ev("game.speed > 5") == [False, False, True, False, True]  # NaN (stale) never triggers
    assert ev("game.speed>5 and gear >= 1") == [False, False, True, False, False]
    assert ev("not (game.speed > 5) or gear == 3") == [True, True, False, True, False]
    assert ev("gear") == [False, True, True, True, False]
    assert ev("5 < game.speed") == ev("game.speed > 5")
    assert ev("gps.speed == 1 and n != 0") == [False] * 5
    assert parse_condition("gear >= 1", DT).channels == ("game.gear",)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "speed > 5",  # ambiguous: game.speed and gps.speed
        "rpm > 5",  # no such channel
        "__import__('os').system('true')",
        "game.speed > > 5",
        "(game.speed > 5",
        "game.speed > 5)",
        "1 < 2",
        "game.speed > 1e999",
        "game.speed + 1 > 2",
        "not " * 40 + "gear",
        "gear" + " or gear" * 200,
    ],
)
def test_bad_conditions_are_config_errors(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_condition(text, DT)


@given(st.text(max_size=60))
def test_any_text_parses_or_is_a_config_error(text: str) -> None:
    try:
        cond = parse_condition(text, DT)
    except ConfigError:
        return
    result = cond.evaluate(np.zeros(3, dtype=DT))
    assert result.dtype == bool and result.shape == (3,)


def test_policy_checks() -> None:
    with pytest.raises(ConfigError, match="needs a trigger"):
        TriggerPolicy(condition=None, on_marker=False, on_session=False).check()
    with pytest.raises(ConfigError, match="pre_trigger_max_bytes"):
        TriggerPolicy(max_buffer_bytes=10).check()
