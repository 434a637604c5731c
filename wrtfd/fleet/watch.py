"""The pit wall's picture of the fleet: every rig's status, layouts, latest live frame and laps.

Pure state (no NATS, no clock of its own): :class:`FleetView` is fed the messages of
``wrtfd.>`` (and the last ones kept in the ``WRTFD_STATE`` stream) and gives one :class:`Row`
per rig and recording group for ``wrtfd watch`` and ``wrtfd fleet status``. Every message is
untrusted: a malformed one is counted under its reason and dropped, never raises; a rig cannot
make the view grow without bound or its rendering slow: at most :data:`MAX_RIGS` rigs (a new one
replaces the one heard from least recently), and of each only a bounded summary of its status
(:class:`StatusSummary`, :data:`MAX_GROUPS` groups) and the few channels a row shows.

What a row shows, and from where:

- state: ``offline`` when the rig's last status is older than three status intervals or said
  ``stopped``; else ``recording`` (the group is in a session) or ``idle``;
- speed, gear, lap: the latest live frame (the first channel named ``speed``, converted to
  km/h from its unit; ``laps.lap_number`` or the game's ``lap_number``; ``gear``);
- last lap: the rig's ``lap`` events (computed from the full-rate lap channels), else the
  status, else the game's own ``last_lap`` channel; best lap: the status (the lap detector's),
  else the game's ``best_lap``;
- backlog: the status's upload queue (files and bytes) and live frames dropped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import numpy as np

from wrtfd.fleet import untrusted
from wrtfd.fleet.encoding import FleetDecodeError, Layout, decode_frames, decode_layout

__all__ = [
    "MAX_GROUPS",
    "MAX_RIGS",
    "FleetView",
    "GroupSummary",
    "Row",
    "StatusSummary",
    "is_offline",
    "summarize_status",
]

#: Rigs in the view; a new rig beyond them replaces the one heard from least recently.
MAX_RIGS = 256
#: Recording groups per rig (from its status and from its layouts and lap events, each).
MAX_GROUPS = 16
MAX_STATUS_BYTES = 1 << 20
#: Longest rig, group, link or problem text kept from a status (longer ones are cut).
MAX_TEXT = 200
#: Problems of a status kept for a row.
MAX_PROBLEMS = 5
#: Counters (uploads, bytes, drops) above this are not believed (a JSON int may have 400 digits).
MAX_COUNT = float(1 << 62)
#: A lap time above this (a day) is not a lap.
MAX_LAP_MS = 86_400_000.0
#: A rig is offline when its status is older than this many status intervals.
OFFLINE_INTERVALS = 3.0
DEFAULT_STATUS_INTERVAL_S = 2.0

_SPEED_TO_KMH = {"m/s": 3.6, "km/h": 1.0, "kph": 1.0, "mph": 1.609344}


@dataclass(slots=True)
class Row:
    rig: str
    group: str
    state: str
    speed_kmh: float | None = None
    gear: int | None = None
    lap: int | None = None
    last_lap_ms: int | None = None
    best_lap_ms: int | None = None
    uploads_queued: int | None = None
    uploads_bytes: int | None = None
    live_dropped: int | None = None
    link: str | None = None
    seen_s: float | None = None
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class GroupSummary:
    in_session: bool = False
    best_lap_ms: int | None = None
    last_lap_ms: int | None = None


@dataclass(frozen=True, slots=True)
class StatusSummary:
    """What the views use of a rig's status, every value checked and bounded: a status document
    of 1 MiB parses into some 23 MiB of Python objects, which a view of 256 rigs cannot keep."""

    state: str | None
    interval_s: float
    link: str | None
    uploads_queued: int | None
    uploads_bytes: int | None
    uploads_done: int | None
    live_dropped: int | None
    last_error: str | None
    problems: tuple[str, ...]
    #: At most :data:`MAX_GROUPS`, in the status's order.
    groups: Mapping[str, GroupSummary]
    #: The status named more groups than that.
    groups_cut: bool


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: object) -> str | None:
    return value[:MAX_TEXT] if isinstance(value, str) else None


def _count(value: object) -> int | None:
    """A JSON integer from 0 to :data:`MAX_COUNT`, else None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value <= MAX_COUNT else None


