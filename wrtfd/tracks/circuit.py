"""Circuit files: a start/finish line (and optional sector and pit lines) on the globe.

A circuit is what GNSS lap timing needs and nothing more: lines given by two latitude/longitude
end points, the order the car crosses them in and which way. The format (JSON) is described in
docs/circuits.md; a track 2.0 file with a ``"wrtfd": {"geo": ...}`` anchor is a circuit too (its
start line and timing sectors become lines across lane 0). Loading checks types, ranges and sizes
and names the key of the first problem, so a hostile or mistyped file gives one clear line.

The shipped library (``wrtfd/circuits/*.json``) and a user's folder are searched by position:
:func:`pick_circuit` finds the circuit whose start/finish line is nearest a fix.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from wrtfd.errors import TrackError
from wrtfd.tracks.geodesy import LocalPlane, track_plane
from wrtfd.vbo.reader import VboGate
from wrtfd.vbo.writer import format_gate

__all__ = [
    "CIRCUIT_FORMAT",
    "DIRECTIONS",
    "GATE_BEHIND_M",
    "LAID_LINE_PREFIX",
    "METADATA_LINES",
    "METADATA_NAME",
    "VBO_LAPTIMING",
    "Circuit",
    "CircuitLine",
    "circuit_from_dict",
    "circuit_from_track",
    "circuit_gates",
    "circuit_metadata",
    "circuit_to_dict",
    "circuits_in",
    "distance_m",
    "laid_circuit",
    "laid_line_note",
    "laid_name",
    "line_across",
    "load_circuit",
    "load_circuit_dir",
    "pick_circuit",
    "recorded_circuit",
    "shipped_circuits",
]

CIRCUIT_FORMAT = "wrtfd-circuit"
#: ``right``: standing on ``a`` looking at ``b`` the car passes from left to right; ``left`` the
#: other way; ``either``: each line's first crossing sets its direction for the session.
DIRECTIONS = ("right", "left", "either")
#: A circuit file is a few hundred bytes; refuse anything absurd before parsing.
MAX_FILE_BYTES = 256 * 1024
MAX_SECTOR_LINES = 64
MAX_NAME_CHARS = 200
#: A line shorter than this cannot be crossed reliably; longer ones cut across other parts of a track.
MIN_LINE_M = 1.0
MAX_LINE_M = 500.0
#: Every line lies this close to the start/finish line (the local plane is exact enough there).
MAX_SPREAD_M = 50_000.0
#: How many circuit files a folder may hold (each is read at start).
MAX_DIR_FILES = 5000

LatLon = tuple[float, float]


@dataclass(frozen=True, slots=True)
class CircuitLine:
    """A line between two points ``(lat, lon)`` in degrees."""

    a: LatLon
    b: LatLon

    @property
    def middle(self) -> LatLon:
        return ((self.a[0] + self.b[0]) / 2.0, (self.a[1] + self.b[1]) / 2.0)


@dataclass(frozen=True, slots=True)
class Circuit:
    """A circuit's timing lines (sector lines in driving order) and where it came from."""

    name: str
    start: CircuitLine
    sectors: tuple[CircuitLine, ...] = ()
    pit_entry: CircuitLine | None = None
    pit_exit: CircuitLine | None = None
    direction: str = "right"
    source: str = "<string>"
    notes: Mapping[str, Any] = field(default_factory=dict)

    @property
    def centre(self) -> LatLon:
        """The middle of the start/finish line (the origin of :meth:`plane`)."""
        return self.start.middle

    def plane(self) -> LocalPlane:
        """The local plane (x east, y north, metres) the timing works in."""
        lat, lon = self.centre
        return LocalPlane(lat, lon)


def distance_m(a: LatLon, b: LatLon) -> float:
    """Geodesic distance between two ``(lat, lon)`` points (WGS84, pyproj's Geod)."""
    from wrtfd._optional import require

    pyproj = require("pyproj", extra="gnss", purpose="lap timing on the globe")
    _, _, dist = pyproj.Geod(ellps="WGS84").inv(a[1], a[0], b[1], b[0])
    return float(dist)


