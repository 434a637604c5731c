"""Memory-mapped WRTF reader.

Nothing read from the file is trusted: every length, count and offset is bounds-checked before
it is used, and anything that contradicts the format raises :class:`CorruptFileError` with the
byte offset. Frames come out as zero-copy, read-only numpy views.

A file with a valid document footer is opened in O(sessions). A file without one (the writer
crashed, the power went) is read by scanning from the end of the metadata (N11): session magic,
header, fixed-size frames whose ticks strictly increase, then a session footer or the end of the
data; a torn last frame is dropped. Such a file is reported as incomplete (``complete=False``).

Files with the frame check (:mod:`wrtfd.format.check`) are read the same way, except that a scan
keeps a session's frames only up to the first one whose commit group does not verify, and trusts
nothing after it: after a power cut, zeros, random bytes and an older recording's blocks never
come out as frames. Opening a complete file does no CRC pass; :meth:`Reader.verify_session` and
:meth:`Reader.verified_frames` do it on request (validate, dump and export use them).
"""

from __future__ import annotations

import errno
import mmap
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, BinaryIO

import numpy as np

from wrtfd.errors import CorruptFileError, FormatError, SchemaError
from wrtfd.format.check import CheckFailure, FrameCheck, check_from_metadata, data_leaves, declared_field
from wrtfd.format.records import take_records
from wrtfd.format.schema import Leaf, Schema
from wrtfd.format.spec import (
    DOC_END_MAGIC,
    DOC_FOOTER_TAIL,
    DOC_START_MAGIC,
    FILE_HEADER,
    FILE_HEADER_SIZE,
    FILE_MAGIC,
    FORMAT_VERSION,
    MAGIC_WORDS,
    METADATA_LEN,
    SCHEMA_METADATA_KEY,
    SESSION_ENTRY,
    SESSION_FOOTER_HEAD,
    SESSION_FOOTER_MAGIC,
    SESSION_MAGIC,
    U64,
    pad8,
)
from wrtfd.format.times import ticks_to_time_us

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "FileHeader",
    "MetadataEntry",
    "Reader",
    "ScanResult",
    "ScannedSession",
    "SessionInfo",
    "check_dropped",
    "count_frames",
    "decode_metadata",
    "describe_dropped",
    "open_regular",
    "parse_document_footer",
    "parse_file_header",
    "parse_metadata",
    "scan_sessions",
    "ticks_to_time_us",
]

Buffer = bytes | bytearray | memoryview | mmap.mmap

_MAGIC_ARRAY = np.array(sorted(MAGIC_WORDS), dtype="<u8")
_SCAN_CHUNK_FRAMES = 1 << 18
#: The reason scan_sessions gives for a partial record at the very end of the data.
TORN_REASON = "torn record at end of data"


@dataclass(frozen=True, slots=True)
class FileHeader:
    version: int
    rate_hz: int
    start_timestamp_us: int
    metadata_count: int
    reserved: int


@dataclass(frozen=True, slots=True)
class MetadataEntry:
    """A raw metadata entry (N1) at ``offset``; key and value not yet decoded."""

    offset: int
    key: bytes
    value: bytes
    value_offset: int


@dataclass(frozen=True, slots=True, eq=False)
class SessionInfo:
    """One session as found in a file.

    ``footer_order`` is ``"spec"`` (frame count, then last tick) or ``"reference"`` (the .NET
    writer's last tick, then frame count), see N2; None without a footer or when the footer
    matches neither. ``frame_count`` always comes from the file's geometry, never the footer.
    """

    index: int
    offset: int
    frames_offset: int
    footer_offset: int | None
    end_offset: int
    frame_count: int
    first_tick: int | None
    last_tick: int | None
    dropped_ticks: int
    footer_order: str | None
    header: np.void
    footer: np.void | None
    time_base_us: int
    footer_frame_count: int | None = None
    footer_last_tick: int | None = None
    torn_bytes: int = 0

    @property
    def complete(self) -> bool:
        return self.footer_offset is not None

    def duration_us(self, rate_hz: int) -> int:
        """Time covered by the session's ticks (first to last tick, one period included)."""
        if self.first_tick is None or self.last_tick is None:
            return 0
        return ((self.last_tick - self.first_tick + 1) * 1_000_000) // rate_hz


