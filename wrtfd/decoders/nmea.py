"""NMEA 0183 GPS sentences -> fix state (pure; pynmeagps parses the fields).

One line in, the receiver's current fix state out. A GPS reports one fix over several sentences
(RMC, GGA, GSA, ...), each carrying part of it, so the decoder keeps the latest value of every
channel and returns the whole state after each accepted sentence; a sentence that reports
"no fix" clears the position instead of leaving a stale one.

The checksum is verified here before pynmeagps sees the line, so a bad checksum is counted as
``bad_checksum`` rather than as a parser error. ``$$``-prefixed lines (ST Teseo) are accepted.
Talkers are not filtered: GP, GN, GL, GA, GB/BD, ... all feed the same state.

``source_time_ns`` is the fix's UTC time in ns since the Unix epoch, known once a date has been
seen (RMC or ZDA); before that it is None. A time of day that falls more than 12 h before the
one the date came with is taken to be past midnight.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from typing import Any

from wrtfd._optional import missing_dependency
from wrtfd.decoders._common import load_definition
from wrtfd.decoders.base import Decoded
from wrtfd.errors import DecodeError

try:
    from pynmeagps import NMEAReader
except ImportError as exc:
    raise missing_dependency("pynmeagps", extra="daemon", purpose="the NMEA (GPS) decoder") from exc

__all__ = [
    "KNOTS_TO_MPS",
    "MAX_SENTENCE_BYTES",
    "MODE_2D",
    "MODE_3D",
    "MODE_NO_FIX",
    "MODE_UNKNOWN",
    "NmeaDecoder",
    "nmea_checksum",
    "nmea_definition",
]

#: 1 international knot = 1852 m per hour.
KNOTS_TO_MPS = 1852.0 / 3600.0

#: Longest line accepted: NMEA allows 82 characters, some receivers send longer proprietary ones.
MAX_SENTENCE_BYTES = 200

_HANDLED = frozenset({"RMC", "GGA", "VTG", "GSA", "GSV", "GLL", "ZDA", "GST"})
_HEX = frozenset(b"0123456789ABCDEFabcdef")
_UNIX_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_NAN = math.nan

MODE_UNKNOWN, MODE_NO_FIX, MODE_2D, MODE_3D = 0, 1, 2, 3


def nmea_definition() -> dict[str, Any]:
    """A fresh copy of the WRTF definition of the NMEA frame (``wrtfd/schemas/nmea.wrtf.yaml``).

    A copy: the caller (a source's ``mapping``, a test) may edit it.
    """
    return load_definition("nmea.wrtf.yaml")


def nmea_checksum(body: bytes) -> int:
    """XOR of the bytes between ``$`` and ``*``."""
    value = 0
    for b in body:
        value ^= b
    return value


def _initial_state() -> dict[str, object]:
    return {
        "fix_time_utc_us": 0,
        "lat_deg": _NAN,
        "lon_deg": _NAN,
        "alt_msl_m": _NAN,
        "geoid_sep_m": _NAN,
        "speed_mps": _NAN,
        "course_deg": _NAN,
        "fix_mode": MODE_UNKNOWN,
        "fix_quality": 0,
        "satellites_used": 0,
        "satellites_in_view": 0,
        "hdop": _NAN,
        "vdop": _NAN,
        "pdop": _NAN,
        "lat_err_m": _NAN,
        "lon_err_m": _NAN,
        "alt_err_m": _NAN,
    }


def _num(value: Any) -> float | None:
    """pynmeagps gives '' for an empty field."""
    if value == "" or value is None:
        return None
    return float(value)


class NmeaDecoder:
    """Stateful NMEA line decoder: ``decode(line)`` -> the fix state after that sentence.

    ``require_checksum``: reject sentences without ``*hh`` (``no_checksum``). gpsd accepts them;
    the default here is strict because a serial line without checksums cannot be trusted.
    """

    def __init__(self, *, require_checksum: bool = True) -> None:
        self.require_checksum = require_checksum
        self.definition = nmea_definition()
        self._clear()

    def _clear(self) -> None:
        self._state = _initial_state()
        self._date: dt.date | None = None
        self._date_sod_s = 0.0  # second of day at which _date was reported
        self._time_ns: int | None = None
        self._tod: dt.time | None = None
        self._in_view: dict[str, int] = {}

    @property
    def state(self) -> Mapping[str, object]:
        return self._state

    def reset(self) -> None:
        """Forget the fix (a new device or a reconnect)."""
        self._clear()

    # -- framing-level checks ------------------------------------------------------------

    def _check(self, data: bytes) -> tuple[bytes, str, str]:
        """Validate the envelope; return (sentence without line end, talker, sentence id)."""
        line = data.strip()
        if line.startswith(b"$$"):
            line = line[1:]
        if not line.startswith(b"$"):
            raise DecodeError("line does not start with '$'", reason="not_nmea")
        if len(line) > MAX_SENTENCE_BYTES:
            raise DecodeError(f"sentence of {len(line)} bytes > {MAX_SENTENCE_BYTES}", reason="too_long")
        star = line.rfind(b"*")
        if star < 0:
            if self.require_checksum:
                raise DecodeError("sentence has no checksum", reason="no_checksum")
            body = line[1:]
            line = line + b"*%02X" % nmea_checksum(body)
        else:
            body = line[1:star]
            given = line[star + 1 :]
            if len(given) != 2 or not _HEX.issuperset(given):
                raise DecodeError(f"checksum field {given!r} is not two hex digits", reason="bad_checksum")
            if int(given, 16) != nmea_checksum(body):
                raise DecodeError(
                    f"checksum {given.decode()} != computed {nmea_checksum(body):02X}", reason="bad_checksum"
                )
        if not body.isascii():
            raise DecodeError("non-ASCII byte in sentence", reason="garbage")
        comma = body.find(b",")
        address = (body if comma < 0 else body[:comma]).decode("ascii")
        if address.startswith("P") or len(address) != 5:
            raise DecodeError(f"unsupported sentence {address!r}", reason="unknown_sentence")
        return line, address[:2], address[2:]

    # -- decoding ----------------------------------------------------------------------

    def decode(self, data: bytes) -> Decoded | None:
        line, talker, msg_id = self._check(data)
        if msg_id not in _HANDLED:
            raise DecodeError(f"sentence {talker}{msg_id} is not used", reason="unknown_sentence")
        try:
            msg = NMEAReader.parse(line, validate=0)
            if msg is None:
                raise DecodeError(f"pynmeagps does not know {talker}{msg_id}", reason="unknown_sentence")
            getattr(self, "_on_" + msg_id)(msg, talker)
        except DecodeError:
            raise
        except Exception as exc:  # hostile input: the third-party parser may raise anything
            raise DecodeError(f"malformed {talker}{msg_id}: {exc}", reason="malformed") from exc
        return Decoded(values=dict(self._state), source_time_ns=self._time_ns)

    # -- time --------------------------------------------------------------------------

    def _set_date(self, date: dt.date, tod: Any) -> None:
        self._date = date
        self._date_sod_s = _sod(tod) if isinstance(tod, dt.time) else 0.0

    def _set_time(self, tod: Any) -> None:
        if not isinstance(tod, dt.time):
            return
        self._tod = tod
        if self._date is None:
            return
        sod = _sod(tod)
        days = self._date.toordinal() - _UNIX_EPOCH_ORDINAL
        if sod + 43200.0 < self._date_sod_s:
            days += 1  # GGA past midnight before the next RMC/ZDA brings the new date
        whole_s = days * 86400 + tod.hour * 3600 + tod.minute * 60 + tod.second
        self._time_ns = whole_s * 1_000_000_000 + tod.microsecond * 1000
        self._state["fix_time_utc_us"] = self._time_ns // 1000

    # -- fix state ---------------------------------------------------------------------

    def _no_fix(self) -> None:
        s = self._state
        s["fix_mode"] = MODE_NO_FIX
        s["lat_deg"] = _NAN
        s["lon_deg"] = _NAN

    def _position(self, msg: Any) -> bool:
        lat, lon = _num(msg.lat), _num(msg.lon)
        if lat is None or lon is None:
            return False
        if not (-90.0 <= lat <= 90.0 and -180.0 <= lon <= 180.0):
            raise DecodeError(f"position out of range: {lat}, {lon}", reason="out_of_range")
        self._state["lat_deg"] = lat
        self._state["lon_deg"] = lon
        return True

    def _raise_mode(self, mode: int) -> None:
        current = self._state["fix_mode"]
        if not isinstance(current, int) or current < mode:
            self._state["fix_mode"] = mode

    def _on_RMC(self, msg: Any, talker: str) -> None:
        date = msg.date
        if isinstance(date, dt.date):
            self._set_date(date, msg.time)
        self._set_time(msg.time)
        pos_mode = getattr(msg, "posMode", "")
        if msg.status != "A" or pos_mode == "N":
            self._no_fix()
            return
        if not self._position(msg):
            return
        self._raise_mode(MODE_2D)
        speed_kn, course = _num(msg.spd), _num(msg.cog)
        if speed_kn is not None:
            self._state["speed_mps"] = speed_kn * KNOTS_TO_MPS
        if course is not None:
            self._state["course_deg"] = course

    def _on_GGA(self, msg: Any, talker: str) -> None:
        self._set_time(msg.time)
        s = self._state
        quality = int(msg.quality) if msg.quality != "" else 0
        s["fix_quality"] = quality
        if msg.numSV != "":
            s["satellites_used"] = min(int(msg.numSV), 255)
        hdop = _num(msg.HDOP)
        if hdop is not None:
            s["hdop"] = hdop
        if quality == 0:
            self._no_fix()
            return
        if not self._position(msg):
            return
        alt, sep = _num(msg.alt), _num(msg.sep)
        if sep is not None:
            s["geoid_sep_m"] = sep
        if alt is not None:
            s["alt_msl_m"] = alt
            self._raise_mode(MODE_3D)
        else:
            self._raise_mode(MODE_2D)

    def _on_GLL(self, msg: Any, talker: str) -> None:
        self._set_time(msg.time)
        if msg.status != "A" or getattr(msg, "posMode", "") == "N":
            self._no_fix()
            return
        if self._position(msg):
            self._raise_mode(MODE_2D)

    def _on_VTG(self, msg: Any, talker: str) -> None:
        if getattr(msg, "posMode", "") == "N":
            return
        course, knots, kmh = _num(msg.cogt), _num(msg.sogn), _num(msg.sogk)
        if course is not None:
            self._state["course_deg"] = course
        if knots is not None:
            self._state["speed_mps"] = knots * KNOTS_TO_MPS
        elif kmh is not None:
            self._state["speed_mps"] = kmh / 3.6

    def _on_GSA(self, msg: Any, talker: str) -> None:
        s = self._state
        nav_mode = int(msg.navMode) if msg.navMode != "" else 0
        if nav_mode == 1:
            self._no_fix()
        elif nav_mode in (2, 3):
            s["fix_mode"] = nav_mode
        for key, name in (("PDOP", "pdop"), ("HDOP", "hdop"), ("VDOP", "vdop")):
            value = _num(getattr(msg, key, ""))
            if value is not None:
                s[name] = value

    def _on_GSV(self, msg: Any, talker: str) -> None:
        if msg.numSV != "":
            self._in_view[talker] = int(msg.numSV)
            if len(self._in_view) > 16:  # bounded: talkers come from the wire
                self._in_view = {talker: int(msg.numSV)}
            self._state["satellites_in_view"] = min(sum(self._in_view.values()), 255)

    def _on_ZDA(self, msg: Any, talker: str) -> None:
        if msg.year != "" and msg.month != "" and msg.day != "":
            try:
                date = dt.date(int(msg.year), int(msg.month), int(msg.day))
            except ValueError as exc:
                raise DecodeError(f"bad ZDA date: {exc}", reason="malformed") from exc
            self._set_date(date, msg.time)
        self._set_time(msg.time)

    def _on_GST(self, msg: Any, talker: str) -> None:
        self._set_time(msg.time)
        for key, name in (("stdLat", "lat_err_m"), ("stdLong", "lon_err_m"), ("stdAlt", "alt_err_m")):
            value = _num(getattr(msg, key, ""))
            if value is not None:
                self._state[name] = value


def _sod(tod: dt.time) -> float:
    return tod.hour * 3600 + tod.minute * 60 + tod.second + tod.microsecond / 1e6
