"""Racelogic VBO text files (VBOX loggers, Circuit Tools): sections, channels, gates, data.

The layout, from Racelogic's published description of the format:

* a first line ``File created on DD/MM/YYYY @ HH:MM:SS`` (``at`` instead of ``@`` in files
  re-saved by VBOX Tools): the logger's local time;
* sections ``[name]`` separated by blank lines, lines ending ``\\r\\n``;
* ``[header]``: one channel title a line (``velocity kmh``, ``vertical velocity m/s``, ...);
* ``[channel units]``: one unit a line for the *non-standard* channels only, which follow the
  standard ones, so the last ``len(units)`` titles own the units (``(null)`` or a blank line:
  none);
* ``[laptiming]``: gates, one a line: kind, then two points as longitude and latitude in
  minutes (``+5279.378270 +2627.874410 +5279.378320 +2627.877020``), then ``¬`` and a name;
* ``[column names]``: the short names of the data columns, space-separated, in header order;
* ``[data]``: one sample a line, values space-separated.

Units of the standard columns: ``time`` is UTC since midnight as ``HHMMSS.SS``; ``lat`` and
``long`` are minutes of arc, latitude positive north and **longitude positive west**; velocity
in km/h (``velocity knots`` and ``velocity mph`` titles say otherwise); heading in degrees from
north; height in metres; ``sats`` counts satellites, plus 64 while the brake trigger is
pressed and 128 with a DGPS correction.

A ``[laptiming]`` gate is a point and a direction along the track, not the two ends of a line:
the first point is where the gate stands, the second lies a few metres along the track from it.
In the one real log here (Road America, ../shared/data/trackday) the second point is 4.8 m
*behind* the first in the driving direction (north of it on a straight the car drives heading
178 deg at every crossing): where the car was a moment before the gate was set. So the driving
direction is taken as second point -> first point, and the gate line runs through the first
point across it (docs/import.md). VBOX units themselves trigger a gate both ways.

Everything read is bounded (line length, channel count, file size per line read); a malformed
data line is dropped and counted by reason, never a crash. Pure: text in, values out.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO

import numpy as np
import numpy.typing as npt

from wrtfd.errors import ImportFormatError

__all__ = [
    "MAX_CHANNELS",
    "MAX_LINE_BYTES",
    "VboChannel",
    "VboFile",
    "VboGate",
    "hhmmss_to_seconds",
    "looks_like_vbo",
    "minutes_to_degrees",
    "parse_hhmmss",
    "read_gate",
    "read_vbo",
]

#: A data line of a few hundred channels is a few kilobytes; anything longer is not VBO.
MAX_LINE_BYTES = 64 * 1024
#: Columns a file may declare.
MAX_CHANNELS = 1024
#: Lines of the sections before ``[data]`` (titles, units, comments, gates).
MAX_HEAD_LINES = 20_000
_CREATED = re.compile(r"File created on (\d{1,2})/(\d{1,2})/(\d{4}) (?:@|at) (\d{1,2}):(\d{2})(?::(\d{2}))?")
_SECTION = re.compile(r"^\[([^\]]{1,64})\]\s*$")


@dataclass(frozen=True, slots=True)
class VboChannel:
    """One column: its title in ``[header]``, short name in ``[column names]``, unit (or "")."""

    title: str
    column: str
    unit: str = ""


@dataclass(frozen=True, slots=True)
class VboGate:
    """A ``[laptiming]`` gate: ``kind`` (Start, Split, Finish...), its name, the point where it
    stands and a point behind it along the driving direction (degrees, longitude east-positive)."""

    kind: str
    name: str
    lat_deg: float
    lon_deg: float
    behind_lat_deg: float
    behind_lon_deg: float


@dataclass(slots=True)
class VboFile:
    """A parsed file; ``values[column]`` is every kept data line's value of that column."""

    path: Path
    created: datetime | None
    channels: list[VboChannel]
    comments: list[str]
    gates: list[VboGate]
    values: dict[str, npt.NDArray[np.float64]]
    lines_read: int = 0
    dropped: Counter[str] = field(default_factory=Counter)

    @property
    def rows(self) -> int:
        return len(next(iter(self.values.values()))) if self.values else 0

    def column(self, *names: str) -> npt.NDArray[np.float64] | None:
        """The first of ``names`` (short column names, case-insensitive) the file has."""
        lower = {k.lower(): k for k in self.values}
        for name in names:
            key = lower.get(name.lower())
            if key is not None:
                return self.values[key]
        return None


