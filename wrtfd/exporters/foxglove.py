"""Frames as Foxglove messages: JSON with a JSON Schema per topic (``jsonschema`` encoding).

Pure (json + numpy): the MCAP export writes these messages to a file, and a live server can send
the same ones. :class:`FoxgloveEncoder` turns a frame definition into topics and frames into
``(topic, log_time_ns, message)``:

- one topic per source (``/forza``, ``/f1``, ``/gps``, the derived ``/laps``, ``/stale``; fields
  at the top level of a single-source file go to ``/frame``); a message holds the frame's
  ``session`` and ``tick`` and every channel of the source, flattened (``wheels_0_temperature``)
  so that the Plot panel offers each one. NaN and infinities are ``null`` (JSON has neither),
  enums their numbers (names in the schema's description), text fields strings;
- a source with GPS degrees (``lat_deg``/``lon_deg``, as NMEA records them) also gets
  ``/<source>/fix`` messages of Foxglove's well-known ``foxglove.LocationFix`` schema, which
  the Map panel draws;
- :func:`log_message` makes ``foxglove.Log`` messages (``/wrtfd/log``: sessions and laps).

Times are the frames' times (N9), in nanoseconds since the Unix epoch.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from math import isfinite
from typing import Any

import numpy as np

from wrtfd.exporters.channels import source_of
from wrtfd.format.columns import column_names, export_leaves
from wrtfd.format.schema import Leaf, Schema

__all__ = [
    "LOCATION_FIX_SCHEMA",
    "LOG_SCHEMA",
    "LOG_SCHEMA_BYTES",
    "LOG_TOPIC",
    "FoxgloveEncoder",
    "LogLevel",
    "Topic",
    "log_message",
]

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
LOG_TOPIC = "/wrtfd/log"
FRAME_TOPIC = "/frame"

_TIME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "title": "time",
    "properties": {
        "sec": {"type": "integer", "minimum": 0},
        "nsec": {"type": "integer", "minimum": 0, "maximum": 999_999_999},
    },
    "required": ["sec", "nsec"],
}

#: foxglove.LocationFix, as Foxglove's schema documentation describes its fields.
LOCATION_FIX_SCHEMA: dict[str, Any] = {
    "$schema": JSON_SCHEMA_DIALECT,
    "title": "foxglove.LocationFix",
    "description": "A navigation satellite fix for any Global Navigation Satellite System",
    "type": "object",
    "properties": {
        "timestamp": {**_TIME_SCHEMA, "description": "Timestamp of the message"},
        "frame_id": {"type": "string", "description": "Frame for the sensor"},
        "latitude": {"type": "number", "description": "Latitude in degrees"},
        "longitude": {"type": "number", "description": "Longitude in degrees"},
        "altitude": {"type": "number", "description": "Altitude in meters"},
        "position_covariance": {
            "type": "array",
            "items": {"type": "number"},
            "minItems": 9,
            "maxItems": 9,
            "description": "Position covariance (m^2), East North Up, row-major",
        },
        "position_covariance_type": {
            "type": "integer",
            "enum": [0, 1, 2, 3],
            "description": "0 unknown, 1 approximated, 2 diagonal known, 3 known",
        },
    },
    "required": [
        "timestamp",
        "frame_id",
        "latitude",
        "longitude",
        "altitude",
        "position_covariance",
        "position_covariance_type",
    ],
}


class LogLevel:
    """foxglove.LogLevel values."""

    UNKNOWN = 0
    DEBUG = 1
    INFO = 2
    WARNING = 3
    ERROR = 4
    FATAL = 5


#: foxglove.Log, as Foxglove's schema documentation describes its fields.
LOG_SCHEMA: dict[str, Any] = {
    "$schema": JSON_SCHEMA_DIALECT,
    "title": "foxglove.Log",
    "description": "A log message",
    "type": "object",
    "properties": {
        "timestamp": {**_TIME_SCHEMA, "description": "Timestamp of log message"},
        "level": {"type": "integer", "enum": [0, 1, 2, 3, 4, 5], "description": "Log level"},
        "message": {"type": "string", "description": "Log message"},
        "name": {"type": "string", "description": "Process or node name"},
        "file": {"type": "string", "description": "Filename"},
        "line": {"type": "integer", "minimum": 0, "description": "Line number in the file"},
    },
    "required": ["timestamp", "level", "message", "name", "file", "line"],
}

#: LOG_SCHEMA as a channel's schema data.
LOG_SCHEMA_BYTES = json.dumps(LOG_SCHEMA, separators=(",", ":")).encode()

#: Field pairs that are GPS degrees (latitude, longitude, altitude or None).
GPS_FIELDS: tuple[tuple[str, str, str | None], ...] = (
    ("lat_deg", "lon_deg", "alt_msl_m"),
    ("latitude", "longitude", "altitude"),
)


def _time(ns: int) -> dict[str, int]:
    sec, nsec = divmod(int(ns), 1_000_000_000)
    return {"sec": sec, "nsec": nsec}


def log_message(log_time_ns: int, level: int, message: str, *, name: str = "wrtfd", file: str = "") -> bytes:
    """A ``foxglove.Log`` message (JSON)."""
    doc = {
        "timestamp": _time(log_time_ns),
        "level": level,
        "message": message,
        "name": name,
        "file": file,
        "line": 0,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def _leaf_schema(leaf: Leaf) -> dict[str, Any]:
    about = leaf.description or ""
    if leaf.unit:
        about = f"{about} ({leaf.unit})" if about else f"({leaf.unit})"
    if leaf.kind == "text":
        out: dict[str, Any] = {"type": "string"}
    elif leaf.kind == "bool":
        out = {"type": "boolean"}
    elif leaf.kind in ("float32", "float64"):
        out = {"type": ["number", "null"]}  # NaN and infinities are null
    else:
        out = {"type": "integer"}
        if leaf.kind == "enum" and leaf.enum is not None:
            names = ", ".join(f"{v}={n}" for n, v in leaf.enum.values)
            about = f"{about} [{names}]" if about else f"[{names}]"
    if about:
        out["description"] = about
    return out


@dataclass(frozen=True, slots=True)
class Topic:
    """One topic: its name, schema (name, JSON Schema) and what goes into its messages."""

    topic: str
    schema_name: str
    schema: dict[str, Any]
    source: str | None
    keys: tuple[str, ...] = ()
    leaves: tuple[Leaf, ...] = ()
    gps: tuple[str, str, str | None] | None = None  # for LocationFix topics: the fields

    @property
    def template(self) -> str:
        """The message as a ``%`` template over (session, tick, *values as JSON text)."""
        fields = ",".join(f"{json.dumps(k)}:%s" for k in ("session", "tick", *self.keys))
        return "{" + fields + "}"

    @property
    def schema_bytes(self) -> bytes:
        return json.dumps(self.schema, separators=(",", ":")).encode()


#: Below this many frames, float columns are checked value by value instead of with numpy.
_FEW = 16


def _json_columns(frames: np.ndarray, leaves: Sequence[Leaf]) -> list[list[Any]]:
    """Per leaf, the chunk's values as JSON text (ints may stay ints: ``%s`` prints them)."""
    out: list[list[Any]] = []
    for lf in leaves:
        col = frames
        for p in lf.path:
            col = col[p] if isinstance(p, str) else col[..., p]
        if lf.kind == "text":
            raw = np.ascontiguousarray(col).view(f"S{col.shape[-1]}").reshape(len(col))
            out.append([json.dumps(b.decode("utf-8", "replace")) for b in raw])
        elif lf.kind in ("float32", "float64"):
            if len(col) <= _FEW:  # a live server's few frames: numpy's per-call cost would dominate
                out.append([repr(v) if isfinite(v) else "null" for v in col.tolist()])
                continue
            ok = np.isfinite(col)
            if ok.all():
                out.append([repr(v) for v in col.tolist()])
            else:  # JSON has no NaN or infinity
                out.append(
                    [repr(v) if good else "null" for v, good in zip(col.tolist(), ok.tolist(), strict=True)]
                )
        elif lf.kind == "bool":
            out.append(["true" if v else "false" for v in col.tolist()])
        else:
            out.append(col.tolist())
    return out


