"""Rebuild a watched file from its recorded operations, and list the frames the daemon wrote to it.

:class:`FileHistory` answers what the file held after any prefix of the trace (everything
written, or only what the last fsync made durable) and whether its directory entry was durable.
:func:`daemon_frames` walks the daemon's own bytes (the file as rebuilt at the end of the trace,
checked against the real file) with a parser of its own, not the reader under test: that walk is
the ground truth every crash state is compared with.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tests.crashstate.trace import FileOp, FsLog
from wrtfd.format.check import CHECK_FIELD, CHECK_FIELD_KEY, CHECK_KEY
from wrtfd.format.jsonio import JsonCodec
from wrtfd.format.schema import Schema
from wrtfd.format.spec import (
    DOC_START_MAGIC,
    FILE_HEADER,
    FILE_MAGIC,
    MAGIC_WORDS,
    METADATA_LEN,
    SCHEMA_METADATA_KEY,
    SESSION_FOOTER_HEAD,
    SESSION_FOOTER_MAGIC,
    SESSION_MAGIC,
    U64,
    pad8,
)

__all__ = ["DaemonFile", "FileHistory", "HarnessError", "apply_ops", "daemon_frames"]

_DATA_KINDS = ("write", "truncate")
_SYNC_KINDS = ("fsync", "sync")


class HarnessError(Exception):
    """The daemon's own bytes or operations are not what the harness can model."""


def apply_ops(ops: list[FileOp], base: bytes = b"") -> bytes:
    """``base`` with the writes and truncates of ``ops`` applied in order."""
    buf = bytearray(base)
    for op in ops:
        if op.kind == "write":
            end = op.offset + len(op.data)
            if len(buf) < end:
                buf.extend(bytes(end - len(buf)))
            buf[op.offset : end] = op.data
        elif op.kind == "truncate":
            if op.size < len(buf):
                del buf[op.size :]
            else:
                buf.extend(bytes(op.size - len(buf)))
    return bytes(buf)


@dataclass(slots=True)
class FileHistory:
    """One watched file: its operations plus the directory fsyncs and global syncs that concern it.

    Crash points ``k`` are global operation numbers: the state after every operation with
    ``seq < k`` completed.
    """

    file: int
    ops: list[FileOp]
    end_s: float
    _seqs: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._seqs = [op.seq for op in self.ops]

    @classmethod
    def of(cls, log: FsLog, file: int) -> FileHistory:
        own = [op for op in log.ops if op.file == file]
        dirs = {os.path.dirname(op.path) for op in own}
        ops = [
            op
            for op in log.ops
            if op.file == file or op.kind == "sync" or (op.kind == "dirsync" and op.path in dirs)
        ]
        for op in ops:
            if op.uncertain:
                raise HarnessError(f"line {op.line}: a write of unknown extent (resolve it first)")
        return cls(file, ops, log.end_s)

    def _before(self, k: int) -> list[FileOp]:
        return self.ops[: bisect.bisect_left(self._seqs, k)]

    @property
    def created_seq(self) -> int:
        return next(op.seq for op in self.ops if op.kind == "create")

    @property
    def last_seq(self) -> int:
        return self.ops[-1].seq

    def path_at(self, k: int) -> str | None:
        """The file's path after the first ``k`` operations (None: not created yet, or unlinked)."""
        path: str | None = None
        for op in self._before(k):
            if op.file != self.file:
                continue
            if op.kind in ("create", "rename"):
                path = op.path
            elif op.kind == "unlink":
                path = None
        return path

    def content(self, k: int) -> bytes:
        """Everything written before ``k`` (what survives a crash of the process: model a)."""
        return apply_ops([op for op in self._before(k) if op.file == self.file])

    def last_sync(self, k: int) -> int | None:
        """Index in ``ops`` of the last fsync (of this file) or global sync before ``k``."""
        ops = self._before(k)
        for i in range(len(ops) - 1, -1, -1):
            op = ops[i]
            if op.kind == "sync" or (op.kind == "fsync" and op.file == self.file):
                return i
        return None

    def synced(self, k: int) -> tuple[bytes, list[FileOp]]:
        """(content made durable by the last sync before ``k``, data operations after it)."""
        ops = self._before(k)
        i = self.last_sync(k)
        mine = [op for op in ops if op.file == self.file and op.kind in _DATA_KINDS]
        if i is None:
            return b"", mine
        cut = ops[i].seq
        return apply_ops([op for op in mine if op.seq < cut]), [op for op in mine if op.seq > cut]

    def entry_durable(self, k: int) -> bool:
        """Was the directory fsynced (or everything synced) after the file got its current name?"""
        named: int | None = None
        durable = False
        for op in self._before(k):
            if op.file == self.file and op.kind in ("create", "rename"):
                named, durable = op.seq, False
            elif named is not None and (
                op.kind == "sync"
                or (op.kind == "dirsync" and op.path == os.path.dirname(self.path_at(k) or ""))
            ):
                durable = True
        return durable

    def next_op_time(self, k: int) -> float:
        """Until when the state at ``k`` holds: the time of the file's next operation (or the end)."""
        i = bisect.bisect_left(self._seqs, k)
        return self.ops[i].time_s if i < len(self.ops) else self.end_s

    def boundaries(self) -> list[int]:
        """Crash points around every fsync, directory fsync and sync: just before and just after."""
        points: set[int] = set()
        for op in self.ops:
            if op.kind in ("fsync", "dirsync", "sync"):
                points.update((op.seq, op.seq + 1))
        return sorted(p for p in points if p > self.created_seq)


