"""Track file format 2.0 as frozen values, and the loader that builds them.

The loader checks *types and shape* (a vertex is three numbers, a kind is a known word, an index
is an integer) and reports the JSON path of the first problem. What the format *implies*
(counts equal array lengths, indices in range, convex sectors, closed lanes, consistent lengths)
is the validator's job (:mod:`wrtfd.tracks.validate`), so a file with several mistakes gets a
full list of findings instead of the first one.

Unknown fields are kept in ``extensions`` and otherwise ignored, as the format's extension
convention asks (``"gpr-123": {...}`` objects); ``kind`` words are case-insensitive like the
original loader.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wrtfd.errors import TrackError
from wrtfd.tracks import jsonc

__all__ = [
    "EDGE_KINDS",
    "SEGMENT_KINDS",
    "Edge",
    "Lane",
    "Sector",
    "Segment",
    "Track",
    "load_track",
    "parse_track",
    "track_from_dict",
]

EDGE_KINDS = ("wall", "entry", "exit")
SEGMENT_KINDS = ("line", "arc")
#: A track file is a few kilobytes; refuse to read anything absurd.
MAX_FILE_BYTES = 16 * 1024 * 1024

Vertex = tuple[float, float, float]


@dataclass(frozen=True, slots=True)
class Edge:
    """One edge of a sector; it runs from ``start`` to the next edge's start."""

    kind: str  # "wall" | "entry" | "exit"
    start: int
    neighbor: int | None = None
    neighbor_edge: int | None = None
    extensions: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Sector:
    num_edges: int
    edges: tuple[Edge, ...]
    attributes: Mapping[str, Any] = field(default_factory=dict)
    extensions: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Segment:
    """A line or an arc of a lane. ``center`` and ``angle_deg`` are set only for arcs.

    ``angle_deg`` < 0 turns left (counter-clockwise seen from above), > 0 turns right.
    """

    kind: str  # "line" | "arc"
    start: int
    end: int
    length: float
    center: int | None = None
    angle_deg: float | None = None
    extensions: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Lane:
    num_segments: int
    segments: tuple[Segment, ...]
    extensions: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Track:
    """A whole track file. ``num_*`` are the declared counts, kept to be validated."""

    version: str
    name: str
    num_vertices: int
    vertices: tuple[Vertex, ...]
    num_sectors: int
    sectors: tuple[Sector, ...]
    num_lanes: int
    lanes: tuple[Lane, ...]
    revision: str | None = None
    extensions: Mapping[str, Any] = field(default_factory=dict)
    source: str = "<string>"


# --- typed field access with paths ------------------------------------------------------------


def _err(path: str, message: str) -> TrackError:
    return TrackError(f"{path}: {message}")


