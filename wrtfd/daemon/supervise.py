"""Run one source forever: restart it with exponential backoff when it fails, never let it fail others.

A source that raises an ``Exception`` (its own :class:`~wrtfd.errors.SourceError`, an ``OSError``
such as a port in use, or a bug) is logged, counted in ``stats.restarts``, shown as
``reconnecting`` with the reason, and started again after a delay that doubles from
``initial_s`` up to ``max_s``. The delay starts over once a run has lasted longer than ``max_s``.
Cancellation (``BaseException``) is never caught: shutdown stays prompt.

The supervisor reports "started" to its task group the first time the source is ready *or*
fails, so one missing device never holds up ``READY=1`` for the others.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc

from wrtfd.sources.base import SampleSink, Source, SourceState

__all__ = ["Backoff", "supervise"]

log = logging.getLogger("wrtfd.supervise")


@dataclass(slots=True)
class Backoff:
    """Exponential restart delay (pure: the caller says how long the last run lasted)."""

    initial_s: float
    max_s: float
    next_s: float = 0.0

    def __post_init__(self) -> None:
        self.next_s = self.initial_s

    def after_run(self, ran_s: float) -> float:
        """The delay before the next start, given how long the failed run lasted."""
        if ran_s > self.max_s:
            self.next_s = self.initial_s
        delay = self.next_s
        self.next_s = min(self.next_s * 2, self.max_s)
        return delay


class _StartedRelay:
    """A task_status for the source that calls ``on_started`` (once per run)."""

    def __init__(self, on_started: Callable[[], None]) -> None:
        self._on_started = on_started
        self.started_at: float | None = None

    def started(self, value: Any = None) -> None:
        if self.started_at is None:
            self.started_at = time.monotonic()
            self._on_started()


def _reason(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return (
        text if isinstance(exc, OSError | RuntimeError) or text != type(exc).__name__ else type(exc).__name__
    )


async def supervise(
    source: Source,
    sink: SampleSink,
    backoff: Backoff,
    *,
    on_ready: Callable[[], None] | None = None,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Run ``source`` until cancelled, restarting it after failures."""
    reported = False

    def report() -> None:
        nonlocal reported
        if not reported:
            reported = True
            task_status.started()
            if on_ready is not None:
                on_ready()

    while True:
        relay = _StartedRelay(report)
        began = time.monotonic()
        try:
            await source.run(sink, task_status=relay)
            detail = "source ended"
            log.warning(
                "source %s ended; restarting", source.name, extra={"rate_key": f"restart:{source.name}"}
            )
        except Exception as exc:  # a failing source must not take the others down
            detail = _reason(exc)
            log.warning(
                "source %s failed: %s; restarting",
                source.name,
                detail,
                extra={"rate_key": f"restart:{source.name}"},
            )
        report()
        delay = backoff.after_run(time.monotonic() - (relay.started_at or began))
        source.stats.restarts += 1
        source.stats.set_state(SourceState.RECONNECTING, f"{detail}; retry in {delay:.1f} s")
        await anyio.sleep(delay)
