"""The seam between building the daemon and running it.

:mod:`wiring` turns a config into a :class:`Pipeline` (every source, its sink and the recorder,
nothing bound or opened yet); :mod:`app` runs one. Neither imports the other's internals, so the
pipeline's shape is the whole contract between them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from wrtfd.daemon.config import LoadedConfig, SourceConfig
from wrtfd.daemon.mapping import SampleTransform
from wrtfd.daemon.rates import RateMeter
from wrtfd.daemon.supervise import Backoff
from wrtfd.recorder.groups import RecorderGroups
from wrtfd.recorder.observe import ObserverHub
from wrtfd.sources.base import SampleSink, Source

if TYPE_CHECKING:
    from wrtfd.recorder.tap import RawTap
    from wrtfd.tracks.gnsslaps import GnssLapChannels
    from wrtfd.tracks.lapchannels import LapChannels

__all__ = ["BuiltSource", "FleetLink", "Pipeline", "SourceHandle"]


@dataclass(frozen=True, slots=True)
class BuiltSource:
    """A source ready to run and what the recorder must know about it."""

    config: SourceConfig
    source: Source
    definition: dict[str, Any]
    transform: SampleTransform | None
    address: str
    #: The lap-channel plug-in (a ``LapChannels``) when the source has a ``track``.
    laps: LapChannels | None = None
    #: The GNSS lap-channel plug-in when the source has a ``circuit`` (or ``circuits``).
    gnss_laps: GnssLapChannels | None = None

    @property
    def derived(self) -> LapChannels | GnssLapChannels | None:
        """Whichever lap plug-in the source has."""
        return self.laps if self.laps is not None else self.gnss_laps


@dataclass(slots=True)
class SourceHandle:
    """One configured source with what the daemon keeps about it."""

    config: SourceConfig
    source: Source
    sink: SampleSink
    address: str
    backoff: Backoff
    rate: RateMeter = field(default_factory=RateMeter)
    ready: bool = False
    logged_drops: dict[str, int] = field(default_factory=dict)


class FleetLink(Protocol):
    """What the daemon uses of :class:`wrtfd.fleet.publisher.FleetPublisher`."""

    def start(self) -> None: ...

    async def run_status(self, snapshot: Callable[[], Mapping[str, Any]]) -> None: ...

    async def close(self, timeout_s: float = ...) -> None: ...

    def snapshot(self) -> dict[str, Any]: ...

    def problem(self) -> str | None: ...

    def notify(self, item: Any) -> None: ...


@dataclass(frozen=True, slots=True)
class Pipeline:
    """Everything ``wrtfd run`` runs, built (or refused) before any I/O."""

    loaded: LoadedConfig
    handles: list[SourceHandle]
    #: One live recorder per recording group, behind the single-recorder interface.
    recorder: RecorderGroups
    output_dir: Path
    #: The environment the daemon sees (sd_notify, watchdog); None: ``os.environ``.
    env: Mapping[str, str] | None = None
    #: Every group's recorder publishes its events and live frames here (the observers' seam).
    hub: ObserverHub = field(default_factory=ObserverHub)
    #: The fleet publisher (``[fleet]``), an observer of ``hub``; None without a fleet.
    fleet: FleetLink | None = None
    #: The raw tap (``raw_tap``), an observer on ``hub``; None when no source is tapped.
    tap: RawTap | None = None
    #: Lap records (``laps.jsonl`` beside the recordings), an observer on ``hub``.
    laps: Any = None
