"""What the recorder tells the world: lifecycle events and live frames, fanned out to observers.

The local file is the truth; everything else (the journal, the pit-wall page, Foxglove, the fleet
publisher, the raw tap) is an *observer* of the recording. Observers must never slow, block or
endanger the recording path, so the contract is strict:

* :meth:`Observer.notify` is called on the thread that produced the item (the event loop for
  frames and session events, the writer thread for file events) and must return at once: append
  to a bounded buffer and wake a consumer, nothing more. Never I/O, never a lock held for long.
* An observer whose ``notify`` raises is counted and dropped from the hub; the recording goes on.
* Items are immutable; a :class:`LiveFrames` block holds its own copy of the frames.

The hub is thread-safe and cheap when nobody listens (one attribute read per publish).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

__all__ = [
    "EVENT_KINDS",
    "DiskSpaceChanged",
    "FileClosed",
    "FileOpened",
    "LapCompleted",
    "LiveFrames",
    "MarkerAdded",
    "Observer",
    "ObserverHub",
    "RecordingEvent",
    "SessionEnded",
    "SessionStarted",
    "SourceStateChanged",
    "WriteFailed",
]

log = logging.getLogger("wrtfd.observe")


@dataclass(frozen=True, slots=True)
class FileOpened:
    group: str
    path: str
    wall_us: int
    #: The ``start_reason`` of the file's first session: ``rotate`` when a rotation opened it,
    #: ``resume`` after an I/O error ("" when unknown).
    reason: str = ""


@dataclass(frozen=True, slots=True)
class FileClosed:
    group: str
    path: str
    frames: int
    bytes: int
    #: True when the document footer was written (the file validates without repair).
    complete: bool
    #: Why it was closed early: the write error ("" when it was not): ``frames`` and ``bytes``
    #: are then what the file holds up to its last complete record (0 frames: removed).
    error: str = ""


@dataclass(frozen=True, slots=True)
class WriteFailed:
    """A write, flush, fsync, open or close of a recording failed (ENOSPC, EACCES, EIO...):
    frames are dropped (counted in status) until a new file is tried, ``retry_s`` later."""

    group: str
    #: The file that failed (the one being opened, when the open failed).
    path: str
    #: The OS error and its name: ``Permission denied (EACCES)``.
    error: str
    #: When the next file is tried (None: no retry; the file was being closed).
    retry_s: float | None = None


@dataclass(frozen=True, slots=True)
class SessionStarted:
    group: str
    #: ``first`` (first data), ``session`` (the game started a new one), ``request`` (SIGHUP,
    #: a marker trigger...), ``rotate``, ``resume``: the session header's ``start_reason``.
    reason: str
    wall_us: int


@dataclass(frozen=True, slots=True)
class SessionEnded:
    group: str
    #: the session footer's ``end_reason`` (``idle``, ``session``, ``request``, ``stop``...).
    reason: str
    frames: int
    dropped_ticks: int
    duration_s: float
    #: Completed laps and the best lap time (None without lap channels).
    laps: int | None = None
    best_lap_s: float | None = None


@dataclass(frozen=True, slots=True)
class MarkerAdded:
    group: str
    tick: int
    wall_us: int
    note: str


@dataclass(frozen=True, slots=True)
class SourceStateChanged:
    source: str
    #: ``first_sample``, ``silent`` or ``back``.
    state: str
    wall_us: int
    #: ``silent``: seconds since its last sample; ``back``: about how long it was silent.
    silent_s: float | None = None


@dataclass(frozen=True, slots=True)
class DiskSpaceChanged:
    """The recording file system's free space fell below the threshold (``low``) or rose back."""

    path: str
    low: bool
    free_bytes: int
    min_free_bytes: int
    wall_us: int


