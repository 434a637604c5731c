"""Several recordings replayed side by side: one :class:`~wrtfd.recorder.Replayer` per group.

An import can hold several recordings, as the daemon would record them: a capture of two games
(each game its own recording group), or a daemon config whose sources form groups. Samples
come in file order; each goes to its source's group, whose replayer starts at that group's
first sample (a group that never delivers writes no file, like a game that is not played).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wrtfd.decoders.base import Sample
from wrtfd.errors import ConfigError
from wrtfd.importers.report import earliest_start_us

__all__ = ["GroupPlan", "GroupReplay"]


@dataclass(slots=True)
class GroupPlan:
    """One recording: its sources (``SourceSpec``), policy, plug-ins and file metadata."""

    name: str
    sources: Sequence[Any]
    policy: Any
    derived: Sequence[Any] = ()
    metadata: Mapping[str, str] = field(default_factory=dict)


class GroupReplay:
    """Routes samples by source to their group's replayer.

    ``wall_ns`` maps a receive time to wall-clock nanoseconds (default: the times are
    nanoseconds since the epoch, as in a capture). It must be a fixed offset: each recording
    maps its times with the offset of its first sample, to the nanosecond, as the live daemon
    maps them with its one offset (a tap replayed gives the live session starts exactly).
    """

    def __init__(self, *, wall_ns: Callable[[int], int] | None = None) -> None:
        self._plans: dict[str, GroupPlan] = {}
        self._group_of: dict[str, str] = {}
        self._replayers: dict[str, Any] = {}
        self._push_of: dict[str, Any] = {}  # source -> its group's replayer's push, once started
        self._wall_ns = wall_ns or (lambda rx_ns: rx_ns)

    def add(self, plan: GroupPlan) -> None:
        """:raises ConfigError: a group or source name used twice."""
        if plan.name in self._plans:
            raise ConfigError(f"recording group {plan.name!r} defined twice")
        for spec in plan.sources:
            if spec.name in self._group_of:
                raise ConfigError(f"source {spec.name!r} is in two recording groups")
            self._group_of[spec.name] = plan.name
        self._plans[plan.name] = plan

    def push(self, sample: Sample) -> None:
        push = self._push_of.get(sample.source)
        if push is None:
            push = self._start(sample)
        push(sample)

    def _start(self, sample: Sample) -> Any:
        """The push of the sample's group, whose replayer starts with this sample if need be."""
        group = self._group_of[sample.source]
        replayer = self._replayers.get(group)
        if replayer is None:
            from wrtfd.recorder import Replayer

            plan = self._plans[group]
            start_ns = max(self._wall_ns(sample.rx_ns), earliest_start_us(plan.policy.rate_hz) * 1000)
            replayer = self._replayers[group] = Replayer(
                plan.sources,
                plan.policy,
                start_timestamp_us=start_ns // 1000,
                metadata=plan.metadata,
                derived=plan.derived,
                wall_offset_ns=start_ns - sample.rx_ns,
            )
        self._push_of[sample.source] = replayer.push
        return replayer.push

    def record(self, samples: Iterable[Sample]) -> dict[str, list[Path]]:
        """Push every sample, then :meth:`finish`; every recording is closed if anything fails."""
        try:
            for sample in samples:
                self.push(sample)
        except BaseException:
            self.close()
            raise
        return self.finish()

    def finish(self) -> dict[str, list[Path]]:
        """Finish every recording; returns the files written per group (groups in first-sample order)."""
        written: dict[str, list[Path]] = {}
        try:
            while self._replayers:
                group = next(iter(self._replayers))
                written[group] = self._replayers.pop(group).finish()  # closes it, even on error
        finally:
            self.close()
        return written

    def close(self) -> None:
        """Close every recording without finishing it (an error elsewhere)."""
        for replayer in self._replayers.values():
            replayer.close()
        self._replayers = {}
        self._push_of = {}
