"""Racelogic VBO export (``wrtfd export run.wrtf -o run.vbo``), for Circuit Tools and the other
tools that read VBOX logs.

The recording's GNSS source (the one with latitude and longitude: NMEA, u-blox, an imported
VBO) gives the standard columns (``sats time lat long velocity heading height vert-vel``), in the
format's units (minutes with longitude west-positive, km/h); every other numeric channel follows
as a column of its own, named as in the CSV export (``forza_speed``; a channel of the GNSS source
by its own name), with its unit. Derived lap channels are left out: Circuit Tools times laps
itself, from the ``[laptiming]`` gates, which come from the recording's circuit: the gates of an
imported VBO as they were, else the circuit the daemon (or an import) timed laps against
(``CircuitLines``): a ``Start`` gate at the middle of its start/finish line with the point
:data:`wrtfd.tracks.circuit.GATE_BEHIND_M` behind it along the driving direction, and a
``Split`` gate for each sector line likewise (docs/circuits.md, "VBO gates").

One data line per frame, at the middle of the frame's tick (UTC since midnight); dropped ticks stay gaps
(every line carries its time); frames that fail the frame check are left out.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from wrtfd import __version__
from wrtfd.errors import ExportError, TrackError
from wrtfd.exporters.channels import Channel, numeric_channels
from wrtfd.exporters.dates import check_dated
from wrtfd.exporters.summary import ExportSummary, FramesProgress
from wrtfd.format.export import export_frames, select_sessions
from wrtfd.format.reader import Reader, ticks_to_time_us
from wrtfd.tracks.circuit import circuit_gates, recorded_circuit
from wrtfd.tracks.gnssanalysis import laid_circuit_in
from wrtfd.vbo.reader import VboChannel, VboGate, read_gate
from wrtfd.vbo.writer import STANDARD, write_vbo

__all__ = ["GNSS_FIELDS", "export_vbo", "gnss_fields", "gnss_source"]

#: Standard VBO column -> (the GNSS source's field names it is read from, factor to VBO units).
GNSS_FIELDS: dict[str, tuple[tuple[str, ...], float]] = {
    "sats": (("satellites_used", "num_sv"), 1.0),
    "lat": (("lat_deg", "latitude"), 1.0),
    "long": (("lon_deg", "longitude"), 1.0),
    "velocity": (("speed_mps", "ground_speed_mps"), 3.6),
    "heading": (("course_deg", "heading_deg"), 1.0),
    "height": (("alt_msl_m", "height_msl_m"), 1.0),
    "vert-vel": (("vertical_speed_mps",), 1.0),
}
#: Top-level structs that are derived from the others, not recorded: not exported.
DERIVED_SOURCES = frozenset({"laps", "stale"})


def gnss_source(reader: Reader, what: str) -> tuple[str | None, list[Channel]]:
    """The source whose channels hold latitude and longitude (the first such), and every
    numeric channel of the recording.

    :raises ExportError: no source has both (``what`` names the export in the message).
    """
    channels = numeric_channels(reader.schema)
    by_source: dict[str | None, set[str]] = {}
    for c in channels:
        by_source.setdefault(c.source, set()).add(c.local_name)
    for source, names in by_source.items():
        if any(n in names for n in GNSS_FIELDS["lat"][0]) and any(n in names for n in GNSS_FIELDS["long"][0]):
            return source, channels
    raise ExportError(f"{reader.path}: no GNSS source (latitude and longitude channels) for {what}")


def _gates(reader: Reader) -> list[VboGate]:
    """The gates of the line a mark laid while recording (its marker), else the file's own
    ``vbo.laptiming``, else those of the circuit in its metadata."""
    try:
        laid = laid_circuit_in(reader)
    except TrackError:
        laid = None
    if laid is not None:
        return circuit_gates(laid)
    text = reader.metadata.get("vbo.laptiming", "")
    gates = []
    for line in text.splitlines():
        try:
            gates.append(read_gate(line))
        except ValueError:
            continue  # a hand-edited line: Circuit Tools can still have its gates set by hand
    if gates:
        return gates
    try:
        circuit = recorded_circuit(reader.metadata, str(reader.path))
    except TrackError:
        return []  # a damaged circuit in the metadata: the gates can be set in Circuit Tools
    return circuit_gates(circuit) if circuit is not None else []


def gnss_fields(channels: Sequence[Channel], source: str | None) -> dict[str, Channel]:
    """The channels of ``source`` that are GNSS columns (:data:`GNSS_FIELDS`), by column."""
    found: dict[str, Channel] = {}
    for column, (names, _) in GNSS_FIELDS.items():
        c = next((c for c in channels if c.source == source and c.local_name in names), None)
        if c is not None:
            found[column] = c
    return found


def export_vbo(
    reader: Reader,
    output: Path,
    *,
    sessions: Sequence[int] | None = None,
    progress: FramesProgress | None = None,
) -> ExportSummary:
    """Write ``sessions`` (default all) of ``reader`` to the VBO file ``output``.

    :raises ExportError: the recording has no GNSS position.
    :raises FormatError: a session the file does not have.
    """
    gnss, channels = gnss_source(reader, "a VBO file (a GNSS log)")
    standard = gnss_fields(channels, gnss)
    used = {c.name for c in standard.values()}
    custom: list[tuple[VboChannel, Channel]] = []
    taken = set(STANDARD) | {"time"}
    for c in channels:
        if c.name in used or c.source in DERIVED_SOURCES or c.name == "wrtfd_check":
            continue
        name = c.local_name if c.source == gnss else c.name
        if name.lower() in taken:
            name = c.name if name != c.name and c.name.lower() not in taken else f"{c.name}_"
        taken.add(name.lower())
        custom.append((VboChannel(name, name, c.unit), c))
    chosen = [s for s in select_sessions(reader, sessions) if s.frame_count > 0]
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ["time", *standard, *(v.column for v, _ in custom)]}
    first_us: int | None = None
    for s in chosen:
        frames = export_frames(reader, s.index)
        if len(frames) == 0:
            continue
        times_us = ticks_to_time_us(frames["tick"], s.time_base_us, reader.rate_hz)
        check_dated(reader.path, s.index, times_us)
        if first_us is None:
            first_us = int(times_us[0]) + 500_000 // reader.rate_hz
        # the middle of each frame's tick: where a regular source's samples sit (the recorder
        # starts tick 0 half a tick before the first sample), so a VBO imported and exported
        # again keeps its own times
        centre_us = np.asarray(times_us, dtype=np.float64) + 500_000.0 / reader.rate_hz
        cols["time"].append((centre_us / 1e6) % 86400.0)
        for column, c in standard.items():
            cols[column].append(np.asarray(c.column(frames), dtype=np.float64) * GNSS_FIELDS[column][1])
        for v, c in custom:
            cols[v.column].append(np.asarray(c.column(frames), dtype=np.float64))
    if first_us is None:
        raise ExportError(f"{reader.path}: no frame to export")
    columns = {k: np.concatenate(v) for k, v in cols.items()}
    created = dt.datetime.fromtimestamp(first_us / 1e6, tz=dt.UTC).replace(tzinfo=None)
    comments = [f"Exported by wrtfd {__version__} from {reader.path.name}", "Times are UTC"]
    if "Track" in reader.metadata:
        comments.append(f"Track: {reader.metadata['Track']}")
    with output.open("w", encoding="utf-8", newline="") as fh:
        lines = write_vbo(
            fh,
            created=created,
            columns=columns,
            custom=[v for v, _ in custom],
            gates=_gates(reader),
            comments=comments,
        )
    if progress:
        progress(lines, lines)
    return ExportSummary([output], lines, f"{len(standard) + 1} standard and {len(custom)} other columns")