# --- parsing --------------------------------------------------------------------------------------


def _err(where: str, key: str, message: str) -> TrackError:
    return TrackError(f"{where}: {key}: {message}")


def _point(value: Any, where: str, key: str) -> LatLon:
    if (
        not isinstance(value, list | tuple)
        or len(value) != 2
        or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
    ):
        raise _err(where, key, "expected [latitude, longitude] in degrees")
    lat, lon = float(value[0]), float(value[1])
    if not (math.isfinite(lat) and math.isfinite(lon) and -90.0 <= lat <= 90.0 and -180.0 <= lon <= 180.0):
        raise _err(where, key, f"[{value[0]}, {value[1]}] is not a latitude and longitude in range")
    return lat, lon


def _line(value: Any, where: str, key: str) -> CircuitLine:
    if not isinstance(value, Mapping):
        raise _err(where, key, 'expected {"a": [lat, lon], "b": [lat, lon]}')
    unknown = sorted(set(value) - {"a", "b", "name"})
    if unknown:
        raise _err(where, key, f"unknown key {unknown[0]!r} (a line has a, b)")
    if "a" not in value or "b" not in value:
        raise _err(where, key, 'a line needs both end points "a" and "b"')
    line = CircuitLine(_point(value["a"], where, f"{key}.a"), _point(value["b"], where, f"{key}.b"))
    length = distance_m(line.a, line.b)
    if not MIN_LINE_M <= length <= MAX_LINE_M:
        raise _err(
            where, key, f"the line is {length:.1f} m long; expected {MIN_LINE_M:g} to {MAX_LINE_M:g} m"
        )
    return line


_KEYS = frozenset(
    {"format", "version", "name", "start_finish", "sectors", "pit_entry", "pit_exit", "direction", "source"}
)


def circuit_from_dict(data: Any, source: str = "<string>") -> Circuit:
    """A circuit from the parsed JSON of a circuit file.

    :raises TrackError: naming the file and the key of the first problem.
    """
    where = source
    if not isinstance(data, Mapping):
        raise TrackError(f"{where}: expected a JSON object (a circuit file)")
    if data.get("format") != CIRCUIT_FORMAT:
        raise _err(where, "format", f'expected "{CIRCUIT_FORMAT}"')
    if data.get("version", 1) != 1:
        raise _err(where, "version", f"version {data.get('version')!r} is not supported (1 is)")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise _err(where, unknown[0], f"unknown key (known: {', '.join(sorted(_KEYS))})")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS:
        raise _err(where, "name", f"expected a non-empty string of at most {MAX_NAME_CHARS} characters")
    if "start_finish" not in data:
        raise _err(where, "start_finish", "missing (the start/finish line)")
    start = _line(data["start_finish"], where, "start_finish")
    raw_sectors = data.get("sectors", [])
    if not isinstance(raw_sectors, list):
        raise _err(where, "sectors", "expected a list of lines in driving order")
    if len(raw_sectors) > MAX_SECTOR_LINES:
        raise _err(where, "sectors", f"{len(raw_sectors)} lines; at most {MAX_SECTOR_LINES}")
    sectors = tuple(_line(v, where, f"sectors[{i}]") for i, v in enumerate(raw_sectors))
    pits = {
        k: _line(data[k], where, k) if data.get(k) is not None else None for k in ("pit_entry", "pit_exit")
    }
    direction = data.get("direction", "right")
    if direction not in DIRECTIONS:
        raise _err(where, "direction", f"{direction!r}; expected one of {', '.join(DIRECTIONS)}")
    for key, line in [("sectors", s) for s in sectors] + [(k, v) for k, v in pits.items() if v is not None]:
        if distance_m(start.middle, line.middle) > MAX_SPREAD_M:
            raise _err(where, key, f"a line more than {MAX_SPREAD_M / 1000:g} km from the start/finish line")
    note = data.get("source")
    if note is not None and (not isinstance(note, str) or len(note) > 4 * MAX_NAME_CHARS):
        raise _err(where, "source", f"expected a string of at most {4 * MAX_NAME_CHARS} characters")
    notes = {"source": note} if note is not None else {}
    return Circuit(
        name.strip(), start, sectors, pits["pit_entry"], pits["pit_exit"], str(direction), source, notes
    )


