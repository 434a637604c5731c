"""SavvyCAN / GVRET CSV rows -> CAN frames (pure; for import and tests).

The file starts with a header naming its columns; SavvyCAN writes::

    Time Stamp,ID,Extended,Dir,Bus,LEN,D1,D2,D3,D4,D5,D6,D7,D8
    166064000,0x0000021A,false,Rx,0,8,FE,36,12,FE,69,05,07,AD,

(older GVRET files have no ``Dir`` column). ``Time Stamp`` is in microseconds, ``ID`` is hex
with or without ``0x``, ``Extended`` is ``true``/``false`` (or 1/0), ``Bus`` a number, ``LEN`` the
data length and ``D1``.. the bytes in hex. Columns are found by name, so their order and extra
columns do not matter; a trailing comma is ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

from wrtfd.decoders.can_dbc import CanFrame
from wrtfd.errors import DecodeError

__all__ = ["MAX_LINE_BYTES", "SavvycanColumns", "is_savvycan_header", "parse_savvycan_row"]

#: A row of 8 data bytes is under 80 bytes; CAN FD rows (64 bytes) under 300.
MAX_LINE_BYTES = 512
_TRUE = frozenset({b"true", b"1", b"yes"})
_FALSE = frozenset({b"false", b"0", b"no", b""})


def _key(cell: bytes) -> bytes:
    return cell.strip().replace(b" ", b"").lower()


def is_savvycan_header(line: bytes) -> bool:
    """The header line of a SavvyCAN/GVRET CSV (``Time Stamp,ID,Extended,...``)."""
    cells = [_key(c) for c in line.split(b",")]
    return len(cells) >= 4 and cells[:3] == [b"timestamp", b"id", b"extended"] and b"len" in cells


@dataclass(frozen=True, slots=True)
class SavvycanColumns:
    """Where each value sits in a row (from the header)."""

    time: int
    ident: int
    extended: int
    bus: int | None
    length: int
    data: int  # first data byte column (D1)

    @classmethod
    def from_header(cls, line: bytes) -> SavvycanColumns:
        """:raises DecodeError: ``bad_header`` when a needed column is missing."""
        cells = [_key(c) for c in line.split(b",")]
        try:
            return cls(
                time=cells.index(b"timestamp"),
                ident=cells.index(b"id"),
                extended=cells.index(b"extended"),
                bus=cells.index(b"bus") if b"bus" in cells else None,
                length=cells.index(b"len"),
                data=cells.index(b"d1"),
            )
        except ValueError:
            raise DecodeError(f"not a SavvyCAN CSV header: {line[:80]!r}", reason="bad_header") from None


def parse_savvycan_row(line: bytes, columns: SavvycanColumns) -> tuple[int, CanFrame]:
    """``(bus, frame)`` of one row; the frame's ``timestamp_ns`` is the row's microseconds.

    :raises DecodeError: ``too_long``, ``malformed``, ``bad_id``, ``bad_dlc``.
    """
    if len(line) > MAX_LINE_BYTES:
        raise DecodeError(f"row of {len(line)} bytes > {MAX_LINE_BYTES}", reason="too_long")
    cells = line.strip().split(b",")
    c = columns
    if len(cells) <= max(c.time, c.ident, c.extended, c.length, c.bus or 0):
        raise DecodeError(f"row has {len(cells)} columns: {line[:60]!r}", reason="malformed")
    try:
        time_us = int(cells[c.time])
        bus = int(cells[c.bus]) if c.bus is not None else 0
        length = int(cells[c.length])
    except ValueError:
        raise DecodeError(f"not a SavvyCAN row: {line[:60]!r}", reason="malformed") from None
    if time_us < 0 or not 0 <= bus <= 255:
        raise DecodeError(f"time or bus out of range: {line[:60]!r}", reason="malformed")
    ident = cells[c.ident].strip()
    if ident[:2] in (b"0x", b"0X"):
        ident = ident[2:]
    flag = cells[c.extended].strip().lower()
    if flag not in _TRUE and flag not in _FALSE:
        raise DecodeError(f"Extended is {flag[:10]!r}, not true/false", reason="malformed")
    extended = flag in _TRUE
    try:
        arbitration_id = int(ident, 16) if 0 < len(ident) <= 8 else -1
    except ValueError:
        arbitration_id = -1
    if not 0 <= arbitration_id <= (0x1FFFFFFF if extended else 0x7FF):
        raise DecodeError(f"CAN id {ident[:10]!r} out of range", reason="bad_id")
    if not 0 <= length <= 8:
        raise DecodeError(f"LEN {length} (classic CAN: 0..8)", reason="bad_dlc")
    raw = cells[c.data : c.data + length]
    if len(raw) != length:
        raise DecodeError(f"{len(raw)} data bytes, LEN says {length}", reason="bad_dlc")
    try:
        data = bytes(int(b, 16) for b in raw)
    except ValueError:
        raise DecodeError(f"data bytes {b','.join(raw)[:40]!r} are not hex", reason="bad_dlc") from None
    if any(len(b.strip()) > 2 for b in raw):
        raise DecodeError("a data byte has more than two hex digits", reason="bad_dlc")
    return bus, CanFrame(arbitration_id, data, extended, False, time_us * 1000)
