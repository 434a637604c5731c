"""MoTeC i2 log files: one ``.ld`` per session and the ``.ldx`` beside it (lap beacons).

There is no official specification; the layout is the one worked out by open implementations
(``../shared/spec/motec-ld.md`` has the facts and sources, ``docs/exports.md`` the choices made
here). In short:

- header (1762 bytes) at 0 with the "ADL" device block, date, time, driver, vehicle, venue, the
  "pro logging" word at 0x5DE and the short comment; it points to the event block and to the
  first channel;
- event (name, session, long comment) -> venue (name) -> vehicle (id), each pointing to the
  next; they sit at the offsets files from MoTeC loggers use (vehicle 1762, venue 5078, event
  8180, channels 11336), which is also where a writer whose files are reported to open in
  i2 Standard and Pro puts them;
- a doubly linked list of 124-byte channel blocks (prev, next, data pointer, sample count,
  type, rate, shift/mul/scale/decimals, name, short name, unit), then each channel's samples,
  contiguous. Every channel has the file's rate and the same count: i2 expects constant rates.

Values: physical = (raw / scale * 10^-dec + shift) * mul. This writer always writes shift 0,
mul 1, scale 1 and chooses the raw type and ``dec`` per channel (:func:`choose_encoding`).
"""

from __future__ import annotations

import datetime as dt
import math
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from wrtfd import __version__
from wrtfd.errors import ExportError, TrackError
from wrtfd.exporters.atomic import AtomicOutputs
from wrtfd.exporters.channels import Channel, fill_dropped_ticks, hold_non_finite, numeric_channels
from wrtfd.exporters.dates import session_start
from wrtfd.exporters.ldx import Marker, ldx_document
from wrtfd.exporters.motec_names import MotecName, motec_name, protocol_of
from wrtfd.exporters.summary import ExportSummary, FramesProgress
from wrtfd.format.export import export_frames, select_sessions
from wrtfd.format.reader import Reader, ticks_to_time_us
from wrtfd.format.schema import Schema, StructDef
from wrtfd.tracks.analysis import session_laps
from wrtfd.tracks.model import Track

__all__ = [
    "LdChannel",
    "LdEncoding",
    "LdHeader",
    "choose_encoding",
    "encode_values",
    "export_ld",
    "ld_channels",
    "ld_header_for",
    "ld_targets",
    "session_markers",
    "write_ld",
]

#: The header: marker 0x40, pointers (channel blocks, channel data, event), device block,
#: channel count, date, time, driver, vehicle id, venue, "pro logging" word, short comment.
HEADER = struct.Struct("<I4xII20xI24xHHHI8sHHI4x16s16x16s16x64s64s64x64s64x1024xI66x64s126x")
EVENT = struct.Struct("<64s64s1024sH")  # name, session, long comment, venue pointer
VENUE = struct.Struct("<64s1034xH")  # name, vehicle pointer
VEHICLE = struct.Struct("<64s128xI32s32s")  # id, weight, type, comment
#: prev, next, data pointer, samples, counter, type class, size, rate Hz, shift, mul, scale, dec,
#: name, short name, unit.
CHANNEL = struct.Struct("<IIIIHHHHhhhh32s8s12s40x")

VEHICLE_AT = 1762
VENUE_AT = 5078
EVENT_AT = 8180
CHANNELS_AT = 11336

MARKER = 0x40
DEVICE_WORDS = (1, 0x4240, 0x000F)  # constant in files from MoTeC loggers
DEVICE_SERIAL = 0x1F44
DEVICE_TYPE = b"ADL"
DEVICE_VERSION = 420
DEVICE_WORD2 = 0xADB0
PRO_LOGGING = 0x000C81A4  # the "pro logging" flag word at 0x5DE
CHANNEL_COUNTER0 = 0x2EE1

CLASS_INT = 0x03
CLASS_FLOAT = 0x07

_INT16 = (-(1 << 15), (1 << 15) - 1)
_INT32 = (-(1 << 31), (1 << 31) - 1)
MAX_DEC = 7  # GPS degrees at 1e-7 (about 1 cm), as other writers use for latitude/longitude
_F32_HALF_ULP = 2.0**-24
_F32_MAX = float(np.finfo(np.float32).max)
_MAX_NEG_DEC = 300