@dataclass(frozen=True, slots=True)
class ScannedSession:
    offset: int
    frames_offset: int
    frame_count: int
    footer_offset: int | None
    end_offset: int
    torn_bytes: int


@dataclass(slots=True)
class ScanResult:
    sessions: list[ScannedSession] = field(default_factory=list)
    #: (offset, length, reason) of byte ranges that are not part of any session
    skipped: list[tuple[int, int, str]] = field(default_factory=list)
    #: end of the last complete record found
    data_end: int = 0
    #: (session index, failure): where the frame check ended a session's frames (files with the
    #: check); ``failure.frames`` counts the records after it that looked like frames
    check_failures: list[tuple[int, CheckFailure]] = field(default_factory=list)


# -- low-level parsing: shared by Reader, validate and repair ---------------------------------------


def parse_file_header(buf: Buffer) -> FileHeader:
    if len(buf) < FILE_HEADER_SIZE:
        raise CorruptFileError(
            f"file is {len(buf)} bytes, shorter than the {FILE_HEADER_SIZE}-byte header", offset=0
        )
    magic, version, rate, ts, count, reserved = FILE_HEADER.unpack_from(buf, 0)
    if magic != FILE_MAGIC:
        raise CorruptFileError(f"not a WRTF file: magic {bytes(magic)!r}, expected {FILE_MAGIC!r}", offset=0)
    return FileHeader(version, rate, ts, count, reserved)


def parse_metadata(buf: Buffer, count: int) -> tuple[list[MetadataEntry], int]:
    """The raw metadata entries (N1) and the offset where session data starts."""
    size = len(buf)
    if count > (size - FILE_HEADER_SIZE) // 16:
        raise CorruptFileError(f"metadata count {count} cannot fit in a {size}-byte file", offset=32)
    pos = FILE_HEADER_SIZE
    entries: list[MetadataEntry] = []
    for i in range(count):
        start = pos
        parts: list[bytes] = []
        value_offset = pos
        for what in ("key", "value"):
            if what == "value":
                value_offset = pos
            if pos + 4 > size:
                raise CorruptFileError(f"metadata entry {i}: {what} length past end of file", offset=pos)
            (n,) = METADATA_LEN.unpack_from(buf, pos)
            end = pos + 4 + n
            if end > size:
                raise CorruptFileError(
                    f"metadata entry {i}: {what} of {n} bytes runs past end of file", offset=pos
                )
            parts.append(bytes(buf[pos + 4 : end]))
            pos = pad8(end)
        if pos > size:
            raise CorruptFileError(f"metadata entry {i}: padding runs past end of file", offset=start)
        entries.append(MetadataEntry(start, parts[0], parts[1], value_offset))
    return entries, pos


def decode_metadata(entries: list[MetadataEntry], *, strict: bool = True) -> dict[str, str]:
    """Keys and values as text; the first of duplicate keys wins.

    ``strict=False`` replaces invalid UTF-8 instead of raising, so that one damaged entry does
    not hide the frames (the validator reports it).
    """
    errors = "strict" if strict else "replace"
    out: dict[str, str] = {}
    for e in entries:
        try:
            key = e.key.decode("utf-8", errors)
        except UnicodeDecodeError as exc:
            raise CorruptFileError("metadata key is not valid UTF-8", offset=e.offset) from exc
        try:
            value = e.value.decode("utf-8", errors)
        except UnicodeDecodeError as exc:
            raise CorruptFileError(
                f"metadata {key!r}: value is not valid UTF-8", offset=e.value_offset
            ) from exc
        out.setdefault(key, value)
    return out


