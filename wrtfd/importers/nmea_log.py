"""``wrtfd import GPS.log -o OUT.wrtf``: an NMEA 0183 log (raw sentences) -> one WRTF file.

Lines are sentences as a receiver sent them, as a logger saved them: ``\\n``, ``\\r\\n`` or
``\\r`` endings (mixed), blank lines and ``#`` comments (gpsd's logs) skipped, an optional
timestamp or other prefix before the ``$`` and anything after the ``*hh`` checksum (a C string's
``",``) ignored, ``$$`` prefixes (ST Teseo) accepted. Each
sentence goes through the live :class:`~wrtfd.decoders.nmea.NmeaDecoder` (checksums verified:
a bad one is counted as ``bad_checksum``), so a frame holds the same fix state the live serial
source would have recorded.

Time comes from the GPS itself: the fix's UTC time, dated by RMC or ZDA, past midnight by the
decoder's rollover rule. So:

* sentences before the first date (a GGA before any RMC) update the fix state but make no
  sample (``before_first_date``);
* a time that goes *backwards* (a receiver reset, logs concatenated out of order) cannot be
  placed after what was already recorded: such sentences are dropped (``time_went_back``)
  until the time passes the newest one again;
* a time that jumps *forwards* is a pause: dropped ticks, or beyond 30 s a new session.

The frame rate gives every epoch its own tick unless ``--rate`` is given: see
:func:`receiver_rate_hz`. Epochs that share a tick all the same (``--rate``, a config's rate, a
rare shorter step) are counted in a note: only the last one's values are recorded.

``--config DAEMON.toml``: the log feeds the config's one NMEA source (its decoder options,
mapping and recording group, with the group's other sources never delivering) and is recorded
with the config's recorder policy, as the in-car daemon would have recorded it.
"""

from __future__ import annotations

import argparse
import heapq
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from wrtfd.decoders.base import Sample
from wrtfd.decoders.nmea import NmeaDecoder
from wrtfd.errors import ConfigError, DecodeError, ImportFormatError
from wrtfd.importers.output import check_output, place_outputs, staging_dir
from wrtfd.importers.plan import ImportPlan, add_groups
from wrtfd.importers.replay import GroupPlan, GroupReplay
from wrtfd.importers.report import ImportReport, Progress, refuse_options, run_report

__all__ = ["SOURCE_NAME", "import_nmea_log", "receiver_rate_hz", "run_import", "sentences"]

SOURCE_NAME = "gps"
#: Lines longer than this are not NMEA (82 characters, some receivers a few more).
MAX_LINE_BYTES = 1024
#: How many steps between fixes must be at least as short as the one that sets the rate: a
#: shorter step seen fewer times is a glitch (its fix may share a tick: counted in a note).
RATE_MIN_STEPS = 3
#: The fastest rate chosen from the log (``--rate`` may ask for more).
MAX_RATE_HZ = 100
_SPLIT = re.compile(rb"\r\n|\r|\n")
#: The end of a sentence: its checksum (a sentence holds no ``*`` before it).
_CHECKSUM = re.compile(rb"\*[0-9A-Fa-f]{2}")
_CHUNK_BYTES = 1 << 20


def sentences(path: Path, report: ImportReport, progress: Progress | None = None) -> Iterator[bytes]:
    """Every line that holds a sentence (from its ``$``/``!``), in file order; other lines counted.

    Read in bounded chunks: a line without an end is never held beyond :data:`MAX_LINE_BYTES`.
    """
    tail = b""
    skipping = False
    with path.open("rb") as fh:
        while True:
            chunk = fh.read(_CHUNK_BYTES)
            if progress is not None:
                progress.update(fh.tell())
            data = tail + chunk
            parts = _SPLIT.split(data)
            tail = parts.pop() if chunk else b""
            if tail.endswith(b"\r"):  # a \r\n cut between two chunks
                parts.append(tail[:-1])
                tail = b""
            for line in parts:
                if skipping:  # the rest of an over-long line
                    skipping = False
                    continue
                yield from _sentence(line, report)
            if len(tail) > MAX_LINE_BYTES:
                report.drop("too_long")
                tail, skipping = b"", True
            if not chunk:
                break
        if tail and not skipping:
            yield from _sentence(tail, report)


def _sentence(line: bytes, report: ImportReport) -> Iterator[bytes]:
    line = line.strip()
    if not line or line.startswith(b"#"):
        return
    report.read += 1
    if len(line) > MAX_LINE_BYTES:
        report.drop("too_long")
        return
    start = min((i for i in (line.find(b"$"), line.find(b"!")) if i >= 0), default=-1)
    if start < 0:
        report.drop("not_nmea")
        return
    end = _CHECKSUM.search(line, start)
    yield line[start : end.end()] if end is not None else line[start:]