def minutes_to_degrees(minutes: float, *, west_positive: bool = False) -> float:
    """VBO minutes of arc to degrees (longitude: VBO's west-positive to east-positive)."""
    deg = minutes / 60.0
    return -deg if west_positive else deg


def parse_hhmmss(text: str) -> float:
    """``HHMMSS.SS`` (UTC since midnight) to seconds since midnight.

    :raises ValueError: not that form, or a field out of range.
    """
    value = float(text)
    if not (0.0 <= value < 240000.0) or not math.isfinite(value):
        raise ValueError(f"time {text!r} is not HHMMSS.SS")
    hh = int(value // 10000)
    mm = int(value // 100) % 100
    ss = value - hh * 10000 - mm * 100
    if hh > 23 or mm > 59 or ss >= 60.0 + 1e-6:
        raise ValueError(f"time {text!r} is not HHMMSS.SS")
    return hh * 3600 + mm * 60 + ss


def hhmmss_to_seconds(values: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """A ``time`` column (``HHMMSS.SS`` read as numbers) to seconds since midnight, unwrapped
    past midnight (a time smaller than the one before it by more than 12 h is the next day).

    :raises ValueError: a value that is not a time of day.
    """
    v = np.asarray(values, dtype=np.float64)
    hh = np.floor(v / 10000.0)
    mm = np.floor(v / 100.0) % 100.0
    ss = v - hh * 10000.0 - mm * 100.0
    bad = ~np.isfinite(v) | (v < 0) | (hh > 23) | (mm > 59) | (ss >= 60.0 + 1e-6)
    if bad.any():
        raise ValueError(f"time {float(v[np.argmax(bad)])!r} is not HHMMSS.SS")
    seconds = hh * 3600.0 + mm * 60.0 + ss
    days = np.concatenate(([0.0], np.cumsum(np.diff(seconds) < -43200.0)))
    return seconds + days * 86400.0


def looks_like_vbo(head: bytes) -> bool:
    """The first bytes of a VBO file: the ``File created on`` line or a ``[header]`` section."""
    text = head[:4096].lstrip(b"\xef\xbb\xbf").lstrip()
    return text.startswith(b"File created on") or (text.startswith(b"[header]") and b"[column names]" in head)


def _lines(fh: IO[bytes], dropped: Counter[str]) -> Iterator[str]:
    """Lines without their ending; an over-long one is cut off and counted (``too_long``)."""
    while True:
        raw = fh.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            dropped["too_long"] += 1
            while raw and not raw.endswith(b"\n"):  # skip the rest of it, bounded reads
                raw = fh.readline(MAX_LINE_BYTES)
            continue
        yield raw.decode("utf-8", errors="replace").rstrip("\r\n")


def read_gate(line: str) -> VboGate:
    """``Start +LON1 +LAT1 +LON2 +LAT2 ¬ Name`` (minutes, longitude west-positive)."""
    head, _, name = line.partition("¬")
    parts = head.split()
    if len(parts) != 5:
        raise ValueError(f"gate {line.strip()!r}: expected a kind and four coordinates")
    lon1, lat1, lon2, lat2 = (float(p) for p in parts[1:])
    if not all(math.isfinite(v) for v in (lon1, lat1, lon2, lat2)):
        raise ValueError(f"gate {line.strip()!r}: coordinates must be numbers")
    gate = VboGate(
        kind=parts[0],
        name=name.strip() or parts[0],
        lat_deg=minutes_to_degrees(lat1),
        lon_deg=minutes_to_degrees(lon1, west_positive=True),
        behind_lat_deg=minutes_to_degrees(lat2),
        behind_lon_deg=minutes_to_degrees(lon2, west_positive=True),
    )
    if abs(gate.lat_deg) > 90 or abs(gate.behind_lat_deg) > 90 or abs(gate.lon_deg) > 180:
        raise ValueError(f"gate {line.strip()!r}: coordinates off the globe")
    return gate


def _created(line: str) -> datetime | None:
    m = _CREATED.search(line)
    if m is None:
        return None
    day, month, year, hour, minute, second = (int(g) if g else 0 for g in m.groups())
    try:
        return datetime(year, month, day, hour, minute, second)
    except ValueError:
        return None


def _sections(lines: Iterable[str], path: Path) -> tuple[datetime | None, dict[str, list[str]]]:
    """Everything before ``[data]``: the creation time and each section's non-blank lines."""
    created: datetime | None = None
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    count = 0
    for line in lines:
        count += 1
        if count > MAX_HEAD_LINES:
            raise ImportFormatError(f"{path}: no [data] section in the first {MAX_HEAD_LINES} lines")
        m = _SECTION.match(line.strip())
        if m:
            name = m.group(1).strip().lower()
            if name == "data":
                sections["data"] = []
                return created, sections
            current = sections.setdefault(name, [])
            continue
        if current is None:
            if created is None:
                created = _created(line)
            continue
        if line.strip() or current is sections.get("channel units"):
            current.append(line)  # a blank unit line is a channel without a unit
    raise ImportFormatError(f"{path}: no [data] section: not a VBO file")


def _channels(sections: dict[str, list[str]], path: Path) -> list[VboChannel]:
    titles = [t.strip() for t in sections.get("header", [])]
    columns_lines = sections.get("column names", [])
    columns = " ".join(columns_lines).split()
    if not columns:
        raise ImportFormatError(f"{path}: no [column names] section")
    if len(columns) > MAX_CHANNELS:
        raise ImportFormatError(f"{path}: {len(columns)} columns (at most {MAX_CHANNELS})")
    if len(set(c.lower() for c in columns)) != len(columns):
        raise ImportFormatError(f"{path}: [column names] names a column twice")
    if titles and len(titles) != len(columns):
        raise ImportFormatError(
            f"{path}: [header] lists {len(titles)} channels but [column names] {len(columns)}"
        )
    titles = titles or columns
    units_raw = [u.strip() for u in sections.get("channel units", [])]
    while units_raw and not units_raw[-1]:  # the blank line that ends the section
        units_raw.pop()
    units_raw = units_raw[-len(titles) :] if len(units_raw) > len(titles) else units_raw
    units = [""] * (len(titles) - len(units_raw)) + ["" if u in ("(null)", "") else u for u in units_raw]
    return [VboChannel(t, c, u) for t, c, u in zip(titles, columns, units, strict=True)]


def read_vbo(path: Path) -> VboFile:
    """Read a VBO file.

    :raises ImportFormatError: no ``[data]`` or ``[column names]`` section, inconsistent
        sections, a bad gate, or no data line that could be read.
    :raises OSError: reading the file.
    """
    dropped: Counter[str] = Counter()
    with path.open("rb") as fh:
        lines = _lines(fh, dropped)
        created, sections = _sections(lines, path)
        channels = _channels(sections, path)
        try:
            gates = [read_gate(line) for line in sections.get("laptiming", [])]
        except ValueError as exc:
            raise ImportFormatError(f"{path}: [laptiming]: {exc}") from None
        width = len(channels)
        rows: list[list[float]] = []
        read = 0
        for line in lines:
            parts = line.split()
            if not parts:
                continue
            read += 1
            if len(parts) != width:
                dropped["wrong_column_count"] += 1
                continue
            try:
                row = [float(p) for p in parts]
            except ValueError:
                dropped["not_a_number"] += 1
                continue
            rows.append(row)
    if not rows:
        reasons = ", ".join(f"{k} {n}" for k, n in dropped.most_common(3))
        raise ImportFormatError(
            f"{path}: no data line could be read ({read} read{'; ' + reasons if reasons else ''})"
        )
    table = np.array(rows, dtype=np.float64)
    values = {ch.column: np.ascontiguousarray(table[:, i]) for i, ch in enumerate(channels)}
    return VboFile(
        path=path,
        created=created,
        channels=channels,
        comments=list(sections.get("comments", [])),
        gates=gates,
        values=values,
        lines_read=read,
        dropped=dropped,
    )