#: A few units in MoTeC's spelling; the rest are written as the definition gives them.
MOTEC_UNITS = {"degC": "C", "degF": "F", "N*m": "Nm"}


@dataclass(frozen=True, slots=True)
class LdEncoding:
    """How one channel's samples are stored: raw type, and decimal places (physical = raw *
    10^-dec). ``precision`` is the largest error the encoding can add."""

    raw: np.dtype
    type_class: int
    dec: int
    precision: float

    @property
    def size(self) -> int:
        return self.raw.itemsize


F32 = LdEncoding(np.dtype("<f4"), CLASS_FLOAT, 0, 0.0)


def _fits(lo: float, hi: float, bounds: tuple[int, int]) -> bool:
    return bounds[0] <= lo and hi <= bounds[1]


def choose_encoding(values: np.ndarray, *, integer: bool, exact_float32: bool) -> LdEncoding:
    """The raw type and decimal places for one channel's (finite) values.

    - integers: int16 when the values fit, else int32; beyond int32, int32 with negative
      decimal places (the smallest power of ten that fits; precision half of it);
    - float32 values written unchanged (``exact_float32``): float32, bit for bit;
    - anything else (float64, converted values): int32 with the most decimal places (at most
      :data:`MAX_DEC`, negative for huge values) that fit the largest magnitude, when that is
      finer than float32's rounding there; float32 otherwise.
    """
    if exact_float32:
        return F32
    if len(values) == 0:
        return LdEncoding(np.dtype("<i2"), CLASS_INT, 0, 0.0) if integer else F32
    lo, hi = float(np.min(values)), float(np.max(values))
    if integer:
        if _fits(lo, hi, _INT16):
            return LdEncoding(np.dtype("<i2"), CLASS_INT, 0, 0.0)
        if _fits(lo, hi, _INT32):
            return LdEncoding(np.dtype("<i4"), CLASS_INT, 0, 0.0)
        k = 1
        while not _fits(math.floor(lo / 10**k), math.ceil(hi / 10**k), _INT32):
            k += 1
        return LdEncoding(np.dtype("<i4"), CLASS_INT, -k, 0.5 * 10**k)
    amax = max(abs(lo), abs(hi))
    # float32 rounding at this magnitude (half an ulp; half the smallest subnormal near zero);
    # beyond float32's range it cannot hold the values at all
    f32_err = max(amax * _F32_HALF_ULP, 2.0**-150) if amax < _F32_MAX else math.inf
    for dec in range(MAX_DEC, -_MAX_NEG_DEC - 1, -1):
        if amax * 10.0**dec <= _INT32[1] - 1:
            err = 0.5 * 10.0**-dec
            if err < f32_err:
                return LdEncoding(np.dtype("<i4"), CLASS_INT, dec, err)
            break
    return LdEncoding(np.dtype("<f4"), CLASS_FLOAT, 0, f32_err)


def encode_values(values: np.ndarray, enc: LdEncoding) -> np.ndarray:
    """Physical values -> raw samples of ``enc`` (little-endian, ready to write)."""
    if enc.type_class == CLASS_FLOAT:
        return np.asarray(values).astype(enc.raw)
    if enc.dec == 0 and np.issubdtype(np.asarray(values).dtype, np.integer):
        return np.asarray(values).astype(enc.raw)
    scaled = np.rint(np.asarray(values, dtype=np.float64) * 10.0**enc.dec)
    return scaled.astype(enc.raw)


@dataclass(frozen=True, slots=True)
class LdHeader:
    """The text fields of the header and its event, venue and vehicle blocks."""

    start: dt.datetime  # local time of the first sample
    driver: str = ""
    vehicle: str = ""
    venue: str = ""
    event: str = ""
    session: str = ""
    short_comment: str = ""
    long_comment: str = ""