def _lap_ms(value: object) -> int | None:
    """A lap time in ms (a JSON integer above 0, at most a day), else None."""
    ms = _count(value)
    return ms if ms is not None and 0 < ms <= MAX_LAP_MS else None


def summarize_status(doc: Mapping[str, Any]) -> StatusSummary:
    """The bounded summary of a status document (any JSON object: odd values become None)."""
    fleet = _map(doc.get("fleet"))
    uploads = _map(fleet.get("uploads"))
    problems = doc.get("problems")
    groups: dict[str, GroupSummary] = {}
    given = doc.get("groups")
    cut = False
    if isinstance(given, Mapping):
        for name, value in islice(given.items(), MAX_GROUPS):
            g = _map(value)
            laps = _map(g.get("laps"))
            groups[name[:MAX_TEXT]] = GroupSummary(
                in_session=g.get("in_session") is True,
                best_lap_ms=_lap_ms(laps.get("best_lap_ms")),
                last_lap_ms=_lap_ms(laps.get("last_lap_ms")),
            )
        cut = len(given) > MAX_GROUPS
    return StatusSummary(
        state=_text(doc.get("state")),
        interval_s=untrusted.number(doc.get("status_interval_s"), 1e-3, 3600.0) or DEFAULT_STATUS_INTERVAL_S,
        link=_text(fleet.get("state")),
        uploads_queued=_count(uploads.get("queued")),
        uploads_bytes=_count(uploads.get("queued_bytes")),
        uploads_done=_count(uploads.get("done")),
        live_dropped=_count(_map(fleet.get("live")).get("dropped_total")),
        last_error=_text(fleet.get("last_error")) or _text(uploads.get("last_error")),
        problems=tuple(p for p in map(_text, problems[:MAX_PROBLEMS]) if p)
        if isinstance(problems, list)
        else (),
        groups=groups,
        groups_cut=cut,
    )


def is_offline(summary: StatusSummary | None, age_s: float | None) -> bool:
    """Offline: no status, one older than :data:`OFFLINE_INTERVALS` intervals, or ``stopped``."""
    if summary is None or age_s is None or summary.state == "stopped":
        return True
    return age_s > OFFLINE_INTERVALS * max(summary.interval_s, DEFAULT_STATUS_INTERVAL_S)


@dataclass(slots=True)
class _Live:
    layout: Layout | None = None
    picks: _Picks | None = None
    values: dict[str, Any] = field(default_factory=dict)
    at_s: float = -math.inf
    last_lap: tuple[int, int] | None = None  # (lap, ms) from a lap event


@dataclass(slots=True)
class _Rig:
    status: StatusSummary | None = None
    status_at_s: float = -math.inf
    groups: dict[str, _Live] = field(default_factory=dict)


def _subject_parts(subject: str) -> list[str]:
    parts = subject.split(".")
    return parts if parts and parts[0] == "wrtfd" else []


