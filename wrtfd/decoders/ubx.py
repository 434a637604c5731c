"""u-blox UBX binary frames -> navigation solution (pure: no device, no clock).

Three pieces, each usable alone:

- :class:`UbxFramer` cuts a serial byte stream into UBX frames (``B5 62``, class, id, 16-bit
  length, payload, 8-bit Fletcher checksum). The stream may interleave NMEA sentences (a
  receiver's default output): they are skipped whole and counted in ``nmea_lines``. Lengths are
  bounded; a bad checksum, an over-long frame, an unknown class or bytes that are neither UBX
  nor NMEA are counted drops, and the framer resynchronises on the next sync pattern.
- :class:`UbxDecoder` turns NAV-PVT and HNR-PVT into the channels of ``ubx.wrtf.yaml``
  with a precompiled ``struct`` (the layouts are fixed; the tests check it against pyubx2's own
  parse of real receiver logs). ACK, NAK and MON-VER are the receiver's side of the
  configuration conversation: they decode to None and the source reads them.
- :class:`UbxFeed` runs both on the chunks a source reads and hands samples to a sink, the way
  :class:`~wrtfd.decoders.lines.LineFeed` does for line protocols.

``source_time_ns`` is UTC (ns since the Unix epoch) when the receiver flags date and time valid,
else the GPS time of week (iTOW) in ns: an arbitrary epoch, as the contract allows.
"""

from __future__ import annotations

import datetime as dt
import math
import struct
from collections.abc import Callable, Mapping
from operator import mul
from typing import Any

from wrtfd.decoders._common import load_definition
from wrtfd.decoders.base import Decoded, DropCounter, Sample, SampleSink, SinkFull
from wrtfd.errors import DecodeError

__all__ = [
    "ACK_ACK",
    "ACK_NAK",
    "HNR_PVT",
    "KNOWN_CLASSES",
    "MAX_NMEA_BYTES",
    "MAX_PAYLOAD_BYTES",
    "MON_VER",
    "NAV_PVT",
    "UbxDecoder",
    "UbxFeed",
    "UbxFramer",
    "frame_ubx",
    "parse_mon_ver",
    "ubx_checksum",
    "ubx_definition",
]

SYNC = b"\xb5\x62"
#: (class, id) of the messages this module reads.
NAV_PVT = (0x01, 0x07)
HNR_PVT = (0x28, 0x00)
ACK_ACK = (0x05, 0x01)
ACK_NAK = (0x05, 0x00)
MON_VER = (0x0A, 0x04)

#: Message classes of the UBX protocol (NAV, RXM, INF, ACK, CFG, UPD, MON, AID, TIM, ESF, MGA,
#: LOG, SEC, HNR, NAV2); any other class byte is a counted ``unknown_class`` drop.
KNOWN_CLASSES = frozenset(
    {0x01, 0x02, 0x04, 0x05, 0x06, 0x09, 0x0A, 0x0B, 0x0D, 0x10, 0x13, 0x21, 0x27, 0x28, 0x29}
)

#: Longest payload accepted. The largest periodic messages (NAV-SAT with every satellite of
#: four constellations, RXM-RAWX) stay under it; a longer length field is noise.
MAX_PAYLOAD_BYTES = 4096
#: Longest NMEA sentence skipped whole (NMEA allows 82 characters; proprietary ones are longer).
MAX_NMEA_BYTES = 200

_NAV_PVT = struct.Struct("<IHBBBBBBIiBBBBiiiiIIiiiiiIIHH")  # the first 80 bytes (to flags3)
_HNR_PVT = struct.Struct("<IHBBBBBBiBB2xiiiiiiiiIIII")  # 68 of 72 bytes (4 reserved at the end)
_UNIX_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_NAN = math.nan
#: fixType -> the NMEA definition's fix_mode (0 and 5 carry no position).
_FIX_MODE = (1, 2, 2, 3, 3, 1)


def ubx_definition() -> dict[str, Any]:
    """A fresh copy of the WRTF definition of the UBX frame (``wrtfd/schemas/ubx.wrtf.yaml``)."""
    return load_definition("ubx.wrtf.yaml")


def ubx_checksum(body: bytes | bytearray | memoryview) -> bytes:
    """The 8-bit Fletcher checksum (CK_A, CK_B) over class, id, length and payload.

    CK_B sums the running CK_A, i.e. byte i (of n) weighted n - i: two C-level sums, no loop in
    Python (a tenth of the per-byte loop's time for a NAV-PVT).
    """
    n = len(body)
    return bytes((sum(body) & 0xFF, sum(map(mul, range(n, 0, -1), body)) & 0xFF))


