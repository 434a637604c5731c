"""Streaming, append-only WRTF writer.

Durability is the point of the design (power can be cut at any moment):

* the file only grows by appending (file header + metadata, session header, frames, session
  footer, document footer), so the file on disk is always a valid prefix that the scanning reader
  (N11) can read and ``repair`` can finalize;
* records are buffered in memory and written by :meth:`Writer.flush` (automatically once the buffer
  holds ``buffer_bytes``), which always leaves the file ending on a record boundary;
  :meth:`Writer.fsync` also forces them to the disk, so a caller bounds what a crash loses by how
  often it calls them. A large batch of frames goes to ``write()`` directly, up to the last page
  boundary it reaches (page-aligned writes cost the kernel less); the rest, less than a page, is
  buffered, so until the next write the file can end inside a frame (a torn last frame, which the
  reader skips and ``repair`` drops);
* a failed write (``ENOSPC``, ``EIO``) truncates the file back to the end of the last record that
  was completely written before, rolls the writer's state back to that point and re-raises the
  ``OSError``: nothing already on disk becomes unreadable.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from wrtfd.errors import FormatError
from wrtfd.format.schema import EnumDef, FieldDef, Schema, StructDef, covered_bytes
from wrtfd.format.spec import (
    DOC_END_MAGIC,
    DOC_FOOTER_TAIL,
    DOC_START_MAGIC,
    FILE_HEADER,
    FILE_MAGIC,
    FORMAT_VERSION,
    METADATA_LEN,
    SCHEMA_METADATA_KEY,
    SESSION_ENTRY,
    SESSION_FOOTER_HEAD,
    SESSION_FOOTER_MAGIC,
    SESSION_MAGIC,
    U64,
    pad8,
)

__all__ = [
    "SessionEntry",
    "Writer",
    "encode_document_footer",
    "encode_file_header",
    "encode_session_footer",
    "fill_record",
]

_U64_MAX = 0xFFFFFFFFFFFFFFFF
#: Batches at least this big go straight to write() instead of through the buffer (no copy, up
#: to a page boundary; see the module docstring).
_DIRECT_WRITE_BYTES = 64 * 1024
#: Up to this many padding runs per frame, write_frames checks them slice by slice.
_PAD_RUNS_BY_SLICE = 4
#: Direct writes end on a multiple of this (the page size): the kernel copies whole pages faster.
_ALIGN_BYTES = 4096


def _false_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) ranges where ``mask`` is False (the padding bytes of a record)."""
    runs: list[tuple[int, int]] = []
    start: int | None = None
    for i, covered in enumerate(mask.tolist()):
        if not covered and start is None:
            start = i
        elif covered and start is not None:
            runs.append((start, i))
            start = None
    if start is not None:
        runs.append((start, len(mask)))
    return runs


@dataclass(frozen=True, slots=True)
class SessionEntry:
    """One document footer entry (offsets from the start of the file)."""

    offset: int
    footer_offset: int
    frame_count: int


def _pad(n: int) -> bytes:
    return b"\0" * (pad8(n) - n)


def encode_file_header(rate_hz: int, start_timestamp_us: int, metadata: Sequence[tuple[str, str]]) -> bytes:
    """File header and metadata entries (N1: each key and value padded to the next 8-byte offset)."""
    parts = [FILE_HEADER.pack(FILE_MAGIC, FORMAT_VERSION, rate_hz, start_timestamp_us, len(metadata), 0)]
    seen: set[str] = set()
    for key, value in metadata:
        if not isinstance(key, str) or not key:
            raise FormatError(f"metadata key {key!r}: keys must be non-empty strings (N12)")
        if not isinstance(value, str):
            raise FormatError(f"metadata {key!r}: values must be strings, got {type(value).__name__}")
        if key in seen:
            raise FormatError(f"metadata key {key!r} given twice (N12)")
        seen.add(key)
        for text in (key, value):
            try:
                raw = text.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise FormatError(f"metadata {key!r}: not encodable as UTF-8 ({exc.reason})") from exc
            if len(raw) > 0xFFFFFFFF:
                raise FormatError(f"metadata {key!r}: longer than 4 GiB")
            parts.append(METADATA_LEN.pack(len(raw)) + raw + _pad(4 + len(raw)))
    return b"".join(parts)