def parse_document_footer(buf: Buffer, data_start: int) -> tuple[int, list[tuple[int, int, int]]]:
    """(offset of the start marker, session entries) of the document footer (N3).

    Only the footer's own framing is checked here; the entries' targets are checked by the caller.
    """
    size = len(buf)
    if size < data_start + 24:
        raise CorruptFileError("no document footer: file too short", offset=size)
    n, end_magic = DOC_FOOTER_TAIL.unpack_from(buf, size - 16)
    if end_magic != DOC_END_MAGIC:
        raise CorruptFileError("no document footer: end marker WRDE0001 missing", offset=size - 8)
    if n > (size - data_start - 24) // 24:
        raise CorruptFileError(f"document footer: session count {n} cannot fit in the file", offset=size - 16)
    start = size - 24 - 24 * n
    if bytes(buf[start : start + 8]) != DOC_START_MAGIC:
        raise CorruptFileError("document footer: start marker WRDF0001 missing (N3)", offset=start)
    entries = [SESSION_ENTRY.unpack_from(buf, start + 8 + 24 * i) for i in range(n)]
    return start, entries


def _ticks_view(buf: Buffer, offset: int, count: int, stride: int) -> np.ndarray:
    return np.ndarray((count,), dtype="<u8", buffer=buf, offset=offset, strides=(stride,))


def count_frames(buf: Buffer, start: int, end: int, frame_size: int) -> int:
    """How many whole frames from ``start`` have strictly increasing ticks and no magic word (N11)."""
    total = (end - start) // frame_size
    done = 0
    prev: int | None = None
    while done < total:
        k = min(_SCAN_CHUNK_FRAMES, total - done)
        ticks = _ticks_view(buf, start + done * frame_size, k, frame_size)
        bad = np.isin(ticks, _MAGIC_ARRAY)
        if k > 1:
            bad[1:] |= ticks[1:] <= ticks[:-1]
        if prev is not None and int(ticks[0]) <= prev:
            bad[0] = True
        hits = np.flatnonzero(bad)
        if len(hits):
            return done + int(hits[0])
        prev = int(ticks[-1])
        done += k
    return done


def _next_session_magic(buf: Buffer, start: int, end: int) -> int:
    pos = start
    while True:
        found = buf.find(SESSION_MAGIC, pos, end)  # type: ignore[union-attr]
        if found < 0:
            return -1
        if found % 8 == 0:
            return int(found)
        pos = found + 1


def _footer_matches(buf: Buffer, footer_offset: int, count: int, last_tick: int) -> bool:
    """The session footer's two numbers are this session's frame count and last tick (N2)."""
    _, a, b = SESSION_FOOTER_HEAD.unpack_from(buf, footer_offset)
    return (a, b) in ((count, last_tick), (last_tick, count))


