"""What the page shows live: an observer of the recording and the broadcaster of updates.

:class:`LiveView` is an :class:`~wrtfd.recorder.observe.Observer`: ``notify`` only keeps a
reference to the newest frame blocks and events in bounded deques (it runs on the recorder's
path). :class:`Broadcaster` runs on the event loop at up to ``push_hz``: it builds one update
(status snapshot, the chosen channels' latest values and a short trace, recent events) and hands
the same encoded bytes to every subscriber's one-slot mailbox, newest wins, so a slow page never
holds memory or the loop. With many pages open the push rate drops so that the sends per second
stay under ``max_sends_per_s`` (the recording's CPU comes first). Nobody subscribed: no work.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import numpy as np

from wrtfd.daemon.journal import describe
from wrtfd.format.schema import Leaf, Schema
from wrtfd.recorder.observe import (
    EVENT_KINDS,
    DiskSpaceChanged,
    FileClosed,
    FileOpened,
    LapCompleted,
    LiveFrames,
    MarkerAdded,
    RecordingEvent,
    SessionEnded,
    SessionStarted,
    SourceStateChanged,
    WriteFailed,
)

__all__ = [
    "DEFAULT_CHANNELS",
    "Broadcaster",
    "ChannelPick",
    "DiskRate",
    "LiveView",
    "Subscriber",
    "alerts",
    "pick_channels",
    "to_json",
]

#: Roles shown by default, and the channel names that play each role in the shipped protocols.
DEFAULT_CHANNELS: tuple[str, ...] = ("speed", "rpm", "throttle", "brake", "gear")
ROLE_NAMES: dict[str, tuple[str, ...]] = {
    "speed": ("speed", "speed_kmh", "speed_mps", "ground_speed", "speed_over_ground"),
    "rpm": ("rpm", "engine_rpm", "current_engine_rpm"),
    "throttle": ("throttle", "accel", "throttle_pos"),
    "brake": ("brake", "brake_pos"),
    "gear": ("gear",),
}
#: Points of trace per channel kept between two pushes (the page draws the last ~20 s).
TRACE_POINTS = 12
#: Recent events kept for the page.
MAX_EVENTS = 32
#: Updates sent per second to all pages together, at most: 10 pages get 10 Hz, 100 pages 1 Hz.
#: Each send costs the daemon ~50-80 us (bench/bench_web.py): the recording's CPU comes first.
MAX_SENDS_PER_S = 100.0


@dataclass(frozen=True, slots=True)
class ChannelPick:
    """One channel shown for a group: the role asked for, where it is, how to scale it to 0..1."""

    role: str
    path: tuple[str | int, ...]
    unit: str | None
    kind: str
    scale: float | None  # pedals: value * scale is 0..1 (None: shown as recorded)

    @property
    def name(self) -> str:
        return ".".join(str(p) for p in self.path)


def _pedal_scale(leaf: Leaf) -> float | None:
    if leaf.kind == "uint8":
        return 1 / 255
    if leaf.unit == "%":
        return 1 / 100
    return 1.0


def pick_channels(schema: Schema, wanted: Sequence[str]) -> list[ChannelPick]:
    """The frame leaves for ``wanted`` (roles such as ``speed``, or exact ``source.channel``)."""
    leaves = [
        lf for lf in schema.frame_leaves if lf.kind not in ("text",) and lf.path and lf.path[0] != "tick"
    ]
    by_name = {".".join(str(p) for p in lf.path): lf for lf in leaves}
    picks: list[ChannelPick] = []
    for role in wanted:
        leaf = by_name.get(role)
        if leaf is None:
            for candidate in ROLE_NAMES.get(role, (role,)):
                leaf = next((lf for lf in leaves if len(lf.path) == 2 and lf.path[1] == candidate), None)
                if leaf is not None:
                    break
        if leaf is None:
            continue
        scale = _pedal_scale(leaf) if role in ("throttle", "brake") else None
        picks.append(ChannelPick(role, leaf.path, leaf.unit, leaf.kind, scale))
    return picks


def _value(x: Any) -> float | None:
    v = float(x)
    return v if math.isfinite(v) else None


class _GroupLive:
    """The newest frames of one group and the channels picked for it."""

    def __init__(self, schema: Schema, wanted: Sequence[str]) -> None:
        self.schema = schema
        self.picks = pick_channels(schema, wanted)
        self.blocks: deque[LiveFrames] = deque(maxlen=64)
        self.last: dict[str, Any] = {}
        self.has_laps = "laps" in (schema.frame_dtype.names or ())
        lap_fields = schema.frame_dtype["laps"].names or () if self.has_laps else ()
        self.has_delta = {"delta", "predicted", "last_delta"} <= set(lap_fields)

    def take(self) -> dict[str, Any]:
        blocks = list(self.blocks)
        self.blocks.clear()
        if blocks:
            frames = blocks[-1].frames
            row = frames[-1]
            times = np.concatenate([b.times_us for b in blocks])
            values: dict[str, Any] = {}
            trace: dict[str, list[Any]] = {}
            step = max(1, len(times) // TRACE_POINTS)
            for pick in self.picks:
                col: Any = row
                for p in pick.path:
                    col = col[p]
                v = _value(col)
                if v is not None and pick.scale is not None:
                    v = round(v * pick.scale, 4)
                values[pick.role] = v
                series = np.concatenate([_column(b.frames, pick.path) for b in blocks])[::-step][::-1]
                pts = [None if not math.isfinite(float(x)) else float(x) for x in series]
                if pick.scale is not None:
                    pts = [None if x is None else round(x * pick.scale, 4) for x in pts]
                trace[pick.role] = pts
            self.last = {
                "time_us": int(times[-1]),
                "trace_times_us": times[::-step][::-1].tolist(),
                "values": values,
                "trace": trace,
            }
            if self.has_laps:
                laps = row["laps"]
                self.last["lap"] = {
                    "number": int(laps["lap_number"]),
                    "time_s": _value(laps["lap_time"]),
                    "sector": int(laps["sector"]),
                    "distance_m": _value(laps["lap_distance"]),
                }
                if self.has_delta:
                    self.last["lap"]["delta_s"] = _value(laps["delta"])
                    self.last["lap"]["predicted_s"] = _value(laps["predicted"])
                    self.last["lap"]["last_delta_s"] = _value(laps["last_delta"])
            return self.last
        stale = dict(self.last)
        stale.pop("trace", None)
        stale.pop("trace_times_us", None)
        return stale

    def channels(self) -> list[dict[str, Any]]:
        return [
            {"role": p.role, "name": p.name, "unit": p.unit, "scaled": p.scale is not None}
            for p in self.picks
        ]


def _column(frames: np.ndarray, path: tuple[str | int, ...]) -> np.ndarray:
    col: Any = frames
    for p in path:
        col = col[p] if isinstance(p, str) else col[..., p]
    return np.asarray(col, dtype=np.float64)


#: The fields of each event the page shows (events without ``wall_us`` get the time they are shown).
_PAGE_FIELDS: dict[type, tuple[str, ...]] = {
    MarkerAdded: ("group", "tick", "wall_us", "note"),
    SessionStarted: ("group", "reason", "wall_us"),
    SessionEnded: ("group", "reason", "duration_s", "laps", "best_lap_s"),
    FileOpened: ("group", "path", "wall_us"),
    FileClosed: ("group", "path", "frames", "complete", "error"),
    WriteFailed: ("group", "path", "error", "retry_s"),
    SourceStateChanged: ("source", "state", "wall_us", "silent_s"),
    DiskSpaceChanged: ("path", "low", "free_bytes", "wall_us"),
    LapCompleted: ("group", "lap", "time_s", "wall_us", "valid", "pit"),
}


def _event_dict(ev: RecordingEvent) -> dict[str, Any]:
    """An event for the page: its ``kind`` (the name it goes by outside the process), its
    fields, and ``text``, the sentence the journal logs for it (one wording for both)."""
    doc: dict[str, Any] = {"kind": EVENT_KINDS.get(type(ev), "other")}
    doc.update((name, getattr(ev, name)) for name in _PAGE_FIELDS.get(type(ev), ()))
    if isinstance(ev, SessionEnded):
        doc["duration_s"] = round(ev.duration_s, 3)
    if isinstance(ev, LapCompleted):
        doc["time_s"] = round(ev.time_s, 3)
    said = describe(ev)
    if said is not None:
        level, doc["text"], _ = said
        doc["warning"] = level >= logging.WARNING
    doc.setdefault("wall_us", time.time_ns() // 1000)
    return doc


class LiveView:
    """Observer of the recording (see the module docstring); ``notify`` returns at once."""

    def __init__(self, channels: Sequence[str] = DEFAULT_CHANNELS) -> None:
        self.wanted = tuple(channels)
        self.groups: dict[str, _GroupLive] = {}
        self.events: deque[dict[str, Any]] = deque(maxlen=MAX_EVENTS)
        self._new_events: deque[RecordingEvent] = deque(maxlen=MAX_EVENTS)
        #: False while no page listens: frames are not even looked at.
        self.active = False

    @property
    def wants_frames(self) -> bool:
        """No page, no frames: the recorder copies none for this view (:class:`ObserverHub`)."""
        return self.active

    def notify(self, item: RecordingEvent | LiveFrames) -> None:
        if isinstance(item, LiveFrames):
            if not self.active:
                return
            g = self.groups.get(item.group)
            if g is None or g.schema is not item.schema:
                if not isinstance(item.schema, Schema):
                    return
                g = self.groups[item.group] = _GroupLive(item.schema, self.wanted)
            g.blocks.append(item)
        else:
            self._new_events.append(item)  # deque.append is atomic: safe from the writer thread

    def take(self) -> dict[str, Any]:
        """The live part of an update (on the event loop)."""
        while self._new_events:
            self.events.append(_event_dict(self._new_events.popleft()))
        return {
            "groups": {name: g.take() for name, g in self.groups.items()},
            "channels": self.channels(),
            "events": list(self.events),
        }

    def channels(self) -> dict[str, list[dict[str, Any]]]:
        return {name: g.channels() for name, g in self.groups.items()}


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def to_json(obj: Any) -> bytes:
    """Compact JSON the browser can parse (NaN and infinities become null)."""
    try:
        text = json.dumps(obj, separators=(",", ":"), default=str, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(obj), separators=(",", ":"), default=str, allow_nan=False)
    return text.encode()


class DiskRate:
    """Bytes per second the recording writes (over the last ~10 s) and the time left on the disk."""

    def __init__(self, window_s: float = 10.0) -> None:
        self.window_s = window_s
        self._points: deque[tuple[float, int]] = deque()

    def update(self, now: float, disk: Mapping[str, Any], recorder: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(disk)
        written = recorder.get("bytes_written")
        if isinstance(written, int):
            pts = self._points
            pts.append((now, written))
            while len(pts) > 2 and now - pts[1][0] >= self.window_s:
                pts.popleft()
            (t0, b0), (t1, b1) = pts[0], pts[-1]
            rate = (b1 - b0) / (t1 - t0) if t1 - t0 >= 0.5 and b1 >= b0 else None
            out["write_rate_bps"] = None if rate is None else round(rate, 1)
            free = disk.get("free_bytes")
            out["time_left_s"] = round(free / rate) if rate and isinstance(free, int) else None
        return out


#: Free disk below this multiple of ``min_free_bytes`` is a warning (below 1x, /healthz fails).
DISK_WARN_FACTOR = 2.0


def alerts(snap: Mapping[str, Any]) -> list[dict[str, str]]:
    """What the page shows in red (``error``: /healthz fails for it) or amber (``warning``)."""
    out = [{"level": "error", "text": str(p)} for p in snap.get("problems") or ()]
    uptime = float(snap.get("uptime_s") or 0.0)
    for name, src in (snap.get("sources") or {}).items():
        if src.get("required"):
            continue  # a required source's silence is a problem above already
        age = src.get("last_sample_age_s")
        limit = float(src.get("silent_after_s") or math.inf)
        if age is not None and float(age) > limit and float(age) < uptime + 1:
            out.append({"level": "warning", "text": f"source {name} silent for {float(age):.0f} s"})
        if src.get("state") == "failed":
            out.append(
                {"level": "warning", "text": f"source {name} failed: {src.get('error') or 'see the log'}"}
            )
    groups = (snap.get("recorder") or {}).get("groups") or {}
    for name, g in groups.items():
        if g.get("state") in ("failing", "stalled"):
            out.append(
                {"level": "error", "text": f"recorder {name} {g['state']}: {g.get('error') or ''}".strip()}
            )
    disk = snap.get("disk") or {}
    free, minimum = disk.get("free_bytes"), disk.get("min_free_bytes") or 0
    if isinstance(free, int) and minimum <= free < DISK_WARN_FACTOR * minimum:
        out.append({"level": "warning", "text": f"disk low: {free // (1 << 20)} MiB free"})
    left = disk.get("time_left_s")
    if isinstance(left, int | float) and left < 1800:
        out.append({"level": "warning", "text": f"disk full in {left / 60:.0f} min at this rate"})
    seen: set[str] = set()
    return [a for a in out if not (a["text"] in seen or seen.add(a["text"]))]  # type: ignore[func-returns-value]


@dataclass(eq=False)
class Subscriber:
    """One page's mailbox: the newest update only (older ones are replaced, never queued)."""

    latest: bytes | None = None
    event: anyio.Event = field(default_factory=anyio.Event)
    replaced: int = 0
    closed: bool = False

    def close(self) -> None:
        self.closed = True
        self.event.set()

    def offer(self, data: bytes) -> None:
        if self.latest is not None:
            self.replaced += 1
        self.latest = data
        self.event.set()

    async def next(self, timeout_s: float) -> bytes | None:
        """The next update, or None after ``timeout_s`` (time for a keep-alive comment)."""
        if self.latest is None:
            with anyio.move_on_after(timeout_s):
                await self.event.wait()
        data, self.latest = self.latest, None
        self.event = anyio.Event()
        return data