@dataclass(frozen=True, slots=True)
class LdChannel:
    """A channel as written: its WRTF channel, its MoTeC names, the conversion and encoding."""

    channel: Channel
    name: str
    short: str
    unit: str
    factor: float
    offset: float

    @property
    def converts(self) -> bool:
        return self.factor != 1.0 or self.offset != 0.0

    @property
    def stays_integer(self) -> bool:
        """An integer channel whose conversion (if any) is a whole-number shift."""
        return self.channel.is_integer and self.factor == 1.0 and float(self.offset).is_integer()

    def values(self, frames: np.ndarray, index: np.ndarray | None) -> np.ndarray:
        """Physical values on the fixed-rate grid (NaN held, conversion applied)."""
        col = self.channel.column(frames)
        if index is not None:
            col = col[index]
        if not self.channel.is_integer:
            col = hold_non_finite(col)
        if not self.converts:
            return col
        if self.stays_integer:
            return col.astype(np.int64) + int(self.offset)
        return col.astype(np.float64) * self.factor + self.offset

    def encoding(self, frames: np.ndarray, index: np.ndarray | None) -> LdEncoding:
        if self.channel.leaf.kind == "float32" and not self.converts:
            return F32  # no need to look at the values
        return choose_encoding(self.values(frames, index), integer=self.stays_integer, exact_float32=False)


def _ascii(text: str, size: int) -> bytes:
    """Fixed-size NUL-padded ASCII (non-ASCII becomes '?'), always NUL-terminated."""
    return text.encode("ascii", "replace")[: size - 1]


def _unique(name: str, taken: set[str], size: int) -> str:
    base = name.encode("ascii", "replace").decode("ascii")[: size - 1]
    out, k = base, 2
    while out.lower() in taken:
        tail = f"_{k}"
        out = base[: size - 1 - len(tail)] + tail
        k += 1
    taken.add(out.lower())
    return out


def _source_protocols(schema: Schema, channels: Sequence[Channel]) -> dict[str | None, str | None]:
    out: dict[str | None, str | None] = {}
    for src in {c.source for c in channels}:
        if src is None:
            fields = [f.name for f in schema.frame_fields]
        else:
            ftype = next(f.type for f in schema.frame_fields if f.name == src)
            t = schema.types[ftype]
            fields = [f.name for f in t.fields] if isinstance(t, StructDef) else []
        # a source struct's fields are prefixed by nothing: names are the protocol's own
        out[src] = protocol_of(fields)
    return out


def ld_channels(schema: Schema, *, motec_names: bool = True) -> list[LdChannel]:
    """The channels of a ``.ld`` file: every numeric channel, MoTeC names for the common ones.

    Two channels can never share a name (i2 looks them up by name): a MoTeC name goes to the
    first channel that claims it, the derived ``laps`` set first; later ones keep their own.
    """
    channels = numeric_channels(schema)
    protocols = _source_protocols(schema, channels) if motec_names else {}
    chosen: dict[int, MotecName] = {}
    claimed: set[str] = set()
    order = sorted(range(len(channels)), key=lambda i: protocols.get(channels[i].source) != "laps")
    for i in order:
        c = channels[i]
        m = motec_name(protocols, c.source, c.local_name)
        if m is not None and m.name not in claimed:
            claimed.add(m.name)
            chosen[i] = m
    taken: set[str] = {m.name.lower() for m in chosen.values()}
    out = []
    for i, c in enumerate(channels):
        m = chosen.get(i)
        if m is not None:
            name, short = m.name, m.short
            unit = m.unit if m.unit is not None else c.unit
            factor, offset = m.factor, m.offset
        else:
            name = _unique(c.name, taken, 32)
            short, unit, factor, offset = c.local_name[:7], c.unit, 1.0, 0.0
        out.append(LdChannel(c, name, short, MOTEC_UNITS.get(unit, unit), factor, offset))
    return out


Progress = Callable[[int], None]


