"""Finalize an incomplete WRTF file (N11) without losing a complete frame.

What a crash leaves is a valid prefix: sessions, perhaps the last one without its footer,
perhaps a torn last record. Repair keeps every complete frame the scan finds, drops the torn
bytes, writes the missing session footer(s) (spec order, footer struct zeroed: its values were
never known) and a document footer. In a file with the frame check (:mod:`wrtfd.format.check`)
the scan keeps frames up to the first one that fails the check and nothing after it, so zeros,
random bytes and an older recording's blocks never become frames; a complete file whose frames
fail the check is rebuilt the same way.

Repair then validates its own output (:func:`wrtfd.format.validate.validate_file`) and says so
in the report: ``RepairReport.valid`` is False (and ``wrtfd repair`` exits 1) when it would not
pass ``wrtfd validate``.

In place when only the tail needs fixing (truncate the torn bytes, append footers, fsync);
otherwise the file is rebuilt into a temporary file beside it and atomically renamed, so a
second power cut during repair never leaves a worse file than before.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from wrtfd.errors import FormatError, SchemaError
from wrtfd.format.reader import Reader, SessionInfo
from wrtfd.format.schema import Schema, layout_difference
from wrtfd.format.spec import SCHEMA_METADATA_KEY, SESSION_FOOTER_HEAD
from wrtfd.format.validate import Finding, validate_file
from wrtfd.format.writer import SessionEntry, encode_document_footer, encode_session_footer

__all__ = ["RepairReport", "repair_file", "schema_mismatch"]

_COPY_CHUNK = 8 << 20


@dataclass(frozen=True, slots=True)
class RepairReport:
    """What :func:`repair_file` did."""

    source: Path
    output: Path
    was_complete: bool
    sessions: int
    frames_kept: int
    bytes_dropped: int
    dropped: tuple[tuple[int, int, str], ...]
    session_footers_written: int
    document_footer_written: bool
    rebuilt: bool
    #: What ``wrtfd validate`` finds in the output (empty: it is valid).
    findings: tuple[Finding, ...] = ()

    @property
    def valid(self) -> bool:
        return not self.findings

    def lines(self) -> list[str]:
        out = self._done_lines()
        if self.findings:
            out.append(f"{self.output}: the output does not validate ({len(self.findings)} finding(s)):")
            out.extend(f"  {f}" for f in self.findings)
        return out

    def _done_lines(self) -> list[str]:
        if self.was_complete:
            return [
                f"{self.source}: already complete ({self.sessions} sessions, {self.frames_kept} frames); "
                "nothing to do"
            ]
        out = [
            f"{self.output}: kept {self.frames_kept} frames in {self.sessions} sessions",
            f"wrote {self.session_footers_written} session footer(s) and "
            f"{'a' if self.document_footer_written else 'no'} document footer"
            + (" (rebuilt)" if self.rebuilt else " (in place)" if self.output == self.source else ""),
        ]
        for off, length, reason in self.dropped:
            out.append(f"dropped {length} bytes at offset {off}: {reason}")
        return out


def schema_mismatch(metadata: dict[str, str], schema: Schema) -> str | None:
    """How ``schema`` (given from outside) lays out records differently from the definition the
    file embeds (``wrtf.schema``); None when it lays them out the same, or the file embeds none
    (or one that cannot be read, which is what an outside definition is for).

    Read with another layout, a file's frames are other bytes: the scan finds ticks out of
    order or frames failing the check, and a repair would cut them all.
    """
    text = metadata.get(SCHEMA_METADATA_KEY)
    if text is None:
        return None
    try:
        own = Schema.from_yaml(text, source=f"metadata '{SCHEMA_METADATA_KEY}'")
    except SchemaError:
        return None
    difference = layout_difference(own.frame_dtype, schema.frame_dtype)
    if difference is not None:
        return f"frame: {difference}"
    if own.header_size != schema.header_size:
        return f"session header is {schema.header_size} bytes, expected {own.header_size}"
    if own.footer_size != schema.footer_size:
        return f"session footer is {schema.footer_size} bytes, expected {own.footer_size}"
    return None


def _copy_range(src: BinaryIO, dst: BinaryIO, start: int, length: int) -> None:
    src.seek(start)
    left = length
    while left > 0:
        chunk = src.read(min(_COPY_CHUNK, left))
        if not chunk:
            raise FormatError(f"file shrank while repairing (at byte {start + length - left})")
        dst.write(chunk)
        left -= len(chunk)


@contextmanager
def _beside(dst: Path, durable: bool) -> Iterator[BinaryIO]:
    """A file written beside ``dst`` and renamed onto it when the block ends without an error
    (flushed, and fsynced when ``durable``); an error leaves nothing."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".repair", dir=dst.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fout:
            yield fout
            fout.flush()
            if durable:
                os.fsync(fout.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, dst)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _copy_beside(src: Path, dst: Path, durable: bool) -> None:
    """Copy ``src`` to ``dst`` through a temporary file beside ``dst`` (an error leaves nothing)."""
    with open(src, "rb") as fin, _beside(dst, durable) as fout:
        shutil.copyfileobj(fin, fout, _COPY_CHUNK)