def scan_sessions(
    buf: Buffer, data_start: int, schema: Schema, end: int | None = None, check: FrameCheck | None = None
) -> ScanResult:
    """Find sessions sequentially from ``data_start`` (N11), skipping unreadable stretches.

    With ``check`` (a file with the frame check), a session's frames end at the first frame
    that fails it, a session footer counts only when its numbers match the frames, and the scan
    stops where verified data ends: nothing after a failing frame is trusted.
    """
    end = len(buf) if end is None else end
    fsize = schema.frame_size
    footer_len = SESSION_FOOTER_HEAD.size + schema.footer_size
    res = ScanResult(data_end=data_start)
    pos = data_start
    while pos < end:
        head = bytes(buf[pos : pos + 8])
        if head == SESSION_MAGIC and pos + 8 + schema.header_size <= end:
            frames_at = pos + 8 + schema.header_size
            n = count_frames(buf, frames_at, end, fsize)
            if check is not None:
                if _scan_checked(res, buf, pos, frames_at, n, end, schema, check):
                    pos = res.data_end
                    continue
                break
            p = frames_at + n * fsize
            footer_offset: int | None = None
            torn = 0
            if bytes(buf[p : p + 8]) == SESSION_FOOTER_MAGIC and p + footer_len <= end:
                footer_offset = p
                session_end = p + footer_len
            else:
                session_end = p
                nxt = bytes(buf[p : p + 8])
                if (
                    nxt != SESSION_MAGIC
                    and nxt != DOC_START_MAGIC
                    and p < end
                    and (end - p < fsize or nxt == SESSION_FOOTER_MAGIC)
                ):
                    torn = end - p  # a torn frame or footer at the very end
            res.sessions.append(ScannedSession(pos, frames_at, n, footer_offset, session_end, torn))
            res.data_end = session_end
            pos = session_end
            if torn:
                res.skipped.append((p, torn, TORN_REASON))
                break
            continue
        if head == SESSION_MAGIC:
            res.skipped.append((pos, end - pos, "torn session header at end of data"))
            break
        if head == DOC_START_MAGIC:
            res.skipped.append((pos, end - pos, "document footer not valid"))
            break
        if check is not None:
            res.skipped.append(
                (pos, end - pos, "bytes that are not a session; nothing after them is trusted")
            )
            break
        nxt_session = _next_session_magic(buf, pos + 8, end)
        if nxt_session < 0:
            res.skipped.append((pos, end - pos, "bytes that are not a session"))
            break
        res.skipped.append((pos, nxt_session - pos, "bytes that are not a session"))
        pos = nxt_session
    return res


