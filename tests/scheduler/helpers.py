"""Shared helpers: a small frame dtype and a deterministic driver for the scheduler."""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from wrtfd.decoders.base import Sample
from wrtfd.scheduler import (
    FrameBlock,
    SchedulerConfig,
    SchedulerEvent,
    SessionEnded,
    SessionStarted,
    SourcePlan,
    TickScheduler,
)

T0_NS = 5_000_000_000_000  # an arbitrary monotonic origin
PERIOD_60_NS = 1e9 / 60
WINDOWS_TIMER_NS = 15_625_000  # Windows' default timer resolution (1/64 s)


def dtype_for(sources: dict[str, list[tuple[str, str]]]) -> np.dtype:
    """``{"g": [("x", "<f4"), ("n", "<u4")]}`` -> frame dtype with ``stale`` flags."""
    fields: list[tuple[str, object]] = [("tick", "<u8")]
    for name, chans in sources.items():
        fields.append((name, chans))
    fields.append(("stale", [(name, "?") for name in sources]))
    return np.dtype(fields)


GAME = [("x", "<f4"), ("n", "<u4")]


@dataclass
class Run:
    frames: np.ndarray
    events: list[SchedulerEvent]
    scheduler: TickScheduler

    @property
    def ends(self) -> list[SessionEnded]:
        return [e for e in self.events if isinstance(e, SessionEnded)]

    @property
    def starts(self) -> list[SessionStarted]:
        return [e for e in self.events if isinstance(e, SessionStarted)]

    def session_frames(self, session: int) -> np.ndarray:
        blocks = [e.frames for e in self.events if isinstance(e, FrameBlock) and e.session == session]
        return np.concatenate(blocks) if blocks else np.zeros(0, self.frames.dtype)


def drive(
    samples: Iterable[Sample],
    plans: Sequence[SourcePlan],
    dtype: np.dtype,
    *,
    rate_hz: float = 60,
    finish: bool = True,
    **config: object,
) -> Run:
    """Replay-style driving: advance to each sample's receive time, then push it."""
    sched = TickScheduler(plans, dtype, SchedulerConfig(rate_hz=rate_hz, **config))  # type: ignore[arg-type]
    events: list[SchedulerEvent] = []
    for s in samples:
        events += sched.advance(s.rx_ns)
        sched.push(s)
    if finish:
        events += sched.finish()
    blocks = [e.frames for e in events if isinstance(e, FrameBlock)]
    frames = np.concatenate(blocks) if blocks else np.zeros(0, dtype)
    return Run(frames, events, sched)


def game_samples(times_ns: Sequence[int], source: str = "g") -> list[Sample]:
    return [Sample(source, t, {"x": float(i), "n": i}) for i, t in enumerate(times_ns)]


def jittered(
    indices: Iterable[int],
    *,
    jitter_ns: float,
    seed: int,
    phase_ns: float = 0.0,
    period_ns: float = PERIOD_60_NS,
) -> list[int]:
    rng = random.Random(seed)
    return [round(T0_NS + phase_ns + n * period_ns + rng.uniform(-jitter_ns, jitter_ns)) for n in indices]


def windows_bunched(
    indices: Iterable[int],
    *,
    jitter_ns: float,
    seed: int,
    phase_ns: float = 0.0,
    period_ns: float = PERIOD_60_NS,
) -> list[int]:
    """Sent every period (+- jitter), timestamped by a receiver whose clock ticks every 15.625 ms."""
    rng = random.Random(seed)
    out = []
    for n in indices:
        sent = phase_ns + n * period_ns + rng.uniform(-jitter_ns, jitter_ns)
        out.append(T0_NS + math.ceil(sent / WINDOWS_TIMER_NS) * WINDOWS_TIMER_NS)
    return sorted(out)


def gaps(ticks: np.ndarray) -> int:
    t = ticks.astype(np.int64)
    return int(np.sum(np.diff(t) - 1)) if len(t) > 1 else 0
