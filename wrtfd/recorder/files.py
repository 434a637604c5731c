"""File names, rotation and the I/O side of the recorder (the only module that touches disk).

:class:`FileSink` owns the :class:`wrtfd.format.Writer`. It takes the recorder's operations in
order (``begin`` a session, ``frames``, ``end`` it, ``close``) and decides on its own:

* **rotation** on size (``rotate_bytes``: the batch is cut at the exact frame that would pass the
  limit), duration (``rotate_s`` of frame time) or number of sessions per file. A rotation in
  the middle of a session ends it in the old file (``end_reason = rotate``) and continues it
  in the new file as a new session (``start_reason = rotate``) whose ticks restart at 0 and
  whose ``start_timestamp`` is the time of its first frame, so frame times stay exact (N9);
* **durability**: every file carries the frame check (:mod:`wrtfd.format.check`), with a salt
  of its own (random, or derived from ``salt_seed`` for a deterministic replay);
  :meth:`FileSink.sync_if_due` flushes and fsyncs once ``fsync_interval_s`` (less
  ``sync_early_s``, the caller's scheduling slack) has passed on the caller's clock;
  ``sync_starts`` makes each new file durable (header, metadata, directory entry) before it
  appears, and each new session's header (with the footer before it) before its first frame,
  so a power cut can never pair this file's frames with stale session records;
  ``close_on_idle`` closes the file when a session ends on idle, so that a machine switched off
  while nobody drives leaves only complete files (the next session opens a new one);
* **I/O errors** (ENOSPC, EIO...): the writer truncates a failed write back to its last complete
  record; the sink then closes the file as cleanly as the disk allows (a file with no frame is
  removed), records the error with the path, drops (and counts) frames while the disk is
  unusable, and tries a new file after a backoff (doubling up to ``retry_max_s``, measured in
  frame time). The session continues there with ``start_reason = resume``.

When a session is cut in parts (rotation, I/O error), each part's footer has its own
``frames``, ``dropped_ticks`` and ``duration_s``; the per-source counters and the derived
summaries are written in the footer of the part where the session really ended.

File names come from a template (:func:`render_name`) with every substituted value sanitised:
no path separators, no ``..``, no control or shell-hostile characters, bounded length; an
existing file is never overwritten (``-1``, ``-2``... is appended).
"""

from __future__ import annotations

import errno
import hashlib
import re
import time
import unicodedata
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from wrtfd.errors import ConfigError, FormatError
from wrtfd.format import Schema, Writer
from wrtfd.format.check import CHECK_KEYS, with_check
from wrtfd.format.spec import SCHEMA_METADATA_KEY
from wrtfd.format.writer import encode_file_header
from wrtfd.recorder.observe import FileClosed, FileOpened, RecordingEvent, WriteFailed

__all__ = [
    "DEFAULT_TEMPLATE",
    "FileSink",
    "SinkState",
    "check_metadata",
    "check_template",
    "join_records",
    "render_name",
    "sanitize_component",
]

DEFAULT_TEMPLATE = "{date}_{time}_{source}_{track}.wrtf"
MAX_COMPONENT = 48
MAX_NAME_BYTES = 200
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
_KNOWN = frozenset({"date", "time", "datetime", "source", "track", "car", "session_type", "driver", "seq"})
_UNSAFE = re.compile(r"[^\w.+-]+", re.UNICODE)


def join_records(arrays: list[np.ndarray]) -> np.ndarray:
    """A new, writable array of the records of ``arrays`` (same itemsize), with the first one's dtype.

    Joined as bytes: numpy would repack padded structs and copy them field by field (a hundred
    times slower for wide frames); even allocating an array of a wide nested dtype, or a
    ``.view()`` to one, costs more than the copy (numpy vets such dtypes in Python).
    """
    raw = np.concatenate([np.ascontiguousarray(a).view(np.uint8).reshape(-1) for a in arrays])
    return np.frombuffer(raw, dtype=arrays[0].dtype)