def frame_ubx(msg_class: int, msg_id: int, payload: bytes = b"") -> bytes:
    """A whole UBX frame around ``payload`` (what a receiver, or the simulator, sends)."""
    if len(payload) > 0xFFFF:
        raise ValueError(f"UBX payload of {len(payload)} bytes does not fit a 16-bit length")
    body = struct.pack("<BBH", msg_class, msg_id, len(payload)) + payload
    return SYNC + body + ubx_checksum(body)


def parse_mon_ver(payload: bytes) -> tuple[str, str, tuple[str, ...]]:
    """MON-VER payload -> (software version, hardware version, extension strings).

    Strings are NUL-padded ASCII: 30 bytes, 10 bytes, then 30 bytes per extension.
    """
    if len(payload) < 40 or (len(payload) - 40) % 30:
        raise DecodeError(f"MON-VER payload of {len(payload)} bytes", reason="malformed")

    def text(raw: bytes) -> str:
        return raw.split(b"\x00", 1)[0].decode("ascii", errors="replace")

    extensions = tuple(text(payload[i : i + 30]) for i in range(40, len(payload), 30))
    return text(payload[:30]), text(payload[30:40]), extensions


class UbxFramer:
    """Split a byte stream into whole UBX frames (sync to checksum), skipping NMEA lines.

    Never holds more than one frame's worth of bytes plus the unfinished tail of a chunk.
    Drops (added to ``drops``): ``bad_checksum``, ``too_long`` (length over
    ``MAX_PAYLOAD_BYTES``), ``unknown_class``, ``line_too_long`` (an NMEA sentence without an
    end), ``garbage`` (a run of bytes that start neither a frame nor a sentence).
    """

    __slots__ = ("_buf", "drops", "frames", "max_payload", "nmea_lines")

    def __init__(self, *, max_payload: int = MAX_PAYLOAD_BYTES, drops: DropCounter | None = None) -> None:
        self.max_payload = max_payload
        self._buf = bytearray()
        self.drops = drops if drops is not None else DropCounter()
        self.nmea_lines = 0
        self.frames = 0

    @property
    def pending_bytes(self) -> int:
        return len(self._buf)

    def reset(self) -> None:
        """Forget a partial frame (a new device handle, a new baud rate)."""
        self._buf.clear()

    def feed(self, data: bytes) -> list[bytes]:
        """Add received bytes; return the complete, checked frames they finish, in order."""
        buf = self._buf
        buf += data
        n = len(buf)
        out: list[bytes] = []
        drops = self.drops
        i = 0
        while i < n:
            first = buf[i]
            if first == 0xB5:
                if n - i < 6:
                    if n - i >= 2 and buf[i + 1] != 0x62:
                        i = self._skip_garbage(buf, i, n)
                        continue
                    break
                if buf[i + 1] != 0x62:
                    i = self._skip_garbage(buf, i, n)
                    continue
                length = buf[i + 4] | (buf[i + 5] << 8)
                if length > self.max_payload:
                    drops.add("too_long")
                    i += 2
                    continue
                end = i + 8 + length
                if end > n:
                    break
                if ubx_checksum(memoryview(buf)[i + 2 : end - 2]) != buf[end - 2 : end]:
                    drops.add("bad_checksum")
                    i += 2  # resynchronise on the next sync pattern, maybe inside this one
                    continue
                if buf[i + 2] not in KNOWN_CLASSES:
                    drops.add("unknown_class")
                    i = end
                    continue
                out.append(bytes(buf[i:end]))
                i = end
            elif first == 0x24:  # '$': an NMEA sentence up to its line feed
                j = buf.find(b"\n", i, i + MAX_NMEA_BYTES + 2)
                if j < 0:
                    if n - i > MAX_NMEA_BYTES + 1:
                        drops.add("line_too_long")
                        i = self._skip_garbage(buf, i, n, count=False)
                        continue
                    break
                self.nmea_lines += 1
                i = j + 1
            else:
                i = self._skip_garbage(buf, i, n)
        del buf[:i]
        self.frames += len(out)
        return out

    def _skip_garbage(self, buf: bytearray, i: int, n: int, *, count: bool = True) -> int:
        """Index of the next byte after ``buf[i]`` that may start a frame or sentence; counts one
        ``garbage`` for the run skipped. Line ends (a sentence's CR left behind) are not garbage.
        """
        j = i + 1
        while j < n and buf[j] not in (0xB5, 0x24):
            j += 1
        if count and any(b not in (0x0D, 0x0A) for b in buf[i:j]):
            self.drops.add("garbage")
        return j