def _scan_checked(
    res: ScanResult,
    buf: Buffer,
    pos: int,
    frames_at: int,
    n: int,
    end: int,
    schema: Schema,
    check: FrameCheck,
) -> bool:
    """One session of a file with the frame check; True when the scan may go on after it."""
    fsize = schema.frame_size
    footer_len = SESSION_FOOTER_HEAD.size + schema.footer_size
    failures = check.failures(buf, frames_at, n, first_only=True) if n else []
    if failures:
        f = failures[0]
        res.check_failures.append((len(res.sessions), CheckFailure(f.frame, n - f.frame, f.offset, f.reason)))
        n = f.frame
    p = frames_at + n * fsize
    last = U64.unpack_from(buf, p - fsize)[0] if n else 0
    if (
        not failures
        and bytes(buf[p : p + 8]) == SESSION_FOOTER_MAGIC
        and p + footer_len <= end
        and _footer_matches(buf, p, n, last)
    ):
        res.sessions.append(ScannedSession(pos, frames_at, n, p, p + footer_len, 0))
        res.data_end = p + footer_len
        return True
    if failures:
        why = f"frame {n} of the session fails the check ({failures[0].reason}); nothing after it is trusted"
    elif p >= end:
        why = ""
    elif end - p < fsize:
        why = TORN_REASON
    else:
        why = "no valid session footer after the last verified frame; nothing after it is trusted"
    if n == 0:
        # A session header with no verified frame and no footer: nothing proves it is this file's.
        res.skipped.append(
            (pos, end - pos, f"session header without a verified frame or footer{': ' + why if why else ''}")
        )
        return False
    res.sessions.append(ScannedSession(pos, frames_at, n, None, p, end - p))
    res.data_end = p
    if why:
        res.skipped.append((p, end - p, why))
    return False


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for reading when it is a regular file; a directory is IsADirectoryError,
    anything else (a FIFO, a device) one error, without waiting: O_NONBLOCK, as a FIFO's open
    would block until a writer came."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(mode):
            raise CorruptFileError(f"{path}: not a regular file (a pipe or a device)", offset=0)
        return open(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class Reader:
    """Read a WRTF file through a read-only memory map; a context manager.

    ``schema`` is needed for files without ``wrtf.schema`` metadata (N5) and overrides it when
    given. ``force_scan`` ignores the document footer (the validator and repair use it).

    :raises CorruptFileError: bytes contradict the format (offset in the message).
    :raises FormatError: no usable definition, unsupported version.
    """

    def __init__(self, path: str | Path, schema: Schema | None = None, *, force_scan: bool = False) -> None:
        self.path = Path(path)
        self._mm: mmap.mmap | None = None
        with open_regular(self.path) as f:
            self.size = os.fstat(f.fileno()).st_size
            if self.size == 0:
                raise CorruptFileError(f"{self.path}: empty file", offset=0)
            self._mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            self._open(schema, force_scan)
        except BaseException:
            self.close()
            raise

    def _open(self, schema: Schema | None, force_scan: bool) -> None:
        buf = self._buf
        hdr = parse_file_header(buf)
        if hdr.version != FORMAT_VERSION:
            raise FormatError(
                f"{self.path}: unsupported WRTF version {hdr.version} (expected {FORMAT_VERSION})"
            )
        if hdr.rate_hz == 0:
            raise CorruptFileError("sample rate is 0", offset=16)
        self.header = hdr
        self.rate_hz = hdr.rate_hz
        self.start_timestamp_us = hdr.start_timestamp_us
        self.metadata_entries, self.data_start = parse_metadata(buf, hdr.metadata_count)
        self.metadata = decode_metadata(self.metadata_entries, strict=False)
        self.schema_source = "external"
        if schema is None:
            text = self.metadata.get(SCHEMA_METADATA_KEY)
            if text is None:
                raise FormatError(
                    f"{self.path}: no '{SCHEMA_METADATA_KEY}' metadata (N5); give the definition (--schema)"
                )
            try:
                schema = Schema.from_yaml(text, source=f"metadata '{SCHEMA_METADATA_KEY}'")
            except SchemaError as exc:
                raise SchemaError(
                    f"{self.path}: {exc} (an external definition can be given: --schema)"
                ) from exc
            self.schema_source = "embedded"
        self.schema: Schema = schema
        #: The frame check to verify with (None: the file has none, or one this wrtfd cannot
        #: verify, then ``check_note`` says why); ``check_field`` is the field the file declares.
        self.check: FrameCheck | None
        self._failures: dict[int, list[CheckFailure]] = {}
        self.check, self.check_note = check_from_metadata(self.metadata, schema)
        self.check_field: str | None = declared_field(self.metadata, schema)
        self.footer_error: CorruptFileError | None = None
        self.doc_footer_offset: int | None = None
        self.scan: ScanResult | None = None
        sessions: list[SessionInfo] | None = None
        if not force_scan:
            try:
                sessions = self._from_document_footer()
            except CorruptFileError as exc:
                self.footer_error = exc
        self.complete = sessions is not None
        if sessions is None:
            self.scan = scan_sessions(buf, self.data_start, schema, check=self.check)
            sessions = [
                self._session_info(
                    i, s.offset, s.frames_offset, s.frame_count, s.footer_offset, s.end_offset, s.torn_bytes
                )
                for i, s in enumerate(self.scan.sessions)
            ]
        self.sessions: list[SessionInfo] = sessions

    @property
    def _buf(self) -> mmap.mmap:
        if self._mm is None:
            raise FormatError(f"{self.path}: reader is closed")
        return self._mm

    def _from_document_footer(self) -> list[SessionInfo]:
        buf = self._buf
        schema = self.schema
        doc_start, entries = parse_document_footer(buf, self.data_start)
        footer_len = SESSION_FOOTER_HEAD.size + schema.footer_size
        out: list[SessionInfo] = []
        prev_end = self.data_start
        for i, (off, foff, count) in enumerate(entries):
            where = f"document footer entry {i}"
            entry_at = doc_start + 8 + 24 * i
            frames_at = off + 8 + schema.header_size
            if off < prev_end or off % 8 or frames_at > foff or foff + footer_len > doc_start:
                raise CorruptFileError(
                    f"{where}: session at {off} / footer at {foff} outside the session data", offset=entry_at
                )
            if bytes(buf[off : off + 8]) != SESSION_MAGIC:
                raise CorruptFileError(f"{where}: no session header magic WRSE0001 at {off}", offset=off)
            if bytes(buf[foff : foff + 8]) != SESSION_FOOTER_MAGIC:
                raise CorruptFileError(f"{where}: no session footer magic WRSF0001 at {foff}", offset=foff)
            span = foff - frames_at
            if span % schema.frame_size:
                raise CorruptFileError(
                    f"{where}: {span} bytes of frames is not a multiple of the "
                    f"{schema.frame_size}-byte frame",
                    offset=frames_at,
                )
            n = span // schema.frame_size
            if n != count:
                raise CorruptFileError(
                    f"{where}: frame count {count}, but the session holds {n} frames", offset=entry_at
                )
            out.append(self._session_info(i, off, frames_at, n, foff, foff + footer_len, 0))
            prev_end = foff + footer_len
        if prev_end != doc_start:
            raise CorruptFileError(
                f"{doc_start - prev_end} bytes between the last session and the document footer",
                offset=prev_end,
            )
        self.doc_footer_offset = doc_start
        return out

    def _session_info(
        self, i: int, off: int, frames_at: int, n: int, foff: int | None, end: int, torn: int
    ) -> SessionInfo:
        buf = self._buf
        schema = self.schema
        header = np.frombuffer(buf, dtype=schema.header_dtype, count=1, offset=off + 8).copy()[0]
        first = last = None
        if n:
            first = U64.unpack_from(buf, frames_at)[0]
            last = U64.unpack_from(buf, frames_at + (n - 1) * schema.frame_size)[0]
        order: str | None = None
        footer = None
        fcount = flast = None
        if foff is not None:
            _, a, b = SESSION_FOOTER_HEAD.unpack_from(buf, foff)
            t = last if last is not None else 0
            if a == n and b == t:
                order, fcount, flast = "spec", a, b
            elif a == t and b == n:
                order, fcount, flast = "reference", b, a
            else:
                fcount, flast = a, b
            if schema.footer_dtype is not None:
                footer = np.frombuffer(
                    buf, dtype=schema.footer_dtype, count=1, offset=foff + SESSION_FOOTER_HEAD.size
                ).copy()[0]
        dropped = 0 if first is None or last is None else last - first + 1 - n
        base = self.start_timestamp_us
        if schema.has_time_base:
            v = int(header["start_timestamp"])
            if v > 0:
                base = v
        return SessionInfo(
            index=i,
            offset=off,
            frames_offset=frames_at,
            footer_offset=foff,
            end_offset=end,
            frame_count=n,
            first_tick=first,
            last_tick=last,
            dropped_ticks=dropped,
            footer_order=order,
            header=header,
            footer=footer,
            time_base_us=base,
            footer_frame_count=fcount,
            footer_last_tick=flast,
            torn_bytes=torn,
        )

    # -- data access ----------------------------------------------------------------------------

    def _session(self, i: int) -> SessionInfo:
        if not -len(self.sessions) <= i < len(self.sessions):
            raise FormatError(f"{self.path}: no session {i} (the file has {len(self.sessions)})")
        return self.sessions[i]

    def frames(self, i: int) -> np.ndarray:
        """The frames of session ``i``: a zero-copy, read-only view of ``schema.frame_dtype``."""
        s = self._session(i)
        if s.frame_count == 0:
            return np.empty(0, dtype=self.schema.frame_dtype)
        return np.ndarray(
            (s.frame_count,), dtype=self.schema.frame_dtype, buffer=self._buf, offset=s.frames_offset
        )

    def ticks(self, i: int) -> np.ndarray:
        return self.frames(i)["tick"]

    def frame_times_us(self, i: int) -> np.ndarray:
        """Per-frame time (N9): session time base + tick * 1e6 / rate, rounded to whole microseconds."""
        s = self._session(i)
        return ticks_to_time_us(self.frames(i)["tick"], s.time_base_us, self.rate_hz)

    def frames_between(self, i: int, start_us: int, end_us: int) -> np.ndarray:
        """The frames of session ``i`` whose time (N9) is in ``[start_us, end_us)``: a view.

        Times are microseconds on the file's clock (:meth:`frame_times_us`), e.g. a lap's start
        and end from the lap channels; an empty range gives an empty array.
        """
        times = self.frame_times_us(i)
        lo, hi = np.searchsorted(times, [start_us, end_us], side="left")
        return self.frames(i)[lo : max(lo, hi)]

    def to_dataframe(self, session: int | None = None) -> pd.DataFrame:
        """Session ``session`` (every session when None) as a pandas DataFrame, one row per frame.

        The columns are those of ``wrtfd export`` (:func:`wrtfd.format.columns.iter_columns`).

        :raises MissingDependencyError: pandas is not installed.
        """
        from wrtfd.format.columns import to_dataframe

        return to_dataframe(self, session)

    def iter_frames(self, i: int, chunk: int = 65536) -> Iterator[np.ndarray]:
        """Frames of session ``i`` in chunks (views)."""
        arr = self.frames(i)
        for start in range(0, len(arr), chunk):
            yield arr[start : start + chunk]

    # -- the frame check ----------------------------------------------------------------------------

    @property
    def data_leaves(self) -> list[Leaf]:
        """The frame's channels without the check field: what exports, dumps and plots show."""
        return data_leaves(self.schema, self.check_field)

    def check_failures(self, i: int, *, first_only: bool = False) -> list[CheckFailure]:
        """The frames of session ``i`` that fail the frame check (empty without a check)."""
        s = self._session(i)
        if self.check is None or s.frame_count == 0:
            return []
        if first_only:
            return self.check.failures(self._buf, s.frames_offset, s.frame_count, first_only=True)
        # One CRC pass per session: an export verifies, then its report asks again.
        found = self._failures.get(s.index)
        if found is None:
            found = self._failures[s.index] = self.check.failures(self._buf, s.frames_offset, s.frame_count)
        return list(found)

    def verify_session(self, i: int) -> CheckFailure | None:
        """The first frame of session ``i`` that fails the frame check (frame index, byte offset,
        reason), or None when every frame passes or the file has no check to verify."""
        failures = self.check_failures(i, first_only=True)
        return failures[0] if failures else None

    def verified_frames(self, i: int) -> tuple[np.ndarray, list[CheckFailure]]:
        """The frames of session ``i`` that pass the frame check, and the ones that do not.

        A zero-copy view when all pass (or the file has no check); a copy without the failing
        frames otherwise.
        """
        arr = self.frames(i)
        failures = self.check_failures(i)
        if not failures:
            return arr, failures
        keep = np.ones(len(arr), dtype=bool)
        for f in failures:
            keep[f.frame : f.frame + f.frames] = False
        return take_records(arr, keep), failures

    @property
    def total_frames(self) -> int:
        return sum(s.frame_count for s in self.sessions)

    def close(self) -> None:
        # Not mm.close(): numpy keeps no buffer export of the map behind a frame array (only a
        # reference to it, as the array's base), so closing it would unmap memory that arrays
        # handed out still read (a crash, not an error). Dropping our reference unmaps it now
        # when no array is left, else when the last one goes.
        self._mm = None

    def __enter__(self) -> Reader:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "complete" if self.complete else "incomplete"
        return f"<Reader {self.path} {state} sessions={len(self.sessions)}>"


def check_dropped(reader: Reader) -> list[tuple[int, CheckFailure]]:
    """What opening ``reader`` left out because of the frame check (a scanned file): (session
    index, failure). Dump and export report these with the failing frames they skip."""
    return [] if reader.scan is None else list(reader.scan.check_failures)


def describe_dropped(dropped: list[tuple[int, CheckFailure]]) -> str:
    """One line about frames left out because they fail the frame check."""
    frames = sum(f.frames for _, f in dropped)
    i, first = dropped[0]
    more = f" (and {len(dropped) - 1} more stretch(es))" if len(dropped) > 1 else ""
    return (
        f"{frames} frame(s) that fail the frame check were left out; first: session {i} frame "
        f"{first.frame} at byte {first.offset}: {first.reason}{more}"
    )
