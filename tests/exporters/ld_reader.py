"""A MoTeC .ld reader for the tests, written from ``shared/spec/motec-ld.md`` alone.

It deliberately shares nothing with ``wrtfd.exporters.motec``: offsets and sizes are the layout
document's table, read field by field with ``struct.unpack_from``; a file the exporter lays out
differently from the document fails here.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass, field

import numpy as np

HEADER_BYTES = 1762
EVENT_BYTES = 1154
VENUE_BYTES = 1100
VEHICLE_BYTES = 260
CHANNEL_BYTES = 124
PRO_LOGGING_AT = 0x5DE


class LdLayoutError(Exception):
    """The bytes contradict the layout document."""


def _u16(b: bytes, at: int) -> int:
    return int(struct.unpack_from("<H", b, at)[0])


def _i16(b: bytes, at: int) -> int:
    return int(struct.unpack_from("<h", b, at)[0])


def _u32(b: bytes, at: int) -> int:
    return int(struct.unpack_from("<I", b, at)[0])


def _text(b: bytes, at: int, size: int) -> str:
    raw = b[at : at + size]
    if b"\0" not in raw:
        raise LdLayoutError(f"text field at {at} ({size} bytes) is not NUL-terminated")
    return raw.split(b"\0", 1)[0].decode("ascii")


@dataclass
class LdChannelBlock:
    at: int
    prev: int
    next: int
    data_ptr: int
    count: int
    counter: int
    type_class: int
    size: int
    freq_hz: int
    shift: int
    mul: int
    scale: int
    dec: int
    name: str
    short: str
    unit: str
    raw: np.ndarray = field(repr=False, default_factory=lambda: np.empty(0))

    def physical(self) -> np.ndarray:
        """physical = (raw / scale * 10^-dec + shift) * mul (the document's formula)."""
        return (self.raw.astype(np.float64) / self.scale * 10.0 ** (-self.dec) + self.shift) * self.mul

    @property
    def precision(self) -> float:
        """Half a step of the raw value in physical units (0 for floats)."""
        if self.type_class == 0x07:
            return 0.0
        return 0.5 * abs(self.mul) / abs(self.scale) * 10.0 ** (-self.dec)


@dataclass
class LdFile:
    marker: int
    channel_meta_ptr: int
    channel_data_ptr: int
    event_ptr: int
    device_words: tuple[int, int, int]
    device_serial: int
    device_type: str
    device_version: int
    num_channels: int
    date: str
    time: str
    driver: str
    vehicle: str
    venue: str
    pro_logging: int
    short_comment: str
    event_name: str
    session: str
    long_comment: str
    venue_name: str
    vehicle_id: str
    channels: list[LdChannelBlock]

    def channel(self, name: str) -> LdChannelBlock:
        hits = [c for c in self.channels if c.name == name]
        if len(hits) != 1:
            raise KeyError(f"{len(hits)} channels named {name!r}")
        return hits[0]


_DTYPES = {(0x07, 4): "<f4", (0x07, 2): "<f2", (0x00, 2): "<i2", (0x03, 2): "<i2", (0x05, 2): "<i2"}
_DTYPES.update({(0x00, 4): "<i4", (0x03, 4): "<i4", (0x05, 4): "<i4"})


def read_ld(data: bytes) -> LdFile:
    """Parse a whole .ld; checks the linked list both ways and every pointer's bounds."""
    if len(data) < HEADER_BYTES:
        raise LdLayoutError(f"{len(data)} bytes: shorter than the {HEADER_BYTES}-byte header")
    # Header @0 (document table): u32 marker; u32 chan_meta_ptr, chan_data_ptr; 20 pad;
    # u32 event_ptr @0x24; 24 pad; u16 x3; u32 serial; char[8] type; u16 version; u16 0xADB0;
    # u32 num_channels; (4 pad) date[16]; (16 pad) time[16]; (16 pad) driver[64]; vehicle[64];
    # (64 pad) venue[64]; ... u32 @0x5DE pro logging; 66 pad; short comment[64]; 126 pad.
    marker = _u32(data, 0)
    meta_ptr, data_ptr = _u32(data, 8), _u32(data, 12)
    event_ptr = _u32(data, 0x24)
    words = (_u16(data, 64), _u16(data, 66), _u16(data, 68))
    serial = _u32(data, 70)
    dev_type = _text(data, 74, 8)
    version = _u16(data, 82)
    if _u16(data, 84) != 0xADB0:
        raise LdLayoutError(f"word at 84 is {_u16(data, 84):#x}, not 0xADB0")
    n = _u32(data, 86)
    date, time = _text(data, 94, 16), _text(data, 126, 16)
    driver, vehicle = _text(data, 158, 64), _text(data, 222, 64)
    venue = _text(data, 350, 64)
    pro = _u32(data, PRO_LOGGING_AT)
    short_comment = _text(data, PRO_LOGGING_AT + 4 + 66, 64)
    if PRO_LOGGING_AT + 4 + 66 + 64 + 126 != HEADER_BYTES:
        raise AssertionError("the document's header table does not add up")
    # Event -> venue -> vehicle, each linked by a u16 pointer at its end.
    if not HEADER_BYTES <= event_ptr <= len(data) - EVENT_BYTES:
        raise LdLayoutError(f"event pointer {event_ptr} outside the file or inside the header")
    ev_name, ev_session = _text(data, event_ptr, 64), _text(data, event_ptr + 64, 64)
    long_comment = _text(data, event_ptr + 128, 1024)
    venue_ptr = _u16(data, event_ptr + 1152)
    if not HEADER_BYTES <= venue_ptr <= len(data) - VENUE_BYTES:
        raise LdLayoutError(f"venue pointer {venue_ptr} out of bounds")
    venue_name = _text(data, venue_ptr, 64)
    vehicle_ptr = _u16(data, venue_ptr + 1098)
    if not HEADER_BYTES <= vehicle_ptr <= len(data) - VEHICLE_BYTES:
        raise LdLayoutError(f"vehicle pointer {vehicle_ptr} out of bounds")
    vehicle_id = _text(data, vehicle_ptr, 64)
    blocks = [
        (0, HEADER_BYTES),
        (event_ptr, EVENT_BYTES),
        (venue_ptr, VENUE_BYTES),
        (vehicle_ptr, VEHICLE_BYTES),
    ]
    # Channel list: prev, next, data_ptr, n_samples; u16 counter, class, size, freq; i16 shift,
    # mul, scale, dec; name[32], short[8], unit[12]; 40 pad.
    channels: list[LdChannelBlock] = []
    at, prev = meta_ptr, 0
    seen: set[int] = set()
    while at:
        if at in seen or not 0 < at <= len(data) - CHANNEL_BYTES:
            raise LdLayoutError(f"channel block pointer {at} loops or is out of bounds")
        seen.add(at)
        c = LdChannelBlock(
            at,
            _u32(data, at),
            _u32(data, at + 4),
            _u32(data, at + 8),
            _u32(data, at + 12),
            _u16(data, at + 16),
            _u16(data, at + 18),
            _u16(data, at + 20),
            _u16(data, at + 22),
            _i16(data, at + 24),
            _i16(data, at + 26),
            _i16(data, at + 28),
            _i16(data, at + 30),
            _text(data, at + 32, 32),
            _text(data, at + 64, 8),
            _text(data, at + 72, 12),
        )
        if c.prev != prev:
            raise LdLayoutError(f"channel {c.name!r}: prev {c.prev}, expected {prev}")
        dtype = _DTYPES.get((c.type_class, c.size))
        if dtype is None:
            raise LdLayoutError(f"channel {c.name!r}: unknown type class {c.type_class:#x} size {c.size}")
        end = c.data_ptr + c.count * c.size
        if end > len(data):
            raise LdLayoutError(f"channel {c.name!r}: data runs to {end}, past the end {len(data)}")
        c.raw = np.frombuffer(data, dtype=dtype, count=c.count, offset=c.data_ptr)
        blocks.append((at, CHANNEL_BYTES))
        blocks.append((c.data_ptr, c.count * c.size))
        channels.append(c)
        prev, at = at, c.next
    if len(channels) != n:
        raise LdLayoutError(f"header says {n} channels, the list has {len(channels)}")
    if channels and (meta_ptr, data_ptr) != (channels[0].at, channels[0].data_ptr):
        raise LdLayoutError("header pointers do not name the first channel's block and data")
    spans = sorted((a, a + size) for a, size in blocks if size)
    for (a0, a1), (b0, b1) in itertools.pairwise(spans):
        if b0 < a1:
            raise LdLayoutError(f"blocks overlap: [{a0}, {a1}) and [{b0}, {b1})")
    return LdFile(
        marker,
        meta_ptr,
        data_ptr,
        event_ptr,
        words,
        serial,
        dev_type,
        version,
        n,
        date,
        time,
        driver,
        vehicle,
        venue,
        pro,
        short_comment,
        ev_name,
        ev_session,
        long_comment,
        venue_name,
        vehicle_id,
        channels,
    )