def _utc_ns(year: int, month: int, day: int, hour: int, minute: int, sec: int, nano: int) -> int | None:
    try:
        days = dt.date(year, month, day).toordinal() - _UNIX_EPOCH_ORDINAL
    except ValueError:
        return None
    if hour > 23 or minute > 59 or sec > 60:
        return None
    return (days * 86400 + hour * 3600 + minute * 60 + sec) * 1_000_000_000 + nano


def _initial_state() -> dict[str, object]:
    return {
        "fix_time_utc_us": 0,
        "itow_ms": 0,
        "lat_deg": _NAN,
        "lon_deg": _NAN,
        "height_m": _NAN,
        "alt_msl_m": _NAN,
        "speed_mps": _NAN,
        "course_deg": _NAN,
        "vel_n_mps": _NAN,
        "vel_e_mps": _NAN,
        "vel_d_mps": _NAN,
        "fix_type": 0,
        "fix_mode": 0,
        "fix_ok": False,
        "carrier_solution": 0,
        "satellites_used": 0,
        "h_acc_m": _NAN,
        "v_acc_m": _NAN,
        "speed_acc_mps": _NAN,
        "heading_acc_deg": _NAN,
        "pdop": _NAN,
        "message": 0,
    }


class UbxDecoder:
    """Stateful UBX frame decoder: ``decode(frame)`` -> the navigation state after that frame.

    Frames are whole (sync to checksum) as :class:`UbxFramer` returns them; the checksum is
    checked again here so a frame from elsewhere cannot slip through. NAV-PVT sets every
    channel; HNR-PVT sets those it carries (the others hold). ACK-ACK, ACK-NAK and MON-VER
    decode to None; other messages are ``unused_message`` drops.
    """

    def __init__(self) -> None:
        self.definition = ubx_definition()
        self._state = _initial_state()

    @property
    def state(self) -> Mapping[str, object]:
        return self._state

    def reset(self) -> None:
        """Forget the fix (a reconnect)."""
        self._state = _initial_state()

    def decode(self, data: bytes) -> Decoded | None:
        if len(data) < 8 or data[:2] != SYNC:
            raise DecodeError("not a UBX frame", reason="not_ubx")
        length = data[4] | (data[5] << 8)
        if len(data) != length + 8:
            raise DecodeError(f"UBX frame of {len(data)} bytes, length field {length}", reason="malformed")
        if ubx_checksum(data[2:-2]) != data[-2:]:
            raise DecodeError("UBX checksum mismatch", reason="bad_checksum")
        return self.decode_checked(data)

    def decode_checked(self, data: bytes) -> Decoded | None:
        """:meth:`decode` of a frame :class:`UbxFramer` returned (its envelope already checked)."""
        key = (data[2], data[3])
        if key == NAV_PVT:
            return self._nav_pvt(data[6:-2])
        if key == HNR_PVT:
            return self._hnr_pvt(data[6:-2])
        if key[0] == 0x05 or key == MON_VER:
            return None
        if key[0] not in KNOWN_CLASSES:
            raise DecodeError(f"UBX class 0x{key[0]:02X} is not a u-blox class", reason="unknown_class")
        raise DecodeError(f"UBX 0x{key[0]:02X} 0x{key[1]:02X} is not used", reason="unused_message")

    def _time(self, fields: tuple[Any, ...], valid: int, itow: int) -> int:
        s = self._state
        utc = _utc_ns(*fields) if valid & 0x03 == 0x03 else None
        if utc is None or utc < 0:
            s["fix_time_utc_us"] = 0
            return itow * 1_000_000
        s["fix_time_utc_us"] = utc // 1000
        return utc

    def _nav_pvt(self, payload: bytes) -> Decoded:
        if len(payload) not in (84, 92):
            raise DecodeError(f"NAV-PVT payload of {len(payload)} bytes (84 or 92)", reason="bad_length")
        (
            itow, year, month, day, hour, minute, sec, valid, _t_acc, nano,
            fix_type, flags, _flags2, num_sv, lon, lat, height, h_msl, h_acc, v_acc,
            vel_n, vel_e, vel_d, g_speed, head_mot, s_acc, head_acc, p_dop, _flags3,
        ) = _NAV_PVT.unpack_from(payload)  # fmt: skip
        s = self._state
        time_ns = self._time((year, month, day, hour, minute, sec, nano), valid, itow)
        ok = bool(flags & 0x01) and 0 < fix_type < 5
        s["carrier_solution"] = flags >> 6
        s["satellites_used"] = num_sv
        s["pdop"] = p_dop * 0.01
        _store_fix(s, 1, ok, itow, fix_type, flags, (lat, lon, height, h_msl, g_speed, head_mot))
        _store_accuracy(s, h_acc, v_acc, s_acc, head_acc)
        if ok:
            s["vel_n_mps"] = vel_n * 1e-3
            s["vel_e_mps"] = vel_e * 1e-3
            s["vel_d_mps"] = vel_d * 1e-3
        else:
            s["vel_n_mps"] = s["vel_e_mps"] = s["vel_d_mps"] = _NAN
        return Decoded(values=dict(s), source_time_ns=time_ns)

    def _hnr_pvt(self, payload: bytes) -> Decoded:
        if len(payload) != 72:
            raise DecodeError(f"HNR-PVT payload of {len(payload)} bytes (72)", reason="bad_length")
        (
            itow, year, month, day, hour, minute, sec, valid, nano, fix_type, flags,
            lon, lat, height, h_msl, g_speed, _speed, head_mot, _head_veh,
            h_acc, v_acc, s_acc, head_acc,
        ) = _HNR_PVT.unpack_from(payload)  # fmt: skip
        s = self._state
        time_ns = self._time((year, month, day, hour, minute, sec, nano), valid, itow)
        ok = bool(flags & 0x01) and 0 < fix_type < 5
        _store_fix(s, 2, ok, itow, fix_type, flags, (lat, lon, height, h_msl, g_speed, head_mot))
        _store_accuracy(s, h_acc, v_acc, s_acc, head_acc)
        return Decoded(values=dict(s), source_time_ns=time_ns)