def circuit_to_dict(circuit: Circuit) -> dict[str, Any]:
    """The JSON object of a circuit file (round-trips through :func:`circuit_from_dict`)."""

    def line(one: CircuitLine) -> dict[str, Any]:
        return {"a": [round(v, 9) for v in one.a], "b": [round(v, 9) for v in one.b]}

    out: dict[str, Any] = {"format": CIRCUIT_FORMAT, "version": 1, "name": circuit.name}
    out["direction"] = circuit.direction
    out["start_finish"] = line(circuit.start)
    if circuit.sectors:
        out["sectors"] = [line(s) for s in circuit.sectors]
    if circuit.pit_entry is not None:
        out["pit_entry"] = line(circuit.pit_entry)
    if circuit.pit_exit is not None:
        out["pit_exit"] = line(circuit.pit_exit)
    out.update(dict(circuit.notes))
    return out


def line_across(
    plane: LocalPlane, x: float, y: float, heading_x: float, heading_y: float, width_m: float
) -> CircuitLine:
    """A line ``width_m`` wide centred on ``(x, y)`` across the heading, ordered for ``"right"``."""
    norm = math.hypot(heading_x, heading_y)
    if norm == 0.0 or not math.isfinite(norm):
        raise TrackError("no heading to lay a line across")
    hx, hy = heading_x / norm, heading_y / norm
    dx, dy = -hy * width_m / 2.0, hx * width_m / 2.0  # the heading turned left: a -> b
    a = plane.to_latlon(x - dx, y - dy)
    b = plane.to_latlon(x + dx, y + dy)
    return CircuitLine((float(a[0]), float(a[1])), (float(b[0]), float(b[1])))


def circuit_from_track(track: Any, *, lane: int = 0, width_m: float = 30.0) -> Circuit:
    """A track 2.0 file laid on the globe as a circuit: lines ``width_m`` wide across ``lane`` at
    its start (lap distance 0) and at each timing-sector start.

    :raises TrackError: the track has no ``"wrtfd": {"geo": ...}`` anchor.
    """
    from wrtfd.tracks.geometry import LanePath
    from wrtfd.tracks.laps import timing_sectors

    plane = track_plane(track.extensions)
    if plane is None:
        raise TrackError(
            f"{track.source}: the track is not laid on the globe"
            ' (no "wrtfd": {"geo": {"lat": .., "lon": ..}})'
        )
    path = LanePath(track, lane)
    lines = []
    for s in timing_sectors(track, path):
        x, _, z = path.point_at(s)
        hx, hz = path.heading_at(s)
        lines.append(line_across(plane, x, z, hx, hz, width_m))
    return Circuit(track.name, lines[0], tuple(lines[1:]), direction="right", source=str(track.source))


# --- files ------------------------------------------------------------------------------------------


