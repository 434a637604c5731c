"""``wrtfd import LOG --dbc [BUS=]FILE.dbc``: candump -l logs and SavvyCAN/GVRET CSV -> WRTF.

Each bus of the log becomes a source named after it (candump's interface, ``can0``; SavvyCAN's
``Bus`` column N, ``bus0``) whose frames are decoded with that bus's DBC by the same
:class:`~wrtfd.decoders.can_dbc.DbcChannelDecoder` the live SLCAN source uses (cantools, every
signal a channel). All buses share one recording (one car): one file with ``can0.*``,
``can1.*`` channels. ``--dbc FILE`` applies to every bus; ``--dbc BUS=FILE`` to one, where BUS is
the log's name for it or ``busN``/``N`` for the bus numbered N (``bus1`` is SavvyCAN's Bus 1 and
candump's ``can1``). A bus without a DBC is not recorded (its frames are counted).

``--config DAEMON.toml`` instead of ``--dbc``: each bus feeds the config's SLCAN source named
after it (``can0``, or ``busN``/``canN`` for its number; the only one when the config and the
log have one each), with that source's DBC, channel mapping, recording group and the config's
recorder policy, so a log of the car records into the file the in-car daemon would have made.

Times: candump's are Unix seconds. SavvyCAN's are microseconds: since the epoch when they are
that large, else relative to the start of the log, which is then placed at the file's
modification time (``--start-timestamp`` overrides; a note says so).

Counted, by reason: lines that are not log lines (``malformed``, ``bad_id``, ``bad_dlc``,
``unsupported_fd``...), and per bus the frames that carry no channel (``can0: unmapped_id``:
an id the DBC does not describe; ``wrong_size``: cantools refused the data length;
``remote_frame``; ``no_dbc``). Frames are read twice: a first pass finds the buses (bounded to
:data:`MAX_BUSES`) and the time base, the second decodes.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from wrtfd.decoders.base import Sample
from wrtfd.decoders.can_dbc import CanFrame, DbcChannelDecoder
from wrtfd.decoders.candump import MAX_LINE_BYTES, parse_candump
from wrtfd.decoders.savvycan import SavvycanColumns, is_savvycan_header, parse_savvycan_row
from wrtfd.errors import ConfigError, DecodeError, ImportFormatError
from wrtfd.importers.output import check_output, place_outputs, staging_dir
from wrtfd.importers.plan import ImportPlan, add_groups
from wrtfd.importers.replay import GroupPlan, GroupReplay
from wrtfd.importers.report import ImportReport, Progress, refuse_options, run_report

__all__ = [
    "DEFAULT_RATE_HZ",
    "MAX_BUSES",
    "dbc_for",
    "import_can_log",
    "is_savvycan_header",
    "parse_dbc_options",
    "run_import",
]

#: Frame rate when ``--rate`` is not given: CAN messages commonly come at up to 100 Hz.
DEFAULT_RATE_HZ = 100
#: Buses one log may name (a car has a handful; more is a garbage file).
MAX_BUSES = 16
#: Microsecond times at least this large are since the epoch (2001), smaller ones relative.
EPOCH_US_MIN = 10**15
_GROUP = "can"
#: A log line longer than this is not one (candump lines are under 100 bytes).
LINE_LIMIT = 4 * MAX_LINE_BYTES

FrameReader = Callable[[bytes], tuple[str, CanFrame]]


def parse_dbc_options(values: list[str]) -> tuple[Path | None, dict[str, Path]]:
    """``--dbc FILE`` (every bus) and ``--dbc BUS=FILE`` -> (default, per bus).

    :raises ConfigError: no --dbc, two defaults, or a bus named twice.
    """
    default: Path | None = None
    per_bus: dict[str, Path] = {}
    for value in values:
        bus, eq, file = value.partition("=")
        if not eq:
            if default is not None:
                raise ConfigError("--dbc FILE (for every bus) given twice; name buses with --dbc BUS=FILE")
            default = Path(value)
            continue
        bus = bus.strip()
        if not bus or not file:
            raise ConfigError(f"--dbc {value!r}: expected FILE or BUS=FILE")
        if bus in per_bus:
            raise ConfigError(f"--dbc: bus {bus!r} given twice")
        per_bus[bus] = Path(file)
    if default is None and not per_bus:
        raise ConfigError(
            "a CAN log needs --dbc FILE.dbc (or --dbc BUS=FILE.dbc per bus) to name its signals"
        )
    return default, per_bus


def _bus_number(label: str) -> int | None:
    m = re.search(r"(\d+)\Z", label)
    return int(m.group(1)) if m else None


def dbc_for(bus: str, default: Path | None, per_bus: dict[str, Path]) -> Path | None:
    """The DBC of ``bus``: its own name, else ``busN``/``N`` for its number, else the default."""
    if bus in per_bus:
        return per_bus[bus]
    number = _bus_number(bus)
    if number is not None:
        for key in (f"bus{number}", str(number)):
            if key in per_bus:
                return per_bus[key]
    return default


def _source_name(bus: str) -> str:
    name = re.sub(r"[^a-z0-9_]", "_", bus.lower())[:32]
    return name if name[:1].isalpha() else f"bus_{name}"[:32]


def _bounded_lines(fh: BinaryIO) -> Iterator[bytes]:
    """The file's lines, none held longer than :data:`LINE_LIMIT` (the rest of a longer line is
    skipped, and the line comes out at that length, to be counted as ``too_long``)."""
    while True:
        line = fh.readline(LINE_LIMIT + 1)
        if not line:
            return
        if len(line) > LINE_LIMIT:
            rest = line
            while rest and not rest.endswith(b"\n"):
                rest = fh.readline(1 << 16)
        yield line


def _lines(path: Path, report: ImportReport, progress: Progress | None) -> Iterator[tuple[int, bytes]]:
    """(line number, line) of every non-blank, non-comment line; over-long lines are counted."""
    with path.open("rb") as fh:
        for lineno, line in enumerate(_bounded_lines(fh), 1):
            if progress is not None and lineno & 0x3FFF == 0:
                progress.update(fh.tell())
            if len(line) > LINE_LIMIT:
                report.read += 1
                report.drop("too_long")
                continue
            stripped = line.strip()
            if stripped and not stripped.startswith(b"#"):
                report.read += 1
                yield lineno, stripped


def _savvycan_reader(columns: SavvycanColumns) -> FrameReader:
    def savvycan(row: bytes) -> tuple[str, CanFrame]:
        bus, frame = parse_savvycan_row(row, columns)
        return f"bus{bus}", frame

    return savvycan


def _reader(path: Path, fmt: str) -> tuple[FrameReader, int]:
    """The line parser for ``fmt`` and the number of the first data line.

    :raises ImportFormatError: a SavvyCAN file without its header.
    """
    if fmt == "candump":

        def candump(line: bytes) -> tuple[str, CanFrame]:
            frame = parse_candump(line)
            return line.split(None, 2)[1].decode("ascii", "replace"), frame

        return candump, 1
    with path.open("rb") as fh:
        for lineno, line in enumerate(_bounded_lines(fh), 1):
            if line.strip() and not line.startswith(b"#"):
                if not is_savvycan_header(line):
                    break
                try:
                    columns = SavvycanColumns.from_header(line)
                except DecodeError as exc:
                    raise ImportFormatError(f"{path}:{lineno}: {exc}") from None

                return _savvycan_reader(columns), lineno + 1
            if lineno > 64:
                break
    raise ImportFormatError(f"{path}: no SavvyCAN header line (Time Stamp,ID,Extended,...,LEN,D1...)")


def _frames(
    path: Path, read: FrameReader, first: int, report: ImportReport | None, progress: Progress | None
) -> Iterator[tuple[str, CanFrame]]:
    """Every frame; bad lines counted in ``report`` (the first pass counts nothing)."""
    sink = report if report is not None else ImportReport(path, "lines")
    for lineno, line in _lines(path, sink, progress):
        if lineno < first:
            sink.read -= 1  # the SavvyCAN header line
            continue
        try:
            yield read(line)
        except DecodeError as exc:
            if report is not None:
                report.drop(exc.reason)


#: bus -> (source name, frame decoder, the source's mapping transform or None)
BusRoutes = dict[str, tuple[str, Callable[[CanFrame], dict[str, object]], Any]]


def _dbc_buses(
    dbc: list[str],
    buses: list[str],
    groups: GroupReplay,
    staging: Path,
    rate_hz: int,
    metadata: dict[str, str],
    report: ImportReport,
) -> BusRoutes:
    """``--dbc``: each bus with a DBC is a source of the one recording group ``can``."""
    from wrtfd.recorder import RecorderPolicy, SourceSpec

    default, per_bus = parse_dbc_options(dbc)
    routes: BusRoutes = {}
    specs = []
    for bus in buses:
        path_dbc = dbc_for(bus, default, per_bus)
        if path_dbc is None:
            report.notes.append(f"bus {bus}: no --dbc for it, not recorded")
            continue
        name = _source_name(bus)
        decoder = DbcChannelDecoder(dbc=path_dbc)
        routes[bus] = (name, decoder.decode_values, None)
        specs.append(SourceSpec(name=name, definition=decoder.definition, drives_frames=True))
        report.notes.append(f"bus {bus} -> source {name} ({path_dbc.name})")
    if specs:
        policy = RecorderPolicy(output_dir=staging, rate_hz=rate_hz, session_idle_s=30.0)
        groups.add(GroupPlan(_GROUP, specs, policy, (), metadata))
    return routes


def _config_buses(
    plan: ImportPlan,
    buses: list[str],
    groups: GroupReplay,
    staging: Path,
    rate_hz: int | None,
    metadata: dict[str, str],
    report: ImportReport,
) -> BusRoutes:
    """``--config``: each bus goes to the config's SLCAN source of the same name (``busN``/``N``
    for its number), or to the only one when the config and the log have one each."""
    add_groups(plan, groups, staging=staging, rate_hz=rate_hz, metadata=metadata)
    sources = plan.of_protocol("slcan")
    by_name = {s.name: s for s in sources}
    routes: BusRoutes = {}
    for bus in buses:
        number = _bus_number(bus)
        candidates = [bus, _source_name(bus)] + (
            [f"bus{number}", f"can{number}"] if number is not None else []
        )
        built = next((by_name[c] for c in candidates if c in by_name), None)
        if built is None and len(sources) == 1 and len(buses) == 1:
            built = sources[0]
        if built is None:
            report.notes.append(f"bus {bus}: no SLCAN source of the config is named after it, not recorded")
            continue
        decoder: Any = built.decoder
        routes[bus] = (built.name, decoder.can.decode_values, built.transform)
        report.notes.append(f"bus {bus} -> source {built.name} (config)")
    return routes


def _samples(
    frames: Iterator[tuple[str, CanFrame]],
    routes: BusRoutes,
    offset_ns: int,
    report: ImportReport,
    unrouted: str,
) -> Iterator[Sample]:
    """Each frame decoded by its bus's source, stamped with the log's time (never backwards);
    a frame of a bus without a source is counted as ``unrouted``."""
    last_ns = -1
    for bus, frame in frames:
        entry = routes.get(bus)
        if entry is None:
            report.drop(f"{bus}: {unrouted}")
            continue
        name, decode, transform = entry
        try:
            values = decode(frame)
        except DecodeError as exc:
            report.drop(f"{bus}: {exc.reason}")
            continue
        ns = (frame.timestamp_ns or 0) + offset_ns
        rx = ns if ns >= last_ns else last_ns
        last_ns = rx
        sample = Sample(name, rx, values, ns)
        report.samples += 1
        yield transform(sample) if transform is not None else sample


def import_can_log(
    path: Path,
    output: Path,
    *,
    fmt: str,
    dbc: list[str],
    plan: ImportPlan | None = None,
    rate_hz: int | None = None,
    start_timestamp_us: int | None = None,
    force: bool = False,
) -> ImportReport:
    """Import a candump (``fmt="candump"``) or SavvyCAN (``"savvycan"``) log; see the module docstring.
    ``plan``: a daemon config's (``--config``, built by the daemon for the command).

    :raises ConfigError: bad ``--dbc`` values, a DBC that does not load, a bad ``--config``.
    :raises ImportFormatError: nothing to import, an output that exists, too many buses.
    :raises OSError: reading the input or writing the output.
    """
    if output.suffix == ".wrtf":
        check_output(output, force=force)
    rate = rate_hz if rate_hz is not None else DEFAULT_RATE_HZ
    if rate <= 0:
        raise ImportFormatError(f"--rate must be a positive number of Hz, not {rate}")
    if plan is not None and dbc:
        raise ConfigError("--config and --dbc: the config's CAN sources name their DBC files")
    if plan is None:
        parse_dbc_options(dbc)  # fail on bad values before reading anything
    read, first = _reader(path, fmt)
    buses: list[str] = []
    first_ns: int | None = None
    for bus, frame in _frames(path, read, first, None, None):
        if first_ns is None:
            first_ns = frame.timestamp_ns
        if bus not in buses:
            if len(buses) >= MAX_BUSES:
                raise ImportFormatError(f"{path}: more than {MAX_BUSES} buses; not a CAN log of one car")
            buses.append(bus)
    report = ImportReport(path, "lines")
    if first_ns is None:
        for _ in _frames(path, read, first, report, None):  # counts the lines and why they failed
            pass
        report.check_any()
        raise ImportFormatError(f"{path}: no CAN frame")  # not reached: nothing was imported
    offset_ns = 0
    if fmt == "savvycan" and first_ns < EPOCH_US_MIN * 1000:
        if start_timestamp_us is None:
            start_timestamp_us = int(path.stat().st_mtime) * 1_000_000
            report.notes.append("the log's times are relative: placed at the file's modification time")
        offset_ns = start_timestamp_us * 1000 - first_ns
    elif start_timestamp_us is not None:
        offset_ns = start_timestamp_us * 1000 - first_ns
    metadata = {"import.file": path.name, "import.format": fmt}
    with staging_dir(output) as staging:
        groups = GroupReplay()
        if plan is not None:
            buses_to = _config_buses(plan, buses, groups, staging, rate_hz, metadata, report)
        else:
            buses_to = _dbc_buses(dbc, buses, groups, staging, rate, metadata, report)
        if not buses_to:
            raise ImportFormatError(
                f"{path}: no bus of the log has a DBC or a source (buses: {', '.join(buses)})"
            )
        progress = Progress(path.name, path.stat().st_size)
        frames = _frames(path, read, first, report, progress)
        unrouted = "no_dbc" if plan is None else "no_source"
        written = groups.record(_samples(frames, buses_to, offset_ns, report, unrouted))
        progress.done()
        report.check_any()
        report.outputs = place_outputs(output, written, force=force)
    return report


def run_import(args: argparse.Namespace) -> int:
    """Entry point for ``wrtfd import LOG --format candump|savvycan``."""
    refuse_options(args, "CAN log", "track")
    return run_report(import_can_log, args, fmt=args.format, dbc=args.dbc, plan=getattr(args, "plan", None))
