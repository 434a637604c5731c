"""Streaming, append-only WRTF writer.

Durability is the point of the design (power can be cut at any moment):

* the file only grows by appending (file header + metadata, session header, frames, session
  footer, document footer), so the file on disk is always a valid prefix that the scanning reader
  (N11) can read and ``repair`` can finalize;
* records are buffered in memory and written by :meth:`Writer.flush` (automatically once the buffer
  holds ``buffer_bytes``), which always leaves the file ending on a record boundary;
  :meth:`Writer.fsync` also forces them to the disk, so a caller bounds what a crash loses by how
  often it calls them. A large batch of frames goes to ``write()`` directly (no copy), up to a
  page boundary (page-aligned writes cost the kernel less), the rest buffered: without the
  check exactly at the last page boundary, so until the next write the file can end inside a
  frame (a torn last frame, which the reader skips and ``repair`` drops); with it only at a page
  boundary between two frames;
* with ``check=True`` every frame carries the frame check (:mod:`wrtfd.format.check`): each
  ``write_frames`` batch is one or more commit groups, each ``write_frame`` a group of one, and
  no group is split between two ``write()`` calls, so the file always ends on a whole group
  once flushed;
* ``sync_on_create=True`` makes the file header, the metadata and the directory entry durable
  before the file appears under its name (written to a hidden temporary name, fsynced, renamed,
  directory fsynced): a power cut leaves no file or a readable one;
* a failed write (``ENOSPC``, ``EIO``) truncates the file back to the end of the last record that
  was completely written before, rolls the writer's state back to that point and re-raises the
  ``OSError``: nothing already on disk becomes unreadable.
"""

from __future__ import annotations

import errno
import math
import os
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from wrtfd.errors import FormatError
from wrtfd.format.check import (
    CHECK_ALGORITHM,
    CHECK_FIELD,
    CHECK_FIELD_KEY,
    CHECK_KEY,
    CHECK_KEYS,
    CHECK_SALT_KEY,
    FrameCheck,
    new_salt,
    parse_salt,
    with_check,
)
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
    "copied_metadata",
    "encode_document_footer",
    "encode_file_header",
    "encode_session_footer",
    "fill_record",
]

_U64_MAX = 0xFFFFFFFFFFFFFFFF
_BYTE = np.dtype(np.uint8)
_WORD = np.dtype("<u8")
#: Batches at least this big go straight to write() instead of through the buffer (no copy).
_DIRECT_WRITE_BYTES = 64 * 1024
#: Frames copied into the file's layout go to a buffer kept between batches up to this size.
_KEEP_COPY_BYTES = 4 << 20
#: Up to this many padding runs per frame, write_frames checks them slice by slice.
_PAD_RUNS_BY_SLICE = 4
#: Direct writes end on a multiple of this (the page size) where a frame boundary falls there.
_ALIGN_BYTES = 4096
#: ... unless the rest of the batch left in the buffer would be larger than this.
_MAX_CUT_REST_BYTES = 64 * 1024


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