def write_ld(
    out: BinaryIO,
    frames: np.ndarray,
    channels: Sequence[LdChannel],
    header: LdHeader,
    rate_hz: int,
    progress: Progress | None = None,
) -> list[LdEncoding]:
    """Write one session's ``.ld`` to ``out``; returns each channel's encoding.

    :raises ExportError: a rate or a count the format cannot hold.
    """
    if not 1 <= rate_hz <= 0xFFFF:
        raise ExportError(f"MoTeC .ld holds rates of 1..65535 Hz, this file is {rate_hz} Hz")
    if len(channels) > 0xFFFF - CHANNEL_COUNTER0:
        raise ExportError(f"{len(channels)} channels are more than a MoTeC .ld can number")
    ticks = frames["tick"]
    index: np.ndarray | None = fill_dropped_ticks(ticks)
    n = len(ticks) if index is None else len(index)
    if n > 0xFFFFFFFF:
        raise ExportError(f"{n} samples per channel are more than a MoTeC .ld can count")
    # Pass 1: each channel's encoding (needs its range), so that every pointer is known.
    encodings = [c.encoding(frames, index) for c in channels]
    data_at = CHANNELS_AT + CHANNEL.size * len(channels)
    head = bytearray(data_at)
    date, clock = header.start.strftime("%d/%m/%Y"), header.start.strftime("%H:%M:%S")
    HEADER.pack_into(
        head,
        0,
        MARKER,
        CHANNELS_AT if channels else 0,
        data_at if channels else 0,
        EVENT_AT,
        *DEVICE_WORDS,
        DEVICE_SERIAL,
        DEVICE_TYPE,
        DEVICE_VERSION,
        DEVICE_WORD2,
        len(channels),
        date.encode("ascii"),
        clock.encode("ascii"),
        _ascii(header.driver, 64),
        _ascii(header.vehicle, 64),
        _ascii(header.venue, 64),
        PRO_LOGGING,
        _ascii(header.short_comment, 64),
    )
    EVENT.pack_into(
        head,
        EVENT_AT,
        _ascii(header.event, 64),
        _ascii(header.session, 64),
        _ascii(header.long_comment, 1024),
        VENUE_AT,
    )
    VENUE.pack_into(head, VENUE_AT, _ascii(header.venue, 64), VEHICLE_AT)
    VEHICLE.pack_into(
        head, VEHICLE_AT, _ascii(header.vehicle, 64), 0, b"", _ascii(f"wrtfd {__version__}", 32)
    )
    ptr = data_at
    for k, (c, enc) in enumerate(zip(channels, encodings, strict=True)):
        at = CHANNELS_AT + k * CHANNEL.size
        CHANNEL.pack_into(
            head,
            at,
            at - CHANNEL.size if k else 0,
            at + CHANNEL.size if k + 1 < len(channels) else 0,
            ptr,
            n,
            CHANNEL_COUNTER0 + k,
            enc.type_class,
            enc.size,
            rate_hz,
            0,  # shift
            1,  # mul
            1,  # scale
            enc.dec,
            _ascii(c.name, 32),
            _ascii(c.short, 8),
            _ascii(c.unit, 12),
        )
        ptr += enc.size * n
    out.write(head)
    # Pass 2: the samples, channel after channel.
    for k, (c, enc) in enumerate(zip(channels, encodings, strict=True)):
        out.write(encode_values(c.values(frames, index), enc).tobytes())
        if progress:
            progress(k + 1)
    return encodings


def ld_header_for(
    metadata: dict[str, str], session_header: np.void | None, start_us: int, session: int, source_file: Path
) -> LdHeader:
    """Header text from the file's metadata (``Driver``, ``Car``, ``Track``, ``Event``,
    ``Session``, ``Comment``), falling back to the session header's ``car``/``track``/
    ``session_type`` that the games report."""

    def from_header(name: str) -> str:
        if (
            session_header is None
            or session_header.dtype.names is None
            or name not in session_header.dtype.names
        ):
            return ""
        raw = np.asarray(session_header[name])
        if raw.dtype != np.uint8:
            return ""
        return bytes(raw).split(b"\0", 1)[0].decode("utf-8", "replace")

    start = session_start(source_file, session, start_us)
    return LdHeader(
        start=start,
        driver=metadata.get("Driver", ""),
        vehicle=metadata.get("Car") or from_header("car"),
        venue=metadata.get("Track") or from_header("track"),
        event=metadata.get("Event", ""),
        session=metadata.get("Session") or from_header("session_type") or f"session {session}",
        short_comment=metadata.get("Comment", ""),
        long_comment=f"Exported by wrtfd {__version__} from {source_file.name}, session {session}",
    )