# -- the daemon's frames ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FrameTruth:
    session: int
    tick: int
    offset: int
    data: bytes
    time_us: int
    written_seq: int
    synced_seq: int | None
    #: the truncate that removed it (None: still in the file at the end)
    cut_seq: int | None = None

    def durable_at(self, k: int) -> bool:
        """Made durable by an fsync before crash point ``k``, and not cut since."""
        return (
            self.synced_seq is not None
            and self.synced_seq < k
            and (self.cut_seq is None or k <= self.cut_seq)
        )


@dataclass(slots=True)
class SessionTruth:
    index: int
    offset: int
    header: bytes
    #: canonical JSON of the header, as ``dump`` prints it (keys sorted)
    header_key: str
    start_us: int
    frames: dict[int, FrameTruth]
    #: digest of the dump's ``data`` text of each frame, by tick (:func:`text_digest`)
    frames_json: dict[int, bytes]
    footer_offset: int | None = None
    footer_end_reason: str | None = None
    footer_written_seq: int | None = None


@dataclass(slots=True)
class DaemonFile:
    """What the daemon wrote to one file (from the rebuilt bytes, walked independently)."""

    schema: Schema
    rate_hz: int
    data_start: int
    sessions: list[SessionTruth]
    doc_footer_offset: int | None
    _by_key: dict[str, SessionTruth] | None = None

    def frames(self) -> list[FrameTruth]:
        return [f for s in self.sessions for f in s.frames.values()]

    def session_by_key(self) -> dict[str, SessionTruth]:
        if self._by_key is None:
            self._by_key = {s.header_key: s for s in self.sessions}
        return self._by_key


def canonical(obj: Any) -> str:
    """Keys sorted: session headers compared whatever order a dump prints them in."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def text_digest(text: str) -> bytes:
    """What a frame's dump text is compared by (the texts themselves would not fit in memory
    for thousands of states)."""
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def dump_text(obj: Any) -> str:
    """JSON exactly as ``wrtfd dump`` prints it (compact, fields in definition order)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _written_map(ops: list[FileOp], size: int) -> np.ndarray:
    """Per byte, the seq of the write that last wrote it (-1: never written)."""
    last = np.full(size, -1, dtype=np.int64)
    for op in ops:
        if op.kind == "write":
            end = min(op.offset + len(op.data), size)
            if op.offset < end:
                last[op.offset : end] = op.seq
    return last


def daemon_frames(history: FileHistory) -> DaemonFile:
    """Walk the file as the daemon left it at the end of the trace (N1, N7, N8, N9, N11), and
    as it was before each truncate that shrank it (what a truncate cut was written too)."""
    own = [op for op in history.ops if op.file == history.file]
    syncs = [
        op.seq for op in history.ops if op.kind == "sync" or (op.kind == "fsync" and op.file == history.file)
    ]
    final = apply_ops(own)
    out = _walk(final, _written_map(own, len(final)), syncs, None)
    size = 0
    for i, op in enumerate(own):
        if op.kind == "truncate":
            if op.size < size:
                buf = apply_ops(own[:i])
                _merge(out, _walk(buf, _written_map(own[:i], len(buf)), syncs, op.seq))
            size = op.size
        elif op.kind == "write":
            size = max(size, op.offset + len(op.data))
    keys = [s.header_key for s in out.sessions]
    if len(set(keys)) != len(keys):
        raise HarnessError("two sessions of one file have equal headers: frames cannot be told apart")
    return out