def load_circuit(path: str | Path) -> Circuit:
    """A circuit file (JSON) or a track file (``.trk``) laid on the globe.

    :raises TrackError: one line naming the file and the problem.
    """
    p = Path(path)
    if p.suffix.lower() == ".trk":
        from wrtfd.tracks.model import load_track

        return circuit_from_track(load_track(p))
    try:
        with p.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise TrackError(f"{p}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise TrackError(f"{p}: larger than {MAX_FILE_BYTES // 1024} KiB; not a circuit file")
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise TrackError(f"{p}: not UTF-8 text") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise TrackError(f"{p}: not JSON: {exc}") from None
    return circuit_from_dict(data, str(p))


def load_circuit_dir(directory: str | Path) -> tuple[list[Circuit], list[str]]:
    """Every ``*.json`` and ``*.trk`` circuit in a folder (sorted by name), and one line per file
    that could not be loaded (or has no geo anchor)."""
    d = Path(directory)
    circuits: list[Circuit] = []
    problems: list[str] = []
    try:
        files = sorted(p for p in d.iterdir() if p.suffix.lower() in (".json", ".trk"))
    except OSError as exc:
        return [], [f"{d}: cannot list: {exc.strerror or exc}"]
    for p in files[:MAX_DIR_FILES]:
        try:
            circuits.append(load_circuit(p))
        except TrackError as exc:
            problems.append(str(exc))
    if len(files) > MAX_DIR_FILES:
        problems.append(f"{d}: only the first {MAX_DIR_FILES} of {len(files)} files were read")
    return circuits, problems


def shipped_circuits() -> list[Circuit]:
    """The circuits shipped with wrtfd (``wrtfd/circuits``)."""
    out: list[Circuit] = []
    root = resources.files("wrtfd") / "circuits"
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".json"):
            out.append(
                circuit_from_dict(
                    json.loads(entry.read_text(encoding="utf-8")), f"wrtfd/circuits/{entry.name}"
                )
            )
    return out


def pick_circuit(
    lat: float, lon: float, circuits: Iterable[Circuit], *, max_m: float = 3000.0
) -> tuple[Circuit, float] | None:
    """The circuit whose start/finish line is nearest ``(lat, lon)``, within ``max_m``, and that
    distance; None when none is that close."""
    best: tuple[Circuit, float] | None = None
    for c in circuits:
        d = distance_m((lat, lon), c.centre)
        if d <= max_m and (best is None or d < best[1]):
            best = (c, d)
    return best


def circuits_in(dirs: Sequence[Path], *, shipped: bool = True) -> tuple[list[Circuit], list[str]]:
    """The user's folders first (they win a tie), then the shipped library."""
    found: list[Circuit] = []
    problems: list[str] = []
    for d in dirs:
        c, p = load_circuit_dir(d)
        found += c
        problems += p
    if shipped:
        found += shipped_circuits()
    return found, problems


#: File metadata keys: the circuit's name and its whole file (compact JSON) as recorded.
METADATA_NAME = "Circuit"
METADATA_LINES = "CircuitLines"


def circuit_metadata(circuit: Circuit) -> dict[str, str]:
    """What a recording made with ``circuit`` keeps in its metadata, so ``wrtfd laps`` needs no
    file: its name, the whole circuit, and its lines as VBO ``[laptiming]`` gates (``wrtfd export
    -o run.vbo`` writes them for Circuit Tools)."""
    return {
        METADATA_NAME: circuit.name,
        METADATA_LINES: json.dumps(circuit_to_dict(circuit), separators=(",", ":")),
        VBO_LAPTIMING: "\n".join(format_gate(g) for g in circuit_gates(circuit)),
    }


#: The metadata key of the VBO ``[laptiming]`` lines (as the VBO import keeps a file's).
VBO_LAPTIMING = "vbo.laptiming"
#: How far behind a VBO gate its second point stands, along the driving direction (metres;
#: Racelogic's own files: about 5 m).
GATE_BEHIND_M = 5.0


def circuit_gates(circuit: Circuit) -> list[VboGate]:
    """The circuit's lines as VBO ``[laptiming]`` gates: ``Start`` and one ``Split`` per sector
    line, each at the middle of its line with its second point ``GATE_BEHIND_M`` before it along
    the driving direction (an ``"either"`` circuit's point the ``"right"`` way: VBOX units
    trigger both ways)."""
    sign = -1 if circuit.direction == "left" else 1
    gates = [_gate("Start", "Start / Finish", circuit.start, sign)]
    gates += [_gate("Split", f"Split {i + 1}", s, sign) for i, s in enumerate(circuit.sectors)]
    return gates


def _gate(kind: str, name: str, line: CircuitLine, sign: int) -> VboGate:
    lat, lon = line.middle
    plane = LocalPlane(lat, lon)
    ax, ay = plane.to_xy(*line.a)
    bx, by = plane.to_xy(*line.b)
    dx, dy = float(bx - ax), float(by - ay)
    norm = math.hypot(dx, dy) or 1.0
    hx, hy = sign * dy / norm, -sign * dx / norm  # a -> b turned right: the way the car goes
    blat, blon = plane.to_latlon(-hx * GATE_BEHIND_M, -hy * GATE_BEHIND_M)
    return VboGate(kind, name, lat, lon, float(blat), float(blon))


def recorded_circuit(metadata: Mapping[str, Any], where: str) -> Circuit | None:
    """The circuit a recording keeps in its metadata (None when it has none).

    :raises TrackError: the metadata's circuit is not a valid circuit file.
    """
    text = metadata.get(METADATA_LINES)
    if not isinstance(text, str):
        return None
    if len(text) > MAX_FILE_BYTES:
        raise TrackError(f"{where}: metadata {METADATA_LINES}: too large")
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise TrackError(f"{where}: metadata {METADATA_LINES}: not JSON: {exc}") from None
    return circuit_from_dict(data, f"{where}: metadata {METADATA_LINES}")


# --- a line laid while recording, kept in a marker -------------------------------------------------

#: The note of the marker the recorder writes when ``wrtfd mark --start-finish`` lays a line:
#: ``start/finish line LAT,LON LAT,LON`` (the line's two ends, ordered for ``"right"``), so the
#: file being recorded keeps the line although its metadata was written before it.
LAID_LINE_PREFIX = "start/finish line "
#: A marker's note is at most 64 bytes: 7 decimals (1 cm) fit but for the longest coordinates.
_NOTE_BYTES = 64
_NUM = r"(-?\d{1,3}\.\d{1,9})"
_LAID = re.compile(rf"{re.escape(LAID_LINE_PREFIX)}{_NUM},{_NUM} {_NUM},{_NUM}")


def laid_name(line: CircuitLine) -> str:
    """The name of a circuit laid by a mark (live and read back from the file alike)."""
    lat, lon = line.middle
    return f"start/finish marked at {lat:.5f}, {lon:.5f}"


def laid_line_note(line: CircuitLine) -> str:
    """The marker note that keeps a laid start/finish line (see :data:`LAID_LINE_PREFIX`)."""
    for places in (7, 6, 5):
        a, b = (f"{p[0]:.{places}f},{p[1]:.{places}f}" for p in (line.a, line.b))
        note = f"{LAID_LINE_PREFIX}{a} {b}"
        if len(note.encode()) <= _NOTE_BYTES:
            return note
    raise AssertionError("unreachable: 5 decimals always fit")


def laid_circuit(notes: Iterable[str]) -> Circuit | None:
    """The circuit of the last laid-line marker among ``notes`` (a recording's markers, in
    order); None when there is none. A note that looks like one but is not a valid line (a
    damaged or hostile file) is not one."""
    found: Circuit | None = None
    for note in notes:
        m = _LAID.fullmatch(note)
        if m is None:
            continue
        a, b = [float(m[1]), float(m[2])], [float(m[3]), float(m[4])]
        data = {"format": CIRCUIT_FORMAT, "name": "laid", "start_finish": {"a": a, "b": b}}
        try:
            circuit = circuit_from_dict(data, "a laid start/finish line")
        except TrackError:
            continue
        found = Circuit(laid_name(circuit.start), circuit.start, direction="right", source="marker")
    return found
