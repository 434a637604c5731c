"""``wrtfd import FILE.zddsrec --config MAP.toml -o OUT.wrtf``: a zerodds capture -> one WRTF file.

The capture is replayed through the same pieces as the live DDS source: the same stream parser,
the same :class:`~wrtfd.zddsrec.mapper.FrameMapper` and CDR decoders, then the recorder's
scheduler, driven by the recorded timestamps (``time_base + delta``) instead of a clock. So a
pause in the capture shows as exactly the ticks it lasted, and the same input with the same
``--start-timestamp`` gives the same output bytes. The default start timestamp is the recorded
time of the first imported sample (so without the option the output is deterministic too).

A torn last frame (a recorder killed mid-write) is reported and every complete frame before it
is imported. Malformed frames stop the import with the frame's byte offset; payloads that do not
decode as the configured type are counted by reason and skipped, like the live source does.

The output is written in a temporary directory beside ``-o`` and renamed into place when
complete, so a failed import never leaves a half-written file.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wrtfd.decoders.base import Sample
from wrtfd.errors import ConfigError, DecodeError, ImportFormatError
from wrtfd.importers.output import check_output, replay_into_file
from wrtfd.zddsrec.format import TornTail, ZddsrecReader
from wrtfd.zddsrec.mapper import FrameMapper
from wrtfd.zddsrec.mapping import MappingConfig, load_mapping

__all__ = ["ImportResult", "import_zddsrec", "iter_samples", "run_import"]


@dataclass(slots=True)
class ImportResult:
    """What an import saw; printed by the CLI."""

    frames: int = 0
    samples: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    unmapped: Counter[str] = field(default_factory=Counter)
    torn_tail: TornTail | None = None
    time_base_unix_ns: int = 0
    output: Path = Path()
    rate_hz: int = 0


def iter_samples(reader: ZddsrecReader, mapping: MappingConfig, stats: ImportResult) -> Iterator[Sample]:
    """Samples of a capture in file order, stamped with their recorded time (Unix ns).

    Pure apart from the reader's file reads. :raises ImportFormatError: a malformed frame.
    """
    mapper = FrameMapper(mapping, reader.header, unmapped=stats.unmapped)
    name = mapping.source_name
    for frame in reader.frames():
        stats.frames += 1
        try:
            mapped = mapper.map(frame)
        except DecodeError as exc:
            stats.dropped[exc.reason] += 1
            continue
        if mapped is None:
            stats.dropped["unmapped"] += 1
            continue
        stats.samples += 1
        yield Sample(
            source=name,
            rx_ns=mapped.time_ns,
            values=mapped.values,
            source_time_ns=mapped.time_ns,
            stale=mapped.stale,
        )
    stats.torn_tail = reader.torn_tail


def _progress(samples: Iterator[Sample], reader: ZddsrecReader, size: int) -> Iterator[Sample]:
    err = sys.stderr
    for n, s in enumerate(samples, 1):
        if n % 20000 == 0 and size:
            done = min(reader.position(), size)
            err.write(f"\rimporting: {100 * done // size:3d}%")
            err.flush()
        yield s
    err.write("\rimporting: 100%\n")


def import_zddsrec(
    path: Path,
    output: Path,
    mapping: MappingConfig,
    *,
    rate_hz: int | None = None,
    start_timestamp_us: int | None = None,
    force: bool = False,
    progress: bool = False,
) -> ImportResult:
    """Import ``path`` into ``output`` with ``mapping``; see the module docstring.

    :raises ImportFormatError: unreadable capture, malformed frame, existing output, bad option.
    :raises WrtfdError: from the recorder.
    :raises OSError: reading the input or writing the output.
    """
    check_output(output, force=force)
    rate = rate_hz if rate_hz is not None else mapping.rate_hz
    if rate <= 0:
        raise ImportFormatError(f"--rate must be a positive number of Hz, not {rate}")
    from wrtfd.recorder import SourceSpec

    stats = ImportResult(output=output, rate_hz=rate)
    with ZddsrecReader(path, limits=mapping.limits) as reader:
        header = reader.header
        stats.time_base_unix_ns = header.time_base_unix_ns
        metadata = {
            "zddsrec.file": path.name,
            "zddsrec.time_base_unix_ns": str(header.time_base_unix_ns),
            "zddsrec.participants": ",".join(p.name for p in header.participants),
            "zddsrec.topics": ",".join(f"{t.name}:{t.type_name}" for t in header.topics),
            "zddsrec.mapped_topics": ",".join(sorted({t.topic for t in mapping.topics})),
        }
        if mapping.path is not None:
            metadata["zddsrec.mapping"] = mapping.path.name
        spec = SourceSpec(
            name=mapping.source_name,
            definition=mapping.definition(),
            drives_frames=True,
            stale_after_s=mapping.stale_after_s,
            use_source_clock=True,
        )
        samples = iter_samples(reader, mapping, stats)
        first = next(samples, None)
        if first is None:
            raise ImportFormatError(
                f"{path}: no sample of a mapped topic to import "
                f"({stats.frames} frames; topics in the file: {', '.join(t.name for t in header.topics)})"
            )
        if start_timestamp_us is None:
            start_timestamp_us = max(first.rx_ns, 0) // 1000
        samples = itertools.chain((first,), samples)
        if progress:
            samples = _progress(samples, reader, path.stat().st_size)
        replay_into_file(
            samples,
            output=output,
            source=spec,
            rate_hz=rate,
            start_timestamp_us=start_timestamp_us,
            metadata=metadata,
        )
    return stats


def run_import(args: argparse.Namespace) -> int:
    """Entry point for ``wrtfd import FILE.zddsrec`` (see ``wrtfd.cli.import_cmd``)."""
    config: Any = getattr(args, "config", None)
    if config is None:
        raise ConfigError("importing a .zddsrec needs --config MAP.toml (which topics become which channels)")
    if getattr(args, "track", None) is not None:
        raise ImportFormatError(
            "--track is not supported for .zddsrec imports (no lap-channel mapping for DDS yet)"
        )
    mapping = load_mapping(config)
    stats = import_zddsrec(
        args.file,
        args.output,
        mapping,
        rate_hz=args.rate,
        start_timestamp_us=args.start_timestamp,
        force=args.force,
        progress=sys.stderr.isatty(),
    )
    err = sys.stderr
    err.write(
        f"{args.file}: {stats.frames} frames -> {stats.output} at {stats.rate_hz} Hz"
        f" ({stats.samples} samples)\n"
    )
    for reason, n in sorted(stats.dropped.items()):
        err.write(f"  {n} frames skipped: {reason}\n")
    for topic, n in sorted(stats.unmapped.items()):
        err.write(f"  {n} samples of unmapped topic {topic}\n")
    if stats.torn_tail is not None:
        err.write(
            f"  warning: torn last frame ({stats.torn_tail.size} bytes at offset {stats.torn_tail.offset})"
            " ignored; every complete frame was imported\n"
        )
    return 0