@dataclass(frozen=True, slots=True, eq=False)
class LiveFrames:
    """Frames of one group just closed by the scheduler (before they reach the disk).

    ``frames`` is a private copy in the recording's frame dtype (``schema`` is the
    :class:`wrtfd.format.Schema` of the group's files); ``times_us`` their wall times (N9).
    """

    group: str
    schema: object
    frames: np.ndarray
    times_us: np.ndarray = field(repr=False)


@dataclass(frozen=True, slots=True)
class LapCompleted:
    """A lap a lap-channel plug-in (game positions, GNSS) just timed, in session terms.

    ``start_s``/``end_s`` are the interpolated line crossings in session seconds (tick / rate);
    ``first_tick``/``last_tick`` the first and last frame of the lap. ``valid`` is None when the
    source does not say (the plug-in's ``lap_facts``). ``info`` holds what the session and the
    files know: ``track``, ``car``, ``session_type``, ``driver`` (only those known)."""

    group: str
    lap: int
    time_s: float
    sectors_s: tuple[float, ...]
    start_s: float
    end_s: float
    first_tick: int
    last_tick: int
    #: Wall time of the session's tick 0 (identifies the session in its file).
    session_start_us: int
    wall_us: int
    valid: bool | None = None
    info: tuple[tuple[str, str], ...] = ()
    #: A GNSS lap through the pit lane: ``"in"``, ``"out"`` or ``"in-out"`` (None: on the track).
    pit: str | None = None
    #: Weather and temperatures over the lap where the source gives them (None: it does not).
    conditions: tuple[tuple[str, str | float], ...] | None = None


RecordingEvent = (
    FileOpened
    | FileClosed
    | SessionStarted
    | SessionEnded
    | MarkerAdded
    | SourceStateChanged
    | DiskSpaceChanged
    | LapCompleted
    | WriteFailed
)

#: The name each event goes by outside the process (the pit-wall page's ``kind``, the fleet's
#: ``type``), one table so that both say the same.
EVENT_KINDS: dict[type, str] = {
    FileOpened: "file_opened",
    FileClosed: "file_closed",
    SessionStarted: "session_started",
    SessionEnded: "session_ended",
    MarkerAdded: "marker",
    SourceStateChanged: "source",
    DiskSpaceChanged: "disk",
    LapCompleted: "lap_completed",
    WriteFailed: "write_failed",
}


class Observer(Protocol):
    """A consumer of the recording (see the module docstring for the contract)."""

    def notify(self, item: RecordingEvent | LiveFrames) -> None: ...


class ObserverHub:
    """Fans items out to observers; thread-safe; an observer that raises is removed.

    An observer added with ``frames=False`` (the journal) gets the events only: it does not make
    the recorder copy every frame block for :class:`LiveFrames`. A frame observer may say, with a
    ``wants_frames`` attribute, that it takes none for now (the status page with no page open, the
    Foxglove server with no client): no copy is made for it meanwhile.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._observers: tuple[Observer, ...] = ()
        self._frame_observers: tuple[Observer, ...] = ()
        self.failed = 0

    @property
    def wants_frames(self) -> bool:
        """Any observer of frames that takes them now (copying frames is skipped otherwise)."""
        return any(getattr(o, "wants_frames", True) for o in self._frame_observers)

    def add(self, observer: Observer, *, frames: bool = True) -> None:
        with self._lock:
            self._observers = (*self._observers, observer)
            if frames:
                self._frame_observers = (*self._frame_observers, observer)

    def remove(self, observer: Observer) -> None:
        with self._lock:
            self._observers = tuple(o for o in self._observers if o is not observer)
            self._frame_observers = tuple(o for o in self._frame_observers if o is not observer)

    def publish(self, item: RecordingEvent | LiveFrames) -> None:
        # a snapshot: add/remove swap the tuples
        targets = self._frame_observers if isinstance(item, LiveFrames) else self._observers
        for observer in targets:
            try:
                observer.notify(item)
            except Exception:
                self.failed += 1
                log.exception("observer %r failed and was removed", observer)
                self.remove(observer)
