"""``wrtfd import RUN.vbo -o OUT.wrtf``: a Racelogic VBO log -> one WRTF file.

Every column becomes a float64 channel of source ``vbox``. The standard GNSS columns get the
names the NMEA source uses, in SI units, so lap timing, exports and plots treat both alike:

==============  ==================  ====================================================
VBO column      channel             conversion
==============  ==================  ====================================================
``sats``        ``satellites_used`` the count (the +64 brake and +128 DGPS flags dropped)
``lat``         ``lat_deg``         minutes -> degrees, north positive
``long``        ``lon_deg``         minutes -> degrees, **east** positive (VBO: west)
``velocity``    ``speed_mps``       km/h (or the knots/mph of its title) -> m/s
``heading``     ``course_deg``      as is
``height``      ``alt_msl_m``       as is
``vert-vel``    ``vertical_speed_mps`` m/s, or km/h by its title
==============  ==================  ====================================================

Other columns keep their column name (``Engine_Speed``), their unit from ``[channel units]``,
and their ``[header]`` title as the description. ``time`` (UTC since midnight) is the source
clock, dated by the ``File created on`` line; the frame rate is the logger's (the median step,
25 Hz for a VBOX HD2) unless ``--rate`` is given, so every sample has its own tick.

The ``[laptiming]`` gates are kept in the metadata (``vbo.laptiming``, the lines as written) and
make the file's circuit (:func:`gate_circuit`; the convention is in docs/circuits.md): with a
``Start`` gate, the file gets lap channels (``laps.*``) timed from the fixes by the same plug-in
as a live GNSS source, and the circuit in its metadata (``Circuit``, ``CircuitLines``), so
``wrtfd laps`` times it with no circuit file.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from wrtfd.decoders.base import Sample, generated_definition
from wrtfd.errors import ImportFormatError, TrackError
from wrtfd.importers.output import check_output, replay_into_file
from wrtfd.importers.report import ImportReport, Progress, earliest_start_us, refuse_options, run_report
from wrtfd.tracks.circuit import (
    Circuit,
    CircuitLine,
    circuit_from_dict,
    circuit_metadata,
    circuit_to_dict,
    line_across,
)
from wrtfd.tracks.geodesy import LocalPlane
from wrtfd.vbo.reader import VboChannel, VboFile, VboGate, hhmmss_to_seconds, read_vbo
from wrtfd.vbo.writer import format_gate

__all__ = [
    "GATE_LINE_WIDTH_M",
    "SOURCE_NAME",
    "STANDARD_CHANNELS",
    "circuit_lines",
    "gate_circuit",
    "gate_line",
    "import_vbo",
    "run_import",
    "vbo_channels",
]

SOURCE_NAME = "vbox"
_KMH = 1 / 3.6
_SPEED_UNITS = {"kmh": _KMH, "km/h": _KMH, "knots": 1852 / 3600, "mph": 1609.344 / 3600, "m/s": 1.0}

#: VBO column -> (channel, unit, description).
STANDARD_CHANNELS: dict[str, tuple[str, str, str]] = {
    "sats": ("satellites_used", "", "satellites used (VBO sats without its flag bits)"),
    "lat": ("lat_deg", "deg", "latitude, north positive"),
    "long": ("lon_deg", "deg", "longitude, east positive"),
    "velocity": ("speed_mps", "m/s", "ground speed"),
    "heading": ("course_deg", "deg", "heading of motion from north"),
    "height": ("alt_msl_m", "m", "height above sea level"),
    "vert-vel": ("vertical_speed_mps", "m/s", "vertical velocity, up positive"),
}
_NAME = re.compile(r"[^A-Za-z0-9_]")


def _speed_factor(title: str) -> float:
    words = title.lower().split()
    for word in reversed(words):
        if word in _SPEED_UNITS:
            return _SPEED_UNITS[word]
    return _KMH  # the format's default for velocity


def vbo_channels(vbo: VboFile) -> list[tuple[VboChannel, str, str, float]]:
    """Each column but ``time``: (column, channel name, unit, factor to the channel's unit).

    :raises ImportFormatError: two columns that would make the same channel name.
    """
    out: list[tuple[VboChannel, str, str, float]] = []
    seen: set[str] = set()
    for ch in vbo.channels:
        key = ch.column.lower()
        if key == "time":
            continue
        if key in STANDARD_CHANNELS:
            name, unit, _ = STANDARD_CHANNELS[key]
            factor = _speed_factor(ch.title) if key in ("velocity", "vert-vel") else 1.0
            if key == "vert-vel" and "m/s" in ch.title:
                factor = 1.0
        else:
            name = _NAME.sub("_", ch.column)
            if not name[0].isalpha():
                name = "c_" + name
            unit, factor = ch.unit, 1.0
        if name in seen:
            raise ImportFormatError(f"{vbo.path}: column {ch.column!r} gives channel {name!r} twice")
        seen.add(name)
        out.append((ch, name, unit, factor))
    return out


def _definition(vbo: VboFile, channels: list[tuple[VboChannel, str, str, float]]) -> dict[str, Any]:
    fields = []
    for ch, name, unit, _ in channels:
        std = STANDARD_CHANNELS.get(ch.column.lower())
        field: dict[str, Any] = {
            "name": name,
            "type": "float64",
            "description": std[2] if std else ch.title,
        }
        if unit:
            field["unit"] = unit
        fields.append(field)
    return generated_definition(
        title="Racelogic VBO log",
        description=f"The columns of {vbo.path.name}",
        session_description="One VBO log",
        frame_description="One VBO data line per tick",
        fields=fields,
    )


def _values(vbo: VboFile, channels: list[tuple[VboChannel, str, str, float]]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for ch, name, _, factor in channels:
        col = vbo.values[ch.column]
        key = ch.column.lower()
        if key == "sats":
            col = np.mod(col, 64.0)
        elif key == "lat":
            col = col / 60.0
        elif key == "long":
            col = -col / 60.0
        elif factor != 1.0:
            col = col * factor
        out[name] = col
    return out


def _rate_hz(times_s: np.ndarray) -> int:
    steps = np.diff(times_s)
    steps = steps[steps > 0]
    if len(steps) == 0:
        return 1
    return max(1, min(1000, round(1.0 / float(np.median(steps)))))


def _samples(
    vbo: VboFile, values: dict[str, np.ndarray], times_ns: np.ndarray, report: ImportReport
) -> Iterator[Sample]:
    names = list(values)
    columns = [values[n].tolist() for n in names]
    size = vbo.path.stat().st_size
    rows = max(1, len(times_ns))
    progress = Progress(vbo.path.name, size)
    newest = -1
    for i, t in enumerate(times_ns.tolist()):
        if t <= newest:
            report.drop("time_went_back" if t < newest else "same_time")
            continue
        newest = t
        report.samples += 1
        yield Sample(SOURCE_NAME, t, {n: c[i] for n, c in zip(names, columns, strict=True)}, t)
        if i % 4096 == 0:
            progress.update(size * i // rows)
    progress.done()


def circuit_lines(vbo: VboFile) -> list[str]:
    """The file's ``[laptiming]`` lines as wrtfd writes them (for the metadata)."""
    return [format_gate(g) for g in vbo.gates]


#: How wide the line laid across a gate is: a track and its verges, not the pit lane beside it.
GATE_LINE_WIDTH_M = 30.0


def gate_line(gate: VboGate, width_m: float = GATE_LINE_WIDTH_M) -> CircuitLine:
    """The line of a gate: through its point, across the direction from the point behind it to
    the point, ``width_m`` wide, ordered for a ``"right"`` circuit (the car drives that way).

    :raises TrackError: the two points are the same (no direction).
    """
    plane = LocalPlane(gate.lat_deg, gate.lon_deg)
    bx, by = plane.to_xy(gate.behind_lat_deg, gate.behind_lon_deg)
    return line_across(plane, 0.0, 0.0, -float(bx), -float(by), width_m)


def gate_circuit(vbo: VboFile, report: ImportReport | None = None) -> Circuit | None:
    """The circuit of the file's gates: the first ``Start`` gate is the start/finish line, the
    ``Split`` gates (in the file's order) the sector lines. None without a usable ``Start``;
    a gate that cannot be used is a note of ``report``."""
    start: CircuitLine | None = None
    sectors: list[CircuitLine] = []
    for gate in vbo.gates:
        kind = gate.kind.lower()
        if kind not in ("start", "split") or (kind == "start" and start is not None):
            if report is not None:
                report.notes.append(f"[laptiming] {gate.kind} gate {gate.name!r} not used for laps")
            continue
        try:
            line = gate_line(gate)
        except TrackError:
            if report is not None:
                report.notes.append(f"[laptiming] gate {gate.name!r}: its two points are one: no direction")
            continue
        if kind == "start":
            start = line
        else:
            sectors.append(line)
    if start is None:
        return None
    made = Circuit(f"VBO gates of {vbo.path.name}"[:200], start, tuple(sectors), direction="right")
    try:  # the checks a circuit file gets (lines near each other...): what the metadata must pass
        return circuit_from_dict(circuit_to_dict(made), str(vbo.path))
    except TrackError as exc:
        if report is not None:
            report.notes.append(f"[laptiming] gates not used for laps: {exc}")
        return None


def import_vbo(
    path: Path,
    output: Path,
    *,
    rate_hz: int | None = None,
    start_timestamp_us: int | None = None,
    force: bool = False,
) -> ImportReport:
    """Import a VBO log; see the module docstring.

    :raises ImportFormatError: not a VBO file, no time column, no data, an output that exists.
    :raises OSError: reading the input or writing the output.
    """
    from wrtfd.recorder import SourceSpec

    check_output(output, force=force)
    if rate_hz is not None and rate_hz <= 0:
        raise ImportFormatError(f"--rate must be a positive number of Hz, not {rate_hz}")
    report = ImportReport(path, "lines")
    vbo = read_vbo(path)
    report.read = vbo.lines_read
    for reason, n in vbo.dropped.items():
        report.drop(reason, n)
    time_col = vbo.column("time")
    if time_col is None:
        raise ImportFormatError(f"{path}: no time column: the samples cannot be placed in time")
    try:
        times_s = hhmmss_to_seconds(time_col)
    except ValueError as exc:
        raise ImportFormatError(f"{path}: {exc}") from None
    day = vbo.created.date() if vbo.created is not None else datetime(1970, 1, 1).date()
    if vbo.created is None:
        report.notes.append("no 'File created on' line: times are placed on 1970-01-01")
    midnight_us = int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()) * 1_000_000
    times_ns = (midnight_us * 1000 + np.round(times_s * 1e9)).astype(np.int64)
    if start_timestamp_us is not None:
        times_ns += start_timestamp_us * 1000 - int(times_ns[0])
    rate = rate_hz or _rate_hz(times_s)
    channels = vbo_channels(vbo)
    values = _values(vbo, channels)
    spec = SourceSpec(name=SOURCE_NAME, definition=_definition(vbo, channels), drives_frames=True)
    metadata = {"import.file": path.name, "import.format": "vbo"}
    if vbo.gates:
        metadata["vbo.laptiming"] = "\n".join(circuit_lines(vbo))
    if vbo.comments:
        metadata["vbo.comments"] = "\n".join(vbo.comments)[:65536]
    start_us = max(int(times_ns[0] // 1000), earliest_start_us(rate))
    derived: list[Any] = []
    circuit = gate_circuit(vbo, report)
    names = [name for _, name, _, _ in channels]
    if circuit is not None and "lat_deg" in names and "lon_deg" in names:
        from wrtfd.tracks.gnsslaps import GnssFields, GnssLapChannels

        metadata.update(circuit_metadata(circuit))
        fields = GnssFields().present(names)
        derived.append(GnssLapChannels(circuit, source=SOURCE_NAME, fields=fields))
    replay_into_file(
        _samples(vbo, values, times_ns, report),
        output=output,
        source=spec,
        rate_hz=rate,
        start_timestamp_us=start_us,
        metadata=metadata,
        derived=derived,
    )
    report.check_any()
    report.outputs = [output]
    return report


def run_import(args: argparse.Namespace) -> int:
    """Entry point for ``wrtfd import RUN.vbo``."""
    refuse_options(args, "VBO log", "track", "config")
    return run_report(import_vbo, args)