def encode_session_footer(frame_count: int, last_tick: int, footer: bytes) -> bytes:
    """``WRSF0001``, frame count, last tick (spec order, N2), footer struct (N8)."""
    return SESSION_FOOTER_HEAD.pack(SESSION_FOOTER_MAGIC, frame_count, last_tick) + footer


def encode_document_footer(entries: Sequence[SessionEntry]) -> bytes:
    """Document footer (N3): start marker, entries, session count, end marker."""
    body = b"".join(SESSION_ENTRY.pack(e.offset, e.footer_offset, e.frame_count) for e in entries)
    return DOC_START_MAGIC + body + DOC_FOOTER_TAIL.pack(len(entries), DOC_END_MAGIC)


# -- filling records from Python values ------------------------------------------------------------


def _scalar(schema: Schema, f: FieldDef, value: Any, path: str) -> Any:
    t = schema.types.get(f.type)
    if isinstance(t, EnumDef) and isinstance(value, str):
        num = t.value_of(value)
        if num is None:
            raise FormatError(f"{path}: '{value}' is not a value of enum {t.name}")
        return num
    if isinstance(value, str):
        if f.type in ("float32", "float64") and value in ("nan", "inf", "-inf"):
            return float(value)
        raise FormatError(f"{path}: expected a number for {f.type}, got string {value!r}")
    return value


def _assign(schema: Schema, target: np.ndarray, f: FieldDef, value: Any, path: str) -> None:
    """Write ``value`` into ``target[f.name]`` (``target`` is a 0-d structured array)."""
    t = schema.types.get(f.type)
    if f.is_text and isinstance(value, str):
        # Longer text is cut at a UTF-8 character boundary: a long name from a game must not
        # stop a recording.
        raw = value.encode("utf-8", errors="replace")[: f.dimensions]
        raw = raw.decode("utf-8", errors="ignore").encode("utf-8")
        buf = np.zeros(f.dimensions, dtype=np.uint8)
        buf[: len(raw)] = np.frombuffer(raw, dtype=np.uint8)
        target[f.name] = buf
        return
    if isinstance(t, StructDef):
        sub = target[f.name]
        if f.dimensions == 0:
            fill_record(schema, t.fields, sub, value, path)
        else:
            items = _sequence(value, f.dimensions, path)
            for i, item in enumerate(items):
                fill_record(schema, t.fields, sub[i], item, f"{path}[{i}]")
        return
    try:
        if f.dimensions == 0:
            target[f.name] = _scalar(schema, f, value, path)
        else:
            items = _sequence(value, f.dimensions, path)
            target[f.name] = [_scalar(schema, f, v, f"{path}[{i}]") for i, v in enumerate(items)]
    except (TypeError, ValueError, OverflowError) as exc:
        raise FormatError(f"{path}: {value!r} does not fit {f.type}: {exc}") from exc


def _sequence(value: Any, n: int, path: str) -> Sequence[Any]:
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__len__"):
        raise FormatError(f"{path}: expected a sequence of {n} items, got {type(value).__name__}")
    if len(value) != n:
        raise FormatError(f"{path}: expected {n} items, got {len(value)}")
    return value


