"""Bounded incremental line framing for serial byte streams.

Serial bytes arrive in arbitrary chunks and are hostile: a device can stream garbage with no
line end at all. :class:`LineFramer` splits on any of a set of delimiter bytes and never holds
more than ``max_line_bytes`` of an unfinished line: a longer line is dropped whole (counted as
``line_too_long``) and the framer resynchronises at the next delimiter.
"""

from __future__ import annotations

import re

from wrtfd.decoders.base import DropCounter

__all__ = ["LineFramer"]


class LineFramer:
    """Split a byte stream into lines (delimiters removed, empty lines skipped).

    ``delimiters``: every byte in it ends a line (``b"\\r\\n"`` for NMEA, ``b"\\r\\x07"`` for
    SLCAN, ``b">"`` to cut ELM327 responses at the prompt). Drops are added to ``drops``.
    """

    __slots__ = ("_discarding", "_max", "_split", "_tail", "drops")

    def __init__(
        self,
        *,
        delimiters: bytes = b"\r\n",
        max_line_bytes: int = 256,
        drops: DropCounter | None = None,
    ) -> None:
        if not delimiters:
            raise ValueError("delimiters must not be empty")
        if max_line_bytes < 1:
            raise ValueError(f"max_line_bytes must be >= 1, got {max_line_bytes}")
        self._split = re.compile(b"[" + re.escape(delimiters) + b"]").split
        self._max = max_line_bytes
        self._tail = b""
        self._discarding = False
        self.drops = drops if drops is not None else DropCounter()

    @property
    def pending_bytes(self) -> int:
        """Bytes of an unfinished line held back (never more than ``max_line_bytes``)."""
        return len(self._tail)

    def reset(self) -> None:
        """Forget any partial line (after a reconnect the old tail belongs to a dead stream)."""
        self._tail = b""
        self._discarding = False

    def feed(self, data: bytes) -> list[bytes]:
        """Add received bytes; return the complete lines they finish, in order."""
        parts = self._split(self._tail + data if self._tail else data)
        tail = parts.pop()
        limit = self._max
        if self._discarding:
            if not parts:
                # Still inside an over-long line: keep discarding without buffering.
                return []
            parts[0] = b""  # the rest of the over-long line
            self._discarding = False
        if len(tail) > limit:
            self.drops.add("line_too_long")
            tail = b""
            self._discarding = True
        self._tail = tail
        out: list[bytes] = []
        for line in parts:
            if not line:
                continue
            if len(line) > limit:
                self.drops.add("line_too_long")
                continue
            out.append(line)
        return out