def _footer_record(s: SessionInfo, schema: Schema) -> bytes:
    return encode_session_footer(s.frame_count, s.last_tick or 0, bytes(schema.footer_size))


def repair_file(
    path: str | Path, output: str | Path | None = None, schema: Schema | None = None, *, durable: bool = True
) -> RepairReport:
    """Repair ``path`` in place, or write the repaired file to ``output``; then validate it.

    ``durable`` fsyncs the result before returning (tests turn it off). The report's
    ``findings`` are what validating the output found (``valid`` is False when there are any).

    :raises CorruptFileError: the file header or metadata is unreadable (nothing to anchor on).
    :raises FormatError: no definition (give ``schema`` for files without ``wrtf.schema``), or
        ``schema`` does not lay out records as the file's embedded definition does (nothing
        written: repairing with it would drop every frame).
    """
    report = _repair(Path(path), Path(output) if output is not None else Path(path), schema, durable)
    return dataclasses.replace(report, findings=tuple(validate_file(report.output, schema)))


def _complete_and_verified(r: Reader) -> bool:
    """A complete file (valid document footer) whose frames all pass the frame check."""
    return r.complete and all(r.verify_session(i) is None for i in range(len(r.sessions)))


def _repair(src: Path, dst: Path, schema: Schema | None, durable: bool) -> RepairReport:
    with Reader(src, schema) as r:
        if schema is not None:
            difference = schema_mismatch(r.metadata, schema)
            if difference is not None:
                raise FormatError(
                    f"{src}: the definition given (--schema) does not match the one the file embeds "
                    f"({difference}); repair without --schema"
                )
        if _complete_and_verified(r):
            frames = r.total_frames
            n = len(r.sessions)
            if dst != src:
                _copy_beside(src, dst, durable)
            return RepairReport(src, dst, True, n, frames, 0, (), 0, False, False)
    with Reader(src, schema, force_scan=True) as r:
        scan = r.scan
        if scan is None:  # pragma: no cover - force_scan always scans
            raise FormatError(f"{src}: scan did not run")
        sessions = list(r.sessions)
        data_start = r.data_start
        schema = r.schema
        dropped = tuple(scan.skipped)
        data_end = scan.data_end
        size = r.size
    frames_kept = sum(s.frame_count for s in sessions)
    missing = [s for s in sessions if s.footer_offset is None]
    # Stray bytes before the end of the data, or a footer missing before the last session,
    # cannot be fixed by truncating and appending.
    needs_rebuild = any(off < data_end for off, _, _ in dropped) or any(
        s is not sessions[-1] for s in missing
    )
    footer_len = SESSION_FOOTER_HEAD.size + schema.footer_size

    if not needs_rebuild and dst == src:
        tail = b""
        entries = [SessionEntry(s.offset, s.footer_offset or 0, s.frame_count) for s in sessions]
        if missing:
            last = sessions[-1]
            tail += _footer_record(last, schema)
            entries[-1] = SessionEntry(last.offset, data_end, last.frame_count)
        tail += encode_document_footer(entries)
        fd = os.open(src, os.O_WRONLY)
        try:
            os.ftruncate(fd, data_end)
            os.lseek(fd, data_end, os.SEEK_SET)
            view = memoryview(tail)
            while view:
                view = view[os.write(fd, view) :]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        return RepairReport(
            src, dst, False, len(sessions), frames_kept, size - data_end, dropped, len(missing), True, False
        )

    with open(src, "rb") as fin, _beside(dst, durable) as fout:
        _copy_range(fin, fout, 0, data_start)
        pos = data_start
        entries = []
        for s in sessions:
            frames_end = s.frames_offset + s.frame_count * schema.frame_size
            entries.append(SessionEntry(pos, pos + (frames_end - s.offset), s.frame_count))
            _copy_range(fin, fout, s.offset, frames_end - s.offset)
            if s.footer_offset is not None:
                _copy_range(fin, fout, s.footer_offset, footer_len)
            else:
                fout.write(_footer_record(s, schema))
            pos += frames_end - s.offset + footer_len
        fout.write(encode_document_footer(entries))
    used = sum(s.end_offset - s.offset for s in sessions)
    return RepairReport(
        src,
        dst,
        False,
        len(sessions),
        frames_kept,
        max(0, size - data_start - used),
        dropped,
        len(missing),
        True,
        dst == src,
    )