def _page_cut(start: int, count: int, frame_size: int) -> int:
    """How many of ``count`` frames at file offset ``start`` to write now: up to the last page
    boundary that falls between two frames (all of them when none does, or when the rest would
    be large). Frame boundaries ``start + c * frame_size`` meet page boundaries every
    ``lcm(frame_size, page) / frame_size`` frames, if ever (N7: both are multiples of 8)."""
    g = math.gcd(frame_size, _ALIGN_BYTES)
    if start % g:
        return count
    period = _ALIGN_BYTES // g  # frames between two page-aligned frame boundaries
    if period * frame_size > _MAX_CUT_REST_BYTES:
        return count
    first = (-(start // g) * pow(frame_size // g, -1, period)) % period  # c * fs = -start (mod page)
    if first > count:
        return count
    cut = first + (count - first) // period * period
    return cut if cut > 0 else count


@dataclass(frozen=True, slots=True)
class SessionEntry:
    """One document footer entry (offsets from the start of the file)."""

    offset: int
    footer_offset: int
    frame_count: int


def _pad(n: int) -> bytes:
    return b"\0" * (pad8(n) - n)


def _pick_salt(check_salt: int | None, given: Mapping[str, str]) -> int:
    """The salt of a new file: ``check_salt``, or the ``wrtfd.check.salt`` given as metadata (to
    reproduce a file), or 64 new random bits; the other given check keys must match the writer's."""
    for key, want in ((CHECK_KEY, CHECK_ALGORITHM), (CHECK_FIELD_KEY, CHECK_FIELD)):
        if key in given and given[key] != want:
            raise FormatError(f"metadata {key!r}: this writer writes {want!r}, got {given[key]!r}")
    meta_salt = None
    if CHECK_SALT_KEY in given:
        meta_salt = parse_salt(given[CHECK_SALT_KEY])
        if meta_salt is None:
            raise FormatError(
                f"metadata {CHECK_SALT_KEY!r}: 16 lowercase hex digits, got {given[CHECK_SALT_KEY]!r}"
            )
    if check_salt is None:
        return new_salt() if meta_salt is None else meta_salt
    if not isinstance(check_salt, int) or not 0 <= check_salt <= _U64_MAX:
        raise FormatError(f"check_salt must be an unsigned 64-bit integer, got {check_salt!r}")
    if meta_salt is not None and meta_salt != check_salt:
        raise FormatError(f"metadata {CHECK_SALT_KEY!r} and check_salt disagree")
    return check_salt


def copied_metadata(metadata: Mapping[str, str]) -> dict[str, str]:
    """A file's metadata as a :class:`Writer` making a copy of it takes it: without the keys a
    writer sets itself (the embedded schema; the frame check's, which a new file salts anew)."""
    return {k: v for k, v in metadata.items() if k != SCHEMA_METADATA_KEY and k not in CHECK_KEYS}


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

    ``check=True`` adds the frame check (:mod:`wrtfd.format.check`): :attr:`schema` is then the
    given one with ``wrtfd_check`` appended, and frames are given either in its ``frame_dtype``
    (``write_frames`` fills their ``wrtfd_check`` column in place, unless the array is read-only)
    or in the given schema's (copied into the file layout). ``check_salt`` (or a
    ``wrtfd.check.salt`` metadata value) reproduces a file's salt; by default each file draws
    64 random bits. ``sync_on_create`` makes the new file durable under its name at once (see
    the module docstring); the recorder uses it.
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
        check: bool = False,
        check_salt: int | None = None,
        sync_on_create: bool = False,
    ) -> None:
        if not isinstance(rate_hz, int) or isinstance(rate_hz, bool) or not 0 < rate_hz <= _U64_MAX:
            raise FormatError(f"rate_hz must be a positive integer, got {rate_hz!r}")
        if start_timestamp_us is None:
            start_timestamp_us = time.time_ns() // 1000
        if not isinstance(start_timestamp_us, int) or not 0 < start_timestamp_us <= _U64_MAX:
            raise FormatError(f"start_timestamp_us must be > 0 (spec 9), got {start_timestamp_us}")
        user_meta = dict(metadata or {})
        given = {k: user_meta.pop(k) for k in CHECK_KEYS if k in user_meta}
        self.check: FrameCheck | None = None
        file_schema = schema
        if check:
            file_schema = with_check(schema)
            self.check = FrameCheck.for_schema(file_schema, _pick_salt(check_salt, given))
        elif given or check_salt is not None:
            raise FormatError(f"{sorted(given or [CHECK_SALT_KEY])[0]}: the frame check needs check=True")
        entries: list[tuple[str, str]] = []
        if embed_schema:
            entries.append((SCHEMA_METADATA_KEY, file_schema.yaml_text))
        if self.check is not None:
            entries.extend(self.check.metadata())
        for k, v in user_meta.items():
            if k == SCHEMA_METADATA_KEY and embed_schema:
                raise FormatError(f"metadata key {k!r} is written by the writer from the schema (N5)")
            entries.append((k, v))
        head = encode_file_header(rate_hz, start_timestamp_us, entries)

        self.path = Path(path)
        self.schema = file_schema
        self.rate_hz = rate_hz
        self.start_timestamp_us = start_timestamp_us
        self._buffer_limit = max(0, buffer_bytes)
        self._fsync_on_close = fsync_on_close
        self._dtype = file_schema.frame_dtype
        # The layout frames may also come in (check on): the given schema's, without the check.
        self._data_dtype = schema.frame_dtype
        self._data_size = schema.frame_size
        self._data_void = np.dtype(f"V{schema.frame_size}")  # one such frame as an opaque element
        self._check_zeros = bytes(file_schema.frame_size - schema.frame_size)  # such a frame's tail
        opened = self.path
        if sync_on_create:
            if not exist_ok and os.path.lexists(self.path):
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(self.path))
            opened = self.path.with_name(f".{self.path.name}.{secrets.token_hex(4)}.new")
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        else:
            flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if exist_ok else os.O_EXCL)
        self._fd: int | None = os.open(opened, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
        self._buf = bytearray()
        self._flushed = 0  # file size after the last successful write
        # The end of the last complete record on disk (what a failed write truncates back to):
        # _flushed, except while a direct write has left the rest of a batch in the buffer.
        self._boundary = 0
        self._entries: list[SessionEntry] = []
        self._session_offset: int | None = None
        self.frames_in_session = 0
        self.first_tick: int | None = None
        self.last_tick: int | None = None
        self._closed = False
        self._saved = self._state()
        self._header_scratch = np.zeros((), dtype=file_schema.header_dtype)
        self._frame_scratch = np.zeros((), dtype=self._dtype)
        covered = covered_bytes(self._dtype)
        self._pad_cols = np.flatnonzero(~covered)
        self._pad_ranges = _false_runs(covered)
        self._dir_synced = False
        self._gt = np.empty(0, dtype=bool)  # write_frames' tick comparison, reused
        self._copy = np.empty((0, self.schema.frame_size // 8), dtype=_WORD)  # frames copied in
        # Frames copied from the given layout: the words after their data are the check field
        # alone, which seal() overwrites in every frame (nothing to zero first).
        self._check_fills_rest = (
            self.check is not None
            and self.check.offset == self._data_size
            and self.schema.frame_size == self._data_size + 8
        )
        # The header goes out at once: from now on the file is a readable (if empty) WRTF file.
        self._buf += head
        try:
            self.flush()
            if sync_on_create:
                os.fsync(self._fd)
                if not exist_ok and os.path.lexists(self.path):
                    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(self.path))
                os.replace(opened, self.path)
                opened = self.path
                self._sync_directory()
        except OSError:
            fd, self._fd = self._fd, None
            self._closed = True
            os.close(fd)
            opened.unlink(missing_ok=True)
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

        ``boundary``: (file offset, writer state) that a later failure rolls back to when the
        writer has counted records that stay buffered (the rest of a batch); by default, what
        ``parts`` end on.
        """
        total = sum(map(len, parts))
        done = 0
        try:
            # Almost always one call; the loop resumes after a short write.
            done = os.writev(fd, parts) if len(parts) > 1 else os.write(fd, parts[0])
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
        """Append one frame; ``values`` as for :func:`fill_record` or a record of ``frame_dtype``.

        With the check on, the frame is a commit group of its own. One call per frame, so the
        work of :meth:`_require_session`, :meth:`_count` and :meth:`_append` is inlined and the
        frame is built once, in one bytearray.
        """
        if self._session_offset is None or self._closed:
            self._require_session()
        tick = int(tick)
        last = self.last_tick
        if not 0 <= tick <= _U64_MAX:
            raise FormatError(f"tick {tick} out of range")
        if last is not None and tick <= last:
            raise FormatError(f"tick {tick} after {last}: ticks must strictly increase (N10)")
        if isinstance(values, np.void) or (isinstance(values, np.ndarray) and values.shape == ()):
            dt = values.dtype
            if not (dt is self._dtype or dt == self._dtype) and (
                self.check is None or dt != self._data_dtype
            ):
                raise FormatError(f"frame: dtype {values.dtype} is not the schema's frame dtype")
            # The bytes through the buffer protocol, one copy (``bytearray(values)`` would first
            # try the record as a size, and numpy's refusal costs more than the copy).
            rec = bytearray()
            rec.extend(values)  # type: ignore[arg-type]
            if len(rec) < self.schema.frame_size:  # the definition's own layout
                rec += self._check_zeros
            # Bytes, then padding cleared: a field-by-field copy is slow for wide frames.
            for start, stop in self._pad_ranges:
                rec[start:stop] = bytes(stop - start)
            U64.pack_into(rec, 0, tick)
        else:
            scratch = self._frame_scratch
            scratch[...] = 0
            if values is not None:
                fill_record(self.schema, self.schema.frame_fields, scratch, values, "frame")
            scratch["tick"] = tick
            rec = bytearray(scratch.tobytes())
        buf = self._buf
        if self.check is not None:
            self.check.seal_record(rec, self._flushed + len(buf))
        if last is None:
            self.first_tick = tick
        self.last_tick = tick
        self.frames_in_session += 1
        buf += rec
        if len(buf) >= self._buffer_limit:
            self.flush()

    def _count(self, first: int, last: int, n: int) -> None:
        if self.first_tick is None:
            self.first_tick = first
        self.last_tick = last
        self.frames_in_session += n

    def _increasing(self, ticks: np.ndarray) -> bool:
        """Do ``ticks`` (at least 2) strictly increase? One compare into a reused buffer and a
        count: this runs once per batch on the hot path, where allocating the comparison and
        reducing it through ``all()`` cost as much as the compare itself."""
        k = len(ticks) - 1
        if len(self._gt) < k:
            self._gt = np.empty(k, dtype=bool)
        gt = self._gt[:k]
        np.greater(ticks[1:], ticks[:-1], out=gt)
        return int(np.count_nonzero(gt)) == k

    def _has_garbage_padding(self, rows: np.ndarray) -> bool:
        """Any non-zero padding byte in ``rows`` (frames as a 2-d uint8 array)?"""
        runs = self._pad_ranges
        if not runs:
            return False
        if len(runs) <= _PAD_RUNS_BY_SLICE:  # a few runs: views, no copy of the batch
            return any(rows[:, a:b].any() for a, b in runs)
        return bool(rows[:, self._pad_cols].any())  # many runs: one gather beats a Python loop

    def _rows(self, frames: np.ndarray) -> np.ndarray:
        """The batch as a C-contiguous ``(count, frame_size)`` uint8 array in the file's layout,
        padding zero; the caller's memory when it can be (see :meth:`write_frames`)."""
        n = len(frames)
        owned = False
        if frames.dtype == self._dtype:
            # Through the buffer: a quarter of the cost of .view(uint8).reshape() on a
            # structured array, which counts once per batch.
            rows: np.ndarray = np.ndarray((n, self.schema.frame_size), _BYTE, np.ascontiguousarray(frames))
            if self.check is not None and not rows.flags.writeable:
                rows, owned = rows.copy(), True
        else:  # the given schema's layout: the check field appended (seal() fills it). Each
            # frame is copied as one opaque element of its size (numpy copies those with one
            # memcpy each), into a buffer kept between batches: nothing refers to it once
            # write_frames returns (the rest of a batch is copied into the write buffer), and a
            # fresh array per batch costs page faults.
            k = self._data_size // 8
            width = self.schema.frame_size // 8
            if len(self._copy) >= n:
                words = self._copy[:n]
            else:
                words = np.empty((n, width), dtype=_WORD)
                if n * width * 8 <= _KEEP_COPY_BYTES:
                    self._copy = words
            void = self._data_void
            src = np.ascontiguousarray(frames).view(void)
            words.view(_BYTE)[:, : self._data_size].view(void)[:, 0] = src
            if not self._check_fills_rest:
                words[:, k:] = 0
            rows, owned = words.view(_BYTE), True
        if self._pad_ranges and self._has_garbage_padding(rows):
            # Padding must be zero (spec 8.7); arrays from np.empty or np.array(rows) have garbage.
            if not owned:
                rows = rows.copy()
            rows[:, self._pad_cols] = 0
        return rows

    def write_frames(self, frames: np.ndarray) -> None:
        """Append a batch of frames (``schema.frame_dtype``, ticks in ``"tick"``): the fast path.

        With the check on the batch becomes one or more commit groups, and the ``wrtfd_check``
        column of ``frames`` is filled in place (the writer owns that field; an array it cannot
        write from as it is, read-only or with non-zero padding, is copied first). Frames in the
        layout of the schema given to the writer (without the check) are accepted too, and
        copied.
        """
        if self._session_offset is None or self._closed:
            self._require_session()
        dt = getattr(frames, "dtype", None)
        if not isinstance(frames, np.ndarray) or not (
            dt is self._dtype or dt == self._dtype or (self.check is not None and dt == self._data_dtype)
        ):
            got = getattr(frames, "dtype", type(frames).__name__)
            raise FormatError(f"write_frames: expected an array of the schema's frame dtype, got {got}")
        if frames.ndim != 1:
            raise FormatError(f"write_frames: expected a 1-d array, got shape {frames.shape}")
        n = len(frames)
        if n == 0:
            return
        ticks = frames["tick"]
        if n > 1 and not self._increasing(ticks):
            bad = int(np.flatnonzero(ticks[1:] <= ticks[:-1])[0]) + 1
            raise FormatError(
                f"write_frames: tick {int(ticks[bad])} at index {bad} after {int(ticks[bad - 1])}: "
                "ticks must strictly increase (N10)"
            )
        first, last = int(ticks[0]), int(ticks[-1])
        if self.last_tick is not None and first <= self.last_tick:
            raise FormatError(f"tick {first} after {self.last_tick}: ticks must strictly increase (N10)")
        rows = self._rows(frames)
        check = self.check
        fsize = self.schema.frame_size
        nbytes = n * fsize
        start = self._flushed + len(self._buf)  # file offset of the batch
        if (
            nbytes < min(self._buffer_limit, _DIRECT_WRITE_BYTES)
            and len(self._buf) + nbytes < self._buffer_limit
        ):
            if check is not None:
                check.seal(rows, start)
            self._count(first, last, n)
            self._buf += rows.data.cast("B")
            return
        # Large batch: write the buffer and the batch out together, without copying the batch,
        # up to a page boundary (writes that end on page boundaries cost the kernel less); the
        # rest stays buffered. Without the check, exactly at the last page boundary, so until
        # the next write the file can end inside a frame (a torn frame the reader skips); with
        # it, at the last page boundary between two frames, so the file always ends on a whole
        # commit group.
        head = nbytes
        if self._buffer_limit >= _ALIGN_BYTES:
            if check is None:
                head -= (start + nbytes) % _ALIGN_BYTES
            else:
                head = _page_cut(start, n, fsize) * fsize
                check.seal(rows, start, head // fsize)
        elif check is not None:
            check.seal(rows, start)
        fd = self._fd
        assert fd is not None  # open: checked on entry
        n_entries, session_offset, n_frames, s_first, s_last = self._state()
        self._count(first, last, n)
        pending = self._buf
        self._buf = bytearray()
        data = rows.data.cast("B")
        if head == nbytes or head <= 0:
            self._write_all(fd, [memoryview(pending), data] if pending else [data])
            return
        whole = head // fsize  # frames of this batch complete on disk
        if whole:
            s_first = first if s_first is None else s_first
            s_last = int(ticks[whole - 1])
        boundary = (start + whole * fsize, (n_entries, session_offset, n_frames + whole, s_first, s_last))
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