def _obj(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _err(path, f"expected an object, got {_kind_of(value)}")
    return value


def _kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _get(obj: dict[str, Any], key: str, path: str) -> Any:
    if key not in obj:
        raise _err(path, f"missing field {key!r}")
    return obj[key]


def _int(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _err(path, f"expected an integer, got {_kind_of(value)}")
    if isinstance(value, float):
        if not value.is_integer():
            raise _err(path, f"expected an integer, got {value}")
        value = int(value)
    return int(value)


def _num(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _err(path, f"expected a number, got {_kind_of(value)}")
    if isinstance(value, int) and abs(value) > 10**15:
        raise _err(path, f"number {value} is out of range")
    if not math.isfinite(value):
        raise _err(path, "number is not finite")
    return float(value)


def _str(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise _err(path, f"expected a string, got {_kind_of(value)}")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise _err(path, f"expected an array, got {_kind_of(value)}")
    return value


def _kind(value: Any, path: str, allowed: tuple[str, ...]) -> str:
    word = _str(value, path).lower()
    if word not in allowed:
        raise _err(path, f"unknown kind {value!r}; expected one of {', '.join(allowed)}")
    return word


def _extensions(obj: dict[str, Any], known: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in known}


_TRACK_KEYS = frozenset(
    {
        "version",
        "name",
        "revision",
        "num-vertices",
        "vertices",
        "num-sectors",
        "sectors",
        "num-lanes",
        "lanes",
    }
)
_SECTOR_KEYS = frozenset({"num-edges", "edges", "attributes"})
_EDGE_KEYS = frozenset({"kind", "start", "neighbor", "neighbor-edge"})
_LANE_KEYS = frozenset({"num-segments", "segments"})
_SEGMENT_KEYS = frozenset({"kind", "start", "end", "length", "center", "angle"})


def _vertex(value: Any, path: str) -> Vertex:
    items = _list(value, path)
    if len(items) != 3:
        raise _err(path, f"a vertex is 3 numbers [x, y, z], got {len(items)}")
    x, y, z = (_num(v, f"{path}[{i}]") for i, v in enumerate(items))
    return (x, y, z)


def _edge(value: Any, path: str) -> Edge:
    obj = _obj(value, path)
    kind = _kind(_get(obj, "kind", path), f"{path}.kind", EDGE_KINDS)
    start = _int(_get(obj, "start", path), f"{path}.start")
    neighbor = _int(obj["neighbor"], f"{path}.neighbor") if "neighbor" in obj else None
    neighbor_edge = _int(obj["neighbor-edge"], f"{path}.neighbor-edge") if "neighbor-edge" in obj else None
    return Edge(kind, start, neighbor, neighbor_edge, _extensions(obj, _EDGE_KEYS))


def _sector(value: Any, path: str) -> Sector:
    obj = _obj(value, path)
    num_edges = _int(_get(obj, "num-edges", path), f"{path}.num-edges")
    edges = tuple(
        _edge(e, f"{path}.edges[{i}]") for i, e in enumerate(_list(_get(obj, "edges", path), f"{path}.edges"))
    )
    attributes = _obj(obj.get("attributes", {}), f"{path}.attributes")
    return Sector(num_edges, edges, attributes, _extensions(obj, _SECTOR_KEYS))


def _segment(value: Any, path: str) -> Segment:
    obj = _obj(value, path)
    kind = _kind(_get(obj, "kind", path), f"{path}.kind", SEGMENT_KINDS)
    start = _int(_get(obj, "start", path), f"{path}.start")
    end = _int(_get(obj, "end", path), f"{path}.end")
    length = _num(_get(obj, "length", path), f"{path}.length")
    center: int | None = None
    angle: float | None = None
    if kind == "arc":
        center = _int(_get(obj, "center", path), f"{path}.center")
        angle = _num(_get(obj, "angle", path), f"{path}.angle")
    return Segment(kind, start, end, length, center, angle, _extensions(obj, _SEGMENT_KEYS))


def _lane(value: Any, path: str) -> Lane:
    obj = _obj(value, path)
    num = _int(_get(obj, "num-segments", path), f"{path}.num-segments")
    segs = _list(_get(obj, "segments", path), f"{path}.segments")
    return Lane(
        num,
        tuple(_segment(s, f"{path}.segments[{i}]") for i, s in enumerate(segs)),
        _extensions(obj, _LANE_KEYS),
    )


def track_from_dict(doc: Any, *, source: str = "<string>") -> Track:
    """Build a :class:`Track` from the parsed JSON document.

    :raises TrackError: naming the JSON path of the first field with a wrong type or shape.
    """
    obj = _obj(doc, "$")
    version = _str(_get(obj, "version", "$"), "version")
    if version.split(".")[0] != "2":
        raise _err("version", f"track format {version!r} is not supported (this reader reads 2.x)")
    revision = _str(obj["revision"], "revision") if "revision" in obj else None
    vertices = tuple(
        _vertex(v, f"vertices[{i}]") for i, v in enumerate(_list(_get(obj, "vertices", "$"), "vertices"))
    )
    sectors = tuple(
        _sector(s, f"sectors[{i}]") for i, s in enumerate(_list(_get(obj, "sectors", "$"), "sectors"))
    )
    lanes = tuple(_lane(s, f"lanes[{i}]") for i, s in enumerate(_list(_get(obj, "lanes", "$"), "lanes")))
    return Track(
        version=version,
        name=_str(_get(obj, "name", "$"), "name"),
        num_vertices=_int(_get(obj, "num-vertices", "$"), "num-vertices"),
        vertices=vertices,
        num_sectors=_int(_get(obj, "num-sectors", "$"), "num-sectors"),
        sectors=sectors,
        num_lanes=_int(_get(obj, "num-lanes", "$"), "num-lanes"),
        lanes=lanes,
        revision=revision,
        extensions=_extensions(obj, _TRACK_KEYS),
        source=source,
    )


def parse_track(text: str, *, source: str = "<string>") -> Track:
    """Parse track-file text (JSON with C comments).

    :raises TrackError: with the source name and line/column or JSON path.
    """
    try:
        return track_from_dict(jsonc.loads(text), source=source)
    except TrackError as exc:
        raise TrackError(f"{source}: {exc}") from None


def load_track(path: str | Path) -> Track:
    """Read and parse a track file (bounded size, ASCII/UTF-8).

    :raises TrackError: unreadable, too large, not text, or malformed.
    """
    p = Path(path)
    try:
        with p.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise TrackError(f"{p}: cannot read track file: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise TrackError(f"{p}: track file is larger than {MAX_FILE_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TrackError(f"{p}: not a text file (invalid UTF-8 at byte {exc.start})") from None
    return parse_track(text, source=str(p))
