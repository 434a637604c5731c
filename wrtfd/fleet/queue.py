"""The upload queue on disk: what is still to upload survives restarts, crashes and power cuts.

::

    <queue_dir>/pending/<id>.json   one per file waiting (or being) uploaded, rewritten atomically
    <queue_dir>/uploaded.jsonl      one line per verified upload (path, size, mtime, SHA-256, object)
    <queue_dir>/bad/                entries that could not be parsed (kept for a person to look at)

Entries are written with temp file + fsync + rename + directory fsync, so a crash leaves the old
entry or the new one, never half of one. An entry carries the upload's object id (``nuid``) as
soon as the first chunk may have been sent, which is what lets an upload resume after a crash
(see :mod:`wrtfd.fleet.upload`). The files here are ours, but a disk can still hand back
garbage: every entry is size-bounded and parsed defensively, and a bad one is moved aside and
counted, never a crash.

Blocking I/O: called from a worker thread of the fleet's own loop, never from the recording path.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

__all__ = [
    "MAX_ENTRY_BYTES",
    "UploadEntry",
    "UploadQueue",
    "object_name",
    "write_atomic",
]

log = logging.getLogger("wrtfd.fleet")

MAX_ENTRY_BYTES = 64 * 1024
#: A line of the uploaded log longer than this is not one of ours.
MAX_LOG_LINE = 8192
_OBJECT_SAFE = re.compile(r"[^-/_=.a-zA-Z0-9]")


def object_name(rig: str, relative: str) -> str:
    """The object's name in the bucket: ``<rig>/<path relative to the recording directory>``.

    Object names allow ``[-/_=.a-zA-Z0-9]``; other characters (a track name in a file name)
    become ``_``, with a short hash of the original added so that two names cannot collide.
    """
    rel = relative.replace(os.sep, "/").lstrip("/")
    safe = _OBJECT_SAFE.sub("_", rel)
    parts = [p for p in safe.split("/") if p not in ("", ".", "..")]
    safe = "/".join(parts)
    if safe != rel or not safe:
        digest = hashlib.sha256(rel.encode("utf-8", "surrogateescape")).hexdigest()[:8]
        stem, dot, ext = safe.rpartition(".")
        safe = f"{stem}-{digest}.{ext}" if dot and stem else f"{safe or 'unnamed'}-{digest}"
    return f"{rig}/{safe}"


@dataclass(frozen=True, slots=True)
class UploadEntry:
    """One file to upload and how far its upload got."""

    id: str
    path: str
    object: str
    queued_us: int
    group: str = ""
    frames: int = -1
    #: None when unknown (a file found by the start-up scan)
    complete: bool | None = None
    #: The file as it was when its upload started (a changed file starts over).
    size: int = -1
    mtime_ns: int = -1
    #: The object id whose chunks are (being) sent; None until the first chunk may go out.
    nuid: str | None = None
    chunk_bytes: int = 0
    attempts: int = 0
    last_error: str | None = None

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> UploadEntry:
        """Raises ValueError on anything that is not an entry."""
        doc = json.loads(data)
        if not isinstance(doc, dict):
            raise ValueError("not an object")
        known = {f.name: f for f in fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in doc.items():
            if key not in known:
                continue  # a newer wrtfd's extra key
            kwargs[key] = value
        for key in ("id", "path", "object"):
            if not isinstance(kwargs.get(key), str) or not kwargs[key]:
                raise ValueError(f"{key} missing")
        for key in ("queued_us", "frames", "size", "mtime_ns", "chunk_bytes", "attempts"):
            if key in kwargs and (not isinstance(kwargs[key], int) or isinstance(kwargs[key], bool)):
                raise ValueError(f"{key} is not an integer")
        if not isinstance(kwargs.get("queued_us"), int):
            raise ValueError("queued_us missing")
        for key in ("nuid", "last_error", "group"):
            if kwargs.get(key) is not None and not isinstance(kwargs[key], str):
                raise ValueError(f"{key} is not a string")
        if kwargs.get("complete") is not None and not isinstance(kwargs["complete"], bool):
            raise ValueError("complete is not a boolean")
        return cls(**kwargs)


def _entry_id(path: str) -> str:
    return hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()[:24]


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """``path`` holds ``data`` or its old content, whatever happens (temp, fsync, rename)."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