#: The position fields NAV-PVT and HNR-PVT share, and their scales to degrees, metres, m/s.
_FIX_FIELDS = (
    ("lat_deg", 1e-7),
    ("lon_deg", 1e-7),
    ("height_m", 1e-3),
    ("alt_msl_m", 1e-3),
    ("speed_mps", 1e-3),
    ("course_deg", 1e-5),
)


def _store_fix(
    s: dict[str, Any], message: int, ok: bool, itow: int, fix_type: int, flags: int, raw: tuple[int, ...]
) -> None:
    """The fix of a NAV-PVT (``message`` 1) or HNR-PVT (2) into the held values; NaN without one."""
    s["itow_ms"] = itow
    s["fix_type"] = fix_type if fix_type <= 5 else 0
    s["fix_mode"] = _FIX_MODE[fix_type] if ok else 1
    s["fix_ok"] = bool(flags & 0x01)
    s["message"] = message
    for (name, scale), value in zip(_FIX_FIELDS, raw, strict=True):
        s[name] = value * scale if ok else _NAN


def _store_accuracy(s: dict[str, Any], h_acc: int, v_acc: int, s_acc: int, head_acc: int) -> None:
    s["h_acc_m"] = h_acc * 1e-3
    s["v_acc_m"] = v_acc * 1e-3
    s["speed_acc_mps"] = s_acc * 1e-3
    s["heading_acc_deg"] = head_acc * 1e-5


#: Called with each configuration-conversation frame (ACK, NAK, MON-VER): ``(class, id, payload)``.
ControlSink = Callable[[int, int, bytes], None]


class UbxFeed:
    """Frames and decodes the byte chunks of one UBX source named ``name``.

    Navigation frames become samples stamped ``rx_ns``; ACK/NAK/MON-VER frames go to
    ``control`` (the source's configuration conversation). Pure, so a replay of the raw tap
    could run the same code on the same chunks.
    """

    __slots__ = ("control", "decoder", "drops", "framer", "name", "navigation")

    def __init__(
        self,
        name: str,
        decoder: UbxDecoder,
        *,
        drops: DropCounter | None = None,
        control: ControlSink | None = None,
    ) -> None:
        self.name = name
        self.decoder = decoder
        self.drops = drops if drops is not None else DropCounter()
        self.framer = UbxFramer(drops=self.drops)
        self.control = control
        #: Navigation frames (NAV-PVT, HNR-PVT) decoded so far.
        self.navigation = 0

    def reset(self) -> None:
        self.framer.reset()
        self.decoder.reset()

    def feed(self, rx_ns: int, data: bytes, sink: SampleSink) -> tuple[int, int]:
        """Hand ``sink`` a sample per navigation frame ``data`` completes; ``(frames, samples)``."""
        frames = self.framer.feed(data)
        if not frames:
            return 0, 0
        decode = self.decoder.decode_checked
        dropped = self.drops
        samples = 0
        for frame in frames:
            if frame[2] == 0x05 or (frame[2], frame[3]) == MON_VER:
                if self.control is not None:
                    self.control(frame[2], frame[3], frame[6:-2])
                continue
            try:
                decoded = decode(frame)
            except DecodeError as exc:
                dropped.add(exc.reason)
                continue
            if decoded is None:
                continue
            self.navigation += 1
            try:
                sink(Sample(self.name, rx_ns, decoded.values, decoded.source_time_ns))
            except SinkFull:
                dropped.add("queue_full")
                continue
            samples += 1
        return len(frames), samples
