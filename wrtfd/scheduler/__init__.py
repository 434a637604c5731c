"""Tick scheduler: turns samples from many sources into fixed-rate frames (pure code).

See :mod:`wrtfd.scheduler.core` for the timing model (virtual times, jitter window, dropped and
late ticks, sessions) and :mod:`wrtfd.scheduler.timing` for how arrival-time and source-clock
sources are mapped onto ticks; :mod:`wrtfd.scheduler.follow` for the timeline that follows a
source's own clock (``recorder.clock = "source"``).
"""

from __future__ import annotations

from wrtfd.scheduler.core import (
    FrameBlock as FrameBlock,
)
from wrtfd.scheduler.core import (
    MergePolicy as MergePolicy,
)
from wrtfd.scheduler.core import (
    SchedulerConfig as SchedulerConfig,
)
from wrtfd.scheduler.core import (
    SchedulerEvent as SchedulerEvent,
)
from wrtfd.scheduler.core import (
    SessionEnded as SessionEnded,
)
from wrtfd.scheduler.core import (
    SessionStarted as SessionStarted,
)
from wrtfd.scheduler.core import (
    SourceCounters as SourceCounters,
)
from wrtfd.scheduler.core import (
    SourcePlan as SourcePlan,
)
from wrtfd.scheduler.core import (
    TickScheduler as TickScheduler,
)
from wrtfd.scheduler.follow import (
    SourceTimeline as SourceTimeline,
)

__all__ = [
    "FrameBlock",
    "MergePolicy",
    "SchedulerConfig",
    "SchedulerEvent",
    "SessionEnded",
    "SessionStarted",
    "SourceCounters",
    "SourcePlan",
    "SourceTimeline",
    "TickScheduler",
]