class FleetView:
    """Everything ``wrtfd watch`` knows; feed it with :meth:`feed`, read it with :meth:`rows`.

    At most :data:`MAX_RIGS` rigs: ``rigs`` is kept in the order the rigs were last heard from
    (any message taken), and a new rig beyond the limit replaces the one heard from least
    recently (counted as ``rig_evicted``). A rig that keeps publishing stays; names that
    published once and went quiet (or a flood of made-up ones) cannot hide it for good."""

    def __init__(self) -> None:
        self.rigs: dict[str, _Rig] = {}
        self.dropped: dict[str, int] = {}

    def count(self, reason: str) -> None:
        """One message dropped for ``reason``."""
        self.dropped[reason] = self.dropped.get(reason, 0) + 1

    _drop = count

    def _rig(self, name: str) -> _Rig:
        """The rig ``name``, now the most recently heard from (created, evicting, if new)."""
        rig = self.rigs.pop(name, None)
        if rig is None:
            rig = _Rig()
            while len(self.rigs) >= MAX_RIGS:
                del self.rigs[next(iter(self.rigs))]
                self._drop("rig_evicted")
        self.rigs[name] = rig
        return rig

    def _group(self, rig: _Rig, name: str) -> _Live | None:
        live = rig.groups.get(name)
        if live is None:
            if len(rig.groups) >= MAX_GROUPS:
                self._drop("too_many_groups")
                return None
            live = rig.groups[name] = _Live()
        return live

    def needs_layout(self, subject: str, payload: bytes) -> bool:
        """A frames message whose layout is not known (yet): the caller may fetch it."""
        parts = _subject_parts(subject)
        if len(parts) != 4 or parts[3] != "frames" or len(payload) < 8:
            return False
        rig = self.rigs.get(parts[1])
        live = rig.groups.get(parts[2]) if rig is not None else None
        layout = live.layout if live is not None else None
        return layout is None or int.from_bytes(payload[4:8], "little") != layout.layout_id

    def feed(self, subject: str, payload: bytes, now_s: float) -> None:
        """One message of ``wrtfd.>`` received at ``now_s`` (any monotonic clock)."""
        parts = _subject_parts(subject)
        if len(parts) == 3 and parts[2] == "status":
            self._on_status(parts[1], payload, now_s)
        elif len(parts) == 3 and parts[2] == "events":
            self._on_event(parts[1], payload)
        elif len(parts) == 4 and parts[3] == "layout":
            self._on_layout(parts[1], parts[2], payload)
        elif len(parts) == 4 and parts[3] == "frames":
            self._on_frames(parts[1], parts[2], payload, now_s)
        else:
            self._drop("unknown_subject")

    def _on_status(self, name: str, payload: bytes, now_s: float) -> None:
        if len(payload) > MAX_STATUS_BYTES:
            self._drop("status_too_large")
            return
        try:
            doc = untrusted.loads(payload)
        except ValueError:
            self._drop("status_not_json")
            return
        if not isinstance(doc, dict) or doc.get("rig") != name:
            self._drop("status_not_a_status")
            return
        summary = summarize_status(doc)
        del doc
        if summary.groups_cut:
            self._drop("too_many_groups")
        rig = self._rig(name)
        rig.status = summary
        rig.status_at_s = now_s

    def age_status(self, name: str, age_s: float, now_s: float) -> None:
        """The rig's status came from the stream and is ``age_s`` old (not just received)."""
        rig = self.rigs.get(name)
        if rig is not None:
            rig.status_at_s = now_s - max(0.0, age_s)

    def _on_event(self, name: str, payload: bytes) -> None:
        try:
            doc = untrusted.loads(payload) if len(payload) <= MAX_STATUS_BYTES else None
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            self._drop("event_not_json")
            return
        if doc.get("type") != "lap":
            return
        group, lap, ms = doc.get("group"), _count(doc.get("lap")), _lap_ms(doc.get("lap_ms"))
        if not isinstance(group, str) or lap is None or ms is None:
            self._drop("bad_lap_event")
            return
        live = self._group(self._rig(name), group)
        if live is not None:
            live.last_lap = (lap, ms)

    def _on_layout(self, name: str, group: str, payload: bytes) -> None:
        try:
            _rig, _group, layout = decode_layout(payload)
        except FleetDecodeError as exc:
            self._drop(exc.reason)
            return
        live = self._group(self._rig(name), group)
        if live is not None:
            live.layout, live.picks = layout, _Picks.of(layout)

    def _on_frames(self, name: str, group: str, payload: bytes, now_s: float) -> None:
        rig = self.rigs.get(name)
        live = rig.groups.get(group) if rig is not None else None
        if live is None or live.layout is None:
            self._drop("no_layout")
            return
        try:
            _times, frames = decode_frames(payload, live.layout)
        except FleetDecodeError as exc:
            self._drop(exc.reason)
            return
        self._rig(name)
        if len(frames) == 0:
            return
        last = frames[-1]
        live.values = {name: last[name] for name in live.picks.names} if live.picks is not None else {}
        live.at_s = now_s

    # --- reading ----------------------------------------------------------------------------

    def rows(self, now_s: float) -> list[Row]:
        """One row per rig and group: at most :data:`MAX_RIGS` x 2 x :data:`MAX_GROUPS`."""
        out: list[Row] = []
        for name in sorted(self.rigs):
            rig = self.rigs[name]
            given = rig.status.groups if rig.status is not None else {}
            names = sorted(set(given) | set(rig.groups)) or ["-"]
            for group in names:
                out.append(self._row(name, rig, group, now_s))
        return out

    def _row(self, name: str, rig: _Rig, group: str, now_s: float) -> Row:
        status = rig.status
        seen = now_s - rig.status_at_s if status is not None else None
        g = status.groups.get(group, GroupSummary()) if status is not None else GroupSummary()
        interval = status.interval_s if status is not None else DEFAULT_STATUS_INTERVAL_S
        if is_offline(status, seen):
            state = "offline"
        elif g.in_session:
            state = "recording"
        else:
            state = "idle"
        row = Row(rig=name, group=group, state=state, seen_s=seen, best_lap_ms=g.best_lap_ms)
        row.last_lap_ms = g.last_lap_ms
        if status is not None:
            row.uploads_queued, row.uploads_bytes = status.uploads_queued, status.uploads_bytes
            row.live_dropped, row.link = status.live_dropped, status.link
            row.problems = list(status.problems)
        live = rig.groups.get(group)
        if live is not None:
            fresh = state != "offline" and now_s - live.at_s < OFFLINE_INTERVALS * interval
            if fresh and live.layout is not None:
                self._from_frame(row, live)
            if live.last_lap is not None:
                row.last_lap_ms = live.last_lap[1]
        return row

    @staticmethod
    def _from_frame(row: Row, live: _Live) -> None:
        picks, values = live.picks, live.values
        if picks is None:
            return
        if picks.speed is not None:
            v = _finite(values.get(picks.speed[0]))
            row.speed_kmh = None if v is None else v * picks.speed[1]
        if picks.lap is not None:
            lap = _finite(values.get(picks.lap))
            row.lap = None if lap is None else int(lap)
        if picks.gear is not None:
            g = _finite(values.get(picks.gear))
            row.gear = None if g is None else int(g)
        if row.last_lap_ms is None:
            row.last_lap_ms = _game_lap_ms(values, picks.last_lap)
        if row.best_lap_ms is None:
            row.best_lap_ms = _game_lap_ms(values, picks.best_lap)