def fill_record(
    schema: Schema, fields: Sequence[FieldDef], target: np.ndarray, values: Any, path: str = ""
) -> None:
    """Fill a 0-d structured array from a mapping (nested mappings for structs, sequences for
    arrays, enum names or numbers, strings for ``text`` fields). Missing fields are left as they are.
    """
    if not isinstance(values, Mapping):
        raise FormatError(
            f"{path or 'record'}: expected a mapping of field values, got {type(values).__name__}"
        )
    by_name = {f.name: f for f in fields}
    for key, value in values.items():
        f = by_name.get(key)
        sub_path = f"{path}.{key}" if path else str(key)
        if f is None:
            raise FormatError(f"{sub_path}: no such field")
        _assign(schema, target, f, value, sub_path)


class Writer:
    """Append-only writer of one WRTF file; a context manager.

    ``exist_ok=False`` refuses to overwrite an existing file. ``buffer_bytes`` bounds how much is
    kept in memory before it is written out; ``fsync_on_close`` makes :meth:`close` durable.
    Ticks must strictly increase within a session (:class:`FormatError` otherwise).
    """

    def __init__(
        self,
        path: str | Path,
        schema: Schema,
        *,
        rate_hz: int,
        start_timestamp_us: int | None = None,
        metadata: Mapping[str, str] | None = None,
        exist_ok: bool = False,
        embed_schema: bool = True,
        buffer_bytes: int = 1 << 20,
        fsync_on_close: bool = True,
    ) -> None:
        if not isinstance(rate_hz, int) or isinstance(rate_hz, bool) or not 0 < rate_hz <= _U64_MAX:
            raise FormatError(f"rate_hz must be a positive integer, got {rate_hz!r}")
        if start_timestamp_us is None:
            start_timestamp_us = time.time_ns() // 1000
        if not isinstance(start_timestamp_us, int) or not 0 < start_timestamp_us <= _U64_MAX:
            raise FormatError(f"start_timestamp_us must be > 0 (spec 9), got {start_timestamp_us}")
        entries: list[tuple[str, str]] = []
        if embed_schema:
            entries.append((SCHEMA_METADATA_KEY, schema.yaml_text))
        for k, v in (metadata or {}).items():
            if k == SCHEMA_METADATA_KEY and embed_schema:
                raise FormatError(f"metadata key {k!r} is written by the writer from the schema (N5)")
            entries.append((k, v))
        head = encode_file_header(rate_hz, start_timestamp_us, entries)

        self.path = Path(path)
        self.schema = schema
        self.rate_hz = rate_hz
        self.start_timestamp_us = start_timestamp_us
        self._buffer_limit = max(0, buffer_bytes)
        self._fsync_on_close = fsync_on_close
        flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if exist_ok else os.O_EXCL)
        self._fd: int | None = os.open(self.path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
        self._buf = bytearray()
        self._flushed = 0  # file size after the last successful write
        # The end of the last complete record on disk (what a failed write truncates back to):
        # _flushed, except while a direct write has left the end of a frame in the buffer.
        self._boundary = 0
        self._entries: list[SessionEntry] = []
        self._session_offset: int | None = None
        self.frames_in_session = 0
        self.first_tick: int | None = None
        self.last_tick: int | None = None
        self._closed = False
        self._saved = self._state()
        self._header_scratch = np.zeros((), dtype=schema.header_dtype)
        self._frame_scratch = np.zeros((), dtype=schema.frame_dtype)
        covered = covered_bytes(schema.frame_dtype)
        self._pad_cols = np.flatnonzero(~covered)
        self._pad_ranges = _false_runs(covered)
        self._dir_synced = False
        # The header goes out at once: from now on the file is a readable (if empty) WRTF file.
        self._buf += head
        try:
            self.flush()
        except OSError:
            fd, self._fd = self._fd, None
            self._closed = True
            os.close(fd)
            self.path.unlink(missing_ok=True)
            raise

    # -- state kept consistent with what is on disk ---------------------------------------------

    def _state(self) -> tuple[Any, ...]:
        return (
            len(self._entries),
            self._session_offset,
            self.frames_in_session,
            self.first_tick,
            self.last_tick,
        )

    def _restore(self, st: tuple[Any, ...]) -> None:
        n, self._session_offset, self.frames_in_session, self.first_tick, self.last_tick = st
        del self._entries[n:]

    @property
    def bytes_written(self) -> int:
        """Logical file size (including bytes still buffered)."""
        return self._flushed + len(self._buf)

    @property
    def session_count(self) -> int:
        """Sessions begun so far (the open one included)."""
        return len(self._entries) + (1 if self._session_offset is not None else 0)

    @property
    def in_session(self) -> bool:
        return self._session_offset is not None

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> int:
        if self._fd is None or self._closed:
            raise FormatError(f"{self.path}: writer is closed")
        return self._fd

    def _append(self, data: bytes | bytearray | memoryview) -> None:
        self._buf += data
        if len(self._buf) >= self._buffer_limit:
            self.flush()

    def _write_all(
        self, fd: int, parts: list[memoryview], boundary: tuple[int, tuple[Any, ...]] | None = None
    ) -> None:
        """Write ``parts`` at ``_flushed``; on failure truncate back, roll back, re-raise.

        ``boundary``: (file offset, writer state) of the last complete record when ``parts`` end
        inside one (the rest stays buffered); by default they end on a record boundary.
        """
        total = sum(len(p) for p in parts)
        done = 0
        try:
            while done < total:
                skip = done
                todo: list[memoryview] = []
                for p in parts:
                    if skip >= len(p):
                        skip -= len(p)
                        continue
                    todo.append(p[skip:])
                    skip = 0
                n = os.writev(fd, todo) if len(todo) > 1 else os.write(fd, todo[0])
                if n <= 0:  # pragma: no cover - a regular file never returns 0 for a non-empty write
                    raise OSError("write() made no progress")
                done += n
        except OSError:
            self._buf.clear()
            self._restore(self._saved)
            self._flushed = self._boundary
            try:
                os.ftruncate(fd, self._boundary)
                os.lseek(fd, self._boundary, os.SEEK_SET)
            except OSError:
                pass
            raise
        self._flushed += done
        if boundary is None:
            self._boundary, self._saved = self._flushed, self._state()
        else:
            self._boundary, self._saved = boundary

    def flush(self) -> None:
        """Hand buffered records to the OS (they survive a crash of this process, not a power cut)."""
        fd = self._check_open()
        if self._buf:
            data = self._buf
            self._buf = bytearray()
            self._write_all(fd, [memoryview(data)])
        else:
            self._boundary, self._saved = self._flushed, self._state()

    def fsync(self) -> None:
        """Flush and force everything written so far onto the disk (survives a power cut)."""
        self.flush()
        os.fsync(self._check_open())
        self._sync_directory()

    def _sync_directory(self) -> None:
        """Once per file: make its directory entry durable too (a new file can vanish otherwise)."""
        if self._dir_synced:
            return
        try:
            dfd = os.open(self.path.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except OSError:
            return
        try:
            os.fsync(dfd)
        except OSError:
            pass  # some filesystems cannot fsync a directory; the file data is synced already
        finally:
            os.close(dfd)
        self._dir_synced = True

    # -- sessions and frames --------------------------------------------------------------------

    def _blob(self, dtype: np.dtype[Any], scratch: np.ndarray, fields: Any, value: Any, what: str) -> bytes:
        if value is None:
            return bytes(dtype.itemsize)
        if isinstance(value, np.void) or (isinstance(value, np.ndarray) and value.shape == ()):
            if value.dtype != dtype:
                raise FormatError(f"{what}: dtype {value.dtype} is not the schema's {dtype}")
            scratch[...] = 0
            scratch[...] = value  # field by field: padding stays zero
            return scratch.tobytes()
        scratch[...] = 0
        fill_record(self.schema, fields, scratch, value, what)
        return scratch.tobytes()

    def begin_session(self, header: Mapping[str, Any] | np.void | np.ndarray | None = None) -> None:
        """Start a session (ends the open one first, with an empty footer)."""
        self._check_open()
        if self._session_offset is not None:
            self.end_session()
        blob = self._blob(
            self.schema.header_dtype,
            self._header_scratch,
            self.schema.header_fields,
            header,
            "session header",
        )
        offset = self.bytes_written
        self._session_offset = offset
        self.frames_in_session = 0
        self.first_tick = None
        self.last_tick = None
        self._append(SESSION_MAGIC + blob)

    def _require_session(self) -> None:
        self._check_open()
        if self._session_offset is None:
            raise FormatError(f"{self.path}: no open session (call begin_session first)")

    def write_frame(self, tick: int, values: Mapping[str, Any] | np.void | np.ndarray | None = None) -> None:
        """Append one frame; ``values`` as for :func:`fill_record` or a record of ``frame_dtype``."""
        self._require_session()
        tick = int(tick)
        if not 0 <= tick <= _U64_MAX:
            raise FormatError(f"tick {tick} out of range")
        if self.last_tick is not None and tick <= self.last_tick:
            raise FormatError(f"tick {tick} after {self.last_tick}: ticks must strictly increase (N10)")
        if isinstance(values, np.void) or (isinstance(values, np.ndarray) and values.shape == ()):
            if values.dtype != self.schema.frame_dtype:
                raise FormatError(f"frame: dtype {values.dtype} is not the schema's frame dtype")
            # Bytes, then padding cleared: a field-by-field copy is slow for wide frames.
            rec = bytearray(values.tobytes())
            for start, stop in self._pad_ranges:
                rec[start:stop] = bytes(stop - start)
            rec[0:8] = U64.pack(tick)
            self._count(tick, tick, 1)
            self._append(rec)
            return
        scratch = self._frame_scratch
        scratch[...] = 0
        if values is not None:
            fill_record(self.schema, self.schema.frame_fields, scratch, values, "frame")
        scratch["tick"] = tick
        self._count(tick, tick, 1)
        self._append(scratch.tobytes())

    def _count(self, first: int, last: int, n: int) -> None:
        if self.first_tick is None:
            self.first_tick = first
        self.last_tick = last
        self.frames_in_session += n

    def _has_garbage_padding(self, rows: np.ndarray) -> bool:
        """Any non-zero padding byte in ``rows`` (frames as a 2-d uint8 array)?"""
        runs = self._pad_ranges
        if not runs:
            return False
        if len(runs) <= _PAD_RUNS_BY_SLICE:  # a few runs: views, no copy of the batch
            return any(rows[:, a:b].any() for a, b in runs)
        return bool(rows[:, self._pad_cols].any())  # many runs: one gather beats a Python loop

    def write_frames(self, frames: np.ndarray) -> None:
        """Append a batch of frames (``schema.frame_dtype``, ticks in ``"tick"``): the fast path."""
        self._require_session()
        if not isinstance(frames, np.ndarray) or frames.dtype != self.schema.frame_dtype:
            got = getattr(frames, "dtype", type(frames).__name__)
            raise FormatError(f"write_frames: expected an array of the schema's frame dtype, got {got}")
        if frames.ndim != 1:
            raise FormatError(f"write_frames: expected a 1-d array, got shape {frames.shape}")
        if len(frames) == 0:
            return
        ticks = frames["tick"]
        # The ndarray methods, not np.all(): this runs once per batch on the hot path.
        if len(ticks) > 1 and not np.greater(ticks[1:], ticks[:-1]).all():
            bad = int(np.flatnonzero(ticks[1:] <= ticks[:-1])[0]) + 1
            raise FormatError(
                f"write_frames: tick {int(ticks[bad])} at index {bad} after {int(ticks[bad - 1])}: "
                "ticks must strictly increase (N10)"
            )
        if self.last_tick is not None and int(ticks[0]) <= self.last_tick:
            raise FormatError(
                f"tick {int(ticks[0])} after {self.last_tick}: ticks must strictly increase (N10)"
            )
        rows: np.ndarray = np.ascontiguousarray(frames).view(np.uint8).reshape(len(frames), -1)
        if self._has_garbage_padding(rows):
            # Padding must be zero (spec 8.7); arrays from np.empty or np.array(rows) have garbage.
            rows = rows.copy()
            rows[:, self._pad_cols] = 0
        data = memoryview(rows.data).cast("B")
        if data.nbytes < min(self._buffer_limit, _DIRECT_WRITE_BYTES) and (
            len(self._buf) + data.nbytes < self._buffer_limit
        ):
            self._count(int(ticks[0]), int(ticks[-1]), len(frames))
            self._buf += data
            return
        # Large batch: write the buffer and the batch out together, without copying the batch,
        # up to a page boundary when buffering is on; the rest (less than a page) stays buffered.
        fd = self._check_open()
        n_entries, session_offset, n_frames, first, last = self._state()
        self._count(int(ticks[0]), int(ticks[-1]), len(frames))
        pending = self._buf
        self._buf = bytearray()
        start = self._flushed + len(pending)  # file offset of the batch
        head = len(data)
        if self._buffer_limit >= _ALIGN_BYTES:
            head -= (start + len(data)) % _ALIGN_BYTES
        if head == len(data) or head <= 0:
            self._write_all(fd, [memoryview(pending), data] if pending else [data])
            return
        whole = head // self.schema.frame_size  # frames of this batch complete on disk
        if whole:
            first = int(ticks[0]) if first is None else first
            last = int(ticks[whole - 1])
        boundary = (
            start + whole * self.schema.frame_size,
            (n_entries, session_offset, n_frames + whole, first, last),
        )
        self._write_all(fd, [memoryview(pending), data[:head]] if pending else [data[:head]], boundary)
        self._buf = bytearray(data[head:])

    def end_session(self, footer: Mapping[str, Any] | np.void | np.ndarray | None = None) -> None:
        """Write the session footer (frame count and last tick filled in, N2 spec order)."""
        self._require_session()
        if footer is not None and self.schema.footer_dtype is None:
            raise FormatError("session footer given, but the definition has no session.footer")
        blob = (
            b""
            if self.schema.footer_dtype is None
            else self._blob(
                self.schema.footer_dtype,
                np.zeros((), dtype=self.schema.footer_dtype),
                self.schema.footer_fields,
                footer,
                "session footer",
            )
        )
        footer_offset = self.bytes_written
        session_offset = self._session_offset or 0
        record = encode_session_footer(self.frames_in_session, self.last_tick or 0, blob)
        self._entries.append(SessionEntry(session_offset, footer_offset, self.frames_in_session))
        self._session_offset = None
        self._append(record)

    # -- lifecycle ------------------------------------------------------------------------------

    def close(self) -> None:
        """End an open session, write the document footer, flush (and fsync); idempotent.

        If writing fails the file is left ending at its last complete record (still readable and
        repairable) and the ``OSError`` is raised; the descriptor is closed either way.
        """
        if self._closed or self._fd is None:
            return
        fd = self._fd
        try:
            if self._session_offset is not None:
                self.end_session()
            self._append(encode_document_footer(self._entries))
            self.flush()
            if self._fsync_on_close:
                os.fsync(fd)
                self._sync_directory()
        finally:
            self._closed = True
            self._fd = None
            os.close(fd)

    def abort(self) -> None:
        """Close without writing footers (what a crash leaves; tests and emergency paths)."""
        if self._fd is not None and not self._closed:
            fd = self._fd
            try:
                self.flush()
            finally:
                self._closed = True
                self._fd = None
                os.close(fd)

    def __enter__(self) -> Writer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Writer {self.path} sessions={self.session_count} bytes={self.bytes_written}>"
