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
    "FileClosed",
    "FileOpened",
    "LiveFrames",
    "MarkerAdded",
    "Observer",
    "ObserverHub",
    "RecordingEvent",
    "SessionEnded",
    "SessionStarted",
    "SourceStateChanged",
]

log = logging.getLogger("wrtfd.observe")


@dataclass(frozen=True, slots=True)
class FileOpened:
    group: str
    path: str
    wall_us: int


@dataclass(frozen=True, slots=True)
class FileClosed:
    group: str
    path: str
    frames: int
    bytes: int
    #: True when the document footer was written (the file validates without repair).
    complete: bool


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


RecordingEvent = FileOpened | FileClosed | SessionStarted | SessionEnded | MarkerAdded | SourceStateChanged


class Observer(Protocol):
    """A consumer of the recording (see the module docstring for the contract)."""

    def notify(self, item: RecordingEvent | LiveFrames) -> None: ...


class ObserverHub:
    """Fans items out to observers; thread-safe; an observer that raises is removed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._observers: tuple[Observer, ...] = ()
        self._frames_wanted = False
        self.failed = 0

    @property
    def wants_frames(self) -> bool:
        """Any observer that takes live frames (copying frames is skipped when none does; an
        observer of events only, such as the raw tap, says so with ``wants_frames = False``)."""
        return self._frames_wanted

    def add(self, observer: Observer) -> None:
        with self._lock:
            self._set((*self._observers, observer))

    def remove(self, observer: Observer) -> None:
        with self._lock:
            self._set(tuple(o for o in self._observers if o is not observer))

    def _set(self, observers: tuple[Observer, ...]) -> None:
        self._observers = observers
        self._frames_wanted = any(getattr(o, "wants_frames", True) for o in observers)

    def publish(self, item: RecordingEvent | LiveFrames) -> None:
        for observer in self._observers:  # a snapshot: add/remove swap the tuple
            try:
                observer.notify(item)
            except Exception:
                self.failed += 1
                log.exception("observer %r failed and was removed", observer)
                self.remove(observer)