def sanitize_component(value: object, *, limit: int = MAX_COMPONENT, empty: str = "unknown") -> str:
    """A safe file-name fragment from untrusted text (a game's track name...)."""
    text = unicodedata.normalize("NFKC", str(value))
    text = "".join(ch if unicodedata.category(ch)[0] != "C" else " " for ch in text)
    text = _UNSAFE.sub("-", text.strip())
    text = re.sub(r"\.{2,}", ".", text).strip(".-_")
    if len(text.encode("utf-8")) > limit:
        raw = text.encode("utf-8")[:limit]
        text = raw.decode("utf-8", errors="ignore").rstrip(".-_")
    return text or empty


def check_template(template: str) -> None:
    """:raises ConfigError: an unknown placeholder or a directory part in the template."""
    for name in _PLACEHOLDER.findall(template):
        if name not in _KNOWN:
            known = ", ".join(sorted(_KNOWN))
            raise ConfigError(f"file_template: unknown placeholder {{{name}}} (known: {known})")
    if "/" in template or "\\" in template or template in ("", ".", ".."):
        raise ConfigError(f"file_template {template!r}: a file name, without directories")


def check_metadata(metadata: Mapping[str, str]) -> None:
    """Refuse user metadata that a :class:`FileSink` file could not take: a key its writer writes
    itself (the embedded schema, the frame check's keys: the sink always writes both) or a key
    or value the writer cannot encode. The writer's own constants and encoder decide, so this
    is the writer's rule, checked when the config is read instead of at the first file.

    :raises FormatError: naming the key.
    """
    for key in metadata:
        if key == SCHEMA_METADATA_KEY or key in CHECK_KEYS:
            raise FormatError(f"metadata key {key!r} is written by the writer itself (N5)")
    encode_file_header(1, 1, list(metadata.items()))


def render_name(template: str, *, start_us: int, fields: Mapping[str, object], seq: int = 0) -> str:
    """The file name for a file starting at ``start_us`` (UTC), always ending in ``.wrtf``."""
    dt = datetime.fromtimestamp(start_us / 1e6, tz=UTC)
    values = {
        "date": dt.strftime("%Y%m%d"),
        "time": dt.strftime("%H%M%S"),
        "datetime": dt.strftime("%Y%m%dT%H%M%SZ"),
        "seq": f"{seq:04d}",
    }

    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        if key in values:
            return values[key]
        return sanitize_component(fields.get(key) or "")

    name = _PLACEHOLDER.sub(sub, template)
    name = sanitize_component(name, limit=MAX_NAME_BYTES, empty="recording")
    if not name.endswith(".wrtf"):
        name = name[: MAX_NAME_BYTES - 5] + ".wrtf"
    return name


@dataclass(frozen=True, slots=True)
class SinkState:
    """What :meth:`FileSink.state` reports (read by the stats)."""

    path: str | None
    files: int
    sessions: int
    frames: int
    frames_lost: int
    bytes: int
    bytes_total: int
    failing: bool
    last_error: str | None
    errors: int
    unsynced_since_s: float | None