@dataclass
class FoxgloveEncoder:
    """Topics of a frame definition, and frames -> messages. Build once, encode many chunks."""

    schema: Schema
    topics: list[Topic] = field(init=False)
    #: Per topic, its message template (built once: a live server encodes a few frames at a time).
    _templates: dict[str, str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        leaves = export_leaves(self.schema)
        names = column_names(leaves)
        groups: dict[str | None, list[tuple[Leaf, str]]] = {}
        for lf, flat in zip(leaves, names, strict=True):
            src = source_of(self.schema, lf)
            local = "_".join(str(p) for p in lf.path[1:]) if src is not None else flat
            groups.setdefault(src, []).append((lf, local))
        self.topics = []
        for src, items in groups.items():
            topic = f"/{src}" if src is not None else FRAME_TOPIC
            props: dict[str, Any] = {
                "session": {"type": "integer", "minimum": 0, "description": "session index in the file"},
                "tick": {"type": "integer", "minimum": 0, "description": "frame tick in the session (N9)"},
            }
            for lf, local in items:
                props[local] = _leaf_schema(lf)
            title = f"wrtfd.{src or 'frame'}"
            doc = {
                "$schema": JSON_SCHEMA_DIALECT,
                "title": title,
                "description": f"Channels of {src or 'the frame'}, one message per frame",
                "type": "object",
                "properties": props,
                "required": list(props),
                "additionalProperties": False,
            }
            keys = tuple(local for _, local in items)
            self.topics.append(Topic(topic, title, doc, src, keys, tuple(lf for lf, _ in items)))
            gps = self._gps_fields(src, {local for _, local in items})
            if gps is not None:
                self.topics.append(
                    Topic(f"{topic}/fix", "foxglove.LocationFix", LOCATION_FIX_SCHEMA, src, gps=gps)
                )
        self._templates = {t.topic: t.template for t in self.topics if t.gps is None}

    def _gps_fields(self, src: str | None, names: set[str]) -> tuple[str, str, str | None] | None:
        for lat, lon, alt in GPS_FIELDS:
            if lat in names and lon in names:
                return lat, lon, alt if alt in names else None
        return None

    @staticmethod
    def _sub(frames: np.ndarray, src: str | None) -> np.ndarray:
        return frames if src is None else frames[src]

    def encode(
        self,
        frames: np.ndarray,
        times_us: np.ndarray,
        session: int,
        topics: Sequence[Topic] | None = None,
    ) -> Iterator[tuple[Topic, int, bytes]]:
        """``(topic, log_time_ns, JSON message)`` for each topic of each frame, frame by frame.

        ``topics``: only these (of :attr:`topics`, in their order), e.g. those a viewer subscribed to.
        """
        n = len(frames)
        chosen = self.topics if topics is None else [t for t in self.topics if t in topics]
        if n == 0 or not chosen:
            return
        times_ns = (np.asarray(times_us, dtype=np.int64) * 1000).tolist()
        ticks = frames["tick"].tolist()
        per_topic: list[list[bytes | None]] = []
        dumps = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
        for t in chosen:
            if t.gps is not None:
                per_topic.append(self._fixes(t, frames, times_ns, dumps))
                continue
            tmpl = self._templates[t.topic]
            cols = _json_columns(frames, t.leaves)
            msgs: list[bytes | None] = [
                (tmpl % (session, tick, *row)).encode()
                for tick, row in zip(ticks, zip(*cols, strict=True) if cols else [()] * n, strict=True)
            ]
            per_topic.append(msgs)
        for i in range(n):
            for t, msgs in zip(chosen, per_topic, strict=True):
                m = msgs[i]
                if m is not None:
                    yield t, times_ns[i], m

    def _fixes(self, t: Topic, frames: np.ndarray, times_ns: list[int], dumps: Any) -> list[bytes | None]:
        """LocationFix messages; None where the position is not a finite fix (or exactly 0, 0)."""
        if t.gps is None:
            return []
        sub = self._sub(frames, t.source)
        lat_f, lon_f, alt_f = t.gps
        lat = np.asarray(sub[lat_f], dtype=np.float64)
        lon = np.asarray(sub[lon_f], dtype=np.float64)
        alt = np.asarray(sub[alt_f], dtype=np.float64) if alt_f else np.zeros(len(sub))
        ok = np.isfinite(lat) & np.isfinite(lon) & ~((lat == 0.0) & (lon == 0.0))
        alt = np.where(np.isfinite(alt), alt, 0.0)
        frame_id = t.source or "frame"
        out: list[bytes | None] = []
        for i, good in enumerate(ok.tolist()):
            if not good:
                out.append(None)
                continue
            doc = {
                "timestamp": _time(times_ns[i]),
                "frame_id": frame_id,
                "latitude": float(lat[i]),
                "longitude": float(lon[i]),
                "altitude": float(alt[i]),
                "position_covariance": [0.0] * 9,
                "position_covariance_type": 0,
            }
            out.append(dumps(doc).encode())
        return out
