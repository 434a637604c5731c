"""candump ``-l`` log lines -> CAN frames -> DBC channel values (for import and tests).

Line format (Linux can-utils)::

    (1631416514.717133) can0 0D2#0000FFFF10000000
    (1631416514.717133) can0 12345678#DEAD          extended id: 8 hex digits
    (1631416514.717133) can0 123#R                 remote frame (optionally R<dlc>)

CAN FD lines (``id##flags data``) are counted as ``unsupported_fd``. The timestamp is kept exact
in integer nanoseconds since the Unix epoch.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from wrtfd.decoders.base import Decoded, DropCounter, Sample
from wrtfd.decoders.can_dbc import CanFrame, DbcChannelDecoder
from wrtfd.errors import DecodeError, ImportFormatError

__all__ = ["CandumpDecoder", "candump_samples", "iter_candump", "parse_candump"]

_LINE = re.compile(rb"\((\d{1,12})\.(\d{1,9})\)\s+(\S{1,32})\s+([0-9A-Fa-f]{1,8})(#{1,2})(\S*)\s*\Z")
_HEX = re.compile(rb"(?:[0-9A-Fa-f]{2}){0,8}\Z")
#: A candump line is under 100 bytes for classic CAN; anything far longer is not one.
MAX_LINE_BYTES = 512


def parse_candump(line: bytes) -> CanFrame:
    """:raises DecodeError: ``malformed``, ``unsupported_fd``, ``bad_id``, ``bad_dlc``."""
    if len(line) > MAX_LINE_BYTES:
        raise DecodeError(f"line of {len(line)} bytes > {MAX_LINE_BYTES}", reason="too_long")
    m = _LINE.match(line.strip())
    if m is None:
        raise DecodeError(f"not a candump -l line: {line[:60]!r}", reason="malformed")
    sec, frac, _iface, ident, hashes, payload = m.groups()
    if len(hashes) == 2:
        raise DecodeError("CAN FD frames are not supported", reason="unsupported_fd")
    extended = len(ident) == 8
    if len(ident) not in (3, 8):
        raise DecodeError(f"CAN id {ident!r} must have 3 or 8 hex digits", reason="bad_id")
    arbitration_id = int(ident, 16)
    if arbitration_id > (0x1FFFFFFF if extended else 0x7FF):
        raise DecodeError(f"CAN id 0x{arbitration_id:X} out of range", reason="bad_id")
    stamp_ns = int(sec) * 1_000_000_000 + int(frac.ljust(9, b"0"))
    if payload[:1] in (b"R", b"r"):
        return CanFrame(arbitration_id, b"", extended, True, stamp_ns)
    if _HEX.match(payload) is None:
        raise DecodeError(f"data {payload[:40]!r} is not 0-8 hex bytes", reason="bad_dlc")
    return CanFrame(arbitration_id, binascii.unhexlify(payload), extended, False, stamp_ns)


class CandumpDecoder:
    """candump line -> :class:`Decoded`; same DBC path as :class:`~wrtfd.decoders.slcan.SlcanDecoder`."""

    def __init__(self, *, dbc: str | Path, mapping: Mapping[str, str] | None = None) -> None:
        self.can = DbcChannelDecoder(dbc=dbc, mapping=mapping)
        self.definition = self.can.definition

    def decode(self, data: bytes) -> Decoded | None:
        return self.can.decode_frame(parse_candump(data))


def iter_candump(path: str | Path, *, drops: DropCounter | None = None) -> Iterator[CanFrame]:
    """Every frame of a candump log, in file order; blank and ``#`` lines skipped.

    With ``drops`` given, bad lines are counted there by reason and skipped (import); without it
    the first bad line is an error (tests, strict checks).

    :raises ImportFormatError: the file cannot be read or (strict) a line is not a candump line
        (the message gives the line number).
    """
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed by the with below
    except OSError as exc:
        raise ImportFormatError(f"{path}: {exc.strerror or exc}") from exc
    with fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip() or line.startswith(b"#"):
                continue
            try:
                yield parse_candump(line)
            except DecodeError as exc:
                if drops is not None:
                    drops.add(exc.reason)
                    continue
                raise ImportFormatError(f"{path}:{lineno}: {exc}") from exc


def candump_samples(
    path: str | Path,
    decoder: CandumpDecoder,
    *,
    source: str = "can",
    drops: DropCounter | None = None,
) -> Iterator[Sample]:
    """Samples of a candump log for replay/import: ``rx_ns`` and ``source_time_ns`` are the log's
    timestamps. Frames without a mapped signal are counted in ``drops`` (``unmapped_id``...).

    :raises ImportFormatError: as :func:`iter_candump` (strict unless ``drops`` is given).
    """
    counter = drops if drops is not None else DropCounter()
    decode = decoder.can.decode_frame
    for frame in iter_candump(path, drops=drops):
        try:
            decoded = decode(frame)
        except DecodeError as exc:
            counter.add(exc.reason)
            continue
        stamp = frame.timestamp_ns if frame.timestamp_ns is not None else 0
        yield Sample.from_decoded(source, stamp, decoded)
