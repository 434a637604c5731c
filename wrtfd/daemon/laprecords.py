"""Lap records: every completed lap, one JSON line in ``<recordings>/laps.jsonl`` (docs/lap-records.md).

An observer of the recording like the journal: :meth:`LapBook.notify` puts the event on a queue
and returns; a thread of its own writes the line (flushed at once, so a ``kill -9`` of the
daemon loses none) and fsyncs the file on the recording's ``fsync_interval_s``. The file is
append-only; the fleet publisher (:mod:`wrtfd.fleet.laps`) reads it from where it stopped, so a
rig without a fleet has its laps too and a rig with one sends them after an outage.

A record's ``id`` is derived from what the lap is (rig, group, session start, lap number, end
time): the same lap sent twice is the same record, which is how the server keeps each once.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import queue
import threading
import time
from pathlib import Path
from typing import Any

from wrtfd import __version__
from wrtfd.recorder.observe import FileOpened, LapCompleted, LiveFrames, RecordingEvent

__all__ = ["LAPS_FILE", "RECORD_VERSION", "LapBook", "lap_record", "record_id"]

log = logging.getLogger("wrtfd.laps")

LAPS_FILE = "laps.jsonl"
RECORD_VERSION = 1


def record_id(rig: str, group: str, session_start_us: int, lap: int, end_s: float) -> str:
    key = f"{rig}|{group}|{session_start_us}|{lap}|{end_s:.6f}"
    return hashlib.sha256(key.encode()).hexdigest()[:24]


def lap_record(ev: LapCompleted, *, rig: str, file: str | None, session: int | None) -> dict[str, Any]:
    """The record of one lap (a JSON-ready dict; the wire and file format in docs/lap-records.md)."""
    info = dict(ev.info)
    return {
        "v": RECORD_VERSION,
        "id": record_id(rig, ev.group, ev.session_start_us, ev.lap, ev.end_s),
        "rig": rig,
        "group": ev.group,
        "driver": info.get("driver"),
        "car": info.get("car"),
        "track": info.get("track"),
        "session_type": info.get("session_type"),
        "lap": ev.lap,
        "time_s": round(ev.time_s, 6),
        "sectors_s": [round(s, 6) for s in ev.sectors_s],
        "valid": ev.valid,
        "pit": ev.pit,
        "conditions": None if ev.conditions is None else dict(ev.conditions),
        "file": file,
        "session": session,
        "session_start_us": ev.session_start_us,
        "start_s": round(ev.start_s, 6),
        "end_s": round(ev.end_s, 6),
        "first_tick": ev.first_tick,
        "last_tick": ev.last_tick,
        "wall_us": ev.wall_us,
        "wrtfd": __version__,
    }


class LapBook:
    """Writes lap records beside the recordings (see the module docstring)."""

    def __init__(self, output_dir: Path, *, rig: str, fsync_interval_s: float) -> None:
        self.output_dir = output_dir
        self.path = output_dir / LAPS_FILE
        self.rig = rig
        self.fsync_interval_s = fsync_interval_s
        self.records = 0
        self.errors = 0
        self._queue: queue.SimpleQueue[RecordingEvent | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        # per group: the file being written and the session starts seen in it
        self._files: dict[str, tuple[str, list[int]]] = {}

    def notify(self, item: RecordingEvent | LiveFrames) -> None:
        if isinstance(item, FileOpened | LapCompleted):
            self._queue.put(item)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="wrtfd-laps", daemon=True)
            self._thread.start()

    def close(self, timeout_s: float = 2.0) -> None:
        """Write what is queued, fsync, stop the thread."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout_s)
            self._thread = None

    def _run(self) -> None:
        f = None
        dirty_since: float | None = None
        while True:
            wait = (
                None
                if dirty_since is None
                else max(0.0, dirty_since + self.fsync_interval_s - time.monotonic())
            )
            try:
                item = self._queue.get(timeout=wait)
            except queue.Empty:
                item = "sync"  # type: ignore[assignment]
            if item is None or item == "sync":
                if f is not None and dirty_since is not None:
                    with contextlib.suppress(OSError):
                        os.fsync(f.fileno())
                    dirty_since = None
                if item is None:
                    if f is not None:
                        f.close()
                    return
                continue
            if isinstance(item, FileOpened):
                self._files[item.group] = (item.path, [item.wall_us])
                continue
            if not isinstance(item, LapCompleted):
                continue
            try:
                if f is None:
                    f = self._open()
                f.write(json.dumps(self._record(item), separators=(",", ":")).encode() + b"\n")
                f.flush()
                self.records += 1
                if dirty_since is None:
                    dirty_since = time.monotonic()
            except OSError as exc:
                self.errors += 1
                log.error("lap record not written to %s: %s", self.path, exc.strerror or exc)

    def _open(self) -> Any:
        self.output_dir.mkdir(parents=True, exist_ok=True)
        f = open(self.path, "ab+")  # noqa: SIM115 - kept open by the thread, closed at the end
        # a line torn by a power cut: the next record starts on a line of its own
        if f.seek(0, os.SEEK_END) > 0:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                f.write(b"\n")
        return f

    def _record(self, ev: LapCompleted) -> dict[str, Any]:
        file = session = None
        known = self._files.get(ev.group)
        if known is not None:
            path, starts = known
            if ev.session_start_us < starts[0]:
                session = 0  # a session that began in the file before (rotated into this one)
            else:
                if ev.session_start_us not in starts:
                    starts.append(ev.session_start_us)
                session = starts.index(ev.session_start_us)
            try:
                file = str(Path(path).relative_to(self.output_dir))
            except ValueError:
                file = path
        return lap_record(ev, rig=self.rig, file=file, session=session)
