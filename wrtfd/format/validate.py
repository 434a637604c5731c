"""Check a WRTF file against spec section 9 and docs/wrtf-notes.md; never mutates the file.

Each :class:`Finding` carries the byte offset where the problem is and a stable ``code``. The
session structure is taken from a sequential scan of the data (N11), then compared with what
the document footer claims, so a lying footer is caught too. In a file with the frame check
(:mod:`wrtfd.format.check`) every commit group is verified, and each stretch of failing frames
is reported with the offset of its first frame (the others follow every frame size).
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from wrtfd.errors import CorruptFileError, FormatError, SchemaError
from wrtfd.format.check import FrameCheck, check_from_metadata
from wrtfd.format.reader import (
    TORN_REASON,
    Buffer,
    ScannedSession,
    decode_metadata,
    open_regular,
    parse_document_footer,
    parse_file_header,
    parse_metadata,
    scan_sessions,
)
from wrtfd.format.schema import Schema, covered_bytes
from wrtfd.format.spec import (
    FILE_HEADER_SIZE,
    FORMAT_VERSION,
    SCHEMA_METADATA_KEY,
    SESSION_FOOTER_HEAD,
    SESSION_FOOTER_MAGIC,
    SESSION_MAGIC,
    U64,
    pad8,
)

__all__ = ["UNREADABLE_CODES", "Finding", "unreadable", "validate_file"]

#: Required metadata keys (N12).
REQUIRED_KEYS = (SCHEMA_METADATA_KEY,)
_CHUNK = 1 << 18
#: Finding codes that mean the file could not be read far enough to check its sessions (empty,
#: not WRTF, header or metadata cut, no usable definition): ``wrtfd validate`` exits 2.
UNREADABLE_CODES = frozenset(
    {"empty", "header", "version", "metadata", "no-definition", "schema", "unreadable"}
)
#: At most this many stretches of frames failing the check are listed per session.
MAX_CHECK_FINDINGS = 20


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem: where (byte offset), what (stable code), and a sentence."""

    offset: int | None
    code: str
    message: str

    def __str__(self) -> str:
        where = "-" if self.offset is None else str(self.offset)
        return f"offset {where}: {self.message} [{self.code}]"