class FileSink:
    """Writes the recorder's operations to rotating WRTF files (see module docstring)."""

    def __init__(
        self,
        schema: Schema,
        *,
        output_dir: Path,
        rate_hz: int,
        template: str = DEFAULT_TEMPLATE,
        metadata: Mapping[str, str] | None = None,
        source_label: str = "wrtfd",
        rotate_bytes: int | None = None,
        rotate_s: float | None = None,
        rotate_sessions: int | None = None,
        fsync_interval_s: float = 1.0,
        flush_each_batch: bool = True,
        retry_s: float = 1.0,
        retry_max_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        buffer_bytes: int = 1 << 20,
        sync_starts: bool = False,
        close_on_idle: bool = False,
        sync_early_s: float = 0.0,
        salt_seed: bytes | None = None,
    ) -> None:
        check_template(template)
        if rotate_bytes is not None and rotate_bytes < 4096:
            raise ConfigError(f"rotate_bytes must be at least 4096, got {rotate_bytes}")
        self.schema = schema
        self.output_dir = Path(output_dir)
        self.rate_hz = rate_hz
        self.template = template
        self.metadata = dict(metadata or {})
        self.source_label = source_label
        self.rotate_bytes = rotate_bytes
        self.rotate_us = None if rotate_s is None else round(rotate_s * 1e6)
        self.rotate_sessions = rotate_sessions
        self.fsync_interval_s = fsync_interval_s
        # Sync this much before the interval runs out: the caller only looks between steps.
        self._sync_after_s = max(0.0, fsync_interval_s - max(0.0, sync_early_s))
        self.sync_starts = sync_starts
        self.close_on_idle = close_on_idle
        self._salt_seed = None if salt_seed is None else salt_seed + schema.yaml_text.encode()
        self.flush_each_batch = flush_each_batch
        self.retry_us = round(retry_s * 1e6)
        self.retry_max_us = round(retry_max_s * 1e6)
        self._clock = clock
        self._buffer_bytes = buffer_bytes
        self._frame_size = with_check(schema).frame_size  # as stored: with the frame check
        self._footer_bytes = 24 + schema.footer_size + 40  # session footer + document footer tails
        self._header_bytes = 8 + -(-schema.header_size // 8) * 8  # a session header, padded
        self.writer: Writer | None = None
        self.paths: list[Path] = []
        self.files = 0
        self.sessions = 0
        self.frames = 0
        self.frames_lost = 0
        self.bytes_total = 0
        self.errors = 0
        self.last_error: str | None = None
        self._last_reason = ""  # the last error without its path: "No space left on device (ENOSPC)"
        self.error_log: deque[str] = deque(maxlen=16)  # recent errors, oldest first
        self._file_start_us = 0
        self._file_frames = 0
        self._failing = False
        self._retry_at_us = 0
        self._failures = 0  # consecutive failed attempts (backoff doubles with each)
        self._dirty_since: float | None = None
        self._last_sync = clock()
        # the session being written (None when no session is open)
        self._header: dict[str, Any] | None = None
        self._start_us = 0
        self._tick_offset = 0  # session tick of this file-session's tick 0
        self._in_file_session = False
        self._fs_first: int | None = None
        self._fs_last: int | None = None
        self._fs_frames = 0
        self._fs_dropped = 0
        self._summary: dict[str, Any] = {}
        self._last_frame_us = 0
        #: Told of every file opened and closed (on the writer thread; must not block, see
        #: :mod:`wrtfd.recorder.observe`); ``group`` names the recording in those events.
        self.on_event: Callable[[RecordingEvent], None] | None = None
        self.group = ""

    # -- the operations -------------------------------------------------------------------------

    def begin(
        self, header: Mapping[str, Any], start_us: int, metadata: Mapping[str, str] | None = None
    ) -> None:
        """A new session starts (``header`` without ``start_timestamp``; ``start_us`` = tick 0).
        ``metadata``: added to the metadata of the files opened from now on."""
        if metadata:
            self.metadata.update(metadata)
        if self._header is not None:
            self.end({"end_reason": "end"})
        self._header = dict(header)
        self._start_us = start_us
        self._tick_offset = 0
        self._summary = {}
        if self._failing:
            return  # the next frames retry once the backoff has passed
        w = self.writer
        rotating = w is not None and (
            (self.rotate_sessions is not None and w.session_count >= self.rotate_sessions)
            or (  # no room for another session (header, a frame, the footers) in this file
                self.rotate_bytes is not None
                and w.bytes_written
                + self._header_bytes
                + self._frame_size
                + self._footer_bytes
                + 24 * (w.session_count + 2)
                > self.rotate_bytes
            )
        )
        if rotating:
            self._close_file()
        reason = self._header.get("start_reason", "first")
        self._open_session(start_us, reason, tick=0, file_reason="rotate" if rotating else reason)

    def frames_block(self, frames: np.ndarray, summary: Mapping[str, Any] | None = None) -> None:
        """Frames of the open session (session-relative ticks, strictly increasing)."""
        if self._header is None or len(frames) == 0:
            return
        if summary:
            self._summary = dict(summary)
        period_us = 1e6 / self.rate_hz
        todo = frames
        while len(todo):
            first_tick = int(todo["tick"][0])
            now_us = self._start_us + round(first_tick * period_us)
            if self._failing and not self._reopen(now_us, first_tick):
                self.frames_lost += len(todo)
                return
            if not self._in_file_session:
                self._open_session(now_us, "resume", tick=first_tick)
                if not self._in_file_session:
                    self.frames_lost += len(todo)
                    return
            n = self._fit(todo)
            if n == 0:
                self._rotate(first_tick)
                continue
            part = todo[:n]
            if not self._write(part):
                self.frames_lost += len(todo)
                return
            todo = todo[n:]
            if len(todo):
                self._rotate(int(todo["tick"][0]))

    def end(self, footer: Mapping[str, Any]) -> None:
        """The session ended; ``footer`` gives ``end_reason``, per-source counters, summaries.

        With ``close_on_idle``, a session that ended on idle also closes its file (footers
        written, fsynced): nobody is driving, and the machine may be switched off.
        """
        if self._header is None:
            return
        if self._in_file_session:
            self._end_file_session(footer)
        self._header = None
        if self.close_on_idle and footer.get("end_reason") == "idle":
            self._close_file()

    def close(self) -> None:
        """End any open session and close the file (footers written, fsynced)."""
        if self._header is not None:
            self.end({"end_reason": "stop"})
        self._close_file()

    def sync_due(self) -> bool:
        """True when data was written and ``fsync_interval_s`` has passed (cheap, no I/O)."""
        return (
            self.writer is not None
            and not self._failing
            and self._dirty_since is not None
            and self._clock() - self._last_sync >= self._sync_after_s
        )

    def sync_due_in(self) -> float | None:
        """Seconds until :meth:`sync_due` turns true (0 when it is), None while nothing waits."""
        if self.writer is None or self._failing or self._dirty_since is None:
            return None
        return max(0.0, self._last_sync + self._sync_after_s - self._clock())

    def sync_if_due(self, *, force: bool = False) -> bool:
        """Flush and fsync when ``fsync_interval_s`` (less ``sync_early_s``) passed since the last
        one (or ``force``)."""
        w = self.writer
        if w is None or self._failing:
            return False
        now = self._clock()
        if not force and now - self._last_sync < self._sync_after_s:
            return False
        try:
            w.fsync()
        except OSError as exc:
            self._fail(exc, self._last_frame_us)
            return False
        self._last_sync = now
        self._dirty_since = None
        return True

    def state(self) -> SinkState:
        w = self.writer
        return SinkState(
            path=None if w is None else str(w.path),
            files=self.files,
            sessions=self.sessions,
            frames=self.frames,
            frames_lost=self.frames_lost,
            bytes=0 if w is None else w.bytes_written,
            bytes_total=self.bytes_total,
            failing=self._failing,
            last_error=self.last_error,
            errors=self.errors,
            unsynced_since_s=None if self._dirty_since is None else self._clock() - self._dirty_since,
        )

    # -- internals ------------------------------------------------------------------------------

    def _fit(self, frames: np.ndarray) -> int:
        """How many of ``frames`` go in the current file before a rotation."""
        n = len(frames)
        w = self.writer
        if w is None:
            return n
        if self.rotate_bytes is not None:
            # what closing will still add: this session's footer, one document entry per session
            room = self.rotate_bytes - w.bytes_written - self._footer_bytes - 24 * (w.session_count + 1)
            n = min(n, max(0, room // self._frame_size))
        if self.rotate_us is not None and n:
            period_us = 1e6 / self.rate_hz
            ticks = frames["tick"][:n].astype(np.int64)
            times = self._start_us + np.round(ticks * period_us).astype(np.int64)
            n = int(np.searchsorted(times - self._file_start_us, self.rotate_us, side="left"))
        # A fresh file always takes at least one frame, so rotation always makes progress.
        return max(n, 1) if self._file_frames == 0 else n

    def _rotate(self, next_tick: int) -> None:
        self._end_file_session({"end_reason": "rotate"})
        self._close_file()
        start = self._start_us + round(next_tick * 1e6 / self.rate_hz)
        self._open_session(start, "rotate", tick=next_tick)

    def _open_session(self, start_us: int, reason: str, *, tick: int, file_reason: str | None = None) -> None:
        """Open a file if needed and begin a file-session whose tick 0 is session tick ``tick``.

        ``file_reason``: why a file is opened, for observers (default: the session's ``reason``)."""
        if self.writer is None and not self._open_file(
            start_us, reason if file_reason is None else file_reason
        ):
            return
        w = self.writer
        if w is None:  # pragma: no cover - _open_file returned True
            return
        header = dict(self._header or {})
        header["start_timestamp"] = start_us
        header["start_reason"] = reason
        try:
            w.begin_session(header)
            if self.sync_starts:
                w.fsync()
                self._last_sync = self._clock()
                self._dirty_since = None
            elif self.flush_each_batch:
                w.flush()
        except OSError as exc:
            self._fail(exc, start_us)
            return
        self.sessions += 1
        self._failures = 0
        self._tick_offset = tick
        self._in_file_session = True
        self._fs_first = None
        self._fs_last = None
        self._fs_frames = 0
        self._fs_dropped = 0

    def _open_file(self, start_us: int, reason: str = "") -> bool:
        info = self._header or {}
        name = render_name(
            self.template,
            start_us=start_us,
            fields={
                "source": self.source_label,
                "track": info.get("track"),
                "car": info.get("car"),
                "session_type": info.get("session_type"),
                "driver": info.get("driver"),
            },
            seq=self.files,
        )
        path = self.output_dir / name
        try:  # the directory removed, or a file in its place, is a write error like the others
            self.output_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self._fail(exc, start_us, path=path)
            return False
        stem, k = path.stem, 1
        while path.exists():
            path = self.output_dir / f"{stem}-{k}.wrtf"
            k += 1
        meta = dict(self.metadata)
        for key, label in (("track", "Track"), ("car", "Car"), ("driver", "Driver")):
            value = info.get(key)
            if value and label not in meta:
                meta[label] = str(value).encode("utf-8", "replace").decode("utf-8")[:256]
        try:
            self.writer = Writer(
                path,
                self.schema,
                rate_hz=self.rate_hz,
                start_timestamp_us=max(1, start_us),
                metadata=meta,
                buffer_bytes=self._buffer_bytes,
                check=True,
                check_salt=self._salt(),
                sync_on_create=self.sync_starts,
            )
            if self.flush_each_batch:
                self.writer.flush()
        except OSError as exc:
            self.writer = None
            self._remove_empty(path)
            self._fail(exc, start_us, path=path)
            return False
        self.paths.append(path)
        self.files += 1
        if self.on_event is not None:
            self.on_event(FileOpened(self.group, str(path), start_us, reason))
        self._file_start_us = start_us
        self._file_frames = 0
        self._last_sync = self._clock()
        return True

    def _salt(self) -> int | None:
        """The next file's check salt: None (random) unless derived from ``salt_seed``."""
        if self._salt_seed is None:
            return None
        digest = hashlib.blake2b(self._salt_seed + self.files.to_bytes(8, "little"), digest_size=8).digest()
        return int.from_bytes(digest, "little")

    def _write(self, frames: np.ndarray) -> bool:
        w = self.writer
        if w is None:
            return False
        off = self._tick_offset
        if off:
            frames = join_records([frames])
            frames["tick"] -= off
        ticks = frames["tick"]
        first, last = int(ticks[0]), int(ticks[-1])
        before = w.bytes_written
        try:
            w.write_frames(frames)
            if self.flush_each_batch:
                w.flush()
        except OSError as exc:
            self._fail(exc, self._start_us + round((first + off) * 1e6 / self.rate_hz))
            return False
        if self._fs_last is not None:
            self._fs_dropped += first - self._fs_last - 1
        self._fs_dropped += (last - first + 1) - len(frames)
        if self._fs_first is None:
            self._fs_first = first
        self._fs_last = last
        self._fs_frames += len(frames)
        self._file_frames += len(frames)
        self.frames += len(frames)
        self.bytes_total += w.bytes_written - before
        if self._dirty_since is None:
            self._dirty_since = self._clock()
        self._last_frame_us = self._start_us + round((last + off) * 1e6 / self.rate_hz)
        return True

    def _end_file_session(self, footer: Mapping[str, Any]) -> None:
        w = self.writer
        if w is None or not self._in_file_session:
            self._in_file_session = False
            return
        self._in_file_session = False
        values = {k: v for k, v in footer.items() if k not in ("frames", "dropped_ticks", "duration_s")}
        for k, v in self._summary.items():
            values.setdefault(k, v)
        span = 0 if self._fs_last is None else self._fs_last - (self._fs_first or 0) + 1
        values["frames"] = self._fs_frames
        values["dropped_ticks"] = self._fs_dropped
        values["duration_s"] = span / self.rate_hz
        try:
            w.end_session(values)
            if self.flush_each_batch:
                w.flush()
        except OSError as exc:
            self._fail(exc, self._start_us)
        except FormatError:
            # A footer value that does not fit (a plug-in's summary): keep the counts only.
            try:
                w.end_session(
                    {
                        "frames": self._fs_frames,
                        "dropped_ticks": self._fs_dropped,
                        "duration_s": span / self.rate_hz,
                    }
                )
            except OSError as exc:
                self._fail(exc, self._start_us)

    def _close_file(self) -> None:
        w = self.writer
        if w is None:
            return
        self.writer = None
        self._in_file_session = False
        complete = False
        try:
            w.close()
            complete = True
        except OSError as exc:
            self._record_error(exc, w.path)
            if self._file_frames == 0:
                self._remove_empty(w.path)
        self._dirty_since = None
        if self.on_event is not None:
            error = "" if complete else self._last_reason
            self.on_event(
                FileClosed(self.group, str(w.path), self._file_frames, w.bytes_written, complete, error)
            )

    def _remove_empty(self, path: Path) -> None:
        try:
            path.unlink()
        except OSError:
            pass
        if path in self.paths:
            self.paths.remove(path)

    def _record_error(self, exc: OSError, path: Path | None, *, retry_s: float | None = None) -> None:
        """Count and keep the error; tell the observers (the journal's error line)."""
        self.errors += 1
        name = errno.errorcode.get(exc.errno or 0, "EIO")
        self._last_reason = f"{exc.strerror or exc} ({name})"
        self.last_error = f"{path}: {self._last_reason}"
        self.error_log.append(self.last_error)
        if self.on_event is not None:
            self.on_event(WriteFailed(self.group, str(path), self._last_reason, retry_s))

    def _fail(self, exc: OSError, now_us: int, *, path: Path | None = None) -> None:
        """An I/O error: close as cleanly as the disk allows, retry later (see module doc)."""
        w = self.writer
        self._failures += 1
        backoff = min(self.retry_us * (1 << min(self._failures - 1, 30)), self.retry_max_us)
        self._record_error(exc, path or (w.path if w is not None else None), retry_s=backoff / 1e6)
        self._in_file_session = False
        if w is not None:
            self.writer = None
            try:
                w.close()
            except OSError:
                pass  # the writer has truncated back to its last complete record and closed
            frames = self._file_frames
            if frames == 0:
                self._remove_empty(w.path)
            if self.on_event is not None:  # what the file holds: the frames before the error
                size = w.bytes_written if frames else 0
                self.on_event(FileClosed(self.group, str(w.path), frames, size, False, self._last_reason))
        self._dirty_since = None
        self._failing = True
        self._retry_at_us = now_us + backoff

    def _reopen(self, now_us: int, tick: int) -> bool:
        if now_us < self._retry_at_us:
            return False
        self._failing = False
        self._open_session(now_us, "resume", tick=tick)
        return self._in_file_session