class Broadcaster:
    """Builds an update at up to ``push_hz`` while anyone listens and offers it to every page."""

    def __init__(
        self,
        view: LiveView,
        snapshot: Callable[[], Mapping[str, Any]],
        *,
        push_hz: float = 10.0,
        max_subscribers: int = 64,
        max_sends_per_s: float = MAX_SENDS_PER_S,
    ) -> None:
        self.view = view
        self._snapshot = snapshot
        self.push_hz = push_hz
        self.max_subscribers = max_subscribers
        self.max_sends_per_s = max_sends_per_s
        self.subscribers: set[Subscriber] = set()
        self._wake = anyio.Event()
        self._disk = DiskRate()
        self.pushes = 0
        self.refused = 0

    def subscribe(self) -> Subscriber | None:
        """A mailbox, or None when ``max_subscribers`` pages are open already."""
        if len(self.subscribers) >= self.max_subscribers:
            self.refused += 1
            return None
        sub = Subscriber()
        self.subscribers.add(sub)
        self.view.active = True
        self._wake.set()
        return sub

    def close(self) -> None:
        """The daemon stops: every page's stream ends (the browser reconnects by itself)."""
        for sub in tuple(self.subscribers):
            sub.close()

    def unsubscribe(self, sub: Subscriber) -> None:
        self.subscribers.discard(sub)
        if not self.subscribers:
            self.view.active = False

    def interval_s(self) -> float:
        """Seconds between pushes: 1/push_hz, longer when many pages would pass the send budget."""
        n = max(1, len(self.subscribers))
        return max(1.0 / self.push_hz, n / self.max_sends_per_s)

    def build(self) -> bytes:
        snap = dict(self._snapshot())
        now = time.monotonic()
        snap["disk"] = self._disk.update(now, snap.get("disk") or {}, snap.get("recorder") or {})
        snap["alerts"] = alerts(snap)
        snap["live"] = self.view.take()
        snap["push_interval_s"] = round(self.interval_s(), 3)
        return b"event: update\ndata: " + to_json(snap) + b"\n\n"

    async def run(self) -> None:
        """Until cancelled: sleep while nobody listens, else push every :meth:`interval_s`."""
        while True:
            if not self.subscribers:
                self._wake = anyio.Event()
                await self._wake.wait()
                continue
            started = time.monotonic()
            data = self.build()
            for sub in tuple(self.subscribers):
                sub.offer(data)
            self.pushes += 1
            await anyio.sleep(max(0.0, started + self.interval_s() - time.monotonic()))
