"""Several recordings side by side: one :class:`LiveRecorder` per group of sources.

Sources that belong together (a GPS and a CAN bus in one car) share a group and so one file, one
frame and one tick grid. Sources that do not (the built-in sim-rig default listens for six games
of which one plays at a time) each get a group of their own: each game then records its own
files, with a frame holding only that game's channels, named after that game, and a game that
is not playing costs nothing on disk.

:class:`RecorderGroups` offers the daemon the same interface as a single :class:`LiveRecorder`
(``sink``, ``run``, ``stop``, ``request_new_session``, ``stats_snapshot``), so the daemon does
not care how many recordings run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio

from wrtfd.decoders.base import Sample
from wrtfd.errors import ConfigError
from wrtfd.recorder.live import LiveRecorder
from wrtfd.recorder.markers import TooManyMarkersError

__all__ = ["RecorderGroups", "merge_snapshots"]

#: Worst first: the state a set of recordings reports is the worst of its members'.
_STATE_ORDER = ("failing", "stalled", "ok", "stopped")

#: Snapshot counters that add up across groups.
_SUMMED = (
    "errors",
    "files",
    "sessions",
    "session_frames",
    "frames",
    "frames_written",
    "frames_lost",
    "dropped_ticks",
    "bytes",
    "bytes_written",
    "samples",
    "intake_dropped",
    "intake_queued",
    "backlog_frames",
    "frame_rate_hz",
    "progress",
    "derived_errors",
    "markers",
    "markers_dropped",
    "markers_refused",
)


class RecorderGroups:
    """Routes each sample to its group's recorder and runs them all in one task group."""

    def __init__(self, groups: Mapping[str, LiveRecorder], source_group: Mapping[str, str]) -> None:
        if not groups:
            raise ConfigError("no recording group: at least one source must be configured")
        unknown = sorted(set(source_group.values()) - set(groups))
        if unknown:
            raise ConfigError(f"sources refer to unknown recording group(s): {', '.join(unknown)}")
        self.groups = dict(groups)
        # source name -> that group's sink: one dict lookup per sample on the receive path.
        self._sinks = {source: self.groups[group].sink for source, group in source_group.items()}
        self._stopping = False

    def sink(self, sample: Sample) -> None:
        """Non-blocking intake of the sample's group; raises SinkFull when that intake is full."""
        try:
            sink = self._sinks[sample.source]
        except KeyError:
            raise ConfigError(f"sample from unknown source {sample.source!r}") from None
        sink(sample)

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Run every group's recorder; returns when all have finished."""
        async with anyio.create_task_group() as tg:
            for recorder in self.groups.values():
                await tg.start(recorder.run)
            task_status.started()

    def request_new_session(self) -> None:
        for recorder in self.groups.values():
            recorder.request_new_session()

    def mark(self, note: str = "") -> dict[str, int]:
        """A marker at this moment in every group with a session in progress: ``{group: tick}``.

        :raises TooManyMarkersError: no group took it, and one refused it (too many waiting).
        """
        out: dict[str, int] = {}
        full: TooManyMarkersError | None = None
        for name, recorder in self.groups.items():
            try:
                tick = recorder.mark(note)
            except TooManyMarkersError as exc:
                full = exc
                continue
            if tick is not None:
                out[name] = tick
        if not out and full is not None:
            raise full
        return out

    async def stop(self) -> None:
        """Finalize every group's session and file (concurrently: one slow disk write each)."""
        async with anyio.create_task_group() as tg:
            for recorder in self.groups.values():
                tg.start_soon(recorder.stop)

    def stats_snapshot(self) -> dict[str, Any]:
        return merge_snapshots({name: rec.stats_snapshot() for name, rec in self.groups.items()})


def merge_snapshots(snapshots: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """One recorder snapshot for several groups: worst state, summed counters, every open file.

    ``file`` is the open file of the busiest group (most frames per second), which is the one a
    person watching ``STATUS=`` wants to see; ``open_files`` lists them all and ``groups`` keeps
    each group's own snapshot.
    """
    snaps = list(snapshots.values())
    if len(snaps) == 1:
        merged = dict(snaps[0])
        merged["groups"] = {name: dict(s) for name, s in snapshots.items()}
        merged["open_files"] = [merged["file"]] if merged.get("file") else []
        return merged
    state = min((s.get("state", "ok") for s in snaps), key=_state_rank)
    busiest = max(snaps, key=lambda s: (float(s.get("frame_rate_hz") or 0.0), s.get("frames") or 0))
    merged = {
        "state": state,
        "error": next((s["error"] for s in snaps if s.get("error")), None),
        "file": busiest.get("file"),
        "open_files": [s["file"] for s in snaps if s.get("file")],
        "session": busiest.get("session"),
        "in_session": any(s.get("in_session") for s in snaps),
        "fsync_lag_s": max(float(s.get("fsync_lag_s") or 0.0) for s in snaps),
        "write_pending_s": max(
            (s["write_pending_s"] for s in snaps if s.get("write_pending_s") is not None), default=None
        ),
        "per_source": {k: v for s in snaps for k, v in (s.get("per_source") or {}).items()},
        "groups": {name: dict(s) for name, s in snapshots.items()},
    }
    for key in _SUMMED:
        merged[key] = sum(s.get(key) or 0 for s in snaps)
    return merged


def _state_rank(state: str) -> int:
    try:
        return _STATE_ORDER.index(state)
    except ValueError:
        return 0  # an unknown state is treated as the worst