class _Checker:
    def __init__(self, buf: Buffer, schema: Schema | None) -> None:
        self.buf = buf
        self.schema = schema
        self.check: FrameCheck | None = None
        self.findings: list[Finding] = []

    def add(self, offset: int | None, code: str, message: str) -> None:
        self.findings.append(Finding(offset, code, message))

    # -- header and metadata (spec 9: header, metadata) ----------------------------------------

    def run(self) -> None:
        buf = self.buf
        try:
            hdr = parse_file_header(buf)
        except CorruptFileError as exc:
            self.add(exc.offset, "header", str(exc))
            return
        if hdr.version != FORMAT_VERSION:
            self.add(8, "version", f"version {hdr.version}, must be {FORMAT_VERSION}")
            return
        if hdr.rate_hz == 0:
            self.add(16, "rate", "sample rate must be > 0")
        if hdr.start_timestamp_us == 0:
            self.add(24, "timestamp", "start timestamp must be > 0")
        if hdr.reserved != 0:
            self.add(36, "reserved", f"reserved field is {hdr.reserved}, must be 0")
        try:
            entries, data_start = parse_metadata(buf, hdr.metadata_count)
        except CorruptFileError as exc:
            self.add(exc.offset, "metadata", str(exc))
            return
        seen: set[bytes] = set()
        for e in entries:
            try:
                key = e.key.decode("utf-8")
            except UnicodeDecodeError:
                self.add(e.offset, "metadata-utf8", "metadata key is not valid UTF-8")
                key = repr(e.key)
            try:
                e.value.decode("utf-8")
            except UnicodeDecodeError:
                self.add(e.value_offset, "metadata-utf8", f"metadata {key!r}: value is not valid UTF-8")
            if not e.key:
                self.add(e.offset, "metadata-key", "metadata key is empty")
            if e.key in seen:
                self.add(e.offset, "metadata-duplicate", f"metadata key {key!r} appears more than once")
            seen.add(e.key)
            for start, length in ((e.offset, len(e.key)), (e.value_offset, len(e.value))):
                pad_from = start + 4 + length
                if any(bytes(buf[pad_from : pad8(pad_from)])):
                    self.add(pad_from, "padding", f"metadata {key!r}: padding bytes are not zero")
        for k in REQUIRED_KEYS:
            if k.encode() not in seen:
                self.add(
                    FILE_HEADER_SIZE, "metadata-required", f"required metadata key {k!r} missing (N5, N12)"
                )
        if self.schema is None:
            entry = next((e for e in entries if e.key == SCHEMA_METADATA_KEY.encode()), None)
            try:
                text = None if entry is None else entry.value.decode("utf-8")
            except UnicodeDecodeError:
                text = None
            if text is None:
                self.add(None, "no-definition", "no definition to check sessions against (give --schema)")
                return
            try:
                self.schema = Schema.from_yaml(text, source=f"metadata '{SCHEMA_METADATA_KEY}'")
            except SchemaError as exc:
                self.add(None if entry is None else entry.value_offset, "schema", str(exc))
                return
        self.check, note = check_from_metadata(decode_metadata(entries, strict=False), self.schema)
        if note is not None:
            self.add(FILE_HEADER_SIZE, "check-unverified", note)
        self.check_sessions(data_start, hdr.rate_hz)

    # -- sessions and document footer (spec 9: session, document footer) ---------------------------

    def check_sessions(self, data_start: int, rate_hz: int) -> None:
        schema = self.schema
        if schema is None:  # pragma: no cover - run() returns before
            return
        buf = self.buf
        size = len(buf)
        doc: tuple[int, list[tuple[int, int, int]]] | None = None
        try:
            doc = parse_document_footer(buf, data_start)
        except CorruptFileError as exc:
            self.add(
                exc.offset, "incomplete", f"no valid document footer, the file is incomplete (N11): {exc}"
            )
        end = doc[0] if doc is not None else size
        scan = scan_sessions(buf, data_start, schema, end)
        for off, length, reason in scan.skipped:
            if reason == TORN_REASON:
                continue  # reported with its session
            if reason == "bytes that are not a session" and self._explain_stop(off, scan.sessions):
                continue
            self.add(off, "stray-bytes", f"{length} {reason}")
        for i, s in enumerate(scan.sessions):
            self.check_session(i, s, complete=doc is not None)
        if doc is None:
            return
        doc_start, entries = doc
        if len(entries) != len(scan.sessions):
            self.add(
                size - 16,
                "doc-count",
                f"document footer lists {len(entries)} sessions, the file holds {len(scan.sessions)}",
            )
        footer_len = SESSION_FOOTER_HEAD.size + schema.footer_size
        for i, (off, foff, count) in enumerate(entries):
            at = doc_start + 8 + 24 * i
            if bytes(buf[off : off + 8]) != SESSION_MAGIC or off < data_start or off >= doc_start:
                self.add(
                    at, "doc-entry", f"entry {i}: session offset {off} does not point to a session header"
                )
                continue
            if foff > doc_start - footer_len or bytes(buf[foff : foff + 8]) != SESSION_FOOTER_MAGIC:
                self.add(
                    at, "doc-entry", f"entry {i}: footer offset {foff} does not point to a session footer"
                )
            match = next((s for s in scan.sessions if s.offset == off), None)
            if match is None:
                self.add(at, "doc-entry", f"entry {i}: no session found at offset {off}")
                continue
            if match.footer_offset != foff:
                self.add(
                    at,
                    "doc-entry",
                    f"entry {i}: footer offset {foff}, the session's footer is at {match.footer_offset}",
                )
            if match.frame_count != count:
                self.add(
                    at, "doc-entry", f"entry {i}: frame count {count}, the session holds {match.frame_count}"
                )
        offsets = [e[0] for e in entries]
        if offsets != sorted(offsets):
            self.add(doc_start, "doc-order", "document footer entries are not in file order")

    def _explain_stop(self, off: int, sessions: list[ScannedSession]) -> bool:
        """A scan that stopped inside frames: say which tick failed to increase (N10)."""
        schema = self.schema
        prev = next((s for s in sessions if s.end_offset == off and s.footer_offset is None), None)
        if prev is None or schema is None or off + schema.frame_size > len(self.buf):
            return False
        tick = U64.unpack_from(self.buf, off)[0]
        last = U64.unpack_from(self.buf, off - schema.frame_size)[0] if prev.frame_count else None
        if last is not None and tick <= last:
            self.add(
                off,
                "tick-order",
                f"frame tick {tick} does not increase after {last} (N10); data after it is not read",
            )
            return True
        return False

    def check_session(self, i: int, s: ScannedSession, *, complete: bool) -> None:
        schema = self.schema
        if schema is None:  # pragma: no cover
            return
        buf = self.buf
        self.check_blob(buf, s.offset + 8, schema.header_dtype, f"session {i} header")
        fsize = schema.frame_size
        if s.footer_offset is None:
            if s.torn_bytes:
                self.add(s.end_offset, "torn", f"session {i}: torn last record ({s.torn_bytes} bytes)")
            if complete:
                self.add(s.end_offset, "no-footer", f"session {i} has no session footer (WRSF0001)")
            else:
                self.add(s.end_offset, "no-footer", f"session {i} has no session footer (incomplete file)")
        else:
            _, a, b = SESSION_FOOTER_HEAD.unpack_from(buf, s.footer_offset)
            n = s.frame_count
            last = U64.unpack_from(buf, s.frames_offset + (n - 1) * fsize)[0] if n else 0
            if not ((a == n and b == last) or (a == last and b == n)):
                self.add(
                    s.footer_offset + 8,
                    "footer-values",
                    f"session {i} footer says {a}, {b}; the session holds {n} frames, last tick {last} (N2)",
                )
            if schema.footer_dtype is not None and schema.footer_fields is not None:
                self.check_blob(
                    buf,
                    s.footer_offset + SESSION_FOOTER_HEAD.size,
                    schema.footer_dtype,
                    f"session {i} footer",
                )
        self.check_frames(i, s)
        self.verify_frames(i, s)

    def verify_frames(self, i: int, s: ScannedSession) -> None:
        """Every commit group of the session (frame check): each failing stretch, with offsets."""
        if self.check is None or s.frame_count == 0:
            return
        fsize = self.check.frame_size
        failures = self.check.failures(self.buf, s.frames_offset, s.frame_count)
        for f in failures[:MAX_CHECK_FINDINGS]:
            which = f"frame {f.frame}" if f.frames == 1 else f"frames {f.frame}..{f.frame + f.frames - 1}"
            where = "" if f.frames == 1 else f" (offsets {f.offset} + k * {fsize})"
            verb = "fails" if f.frames == 1 else "fail"
            self.add(f.offset, "check", f"session {i} {which}{where} {verb} the frame check: {f.reason}")
        rest = failures[MAX_CHECK_FINDINGS:]
        if rest:
            self.add(
                rest[0].offset,
                "check",
                f"session {i}: {sum(f.frames for f in rest)} more frames in {len(rest)} stretches "
                "fail the frame check",
            )

    def check_blob(self, buf: Buffer, offset: int, dtype: np.dtype[Any], what: str) -> None:
        arr = np.frombuffer(buf, dtype=dtype, count=1, offset=offset)
        self.check_records(arr, offset, dtype.itemsize, what, covered_bytes(dtype))

    def check_frames(self, i: int, s: ScannedSession) -> None:
        schema = self.schema
        if schema is None or s.frame_count == 0:
            return
        mask = covered_bytes(schema.frame_dtype)
        fsize = schema.frame_size
        for start in range(0, s.frame_count, _CHUNK):
            n = min(_CHUNK, s.frame_count - start)
            off = s.frames_offset + start * fsize
            arr = np.frombuffer(self.buf, dtype=schema.frame_dtype, count=n, offset=off)
            if self.check_records(arr, off, fsize, f"session {i} frame", mask, first_index=start):
                return

    def check_records(
        self,
        arr: np.ndarray,
        offset: int,
        itemsize: int,
        what: str,
        mask: np.ndarray,
        first_index: int | None = None,
    ) -> bool:
        """Padding bytes zero (spec 8.7). True if something was found.

        Enum numbers without a name and bools other than 0/1 are data, not errors: the spec
        reads any non-zero bool as true, and a game may send a state newer than the definition.
        """
        found = False
        raw = arr.view(np.uint8).reshape(len(arr), itemsize)
        pad_cols = np.flatnonzero(~mask)
        if len(pad_cols):
            bad_rows = np.flatnonzero(raw[:, pad_cols].any(axis=1))
            if len(bad_rows):
                r = int(bad_rows[0])
                label = what if first_index is None else f"{what} {first_index + r}"
                self.add(
                    offset + r * itemsize,
                    "padding",
                    f"{label}: padding bytes are not zero ({len(bad_rows)} record(s))",
                )
                found = True
        return found


def unreadable(findings: list[Finding]) -> Finding | None:
    """The finding that made the file unreadable (see :data:`UNREADABLE_CODES`), if any."""
    return next((f for f in findings if f.code in UNREADABLE_CODES), None)


def validate_file(path: str | Path, schema: Schema | None = None) -> list[Finding]:
    """All findings for the file at ``path`` (empty when it is valid).

    ``schema`` is the definition for files without ``wrtf.schema`` (N5); when given it is used
    instead of the embedded one.

    :raises OSError: the file cannot be opened.
    """
    p = Path(path)
    with open_regular(p) as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return [Finding(0, "empty", "file is empty")]
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        checker = _Checker(mm, schema)
        try:
            checker.run()
        except FormatError as exc:  # a check met something it could not read further
            offset = getattr(exc, "offset", None)
            checker.add(offset, "unreadable", str(exc))
        return checker.findings
    finally:
        try:
            mm.close()
        except BufferError:
            pass