def _merge(out: DaemonFile, cut: DaemonFile) -> None:
    """Add the frames a truncate removed (same session header and tick must mean same bytes)."""
    by_key = {s.header_key: s for s in out.sessions}
    for s in cut.sessions:
        target = by_key.get(s.header_key)
        if target is None:
            target = SessionTruth(len(out.sessions), s.offset, s.header, s.header_key, s.start_us, {}, {})
            out.sessions.append(target)
            by_key[s.header_key] = target
        for tick, f in s.frames.items():
            have = target.frames.get(tick)
            if have is None:
                target.frames[tick] = FrameTruth(
                    target.index, tick, f.offset, f.data, f.time_us, f.written_seq, f.synced_seq, f.cut_seq
                )
                target.frames_json[tick] = s.frames_json[tick]
            elif have.data != f.data:
                raise HarnessError(f"session {s.header_key[:60]} tick {tick}: written twice with other bytes")
    out._by_key = None


def _walk(buf: bytes, written: np.ndarray, syncs: list[int], cut_seq: int | None) -> DaemonFile:
    if len(buf) < FILE_HEADER.size:
        raise HarnessError(f"the daemon's file is {len(buf)} bytes: no header")
    magic, _version, rate, _ts, count, _reserved = FILE_HEADER.unpack_from(buf, 0)
    if magic != FILE_MAGIC:
        raise HarnessError("the daemon's file does not start with WRTF0001")
    pos = FILE_HEADER.size
    meta: dict[str, str] = {}
    for _ in range(count):
        parts = []
        for _what in ("key", "value"):
            (n,) = METADATA_LEN.unpack_from(buf, pos)
            parts.append(buf[pos + 4 : pos + 4 + n].decode("utf-8"))
            pos = pad8(pos + 4 + n)
        meta[parts[0]] = parts[1]
    schema = Schema.from_yaml(meta[SCHEMA_METADATA_KEY])
    # dump leaves the frame check out of a frame's data (its own flag shows it)
    check = meta.get(CHECK_FIELD_KEY, CHECK_FIELD) if CHECK_KEY in meta else None
    codec = JsonCodec(schema, hide=check)
    fsize = schema.frame_size
    footer_len = SESSION_FOOTER_HEAD.size + schema.footer_size
    out = DaemonFile(schema, rate, pos, [], None)
    while pos + 8 <= len(buf):
        head = buf[pos : pos + 8]
        if head == DOC_START_MAGIC:
            out.doc_footer_offset = pos
            break
        if head != SESSION_MAGIC:
            raise HarnessError(f"offset {pos}: expected a session in the daemon's own file, got {head!r}")
        if pos + 8 + schema.header_size > len(buf):
            break  # a session header still being written when the trace ended
        hdr_bytes = buf[pos + 8 : pos + 8 + schema.header_size]
        hdr = np.frombuffer(hdr_bytes, dtype=schema.header_dtype)[0]
        start_us = int(hdr["start_timestamp"]) if schema.has_time_base else int(_ts)
        session = SessionTruth(
            len(out.sessions), pos, hdr_bytes, canonical(codec.header_to_json(hdr.item())), start_us, {}, {}
        )
        p = pos + 8 + schema.header_size
        prev: int | None = None
        while p + fsize <= len(buf):
            (tick,) = U64.unpack_from(buf, p)
            if tick in MAGIC_WORDS:
                break
            if prev is not None and tick <= prev:
                raise HarnessError(f"offset {p}: the daemon wrote tick {tick} after {prev}")
            row = np.frombuffer(buf, dtype=schema.frame_dtype, count=1, offset=p)
            w = int(written[p : p + fsize].min())
            if w < 0:
                raise HarnessError(f"offset {p}: frame bytes the trace never wrote")
            wseq = int(written[p : p + fsize].max())
            i = bisect.bisect_right(syncs, wseq)
            synced = syncs[i] if i < len(syncs) and (cut_seq is None or syncs[i] < cut_seq) else None
            t_us = start_us + (tick * 1_000_000 + rate // 2) // rate
            session.frames[tick] = FrameTruth(
                session.index,
                tick,
                p,
                buf[p : p + fsize],
                t_us,
                wseq,
                synced,
                cut_seq,
            )
            session.frames_json[tick] = text_digest(dump_text(codec.frame_to_json(row.tolist()[0][1:])))
            prev = tick
            p += fsize
        out.sessions.append(session)
        if p + 8 <= len(buf) and buf[p : p + 8] == SESSION_FOOTER_MAGIC:
            if p + footer_len > len(buf):
                break
            session.footer_offset = p
            session.footer_written_seq = int(written[p : p + footer_len].max())
            if schema.footer_dtype is not None and codec.footer_to_json is not None:
                ft = np.frombuffer(
                    buf, dtype=schema.footer_dtype, count=1, offset=p + SESSION_FOOTER_HEAD.size
                )
                reason = codec.footer_to_json(ft[0].item()).get("end_reason")
                session.footer_end_reason = None if reason is None else str(reason)
            pos = p + footer_len
            continue
        break  # the end of what was written (a torn frame at most)
    return out