def ld_targets(output: Path, sessions: Sequence[int]) -> list[Path]:
    """One ``.ld`` per session: ``output`` itself for a single session, else ``run-s0.ld``..."""
    if len(sessions) == 1:
        return [output]
    return [output.with_name(f"{output.stem}-s{i}{output.suffix}") for i in sessions]


def export_ld(
    reader: Reader,
    output: Path,
    outputs: AtomicOutputs,
    *,
    sessions: Sequence[int] | None = None,
    track: Track | None = None,
    motec_names: bool = True,
    progress: FramesProgress | None = None,
) -> ExportSummary:
    """Write an ``.ld`` and its ``.ldx`` per session (sessions without frames that pass the frame
    check are skipped).

    Beacons come from ``track`` (laps re-detected from positions) or from the recorded lap
    channels; a session with neither gets an ``.ldx`` without beacons.

    :raises ExportError: nothing to export, or a limit of the format (rate, channel count).
    """
    chosen = [s for s in select_sessions(reader, sessions) if s.frame_count > 0]
    if not chosen:
        raise ExportError(f"{reader.path}: no frames to export")
    channels = ld_channels(reader.schema, motec_names=motec_names)
    total = sum(s.frame_count for s in chosen)
    done = 0
    paths: list[Path] = []
    for s, target in zip(chosen, ld_targets(output, [s.index for s in chosen]), strict=True):
        frames = export_frames(reader, s.index)
        if len(frames) == 0:  # every frame fails the frame check: skipped like an empty session
            continue
        ticks = frames["tick"]
        span = int(ticks[-1]) - int(ticks[0]) + 1
        if span > len(frames) + reader.rate_hz * 3600 or span > 0xFFFFFFFF:
            raise ExportError(
                f"{reader.path}: session {s.index} has {span - len(frames)} dropped ticks, too many to fill"
                " for MoTeC's fixed rate"
            )
        times_us = ticks_to_time_us(ticks, s.time_base_us, reader.rate_hz)
        header = ld_header_for(reader.metadata, s.header, int(times_us[0]), s.index, reader.path)
        base = done

        def step(k: int, base: int = base, n: int = len(frames)) -> None:
            if progress:
                progress(base + n * k // max(1, len(channels)), total)

        ld_path = outputs.path(target)
        with open(ld_path, "wb") as f:
            write_ld(f, frames, channels, header, reader.rate_hz, step)
        done += len(frames)
        laps = _beacons(frames, times_us, track)
        ldx_path = outputs.path(target.with_suffix(".ldx"))
        ldx_path.write_bytes(ldx_document(*laps, markers=session_markers(reader, s.index)))
        paths += [target, target.with_suffix(".ldx")]
    if not paths:
        raise ExportError(f"{reader.path}: no frames to export (every frame fails the frame check)")
    return ExportSummary(paths, done, f"{len(channels)} channels")


def _beacons(
    frames: np.ndarray, times_us: np.ndarray, track: Track | None
) -> tuple[list[float], list[tuple[int, float]]]:
    """Crossing times (s from the first sample) and (i2 lap number, lap time) of the laps."""
    times_s = (times_us - times_us[0]) / 1e6
    try:
        found = session_laps(frames, times_s, track)
    except TrackError:
        if track is not None:
            raise
        return [], []  # no lap channels: the log is one long lap
    crossings = [t for t in found.crossings_s if t > 0.0]
    # i2 numbers the stretch before the first beacon lap 1: a lap starting at beacon k is lap k + 1.
    numbers = {round(t, 6): k + 2 for k, t in enumerate(crossings)}
    laps = [(numbers.get(round(lap.start_s, 6), lap.number), lap.time_s) for lap in found.laps]
    return crossings, laps


def session_markers(reader: Reader, session: int) -> list[Marker]:
    """Markers of a session (docs/markers.md), for the ``.ldx``: seconds from the first frame."""
    from wrtfd.format.markers import read_markers

    frames = export_frames(reader, session)
    if len(frames) == 0:
        return []
    first = int(frames["tick"][0])
    out = []
    for k, m in enumerate(read_markers(reader, session), start=1):
        out.append(Marker(max(0.0, (m.tick - first) / reader.rate_hz), m.note or f"Marker {k}"))
    return out
