"""What an import read, made and dropped, and how it tells the user (stderr, on a TTY too).

Every importer of this package fills one :class:`ImportReport`: inputs read (datagrams, lines,
rows, records), samples recorded, inputs dropped by reason, files written. The command prints
it at the end; an import that produced no sample at all is an error (one line, exit 2) that
names the most common reasons, so a wrong ``--format`` or a log of the wrong bus is obvious.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from wrtfd.errors import ImportFormatError

__all__ = [
    "PROGRESS_MIN_BYTES",
    "ImportReport",
    "Progress",
    "earliest_start_us",
    "refuse_options",
    "run_report",
]

#: Files smaller than this import in about a second: no progress display.
PROGRESS_MIN_BYTES = 4 << 20


@dataclass(slots=True)
class ImportReport:
    """``unit`` names the inputs (``datagrams``, ``lines``, ``rows``, ``records``)."""

    source: Path
    unit: str
    read: int = 0
    samples: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    outputs: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def drop(self, reason: str, n: int = 1) -> None:
        self.dropped[reason] += n

    def check_any(self) -> None:
        """:raises ImportFormatError: nothing was imported (the reasons are in the message)."""
        if self.samples:
            return
        reasons = ", ".join(f"{reason} {n}" for reason, n in self.dropped.most_common(4))
        why = f" (dropped: {reasons})" if reasons else ""
        raise ImportFormatError(f"{self.source}: nothing to import: {self.read} {self.unit} read{why}")

    def lines(self) -> list[str]:
        out = [f"{self.source}: {self.read} {self.unit} -> {self.samples} samples"]
        out.extend(f"  wrote {p}" for p in self.outputs)
        if self.dropped:
            total = sum(self.dropped.values())
            out.append(f"  dropped {total}:")
            out.extend(f"    {reason}: {n}" for reason, n in sorted(self.dropped.items()))
        out.extend(f"  note: {note}" for note in self.notes)
        return out

    def write(self, stream: TextIO | None = None) -> None:
        (stream or sys.stderr).write("".join(line + "\n" for line in self.lines()))


def earliest_start_us(rate_hz: int) -> int:
    """The earliest file start at ``rate_hz``: tick 0 begins half a tick before the first sample."""
    return -(-500_000 // rate_hz)


def refuse_options(args: Any, what: str, *options: str) -> None:
    """:raises ImportFormatError: one of ``options`` (``--config``...) was given for ``what``."""
    for option in options:
        if getattr(args, option, None) is not None:
            raise ImportFormatError(f"--{option} is not used for {what} imports")


def run_report(importer: Callable[..., ImportReport], args: Any, **options: Any) -> int:
    """The command line's side of an importer that fills an :class:`ImportReport`: the options
    every such format takes (``--rate``, ``--start-timestamp``, ``--force``) plus its own
    ``options``, the report on stderr; the exit code (0)."""
    report = importer(
        args.file,
        args.output,
        rate_hz=args.rate,
        start_timestamp_us=args.start_timestamp,
        force=args.force,
        **options,
    )
    report.write(sys.stderr)
    return 0


class Progress:
    """``importing NAME: 42%`` on stderr, redrawn at most 4 times a second; silent unless
    stderr is a TTY and the file is at least :data:`PROGRESS_MIN_BYTES`."""

    __slots__ = ("_enabled", "_label", "_last", "_stream", "_total")

    def __init__(self, label: str, total_bytes: int, *, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stderr
        self._enabled = total_bytes >= PROGRESS_MIN_BYTES and self._stream.isatty()
        self._label = label
        self._total = max(1, total_bytes)
        self._last = 0.0

    def update(self, done_bytes: int) -> None:
        if not self._enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.25:
            return
        self._last = now
        self._stream.write(
            f"\rimporting {self._label}: {100 * min(done_bytes, self._total) // self._total:3d}%"
        )
        self._stream.flush()

    def done(self) -> None:
        if self._enabled:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
