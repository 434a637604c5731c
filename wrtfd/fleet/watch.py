"""The pit wall's picture of the fleet: every rig's status, layouts, latest live frame and laps.

Pure state (no NATS, no clock of its own): :class:`FleetView` is fed the messages of
``wrtfd.>`` (and the last ones kept in the ``WRTFD_STATE`` stream) and gives one :class:`Row`
per rig and recording group for ``wrtfd watch`` and ``wrtfd fleet status``. Every message is
untrusted: a malformed one is counted under its reason and dropped; a rig cannot make the view
grow without bound (at most :data:`MAX_RIGS` rigs, :data:`MAX_GROUPS` groups each).

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

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wrtfd.fleet.encoding import FleetDecodeError, Layout, decode_frames, decode_layout

__all__ = ["MAX_GROUPS", "MAX_RIGS", "FleetView", "Row"]

MAX_RIGS = 256
MAX_GROUPS = 16
MAX_STATUS_BYTES = 1 << 20
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


@dataclass(slots=True)
class _Live:
    layout: Layout | None = None
    dtype: Any = None
    values: dict[str, Any] = field(default_factory=dict)
    at_s: float = -math.inf
    last_lap: tuple[int, int] | None = None  # (lap, ms) from a lap event


@dataclass(slots=True)
class _Rig:
    status: Mapping[str, Any] | None = None
    status_at_s: float = -math.inf
    groups: dict[str, _Live] = field(default_factory=dict)


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _subject_parts(subject: str) -> list[str]:
    parts = subject.split(".")
    return parts if parts and parts[0] == "wrtfd" else []


class FleetView:
    """Everything ``wrtfd watch`` knows; feed it with :meth:`feed`, read it with :meth:`rows`."""

    def __init__(self) -> None:
        self.rigs: dict[str, _Rig] = {}
        self.dropped: dict[str, int] = {}

    def _drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1

    def _rig(self, name: str) -> _Rig | None:
        rig = self.rigs.get(name)
        if rig is None:
            if len(self.rigs) >= MAX_RIGS:
                self._drop("too_many_rigs")
                return None
            rig = self.rigs[name] = _Rig()
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
            doc = json.loads(payload)
        except ValueError:
            self._drop("status_not_json")
            return
        if not isinstance(doc, dict) or doc.get("rig") != name:
            self._drop("status_not_a_status")
            return
        rig = self._rig(name)
        if rig is not None:
            rig.status = doc
            rig.status_at_s = now_s

    def age_status(self, name: str, age_s: float, now_s: float) -> None:
        """The rig's status came from the stream and is ``age_s`` old (not just received)."""
        rig = self.rigs.get(name)
        if rig is not None:
            rig.status_at_s = now_s - max(0.0, age_s)

    def _on_event(self, name: str, payload: bytes) -> None:
        try:
            doc = json.loads(payload) if len(payload) <= MAX_STATUS_BYTES else None
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            self._drop("event_not_json")
            return
        if doc.get("type") != "lap":
            return
        rig = self._rig(name)
        group, lap, ms = doc.get("group"), _int(doc.get("lap")), _int(doc.get("lap_ms"))
        if rig is None or not isinstance(group, str) or lap is None or ms is None:
            return
        live = self._group(rig, group)
        if live is not None:
            live.last_lap = (lap, ms)

    def _on_layout(self, name: str, group: str, payload: bytes) -> None:
        try:
            _rig, _group, layout = decode_layout(payload)
            from wrtfd.fleet.encoding import layout_dtype

            dtype = layout_dtype(layout)
        except FleetDecodeError as exc:
            self._drop(exc.reason)
            return
        rig = self._rig(name)
        live = self._group(rig, group) if rig is not None else None
        if live is not None:
            live.layout, live.dtype = layout, dtype

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
        if len(frames) == 0:
            return
        last = frames[-1]
        live.values = {f.name: last[f.name] for f in live.layout.fields if not f.shape}
        live.at_s = now_s

    # --- reading ----------------------------------------------------------------------------

    def rows(self, now_s: float) -> list[Row]:
        out: list[Row] = []
        for name in sorted(self.rigs):
            rig = self.rigs[name]
            status = _map(rig.status)
            groups = _map(status.get("groups"))
            names = sorted(set(groups) | set(rig.groups)) or ["-"]
            for group in names:
                out.append(self._row(name, rig, status, group, now_s))
        return out

    def _row(self, name: str, rig: _Rig, status: Mapping[str, Any], group: str, now_s: float) -> Row:
        g = _map(_map(status.get("groups")).get(group))
        fleet = _map(status.get("fleet"))
        uploads = _map(fleet.get("uploads"))
        seen = now_s - rig.status_at_s if rig.status is not None else None
        given = status.get("status_interval_s")
        valid = isinstance(given, int | float) and not isinstance(given, bool) and 0 < given < 3600
        interval = float(given) if valid else DEFAULT_STATUS_INTERVAL_S  # type: ignore[arg-type]
        if seen is None or seen > OFFLINE_INTERVALS * max(interval, 2.0) or status.get("state") == "stopped":
            state = "offline"
        elif g.get("in_session"):
            state = "recording"
        else:
            state = "idle"
        row = Row(
            rig=name,
            group=group,
            state=state,
            uploads_queued=_int(uploads.get("queued")),
            uploads_bytes=_int(uploads.get("queued_bytes")),
            live_dropped=_int(_map(fleet.get("live")).get("dropped_total")),
            link=fleet.get("state") if isinstance(fleet.get("state"), str) else None,
            seen_s=seen,
            problems=[str(p) for p in status.get("problems") or [] if p][:5]
            if isinstance(status.get("problems"), list)
            else [],
        )
        laps = _map(g.get("laps"))
        row.best_lap_ms = _int(laps.get("best_lap_ms")) or None
        row.last_lap_ms = _int(laps.get("last_lap_ms")) or None
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
        assert live.layout is not None
        values = live.values
        fields = {f.name: f for f in live.layout.fields}
        for f in live.layout.fields:
            if f.name.endswith(".speed") or f.name == "speed":
                v = _finite(values.get(f.name))
                factor = _SPEED_TO_KMH.get(f.unit.strip().lower())
                if v is not None and factor is not None:
                    row.speed_kmh = v * factor
                break
        lap_field = "laps.lap_number" if "laps.lap_number" in fields else _first_suffix(fields, ".lap_number")
        if lap_field is not None:
            lap = _finite(values.get(lap_field))
            row.lap = None if lap is None else int(lap)
        gear = _first_suffix(fields, ".gear")
        if gear is not None:
            g = _finite(values.get(gear))
            row.gear = None if g is None else int(g)
        if row.last_lap_ms is None:
            row.last_lap_ms = _game_lap_ms(values, fields, "last_lap", "last_lap_time_ms")
        if row.best_lap_ms is None:
            row.best_lap_ms = _game_lap_ms(values, fields, "best_lap", "best_lap_time_ms")


def _first_suffix(fields: Mapping[str, Any], suffix: str) -> str | None:
    return next((n for n in fields if n.endswith(suffix) and n.count(".") == 1), None)


def _finite(value: object) -> float | None:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _game_lap_ms(
    values: Mapping[str, Any], fields: Mapping[str, Any], seconds: str, millis: str
) -> int | None:
    for suffix, factor in ((f".{seconds}", 1000.0), (f".{millis}", 1.0)):
        name = _first_suffix(fields, suffix)
        if name is not None:
            v = _finite(values.get(name))
            if v is not None and v > 0:
                return round(v * factor)
    return None
