"""Writing markers into frames as the engine produces them (layout: :mod:`wrtfd.format.markers`).

The engine asks for a marker at a tick of the session in progress (the tick of "now"); the
stamper writes the marker's record into the frames from the first one at or after that tick on,
a chunk per frame. Pure: no clock, no I/O; bounded (at most :data:`MAX_PENDING` markers wait).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from wrtfd.errors import WrtfdError
from wrtfd.format.markers import CHUNK_BYTES, MARKER_FIELD, clean_note, encode_record
from wrtfd.recorder.ops import PlacedMarker

__all__ = ["MAX_PENDING", "MarkerStamper", "TooManyMarkersError"]

#: Markers asked for but not yet placed (their tick not reached yet); more are refused.
MAX_PENDING = 64


class TooManyMarkersError(WrtfdError):
    """A marker asked for while :data:`MAX_PENDING` wait for their frame already: refused (counted
    in :attr:`MarkerStamper.refused`). Example: a script posting marks in a loop."""


class MarkerStamper:
    """Places requested markers into frame blocks, one record chunk per frame."""

    def __init__(self) -> None:
        self._pending: deque[tuple[int, int, str]] = deque()
        self._record = b""
        self._pos = 0
        self._id = 0
        self.requested = 0
        self.placed = 0
        #: Markers lost because their session ended before their tick was written.
        self.dropped = 0
        #: Markers refused because :data:`MAX_PENDING` were waiting already.
        self.refused = 0

    @property
    def idle(self) -> bool:
        return not self._pending and not self._record

    def request(self, tick: int, wall_us: int, note: str) -> bool:
        """Ask for a marker at session tick ``tick``; False when too many are waiting."""
        if len(self._pending) >= MAX_PENDING:
            self.refused += 1
            return False
        self._pending.append((max(0, int(tick)), int(wall_us), clean_note(note)))
        self.requested += 1
        return True

    def reset(self) -> None:
        """A session ended or began: markers not yet placed are dropped (counted)."""
        self.dropped += len(self._pending)
        self._pending.clear()
        self._record = b""
        self._pos = 0
        self._id = 0

    def stamp(self, frames: np.ndarray) -> list[PlacedMarker]:
        """Write pending marker bytes into ``frames`` (in place); the markers started in them."""
        if self.idle or len(frames) == 0:
            return []
        ticks = frames["tick"]
        field = frames[MARKER_FIELD]
        ids = field["id"]
        offsets = field["offset"]
        chunks = field["chunk"]
        n = len(frames)
        last_tick = int(ticks[-1])
        placed: list[PlacedMarker] = []
        i = 0
        while i < n:
            if self._record:
                piece = self._record[self._pos : self._pos + CHUNK_BYTES]
                ids[i] = self._id
                offsets[i] = self._pos
                chunks[i, : len(piece)] = np.frombuffer(piece, dtype=np.uint8)
                self._pos += CHUNK_BYTES
                if self._pos >= len(self._record):
                    self._record, self._pos = b"", 0
                i += 1
                continue
            if not self._pending or self._pending[0][0] > last_tick:
                break
            tick, wall_us, note = self._pending.popleft()
            i = max(i, int(np.searchsorted(ticks, tick, side="left")))
            self._id = self._id % 255 + 1
            self._record = encode_record(wall_us, int(ticks[i]) - tick, note)
            self._pos = 0
            self.placed += 1
            placed.append(PlacedMarker(tick, wall_us, note))
        return placed