def receiver_rate_hz(times_ns: Iterable[int]) -> int:
    """The lowest whole rate (1-100 Hz) whose tick is no longer than the fastest *sustained* step
    between distinct fix times, the :data:`RATE_MIN_STEPS`-th shortest (the shortest when there
    are fewer): two fixes at least a tick apart always fall in different ticks, so a log that
    changes rate (1 Hz, then 2 Hz) or steps irregularly (50-60 ms) gets every epoch its own
    tick. A tick without a fix costs nothing: it is a dropped tick, not a frame."""
    shortest: list[int] = []  # the RATE_MIN_STEPS shortest steps, negated (a max-heap)
    newest: int | None = None
    for t in times_ns:
        if newest is not None and t > newest:
            step = t - newest
            if len(shortest) < RATE_MIN_STEPS:
                heapq.heappush(shortest, -step)
            elif step < -shortest[0]:
                heapq.heapreplace(shortest, -step)
        if newest is None or t > newest:
            newest = t
    if not shortest:
        return 1
    step = -shortest[0] if len(shortest) == RATE_MIN_STEPS else min(-x for x in shortest)
    return max(1, min(MAX_RATE_HZ, -(-1_000_000_000 // step)))


def _fix_times(path: Path) -> Iterator[int]:
    """Every fix time the import would record, in file order (a quick first pass)."""
    decoder = NmeaDecoder()
    scratch = ImportReport(path, "lines")
    for line in sentences(path, scratch):
        try:
            decoded = decoder.decode(line)
        except DecodeError:
            continue
        t = decoded.source_time_ns if decoded is not None else None
        if t is not None:
            yield t


def _first_pass(path: Path) -> tuple[int | None, int]:
    """The first fix time (None: no dated fix) and :func:`receiver_rate_hz` of the whole log."""
    first: list[int] = []

    def times() -> Iterator[int]:
        for t in _fix_times(path):
            if not first:
                first.append(t)
            yield t

    rate = receiver_rate_hz(times())
    return (first[0] if first else None), rate


def _note_merged(report: ImportReport, epochs: int, paths: list[Path]) -> None:
    """Each tick of a file written holds at least one epoch: the epochs beyond the frames shared
    a tick, and only the last of each tick was recorded. Said in a note (they are epochs, not
    lines: the report's counts stay lines)."""
    from wrtfd.format import Reader

    frames, rate = 0, 0
    for path in paths:
        with Reader(path) as r:
            frames += sum(len(r.frames(i)) for i in range(len(r.sessions)))
            rate = r.rate_hz
    if epochs > frames:
        report.notes.append(
            f"{epochs - frames} fix epochs shared a tick with a later one at {rate} Hz: only the "
            "last epoch of a tick is recorded (--rate sets a higher rate)"
        )


class _Epochs:
    """How many epochs (distinct fix times) the import recorded."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


def _samples(
    path: Path,
    report: ImportReport,
    decoder: Any,
    name: str,
    transform: Any = None,
    epochs: _Epochs | None = None,
) -> Iterator[Sample]:
    newest = -1
    progress = Progress(path.name, path.stat().st_size)
    for line in sentences(path, report, progress):
        try:
            decoded = decoder.decode(line)
        except DecodeError as exc:
            report.drop(exc.reason)
            continue
        if decoded is None:
            continue
        t = decoded.source_time_ns
        if t is None:
            report.drop("before_first_date")
            continue
        if t < newest:
            report.drop("time_went_back")
            continue
        if t > newest and epochs is not None:
            epochs.count += 1
        newest = t
        report.samples += 1
        sample = Sample(name, t, decoded.values, t)
        yield transform(sample) if transform is not None else sample
    progress.done()


def import_nmea_log(
    path: Path,
    output: Path,
    *,
    plan: ImportPlan | None = None,
    rate_hz: int | None = None,
    start_timestamp_us: int | None = None,
    force: bool = False,
) -> ImportReport:
    """Import an NMEA log; see the module docstring. ``plan``: a daemon config's (``--config``,
    built by the daemon for the command).

    :raises ImportFormatError: nothing to import (no dated fix), an output that exists, a bad option.
    :raises ConfigError: a bad ``--config``, or one without exactly one NMEA source.
    :raises OSError: reading the input or writing the output.
    """
    from wrtfd.recorder import RecorderPolicy, SourceSpec

    if output.suffix == ".wrtf":
        check_output(output, force=force)
    if rate_hz is not None and rate_hz <= 0:
        raise ImportFormatError(f"--rate must be a positive number of Hz, not {rate_hz}")
    report = ImportReport(path, "lines")
    first_ns, receiver_rate = _first_pass(path)
    if first_ns is None:
        for _ in _samples(path, report, NmeaDecoder(), SOURCE_NAME):  # count the lines and why
            pass
        report.check_any()
        raise ImportFormatError(f"{path}: no fix with a date (RMC or ZDA) to place the log in time")
    shift_ns = 0 if start_timestamp_us is None else start_timestamp_us * 1000 - first_ns
    metadata = {"import.file": path.name, "import.format": "nmea"}
    epochs = _Epochs()
    with staging_dir(output) as staging:
        groups = GroupReplay(wall_ns=lambda rx_ns: rx_ns + shift_ns)
        if plan is not None:
            add_groups(plan, groups, staging=staging, rate_hz=rate_hz, metadata=metadata)
            sources = plan.of_protocol("nmea")
            if len(sources) != 1:
                raise ConfigError(f"{plan.origin}: {len(sources)} NMEA sources; the log feeds exactly one")
            gps = sources[0]
            group, drives = gps.group, gps.spec.drives_frames
            samples = _samples(path, report, gps.decoder, gps.name, gps.transform, epochs)
        else:
            group, drives = SOURCE_NAME, True
            rate = rate_hz or receiver_rate
            policy = RecorderPolicy(output_dir=staging, rate_hz=rate, session_idle_s=30.0)
            spec = SourceSpec(name=SOURCE_NAME, definition=NmeaDecoder().definition, drives_frames=True)
            groups.add(GroupPlan(SOURCE_NAME, [spec], policy, (), metadata))
            samples = _samples(path, report, NmeaDecoder(), SOURCE_NAME, epochs=epochs)
        written = groups.record(samples)
        report.check_any()
        if drives:
            _note_merged(report, epochs.count, written.get(group, []))
        report.outputs = place_outputs(output, written, force=force)
    return report


def run_import(args: argparse.Namespace) -> int:
    """Entry point for ``wrtfd import GPS.log --format nmea``."""
    refuse_options(args, "NMEA log", "track")
    return run_report(import_nmea_log, args, plan=getattr(args, "plan", None))
