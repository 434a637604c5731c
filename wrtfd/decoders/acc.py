"""Assetto Corsa Competizione broadcasting protocol (Kunos ksBroadcastingNetwork SDK, version 4).

Facts: ``shared/spec/protocols/wave2-games.md`` (section 2). The game is the server: a client
registers (``REGISTER_COMMAND_APPLICATION`` with the connection password of the game's
``broadcasting.json``) and the game then sends, one message per datagram, little-endian, strings
as a u16 byte length + UTF-8:

=====  ======================  ==========================================================
 id    message                 what wrtfd records
=====  ======================  ==========================================================
 1     REGISTRATION_RESULT     nothing (connection id, success, read-only, error text)
 2     REALTIME_UPDATE         session: type, phase, time, focused car, weather, best lap
 3     REALTIME_CAR_UPDATE     one car: position, laps, lap times and splits, world x/y
 4     ENTRY_LIST              the car indexes of the session: the slots of the arrays
 5     TRACK_DATA              track name (session info), id and length
 6     ENTRY_LIST_CAR          one car's race number, model, cup, drivers
 7     BROADCASTING_EVENT      type, message, time, car: event channels and counters
=====  ======================  ==========================================================

Car arrays (``all_*``, ``max_cars`` elements): slot *i* holds the *i*-th car of the last
ENTRY_LIST (``all_car_index[i]`` says which car index, 65535 = empty slot), since the game's car
indexes are arbitrary u16 values. A car update of a car not in the list takes the next free
slot and asks for a new entry list (:attr:`AccDecoder.entry_list_wanted`); with every slot taken
it is counted in ``skipped`` (``car_slots_full``). Every car update re-sends the arrays it
changes (the entry list and entry list cars send the car index, race number, model and cup
arrays), so the recorder's sample-and-hold always holds every car's latest values. The focused
car (the one the game's camera follows: the player's car when driving) is also recorded as
scalars.

Events have no markers yet: each BROADCASTING_EVENT sets ``event_type``, ``event_car_index``,
``event_time_ms`` and ``event_message``, adds one to ``event_count`` and to
``event_counts[type]``; several events landing in one frame leave the last one's details, but
the counters show every one of them.

Lap times and splits: INT32_MAX ("no time") becomes 0. Source clock: the session time of the
last REALTIME_UPDATE (every message until the next one carries it). A new session starts when
the track, the event index or the session index changes, or when a registration answers with
another connection id (the game restarted). Anything malformed, truncated, with trailing bytes
or of an unknown message type raises :class:`DecodeError`.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from wrtfd.decoders._common import check_channels, fit_utf8, load_definition, select_channels
from wrtfd.decoders.acc_cars import car_model_name
from wrtfd.decoders.base import Decoded, DropCounter
from wrtfd.errors import ConfigError, DecodeError

__all__ = [
    "BROADCASTING_PROTOCOL_VERSION",
    "EVENT_TYPES",
    "MSG_BROADCASTING_EVENT",
    "MSG_ENTRY_LIST",
    "MSG_ENTRY_LIST_CAR",
    "MSG_REALTIME_CAR_UPDATE",
    "MSG_REALTIME_UPDATE",
    "MSG_REGISTRATION_RESULT",
    "MSG_TRACK_DATA",
    "OUT_REGISTER",
    "OUT_REQUEST_ENTRY_LIST",
    "OUT_REQUEST_TRACK_DATA",
    "OUT_UNREGISTER",
    "SESSION_TYPES",
    "AccDecoder",
    "RegistrationResult",
    "decode_registration",
    "encode_register",
    "encode_request",
    "encode_string",
]

BROADCASTING_PROTOCOL_VERSION = 4

# client -> game
OUT_REGISTER = 1
OUT_UNREGISTER = 9
OUT_REQUEST_ENTRY_LIST = 10
OUT_REQUEST_TRACK_DATA = 11
# game -> client
MSG_REGISTRATION_RESULT = 1
MSG_REALTIME_UPDATE = 2
MSG_REALTIME_CAR_UPDATE = 3
MSG_ENTRY_LIST = 4
MSG_TRACK_DATA = 5
MSG_ENTRY_LIST_CAR = 6
MSG_BROADCASTING_EVENT = 7

#: BroadcastingCarEventType (index = the wire value); ``event_counts`` has one counter each.
EVENT_TYPES = (
    "none",
    "green_flag",
    "session_over",
    "penalty_message",
    "accident",
    "lap_completed",
    "best_session_lap",
    "best_personal_lap",
)
#: RaceSessionType
SESSION_TYPES = {
    0: "practice",
    4: "qualifying",
    9: "superpole",
    10: "race",
    11: "hotlap",
    12: "hotstint",
    13: "hotlap superpole",
    14: "replay",
}
NO_TIME = 0x7FFFFFFF  # INT32_MAX: "no lap time / split"
_NO_TIME = NO_TIME
EMPTY_SLOT = 0xFFFF
MAX_CARS_LIMIT = 255
EVENT_MESSAGE_BYTES = 64
#: Drivers of a car whose names are kept (the focused car's current driver is session info).
_MAX_DRIVERS = 8

_U8 = struct.Struct("<B")
_U16 = struct.Struct("<H")
_I32 = struct.Struct("<i")
# REGISTRATION_RESULT after the type: connectionId i32, success u8, isReadonly u8 (0 = read-only).
_REGISTRATION = struct.Struct("<iBB")
# REALTIME_UPDATE after the type: eventIndex, sessionIndex u16, sessionType, phase u8, sessionTime,
# sessionEndTime f32 (ms), focusedCarIndex i32.
_RT_HEAD = struct.Struct("<HHBBffi")
_RT_REPLAY = struct.Struct("<ff")  # replaySessionTime, replayRemainingTime (only while replaying)
# timeOfDay f32 (ms), ambientTemp, trackTemp i8, clouds, rainLevel, wetness u8 (tenths).
_RT_WEATHER = struct.Struct("<fbbBBB")
# REALTIME_CAR_UPDATE after the type: carIndex, driverIndex u16, driverCount, gear u8 (+2),
# worldPosX, worldPosY, yaw f32, carLocation u8, kmh, position, cupPosition, trackPosition u16,
# splinePosition f32, laps u16, delta i32 (ms).
_CAR = struct.Struct("<HHBBfffBHHHHfHi")
# Lap: laptimeMs i32, carIndex, driverIndex u16, split count u8, then the splits (i32 each),
# isInvalid, isValidForBest, isOutlap, isInlap u8.
_LAP_HEAD = struct.Struct("<iHHB")
_LAP_TAIL = struct.Struct("<BBBB")
_ENTRY_HEAD = struct.Struct("<iH")  # connectionId i32, car count u16
_TRACK_NUMS = struct.Struct("<ii")  # trackId, trackMeters
# ENTRY_LIST_CAR: carIndex u16, carModelType u8 | teamName | raceNumber i32, cupCategory,
# currentDriverIndex u8, nationality u16, driver count u8.
_ELC_HEAD = struct.Struct("<HB")
_ELC_MID = struct.Struct("<iBBHB")
_EVENT_TAIL = struct.Struct("<ii")  # timeMs, carId

#: The per-car channels: (name, value of an empty slot).
CAR_CHANNELS: tuple[tuple[str, int | float], ...] = (
    ("all_car_index", EMPTY_SLOT),
    ("all_race_number", 0),
    ("all_car_model", 0),
    ("all_cup_category", 0),
    ("all_driver_index", 0),
    ("all_gear", 0),
    ("all_world_x", 0.0),
    ("all_world_y", 0.0),
    ("all_yaw", 0.0),
    ("all_location", 0),
    ("all_speed_kmh", 0),
    ("all_position", 0),
    ("all_cup_position", 0),
    ("all_track_position", 0),
    ("all_spline_position", 0.0),
    ("all_laps", 0),
    ("all_delta_ms", 0),
    ("all_best_lap_ms", 0),
    ("all_last_lap_ms", 0),
    ("all_current_lap_ms", 0),
    ("all_last_split1_ms", 0),
    ("all_last_split2_ms", 0),
    ("all_last_split3_ms", 0),
    ("all_current_lap_invalid", 0),
)
_STATIC = ("all_car_index", "all_race_number", "all_car_model", "all_cup_category")


@cache
def _splits_struct(n: int) -> struct.Struct:
    return struct.Struct(f"<{n}i")


def _string(data: bytes, pos: int) -> tuple[str, int]:
    """A u16-length-prefixed UTF-8 string at ``pos``; invalid UTF-8 is replaced, not fatal."""
    end = pos + 2
    if end > len(data):
        raise DecodeError("acc: string length past the end of the datagram", reason="wrong_size")
    (n,) = _U16.unpack_from(data, pos)
    stop = end + n
    if stop > len(data):
        raise DecodeError(f"acc: {n}-byte string past the end of the datagram", reason="wrong_size")
    raw = data[end:stop]
    return (raw.decode("ascii") if raw.isascii() else raw.decode("utf-8", errors="replace")), stop


def _skip_string(data: bytes, pos: int) -> int:
    end = pos + 2
    if end > len(data):
        raise DecodeError("acc: string length past the end of the datagram", reason="wrong_size")
    stop = end + _U16.unpack_from(data, pos)[0]
    if stop > len(data):
        raise DecodeError("acc: string past the end of the datagram", reason="wrong_size")
    return stop


def _need(data: bytes, pos: int, size: int, what: str) -> None:
    if pos + size > len(data):
        raise DecodeError(
            f"acc: {what} needs {pos + size} bytes, the datagram has {len(data)}", reason="wrong_size"
        )


def _end(data: bytes, pos: int, what: str) -> None:
    if pos != len(data):
        raise DecodeError(
            f"acc: {what} ends at byte {pos} but the datagram has {len(data)}", reason="wrong_size"
        )


#: A lap as its fields are laid out when it has three splits: time ms, car index, driver index,
#: split count (3), split 1..3, invalid, valid for best, outlap, inlap (times raw: INT32_MAX = none).
Lap = tuple[int, ...]
_LAP3 = "iHHB3iBBBB"  # a lap with three splits: 25 bytes
# A car update whose three laps each have three splits (ACC's tracks have three sectors): one
# unpack for the whole message.
_CAR_FAST = struct.Struct("<HHBBfffBHHHHfHi" + _LAP3 * 3)
_CAR_FAST_SIZE = 1 + _CAR_FAST.size
_SPLIT_COUNTS = (1 + _CAR.size + 8, 1 + _CAR.size + 25 + 8, 1 + _CAR.size + 50 + 8)


def _lap(data: bytes, pos: int) -> tuple[Lap, int]:
    """A lap of any split count, as the three-split layout (splits cut or padded to three)."""
    _need(data, pos, _LAP_HEAD.size, "a lap")
    ms, car, driver, n = _LAP_HEAD.unpack_from(data, pos)
    pos += _LAP_HEAD.size
    _need(data, pos, 4 * n + _LAP_TAIL.size, "a lap's splits")
    splits = _splits_struct(n).unpack_from(data, pos) if n else ()
    pos += 4 * n
    tail = _LAP_TAIL.unpack_from(data, pos)
    return (ms, car, driver, 3, *(*splits[:3], NO_TIME, NO_TIME, NO_TIME)[:3], *tail), pos + _LAP_TAIL.size


def encode_string(text: str) -> bytes:
    """A protocol string: u16 byte length + UTF-8 (at most 65535 bytes)."""
    raw = text.encode("utf-8")
    if len(raw) > 0xFFFF:
        raise ValueError("string longer than 65535 bytes")
    return _U16.pack(len(raw)) + raw


def encode_register(
    display_name: str, connection_password: str, update_interval_ms: int, command_password: str = ""
) -> bytes:
    """REGISTER_COMMAND_APPLICATION: what a broadcasting client sends first."""
    return (
        bytes((OUT_REGISTER, BROADCASTING_PROTOCOL_VERSION))
        + encode_string(display_name)
        + encode_string(connection_password)
        + _I32.pack(update_interval_ms)
        + encode_string(command_password)
    )


def encode_request(message: int, connection_id: int) -> bytes:
    """UNREGISTER, REQUEST_ENTRY_LIST or REQUEST_TRACK_DATA: type + connection id."""
    return bytes((message,)) + _I32.pack(connection_id)


@dataclass(frozen=True, slots=True)
class RegistrationResult:
    connection_id: int
    success: bool
    read_only: bool
    error: str


def decode_registration(data: bytes) -> RegistrationResult:
    """:raises DecodeError: not a well-formed REGISTRATION_RESULT."""
    if not data or data[0] != MSG_REGISTRATION_RESULT:
        raise DecodeError("acc: not a registration result", reason="unknown_packet_id")
    _need(data, 1, _REGISTRATION.size, "a registration result")
    conn, success, writable = _REGISTRATION.unpack_from(data, 1)
    error, pos = _string(data, 1 + _REGISTRATION.size)
    _end(data, pos, "a registration result")
    return RegistrationResult(conn, success > 0, writable == 0, fit_utf8(error, 200))


def _column_builder(names: Sequence[str], offset: int = 0) -> Callable[[list[list[Any]]], dict[str, Any]]:
    """``cols -> {name: tuple(cols[offset + i]), ...}`` compiled once: the fastest way to copy the
    columns into a dict (names are checked identifiers)."""
    for n in names:
        if not n.isidentifier():
            raise ValueError(f"channel {n!r} is not an identifier")
    items = ", ".join(f"{n!r}: tuple(c[{offset + i}])" for i, n in enumerate(names))
    namespace: dict[str, Any] = {}
    exec(compile(f"def build(c):\n    return {{{items}}}\n", "<acc>", "exec"), namespace)
    build: Callable[[list[list[Any]]], dict[str, Any]] = namespace["build"]
    return build


class AccDecoder:
    """Decodes the messages the game sends to a registered broadcasting client (module docstring).

    ``max_cars``: elements of the ``all_*`` arrays (default 32; 1..255). ``channels``: record
    only these. ``skipped`` counts valid messages that record nothing, by reason.
    """

    protocol = "acc"
    #: The track comes in TRACK_DATA, the answer to a request: a new session's header waits a
    #: little for it (``recorder.info_wait_s``).
    awaits_session_info: tuple[str, ...] = ("track",)

    def __init__(self, *, max_cars: int = 32, channels: Sequence[str] | None = None) -> None:
        if isinstance(max_cars, bool) or not isinstance(max_cars, int) or not 1 <= max_cars <= MAX_CARS_LIMIT:
            raise ConfigError(f"acc.max_cars: {max_cars!r} is not in 1..{MAX_CARS_LIMIT}")
        definition = load_definition("acc.wrtf.yaml")
        for fld in definition["frame"]["fields"]:
            if fld["name"].startswith("all_"):
                fld["dimensions"] = max_cars
        chosen = check_channels(definition, channels, "acc.channels")
        self.definition: dict[str, Any] = select_channels(definition, chosen) if chosen else definition
        self._keep = frozenset(chosen) if chosen else None
        self.max_cars = max_cars
        self.skipped = DropCounter()
        #: Set when a car not in the entry list sends an update: the source asks for a new list.
        self.entry_list_wanted = False
        self.connection_id: int | None = None
        self._names = tuple(n for n, _ in CAR_CHANNELS)
        self._defaults = tuple(d for _, d in CAR_CHANNELS)
        self._cols: list[list[Any]] = [[d] * max_cars for d in self._defaults]
        self._build_all = _column_builder(self._names)
        self._build_static = _column_builder(_STATIC)
        self._build_dynamic = _column_builder(self._names[len(_STATIC) :], len(_STATIC))
        self._slot_of: dict[int, int] = {}
        self._free = 0  # next slot not taken by the entry list or a late car
        self._drivers: dict[int, tuple[int, tuple[str, ...]]] = {}  # car -> (current driver, names)
        self._focused = -1
        self._time_ns: int | None = None
        self._track = ""
        self._track_id: int | None = None
        self._session_type = ""
        self._key: tuple[int, int] | None = None
        self._pending_new = False
        self._info_dirty = True
        self._info_sent: dict[str, str] | None = None
        self._event_count = 0
        self._event_counts = [0] * len(EVENT_TYPES)
        self._dispatch: dict[int, Callable[[bytes], dict[str, Any] | None]] = {
            MSG_REALTIME_UPDATE: self._realtime,
            MSG_REALTIME_CAR_UPDATE: self._car,
            MSG_ENTRY_LIST: self._entry_list,
            MSG_TRACK_DATA: self._track_data,
            MSG_ENTRY_LIST_CAR: self._entry_list_car,
            MSG_BROADCASTING_EVENT: self._event,
        }

    @property
    def has_track(self) -> bool:
        """Whether TRACK_DATA arrived (the source asks for it until it does)."""
        return self._track_id is not None

    # --- registration (the source reads it too) -----------------------------------------------

    def set_registration(self, result: RegistrationResult) -> bool:
        """Remember a successful registration; True when the connection id is another one than
        before (the game restarted: a new session)."""
        if not result.success:
            return False
        changed = self.connection_id is not None and result.connection_id != self.connection_id
        self.connection_id = result.connection_id
        if changed:
            self._pending_new = True
        return changed

    # --- decoding ------------------------------------------------------------------------------

    def decode(self, data: bytes) -> Decoded | None:
        if not data:
            raise DecodeError("acc: empty datagram", reason="wrong_size")
        kind = data[0]
        handler = self._dispatch.get(kind)
        if handler is None:
            if kind == MSG_REGISTRATION_RESULT:
                self.set_registration(decode_registration(data))
                return None
            raise DecodeError(f"acc: unknown message type {kind}", reason="unknown_packet_id")
        values = handler(data)
        if values is None:
            return None
        if self._keep is not None:
            values = {k: v for k, v in values.items() if k in self._keep}
            if not values:
                return None
        info = None
        if self._info_dirty:
            info = self._session_info()
        new, self._pending_new = self._pending_new, False
        return Decoded(
            values=values,
            source_time_ns=self._time_ns,
            session_key=self._key,
            new_session=new,
            session_info=info,
        )

    def _session_info(self) -> dict[str, str] | None:
        self._info_dirty = False
        info: dict[str, str] = {}
        if self._track:
            info["track"] = self._track
        if self._session_type:
            info["session_type"] = self._session_type
        slot = self._slot_of.get(self._focused)
        if slot is not None:
            cols = self._cols
            info["car"] = f"{car_model_name(cols[2][slot])} #{cols[1][slot]}"
        driver = self._drivers.get(self._focused)
        if driver is not None and driver[0] < len(driver[1]):
            info["driver"] = driver[1][driver[0]]
        if not info or info == self._info_sent:
            return None
        self._info_sent = info
        return info

    def _set_key(self, key: tuple[int, int]) -> None:
        if key != self._key:
            if self._key is not None:
                self._pending_new = True
            self._key = key
            self._info_dirty = True

    def _realtime(self, data: bytes) -> dict[str, Any]:
        _need(data, 1, _RT_HEAD.size, "a realtime update")
        event, session, stype, phase, time_ms, end_ms, focused = _RT_HEAD.unpack_from(data, 1)
        pos = 1 + _RT_HEAD.size
        for _ in range(3):  # active camera set, camera, HUD page: not recorded
            pos = _skip_string(data, pos)
        _need(data, pos, 1, "a realtime update")
        replay = data[pos]
        pos += 1
        replay_time = replay_left = 0.0
        if replay:
            _need(data, pos, _RT_REPLAY.size, "a realtime update's replay times")
            replay_time, replay_left = _RT_REPLAY.unpack_from(data, pos)
            pos += _RT_REPLAY.size
        _need(data, pos, _RT_WEATHER.size, "a realtime update's weather")
        tod_ms, ambient, track_temp, clouds, rain, wet = _RT_WEATHER.unpack_from(data, pos)
        raw_best, pos = _lap(data, pos + _RT_WEATHER.size)
        best = [0 if v == NO_TIME else v for v in raw_best[:7]]
        _end(data, pos, "a realtime update")
        self._time_ns = int(time_ms * 1e6) if math.isfinite(time_ms) and abs(time_ms) < 1e15 else None
        if focused != self._focused:
            self._focused = focused
            self._info_dirty = True
        type_name = SESSION_TYPES.get(stype, f"session type {stype}")
        if type_name != self._session_type:
            self._session_type = type_name
            self._info_dirty = True
        self._set_key((event, session))
        return {
            "event_index": event,
            "session_index": session,
            "session_type": stype,
            "session_phase": phase,
            "session_time": time_ms / 1000.0,
            "session_end_time": end_ms / 1000.0,
            "focused_car_index": focused,
            "replay_playing": replay != 0,
            "replay_session_time": replay_time,
            "replay_remaining_time": replay_left,
            "time_of_day": tod_ms / 1000.0,
            "ambient_temp": ambient,
            "track_temp": track_temp,
            "clouds": clouds / 10.0,
            "rain_level": rain / 10.0,
            "wetness": wet / 10.0,
            "best_session_lap_ms": best[0],
            "best_session_lap_car_index": raw_best[1],
            "best_session_split1_ms": best[4],
            "best_session_split2_ms": best[5],
            "best_session_split3_ms": best[6],
        }

    def _slot(self, car: int) -> int | None:
        slot = self._slot_of.get(car)
        if slot is None:
            self.entry_list_wanted = True
            if self._free >= self.max_cars:
                return None
            slot = self._free
            self._free += 1
            self._slot_of[car] = slot
            self._cols[0][slot] = car
        return slot

    def _car(self, data: bytes) -> dict[str, Any] | None:
        n = _NO_TIME
        if (
            len(data) == _CAR_FAST_SIZE
            and data[_SPLIT_COUNTS[0]] == data[_SPLIT_COUNTS[1]] == data[_SPLIT_COUNTS[2]] == 3
        ):
            t: tuple[Any, ...] = _CAR_FAST.unpack_from(data, 1)
        else:
            _need(data, 1, _CAR.size, "a realtime car update")
            best, pos = _lap(data, 1 + _CAR.size)
            last, pos = _lap(data, pos)
            cur, pos = _lap(data, pos)
            _end(data, pos, "a realtime car update")
            t = (*_CAR.unpack_from(data, 1), *best, *last, *cur)
        (car, driver, _count, gear, wx, wy, yaw, location, kmh, position, cup_pos, track_pos,
         spline, laps, delta) = t[:15]  # fmt: skip
        gear = min(gear - 2, 127)  # the wire adds 2: R = -1, N = 0
        # laps at 15 (best), 26 (last), 37 (current): ms, car, driver, 3, splits x3, invalid ...
        best_ms = 0 if t[15] == n else t[15]
        last_ms = 0 if t[26] == n else t[26]
        cur_ms = 0 if t[37] == n else t[37]
        l1 = 0 if t[30] == n else t[30]
        l2 = 0 if t[31] == n else t[31]
        l3 = 0 if t[32] == n else t[32]
        slot = self._slot_of.get(car)
        if slot is None:
            slot = self._slot(car)
            out: dict[str, Any] = {} if slot is None else self._build_static(self._cols)
        else:
            out = {}
        if slot is None:
            self.skipped.add("car_slots_full")
        else:
            c = self._cols
            c[4][slot] = driver
            c[5][slot] = gear
            c[6][slot] = wx
            c[7][slot] = wy
            c[8][slot] = yaw
            c[9][slot] = location
            c[10][slot] = kmh
            c[11][slot] = position
            c[12][slot] = cup_pos
            c[13][slot] = track_pos
            c[14][slot] = spline
            c[15][slot] = laps
            c[16][slot] = delta
            c[17][slot] = best_ms
            c[18][slot] = last_ms
            c[19][slot] = cur_ms
            c[20][slot] = l1
            c[21][slot] = l2
            c[22][slot] = l3
            c[23][slot] = t[44]
            out.update(self._build_dynamic(c))
        if car == self._focused:
            out.update(
                car_index=car,
                driver_index=driver,
                gear=gear,
                world_x=wx,
                world_y=wy,
                yaw=yaw,
                location=location,
                speed_kmh=kmh,
                position=position,
                cup_position=cup_pos,
                track_position=track_pos,
                spline_position=spline,
                laps=laps,
                delta_ms=delta,
                best_lap_ms=best_ms,
                last_lap_ms=last_ms,
                current_lap_ms=cur_ms,
                last_split1_ms=l1,
                last_split2_ms=l2,
                last_split3_ms=l3,
                current_split1_ms=0 if t[41] == n else t[41],
                current_split2_ms=0 if t[42] == n else t[42],
                current_split3_ms=0 if t[43] == n else t[43],
                last_lap_invalid=t[33],
                current_lap_invalid=t[44],
                current_lap_outlap=t[46],
                current_lap_inlap=t[47],
            )
        return out or None

    def _entry_list(self, data: bytes) -> dict[str, Any]:
        _need(data, 1, _ENTRY_HEAD.size, "an entry list")
        _conn, n = _ENTRY_HEAD.unpack_from(data, 1)
        pos = 1 + _ENTRY_HEAD.size
        _need(data, pos, 2 * n, "an entry list's cars")
        _end(data, pos + 2 * n, "an entry list")
        cars = struct.unpack_from(f"<{n}H", data, pos)
        old_cols, old_slot = self._cols, self._slot_of
        cols = [[d] * self.max_cars for d in self._defaults]
        slot_of: dict[int, int] = {}
        kept = 0
        for car in cars:
            if car in slot_of:
                continue  # listed twice: one slot
            if kept >= self.max_cars:
                self.skipped.add("car_slots_full")
                continue
            slot_of[car] = kept
            prev = old_slot.get(car)
            if prev is not None:
                for col, old in zip(cols, old_cols, strict=True):
                    col[kept] = old[prev]
            cols[0][kept] = car
            kept += 1
        self._cols, self._slot_of, self._free = cols, slot_of, kept
        self._drivers = {car: d for car, d in self._drivers.items() if car in slot_of}
        self.entry_list_wanted = False
        self._info_dirty = True
        out = self._build_all(cols)
        out["num_cars"] = n
        return out

    def _track_data(self, data: bytes) -> dict[str, Any]:
        _need(data, 1, 4, "track data")
        name, pos = _string(data, 5)
        _need(data, pos, _TRACK_NUMS.size, "track data")
        track_id, meters = _TRACK_NUMS.unpack_from(data, pos)
        pos += _TRACK_NUMS.size
        _need(data, pos, 1, "track data's camera sets")
        sets = data[pos]
        pos += 1
        for _ in range(sets):  # camera sets and cameras, HUD pages: checked, not recorded
            pos = _skip_string(data, pos)
            _need(data, pos, 1, "a camera set")
            cameras = data[pos]
            pos += 1
            for _ in range(cameras):
                pos = _skip_string(data, pos)
        _need(data, pos, 1, "track data's HUD pages")
        pages = data[pos]
        pos += 1
        for _ in range(pages):
            pos = _skip_string(data, pos)
        _end(data, pos, "track data")
        name = fit_utf8(name, 64)
        if name != self._track or track_id != self._track_id:
            if self._track_id is not None:
                self._pending_new = True  # another track: another session
            self._track, self._track_id = name, track_id
            self._info_dirty = True
        return {"track_id": track_id, "track_length_m": meters}

    def _entry_list_car(self, data: bytes) -> dict[str, Any] | None:
        _need(data, 1, _ELC_HEAD.size, "an entry list car")
        car, model = _ELC_HEAD.unpack_from(data, 1)
        pos = _skip_string(data, 1 + _ELC_HEAD.size)  # team name
        _need(data, pos, _ELC_MID.size, "an entry list car")
        number, cup, current, _nationality, n_drivers = _ELC_MID.unpack_from(data, pos)
        pos += _ELC_MID.size
        names: list[str] = []
        for _ in range(n_drivers):
            first, pos = _string(data, pos)
            last, pos = _string(data, pos)
            pos = _skip_string(data, pos)  # short name
            _need(data, pos, 3, "a driver")  # category u8, nationality u16
            pos += 3
            if len(names) < _MAX_DRIVERS:
                names.append(fit_utf8(f"{first} {last}".strip(), 64))
        _end(data, pos, "an entry list car")
        slot = self._slot(car)
        self._drivers[car] = (current, tuple(names))
        if car == self._focused:
            self._info_dirty = True
        if slot is None:
            self.skipped.add("car_slots_full")
            return None
        cols = self._cols
        cols[1][slot] = number
        cols[2][slot] = model
        cols[3][slot] = cup
        out = self._build_static([cols[0], cols[1], cols[2], cols[3]])
        if car == self._focused:
            out.update(race_number=number, car_model=model, cup_category=cup)
        return out

    def _event(self, data: bytes) -> dict[str, Any]:
        _need(data, 1, 1, "a broadcasting event")
        kind = data[1]
        message, pos = _string(data, 2)
        _need(data, pos, _EVENT_TAIL.size, "a broadcasting event")
        time_ms, car = _EVENT_TAIL.unpack_from(data, pos)
        _end(data, pos + _EVENT_TAIL.size, "a broadcasting event")
        self._event_count = (self._event_count + 1) & 0xFFFFFFFF
        if kind < len(EVENT_TYPES):
            self._event_counts[kind] = (self._event_counts[kind] + 1) & 0xFFFFFFFF
        return {
            "event_type": kind,
            "event_car_index": car,
            "event_time_ms": time_ms,
            "event_message": fit_utf8(message, EVENT_MESSAGE_BYTES),
            "event_count": self._event_count,
            "event_counts": tuple(self._event_counts),
        }
