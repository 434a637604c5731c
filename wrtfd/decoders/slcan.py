"""SLCAN (Lawicel ASCII) lines -> CAN frames -> DBC channel values (pure).

Received lines (the source cuts at ``\\r``)::

    tiiildd..[ssss]      standard data frame: 3 hex id, DLC 0-8, 2*DLC hex data, optional timestamp
    Tiiiiiiiildd..[ssss] extended data frame: 8 hex id
    riiil[ssss]          standard remote frame (no data)
    Riiiiiiiil[ssss]     extended remote frame
    z / Z                transmit acknowledgements; V..., v..., N..., F.. replies to queries
    BEL (0x07)           the adapter refused a command

The optional timestamp is milliseconds 0..59999 that wrap each minute; the decoder unwraps it
into a running count, so ``source_time_ns`` is on the adapter's own (arbitrary) epoch.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Mapping
from pathlib import Path

from wrtfd.decoders.base import Decoded
from wrtfd.decoders.can_dbc import CanFrame, DbcChannelDecoder
from wrtfd.errors import DecodeError

__all__ = ["SLCAN_BITRATES", "SlcanDecoder", "encode_slcan", "parse_slcan"]

#: bit/s -> the ``Sn`` command that selects it.
SLCAN_BITRATES: dict[int, bytes] = {
    10_000: b"S0",
    20_000: b"S1",
    50_000: b"S2",
    100_000: b"S3",
    125_000: b"S4",
    250_000: b"S5",
    500_000: b"S6",
    800_000: b"S7",
    1_000_000: b"S8",
}

_FRAME = re.compile(rb"([tTrR])([0-9A-Fa-f]+)\Z")
_TIMESTAMP_WRAP_MS = 60_000
_ACK_PREFIXES = frozenset(b"zZVvNF")
_BEL = 0x07


def parse_slcan(line: bytes) -> CanFrame | None:
    """One SLCAN line -> a frame (timestamp in raw ms * 1e6, not unwrapped), None for replies.

    :raises DecodeError: ``adapter_error`` (BEL), ``malformed``, ``bad_dlc``, ``unknown_command``.
    """
    fields = _parse(line)
    return None if fields is None else CanFrame(*fields)


def _parse(line: bytes) -> tuple[int, bytes, bool, bool, int | None] | None:
    """:func:`parse_slcan` without building a CanFrame (the 8,000 frames/s path)."""
    if not line:
        return None
    first = line[0]
    if first == _BEL:
        raise DecodeError("adapter answered BEL (command refused)", reason="adapter_error")
    m = _FRAME.match(line)
    if m is None:
        if first in _ACK_PREFIXES:
            return None
        raise DecodeError(f"not an SLCAN frame: {line[:20]!r}", reason="unknown_command")
    kind = line[0:1]
    id_len = 3 if kind in (b"t", b"r") else 8
    rest = m.group(2)
    if len(rest) < id_len + 1:
        raise DecodeError(f"SLCAN frame too short: {line[:30]!r}", reason="malformed")
    dlc = rest[id_len] - 0x30
    if not 0 <= dlc <= 8:
        raise DecodeError(f"DLC {chr(rest[id_len])!r} not in 0..8", reason="bad_dlc")
    arbitration_id = int(rest[:id_len], 16)
    if (id_len == 3 and arbitration_id > 0x7FF) or arbitration_id > 0x1FFFFFFF:
        raise DecodeError(f"CAN id 0x{arbitration_id:X} out of range", reason="bad_id")
    remote = kind in (b"r", b"R")
    pos = id_len + 1
    data_len = 0 if remote else 2 * dlc
    tail = len(rest) - pos - data_len
    if tail not in (0, 4):
        raise DecodeError(f"SLCAN frame length does not match DLC {dlc}: {line[:30]!r}", reason="malformed")
    data = binascii.unhexlify(rest[pos : pos + data_len]) if data_len else b""
    stamp = int(rest[pos + data_len :], 16) * 1_000_000 if tail else None
    return arbitration_id, data, id_len == 8, remote, stamp


def encode_slcan(frame: CanFrame, *, timestamp_ms: int | None = None) -> bytes:
    """The SLCAN line (with ``\\r``) an adapter sends for ``frame``."""
    if frame.is_extended:
        head = b"%s%08X" % (b"R" if frame.is_remote else b"T", frame.arbitration_id)
    else:
        head = b"%s%03X" % (b"r" if frame.is_remote else b"t", frame.arbitration_id)
    body = head + b"%d" % len(frame.data) + (b"" if frame.is_remote else binascii.hexlify(frame.data).upper())
    if timestamp_ms is not None:
        body += b"%04X" % (timestamp_ms % _TIMESTAMP_WRAP_MS)
    return body + b"\r"


class SlcanDecoder:
    """SLCAN line -> :class:`Decoded` with the DBC channels of that frame.

    Options: ``dbc`` (path), ``mapping`` (channel -> ``MESSAGE.SIGNAL``; None maps every signal).
    Replies (acks, version) decode to None; everything else that carries no mapped channel raises
    :class:`DecodeError` so the source counts it (``unmapped_id``, ``remote_frame``, ...).
    """

    def __init__(self, *, dbc: str | Path, mapping: Mapping[str, str] | None = None) -> None:
        self.can = DbcChannelDecoder(dbc=dbc, mapping=mapping)
        self.definition = self.can.definition
        self._decode_data = self.can.decode_data
        self._wraps_ms = 0
        self._last_ms = -1

    def reset(self) -> None:
        """A reconnect restarts the adapter's clock."""
        self._wraps_ms = 0
        self._last_ms = -1

    def _unwrap(self, stamp_ns: int) -> int:
        ms = stamp_ns // 1_000_000
        if ms < self._last_ms:
            self._wraps_ms += _TIMESTAMP_WRAP_MS
        self._last_ms = ms
        return (self._wraps_ms + ms) * 1_000_000

    def decode_line(self, line: bytes) -> tuple[dict[str, object], int | None] | None:
        """(channel values, adapter time) of one line; what :meth:`decode` wraps.

        The source calls this directly: at 8,000 frames/s the intermediate objects matter.
        """
        fields = _parse(line)
        if fields is None:
            return None
        arbitration_id, data, extended, remote, stamp_ns = fields
        time_ns = self._unwrap(stamp_ns) if stamp_ns is not None else None
        return self._decode_data(arbitration_id, extended, remote, data), time_ns

    def decode(self, data: bytes) -> Decoded | None:
        result = self.decode_line(data)
        if result is None:
            return None
        return Decoded(values=result[0], source_time_ns=result[1])