@dataclass(frozen=True, slots=True)
class _Picks:
    """The few channels of a layout a row shows, found once per layout (a layout may have
    thousands of channels: reading them all for every frame and every render would not do)."""

    speed: tuple[str, float] | None  # (channel, factor to km/h)
    lap: str | None
    gear: str | None
    last_lap: tuple[str, float] | None  # (channel, factor to ms)
    best_lap: tuple[str, float] | None

    @property
    def names(self) -> tuple[str, ...]:
        pairs = (self.speed, self.last_lap, self.best_lap)
        return tuple(p[0] for p in pairs if p is not None) + tuple(n for n in (self.lap, self.gear) if n)

    @classmethod
    def of(cls, layout: Layout) -> _Picks:
        scalars = {f.name: f for f in layout.fields if not f.shape}
        speed = None
        for f in layout.fields:
            if f.name.endswith(".speed") or f.name == "speed":
                factor = _SPEED_TO_KMH.get(f.unit.strip().lower())
                if not f.shape and factor is not None:
                    speed = (f.name, factor)
                break
        lap = "laps.lap_number" if "laps.lap_number" in scalars else _first_suffix(scalars, ".lap_number")
        return cls(
            speed,
            lap,
            _first_suffix(scalars, ".gear"),
            _game_lap_channel(scalars, "last_lap", "last_lap_time_ms"),
            _game_lap_channel(scalars, "best_lap", "best_lap_time_ms"),
        )


def _first_suffix(fields: Mapping[str, Any], suffix: str) -> str | None:
    return next((n for n in fields if n.endswith(suffix) and n.count(".") == 1), None)


def _game_lap_channel(fields: Mapping[str, Any], seconds: str, millis: str) -> tuple[str, float] | None:
    for suffix, factor in ((f".{seconds}", 1000.0), (f".{millis}", 1.0)):
        name = _first_suffix(fields, suffix)
        if name is not None:
            return name, factor
    return None


def _finite(value: object, limit: float = 1e9) -> float | None:
    """A channel's value as a float when it is a finite number within +-``limit``, else None."""
    if isinstance(value, np.generic):
        value = value.item()
    return untrusted.number(value, -limit, limit)


def _game_lap_ms(values: Mapping[str, Any], channel: tuple[str, float] | None) -> int | None:
    if channel is None:
        return None
    v = _finite(values.get(channel[0]))
    if v is not None and 0 < v * channel[1] <= MAX_LAP_MS:
        return round(v * channel[1])
    return None