class UploadQueue:
    """The pending entries and the log of finished uploads in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.pending_dir = directory / "pending"
        self.bad_dir = directory / "bad"
        self.log_path = directory / "uploaded.jsonl"
        self.bad_entries = 0
        self._uploaded: dict[str, tuple[int, int]] = {}

    def open(self) -> list[UploadEntry]:
        """Create the directories, read the log, return the pending entries (oldest first)."""
        self.pending_dir.mkdir(parents=True, exist_ok=True)
        self._uploaded = dict(self._read_log())
        entries = []
        for path in sorted(self.pending_dir.glob("*.json")):
            entry = self._read_entry(path)
            if entry is not None:
                entries.append(entry)
        entries.sort(key=lambda e: (e.queued_us, e.id))
        return entries

    def _read_entry(self, path: Path) -> UploadEntry | None:
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_ENTRY_BYTES + 1)
            if len(data) > MAX_ENTRY_BYTES:
                raise ValueError(f"larger than {MAX_ENTRY_BYTES} bytes")
            entry = UploadEntry.from_json(data)
            if path.stem != entry.id:
                raise ValueError(f"id {entry.id!r} does not match the file name")
            return entry
        except (OSError, ValueError, TypeError) as exc:
            self.bad_entries += 1
            log.error("fleet: upload queue entry %s is unreadable (%s); moved to %s", path, exc, self.bad_dir)
            with contextlib.suppress(OSError):
                self.bad_dir.mkdir(exist_ok=True)
                os.replace(path, self.bad_dir / path.name)
            return None

    def _read_log(self) -> Iterator[tuple[str, tuple[int, int]]]:
        try:
            f = open(self.log_path, "rb")  # noqa: SIM115 - closed below; absent is normal
        except FileNotFoundError:
            return
        with f:
            for line in f:
                if len(line) > MAX_LOG_LINE:
                    continue
                try:
                    doc = json.loads(line)
                    yield str(doc["path"]), (int(doc["size"]), int(doc["mtime_ns"]))
                except (ValueError, TypeError, KeyError):
                    continue  # a torn last line after a power cut: that upload is redone

    def is_uploaded(self, path: str, size: int, mtime_ns: int) -> bool:
        return self._uploaded.get(path) == (size, mtime_ns)

    def add(
        self,
        path: Path,
        *,
        object_name: str,
        group: str = "",
        frames: int = -1,
        complete: bool | None = None,
        now_us: int | None = None,
    ) -> UploadEntry:
        """Queue ``path`` (an entry already pending for it is replaced: the file was closed again)."""
        entry = UploadEntry(
            id=_entry_id(str(path)),
            path=str(path),
            object=object_name,
            queued_us=time.time_ns() // 1000 if now_us is None else now_us,
            group=group,
            frames=frames,
            complete=complete,
        )
        self.save(entry)
        return entry

    def save(self, entry: UploadEntry) -> None:
        write_atomic(self.pending_dir / f"{entry.id}.json", entry.to_json())

    def update(self, entry: UploadEntry, **changes: Any) -> UploadEntry:
        new = replace(entry, **changes)
        self.save(new)
        return new

    def done(self, entry: UploadEntry, *, size: int, mtime_ns: int, sha256: str) -> None:
        """Log the verified upload (fsynced), then drop the pending entry."""
        line = {
            "path": entry.path,
            "object": entry.object,
            "size": size,
            "mtime_ns": mtime_ns,
            "sha256": sha256,
            "nuid": entry.nuid,
            "uploaded_us": time.time_ns() // 1000,
        }
        with open(self.log_path, "ab") as f:
            f.write(json.dumps(line, separators=(",", ":")).encode() + b"\n")
            f.flush()
            os.fsync(f.fileno())
        self._uploaded[entry.path] = (size, mtime_ns)
        self.drop(entry)

    def drop(self, entry: UploadEntry) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.pending_dir / f"{entry.id}.json").unlink()
        _fsync_dir(self.pending_dir)

    def scan(
        self, output_dir: Path, *, before_ns: int, exclude: Iterable[str], pending: Iterable[str]
    ) -> list[Path]:
        """Finished recordings in ``output_dir`` never uploaded: ``*.wrtf`` last modified before
        ``before_ns`` (the daemon's start: anything later may be a file being written), neither
        open (``exclude``), nor queued (``pending``), nor in the log with the same size and time."""
        skip = set(exclude) | set(pending)
        found = []
        for path in sorted(output_dir.rglob("*.wrtf")):
            if self.directory in path.parents or str(path) in skip:
                continue
            try:
                st = path.stat()
            except OSError:
                continue
            if st.st_mtime_ns >= before_ns or not path.is_file():
                continue
            if self.is_uploaded(str(path), st.st_size, st.st_mtime_ns):
                continue
            found.append(path)
        return found
