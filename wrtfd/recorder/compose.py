"""Composing one WRTF definition for a recording from its sources and derived channels.

Layout of the file's definition (a plain dict, turned into a schema by ``wrtfd.format``):

* frame: one struct field per source, named after the source (``forza.speed``); its struct type
  is ``<source>__frame`` and every custom type the source's definition uses is renamed
  ``<source>__<type>`` so that two sources never collide. Then ``stale``: one bool per source,
  set while its values are stale (see :mod:`wrtfd.scheduler.core`). Then ``marker``: the
  markers' bytes (:mod:`wrtfd.format.markers`, 12 bytes). Then one struct field per
  derived-channel plug-in, named after it (``laps.lap_number``).
* session header: ``start_timestamp`` (uint64, us: the session's time base, N9), ``track``,
  ``car``, ``session_type``, ``driver`` (uint8[64] tagged ``text``: what the sources reported),
  ``start_reason`` (why the session started) and ``sources`` (per source: whether its clock
  or its arrival times place its samples).
* session footer: ``frames``, ``dropped_ticks``, ``duration_s``, ``end_reason``, per-source
  counters (``sources.<name>.samples`` ...) and one struct per derived plug-in with its summary
  (``laps.best_lap_ms``).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from wrtfd.errors import ConfigError
from wrtfd.format.markers import MARKER_FIELD, MARKER_TYPE, marker_type_definition

__all__ = [
    "END_REASONS",
    "FOOTER_SOURCE_COUNTERS",
    "RESERVED_NAMES",
    "START_REASONS",
    "TEXT_BYTES",
    "compose_definition",
    "source_frame_fields",
]

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")

#: Names a source or plug-in cannot take (they are fields of the composed definition).
RESERVED_NAMES = frozenset({"tick", "stale", "wrtfd", "start_timestamp", "frames", "sources", MARKER_FIELD})

#: Capacity of the text fields of the session header.
TEXT_BYTES = 64

START_REASONS = ("first", "idle", "new_session", "max_duration", "request", "rotate", "resume", "trigger")
END_REASONS = (
    "end",
    "idle",
    "new_session",
    "max_duration",
    "request",
    "rotate",
    "io_error",
    "stop",
    "error",
    "trigger",
)

#: Per-source counters stored in the session footer (names of SourceCounters.as_dict()).
FOOTER_SOURCE_COUNTERS = ("samples", "late", "superseded", "dropped", "ticks_emitted", "ticks_dropped")


def _check_name(kind: str, name: object) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name) or "__" in name:
        raise ConfigError(
            f"{kind} name {name!r}: use a letter then letters, digits or single underscores (max 64)"
        )
    if name in RESERVED_NAMES:
        raise ConfigError(f"{kind} name {name!r} is reserved by the recording layout")
    return name


def _frame_section(definition: Mapping[str, Any], where: str) -> list[dict[str, Any]]:
    frame = definition.get("frame")
    if isinstance(frame, Mapping):
        fields = frame.get("fields")
    elif "channels" in definition:  # the older form (N4)
        fields = definition.get("channels")
    else:
        fields = definition.get("fields")
    if not isinstance(fields, list) or not fields:
        raise ConfigError(f"{where}: no frame fields")
    out: list[dict[str, Any]] = []
    for i, f in enumerate(fields):
        if not (isinstance(f, Mapping) and isinstance(f.get("name"), str) and isinstance(f.get("type"), str)):
            raise ConfigError(f"{where}: frame field [{i}] needs a name and a type")
        out.append(copy.deepcopy(dict(f)))
    return out


def source_frame_fields(definition: Mapping[str, Any], where: str = "definition") -> list[str]:
    """Top-level frame field names of a source definition (the keys of its ``Sample.values``)."""
    return [f["name"] for f in _frame_section(definition, where)]


def _types(definition: Mapping[str, Any], where: str) -> dict[str, dict[str, Any]]:
    raw = definition.get("types") or {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: 'types' must be a mapping")
    return {str(k): copy.deepcopy(dict(v)) for k, v in raw.items() if isinstance(v, Mapping)}


def _prefixed(
    prefix: str, fields: list[dict[str, Any]], types: dict[str, dict[str, Any]], out_types: dict[str, Any]
) -> list[dict[str, Any]]:
    """Rename the custom types ``fields`` use (transitively) to ``<prefix>__<name>``."""
    needed: list[str] = []

    def visit(flist: Iterable[Mapping[str, Any]]) -> None:
        for f in flist:
            t = f.get("type")
            if isinstance(t, str) and t in types and t not in needed:
                needed.append(t)
                sub = types[t].get("fields")
                if isinstance(sub, list):
                    visit(x for x in sub if isinstance(x, Mapping))

    visit(fields)

    def rename(flist: list[dict[str, Any]]) -> list[dict[str, Any]]:
        res = []
        for f in flist:
            g = dict(f)
            if g.get("type") in types:
                g["type"] = f"{prefix}__{g['type']}"
            res.append(g)
        return res

    for t in needed:
        body = dict(types[t])
        if isinstance(body.get("fields"), list):
            body["fields"] = rename([dict(x) for x in body["fields"] if isinstance(x, Mapping)])
        out_types[f"{prefix}__{t}"] = body
    return rename(fields)


def _footer_fields(spec: Any, where: str) -> list[dict[str, Any]]:
    """Footer fields of a plug-in: a mapping name -> type (or -> field dict), or a list of fields."""
    if spec is None:
        return []
    out: list[dict[str, Any]] = []
    if isinstance(spec, Mapping):
        for name, body in spec.items():
            if isinstance(body, str):
                out.append({"name": str(name), "type": body, "description": str(name)})
            elif isinstance(body, Mapping):
                out.append({"name": str(name), "description": str(name), **dict(body)})
            else:
                raise ConfigError(f"{where}: footer field {name!r} needs a type")
    elif isinstance(spec, Sequence) and not isinstance(spec, (str, bytes)):
        for i, f in enumerate(spec):
            if not isinstance(f, Mapping) or "name" not in f or "type" not in f:
                raise ConfigError(f"{where}: footer field [{i}] needs a name and a type")
            out.append({"description": str(f["name"]), **dict(f)})
    else:
        raise ConfigError(f"{where}: footer_fields must be a mapping or a list")
    return out


def _field(name: str, type_name: str, description: str) -> dict[str, Any]:
    return {"name": name, "type": type_name, "description": description}


def _struct(description: str, fields: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "struct", "description": description, "fields": fields}


def _enum(description: str, names: Sequence[str]) -> dict[str, Any]:
    values = [{"name": r, "value": i, "description": r.replace("_", " ")} for i, r in enumerate(names)]
    return {"type": "enum", "description": description, "values": values}


def compose_definition(
    sources: Sequence[tuple[str, Mapping[str, Any]]],
    derived: Sequence[Any] = (),
    *,
    title: str = "wrtfd recording",
) -> dict[str, Any]:
    """The definition of a recording of ``sources`` (``(name, definition)``) and ``derived``.

    :raises ConfigError: a bad or duplicate name, or a source definition without frame fields.
    """
    if not sources:
        raise ConfigError("a recording needs at least one source")
    types: dict[str, Any] = {}
    frame: list[dict[str, Any]] = []
    stale: list[dict[str, Any]] = []
    clocks: list[dict[str, Any]] = []
    counters: list[dict[str, Any]] = [
        {"name": c, "type": "uint64", "description": f"{c.replace('_', ' ')} in this session"}
        for c in FOOTER_SOURCE_COUNTERS
    ]
    footer_sources: list[dict[str, Any]] = []
    seen: set[str] = set()
    types["wrtfd__source_counters"] = {
        "type": "struct",
        "description": "What one source delivered in the session",
        "fields": counters,
    }
    for name, definition in sources:
        _check_name("source", name)
        if name in seen:
            raise ConfigError(f"source name {name!r} is used twice")
        seen.add(name)
        where = f"source {name}"
        fields = _prefixed(name, _frame_section(definition, where), _types(definition, where), types)
        types[f"{name}__frame"] = _struct(f"Channels of source {name}", fields)
        frame.append({"name": name, "type": f"{name}__frame", "description": f"Channels of source {name}"})
        stale.append(_field(name, "bool", f"values of {name} are stale or missing"))
        clocks.append(_field(name, "wrtfd__clock", f"what places samples of {name}"))
        footer_sources.append(_field(name, "wrtfd__source_counters", f"source {name}"))
    types["wrtfd__stale"] = _struct("Stale flags, one per source", stale)
    types["wrtfd__clock"] = {
        "type": "enum",
        "description": "What places a source's samples on ticks",
        "values": [
            {"name": "arrival", "value": 0, "description": "receive times, de-jittered"},
            {"name": "source_clock", "value": 1, "description": "the source's own timestamps"},
        ],
    }
    types["wrtfd__sources"] = _struct("Per-source session info", clocks)
    types["wrtfd__source_footer"] = _struct("Per-source counters", footer_sources)
    types["wrtfd__start_reason"] = _enum("Why a session started", START_REASONS)
    types["wrtfd__end_reason"] = _enum("Why a session ended", END_REASONS)
    frame.append({"name": "stale", "type": "wrtfd__stale", "description": "Stale flags, one per source"})
    types[MARKER_TYPE] = marker_type_definition()
    frame.append({"name": MARKER_FIELD, "type": MARKER_TYPE, "description": "Markers (docs/markers.md)"})
    footer: list[dict[str, Any]] = [
        {"name": "frames", "type": "uint64", "description": "Frames in the session"},
        _field("dropped_ticks", "uint64", "Ticks without a frame between frames (N10)"),
        {"name": "duration_s", "type": "float64", "unit": "s", "description": "Ticks spanned / rate"},
        {"name": "end_reason", "type": "wrtfd__end_reason", "description": "Why the session ended"},
        {"name": "sources", "type": "wrtfd__source_footer", "description": "Per-source counters"},
    ]
    for d in derived:
        name = _check_name("derived channel set", getattr(d, "name", None))
        if name in seen:
            raise ConfigError(f"derived channel set {name!r} has the name of a source or another set")
        seen.add(name)
        where = f"derived {name}"
        ddef = getattr(d, "definition", None)
        if not isinstance(ddef, Mapping):
            raise ConfigError(f"{where}: definition must be a mapping")
        fields = _prefixed(name, _frame_section(ddef, where), _types(ddef, where), types)
        types[f"{name}__frame"] = _struct(f"Derived channels {name}", fields)
        frame.append({"name": name, "type": f"{name}__frame", "description": f"Derived channels {name}"})
        ffields = _footer_fields(getattr(d, "footer_fields", None), where)
        if ffields:
            types[f"{name}__summary"] = _struct(f"Summary of {name}", ffields)
            footer.append({"name": name, "type": f"{name}__summary", "description": f"Summary of {name}"})
    header = [
        {"name": "start_timestamp", "type": "uint64", "unit": "us", "description": "Session time base (N9)"},
        {
            "name": "track",
            "type": "uint8",
            "dimensions": TEXT_BYTES,
            "tags": ["text", "metadata"],
            "description": "Track reported by the sources",
        },
        {
            "name": "car",
            "type": "uint8",
            "dimensions": TEXT_BYTES,
            "tags": ["text", "metadata"],
            "description": "Car reported by the sources",
        },
        {
            "name": "session_type",
            "type": "uint8",
            "dimensions": TEXT_BYTES,
            "tags": ["text", "metadata"],
            "description": "Session type reported by the sources",
        },
        {
            "name": "driver",
            "type": "uint8",
            "dimensions": TEXT_BYTES,
            "tags": ["text", "metadata"],
            "description": "Driver reported by the sources",
        },
        {"name": "start_reason", "type": "wrtfd__start_reason", "description": "Why the session started"},
        {"name": "sources", "type": "wrtfd__sources", "description": "Per-source session info"},
    ]
    names = ", ".join(n for n, _ in sources)
    return {
        "version": "1.0",
        "metadata": {"title": title, "description": "Recorded by wrtfd from " + names},
        "types": types,
        "session": {
            "description": "One recording session (new sim session, idle gap, limit or request)",
            "header": {"description": "Session start", "fields": header},
            "footer": {"description": "Session summary", "fields": footer},
        },
        "frame": {"description": "Sample-and-hold frame of every source at the tick rate", "fields": frame},
    }
