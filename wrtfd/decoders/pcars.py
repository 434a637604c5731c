"""Project CARS 2 / Automobilista 2 (SMS UDP v2, "Patch 5") and Project CARS 1 (SMS UDP v1).

Layouts: ``shared/spec/protocols/pcars2_ams2.md`` and the Project CARS 1 section of
``wave2-games.md`` (SMS's ``SMS_UDP_Definitions.hpp``; telemetry and timings ``pack(1)``, the
other v2 packets naturally aligned). Both arrive on port 5606, little-endian, told apart by
size: v1 packets are 1367 (telemetry), 1347 (strings) and 1028 bytes (more strings) and start
with a build number; v2 packets start with a 12-byte PacketBase whose type byte names the packet:

====  ===================  ======  ==========================================================
type  packet               bytes   channels
====  ===================  ======  ==========================================================
0     telemetry            559     the viewed car (538: before patch 5, without the last four)
1     race definition      308     track length, lap records, laps/time in event; track name
2     participants         1136    names (16 per packet), nationalities, multiplayer indices
3     timings              1063    every car (32): position, lap, lap distance, times, state
4     game state           24      game and session state, weather
7     time stats           1040    every car: best/last lap and sector times
8     vehicle/class names  1164 /  vehicle name and class of 16 cars per packet / class names
                           1452
====  ===================  ======  ==========================================================

The telemetry and timings packets of one tick (same tick count) give one sample; every other
packet gives a sample of its own channels, and the recorder's sample-and-hold merges them into
the frames, as for F1. Arrays (``all_*``) hold every car, by participant index (32 for
v2, 56 for v1); the *viewed* car (the telemetry's ``viewed_participant_index``) is also given as
scalars. A datagram of the other protocol version is dropped as ``other_version`` (the game's
"UDP protocol version" setting and the configured protocol disagree).

Session signals: the game entering play from the menus or a restart, the session state
changing (practice, qualifying, race...), another track, and the packet counter going back (the
game restarted) start a new session. The packets carry no usable clock (the tick count's rate
is not documented), so samples are placed by their arrival.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable, Sequence
from typing import Any

from wrtfd.decoders._common import RecentTexts, TupleLayout, cstr, selected_definition
from wrtfd.decoders.base import Decoded, DropCounter
from wrtfd.errors import DecodeError

__all__ = [
    "PACKET_SIZES",
    "PARTICIPANTS_V1",
    "PARTICIPANTS_V2",
    "V1_SIZES",
    "Pcars1Decoder",
    "Pcars2Decoder",
    "looks_like_v1",
    "looks_like_v2",
]

PORT = 5606
PARTICIPANTS_V2 = 32  # UDP_STREAMER_PARTICIPANTS_SUPPORTED
PARTICIPANTS_V1 = 56
#: A packet number this far behind the previous one is a restart of the game.
PACKET_NUMBER_RESET = 1000

_BASE = struct.Struct("<IIBBBB")  # packet number, category packet number, partial index/count, type, version
_BASE_SPEC: list[tuple[str | None, int]] = [(None, 6)]

# game states (low 3 bits of the game-state byte) that are not play, and the restarting state
_GAME_PLAYING = 2
#: Game states a drive starts from: exited, front end, restarting, front-end replay.
_GAME_BEFORE_PLAY = frozenset({0, 1, 5, 7})

# Runs of channels both versions send in the same order: the seven vectors, then tyre flags,
# terrain, tyre y and rps; wear, damage, brake and five tyre temperatures; suspension.
_MOTION: list[tuple[str | None, int]] = [
    ("orientation", 3),
    ("local_velocity", 3),
    ("world_velocity", 3),
    ("angular_velocity", 3),
    ("local_acceleration", 3),
    ("world_acceleration", 3),
    ("extents_centre", 3),
    ("tyre_flags", 4),
    ("terrain", 4),
    ("tyre_y", 4),
    ("tyre_rps", 4),
]
_WEAR_AND_TEMPS: list[tuple[str | None, int]] = [
    ("tyre_wear", 4),
    ("brake_damage", 4),
    ("suspension_damage", 4),
    ("brake_temp", 4),
    ("tyre_tread_temp", 4),
    ("tyre_layer_temp", 4),
    ("tyre_carcass_temp", 4),
    ("tyre_rim_temp", 4),
    ("tyre_internal_air_temp", 4),
]
_SUSPENSION: list[tuple[str | None, int]] = [
    ("wheel_local_position_y", 4),
    ("ride_height", 4),
    ("suspension_travel", 4),
    ("suspension_velocity", 4),
]

# --- v2 telemetry (type 0): 559 bytes, pack(1) -------------------------------------------------
# viewed index, unfiltered throttle/brake/steering/clutch, car flags; oil temp, oil/water
# pressure, water temp, fuel pressure; fuel capacity, brake, throttle, clutch; fuel level, speed;
# rpm, max rpm; steering, gear byte, boost, crash state; odometer; seven vectors; tyre flags,
# terrain, tyre y, tyre rps, tyre temp, height above ground, wear, brake/suspension damage, brake
# temps, eight u16 tyre temperature quads; wheel local y, ride height, suspension travel and
# velocity, suspension ride height, air pressure; engine speed, torque; wings x2, handbrake, aero
# and engine damage; joypad, dpad; 4 tyre compound names; (patch 5) turbo boost, full position,
# brake bias, tick count.
_TELEMETRY = (
    "<IIBBBB" "bBBbBB" "hHhHH" "BBBB" "ff" "HH" "bBBB" "f" + "3f" * 7
    + "4B4B4f4f4B4f4B4B4B4h" + "4H" * 8 + "4f4f4f4f4H4H" "ff" "2BBBB" "IB" + "40s" * 4
)  # fmt: skip
_PATCH5_TAIL = "f3fBI"
_TELEMETRY_SPEC: list[tuple[str | None, int]] = [
    *_BASE_SPEC,
    ("viewed_participant_index", 1),
    ("unfiltered_throttle", 1),
    ("unfiltered_brake", 1),
    ("unfiltered_steering", 1),
    ("unfiltered_clutch", 1),
    ("car_flags", 1),
    ("oil_temp", 1),
    ("oil_pressure", 1),
    ("water_temp", 1),
    ("water_pressure", 1),
    ("fuel_pressure", 1),
    ("fuel_capacity", 1),
    ("brake", 1),
    ("throttle", 1),
    ("clutch", 1),
    ("fuel_level", 1),
    ("speed", 1),
    ("rpm", 1),
    ("max_rpm", 1),
    ("steering", 1),
    ("_gear_byte", 1),
    ("boost_amount", 1),
    ("crash_state", 1),
    ("odometer", 1),
    *_MOTION,
    ("tyre_temp", 4),
    ("tyre_height_above_ground", 4),
    *_WEAR_AND_TEMPS,
    ("tyre_temp_left", 4),
    ("tyre_temp_center", 4),
    ("tyre_temp_right", 4),
    *_SUSPENSION,
    ("suspension_ride_height", 4),
    ("air_pressure", 4),
    ("engine_speed", 1),
    ("engine_torque", 1),
    ("wings", 2),
    ("handbrake", 1),
    ("aero_damage", 1),
    ("engine_damage", 1),
    ("joypad", 1),
    ("dpad", 1),
    ("_compound_fl", 1),
    ("_compound_fr", 1),
    ("_compound_rl", 1),
    ("_compound_rr", 1),
]
_PATCH5_SPEC: list[tuple[str | None, int]] = [
    ("turbo_boost_pressure", 1),
    ("full_position_x", 1),
    ("full_position_y", 1),
    ("full_position_z", 1),
    ("brake_bias", 1),
    ("tick_count", 1),
]

# --- v2 race definition (type 1): 308 bytes ----------------------------------------------------
# world fastest lap, personal fastest lap, personal fastest sectors x3, world fastest sectors x3,
# track length; track location, variation, translated location, translated variation (64 each);
# laps/time in event (top bit: timed), enforced pit stop lap, pad.
_RACE = struct.Struct("<IIBBBB9f64s64s64s64sHbx")
_RACE_SPEC: list[tuple[str | None, int]] = [
    *_BASE_SPEC,
    ("world_fastest_lap_time", 1),
    ("personal_fastest_lap_time", 1),
    ("personal_fastest_sector1_time", 1),
    ("personal_fastest_sector2_time", 1),
    ("personal_fastest_sector3_time", 1),
    ("world_fastest_sector1_time", 1),
    ("world_fastest_sector2_time", 1),
    ("world_fastest_sector3_time", 1),
    ("track_length", 1),
    ("_track_location", 1),  # track names: session info
    ("_track_variation", 1),
    (None, 2),  # translated names
    ("_laps_time_in_event", 1),  # split below
    ("enforced_pit_stop_lap", 1),
]

# --- v2 participants (type 2): 1136 bytes: changed timestamp, 16 names, 16 nationalities, 16 indices
_PARTICIPANTS = struct.Struct("<IIBBBBI" + "64s" * 16 + "16I16H")
_NAMES_PER_PACKET = 16

# --- v2 timings (type 3): 1063 bytes, pack(1) --------------------------------------------------
# participant count, participants changed timestamp, event time remaining, split ahead/behind,
# split; 32 x participant info; local participant index; tick count.
_TIMINGS_HEAD = struct.Struct("<IIBBBBbIffff")
# participant info (32 B): world position x3 (s16 m), orientation x3 (quantized s16), current lap
# distance, race position (top bit: active), sector (low bits), highest flag, pit mode/schedule,
# car index (top bit: human), race state (+ invalidated lap bit), current lap, current time,
# current sector time, multiplayer participant index.
_CAR_V2 = "3h3hHBBBBHBBffH"
_TIMINGS_TAIL = struct.Struct("<HI")  # local participant index, tick count
_CAR_V2_SIZE = struct.calcsize("<" + _CAR_V2)  # 32
_CAR_INDICES = struct.Struct(f"<{PARTICIPANTS_V2}H")
_TIMINGS_CARS_AT = _TIMINGS_HEAD.size  # 33
_TIMINGS_CARS_END = _TIMINGS_CARS_AT + PARTICIPANTS_V2 * _CAR_V2_SIZE
#: The head and the tail (local participant index, tick count) of a timings packet in one
#: unpack, the participants padded over: 14 items.
_TIMINGS = struct.Struct(_TIMINGS_HEAD.format + f"{_TIMINGS_CARS_END - _TIMINGS_CARS_AT}x" + "HI")


def _column(code: str, offset: int, stride: int, cars: int) -> struct.Struct:
    """One field of every car of a participant array as one Struct (from the array's start): its
    unpack is the channel's tuple, the pads skip the other fields. Cheaper than unpacking every
    car's fields into one tuple and cutting stride slices from it (no wide tuple, no copies)."""
    gap = stride - struct.calcsize("<" + code)
    lead = f"{offset}x" if offset else ""
    return struct.Struct("<" + lead + f"{code}{gap}x" * (cars - 1) + code)


# Each participant field the decoder unpacks, as a column of every car: world position x3,
# orientation x3, lap distance, highest flag, pit mode, current lap, current time, current
# sector time, multiplayer index. The race position, sector, car index and race state bytes
# (bit fields) are cut from stride slices of the datagram with ``bytes.translate`` instead,
# cheaper than unpacking and masking them one by one.
(
    _V2_X, _V2_Y, _V2_Z, _V2_HEADING, _V2_PITCH, _V2_BANK, _V2_DISTANCE, _V2_FLAG, _V2_PIT,
    _V2_LAP, _V2_TIME, _V2_SECTOR_TIME, _V2_MP_INDEX,
) = (
    _column(code, offset, _CAR_V2_SIZE, PARTICIPANTS_V2)
    for code, offset in (("h", 0), ("h", 2), ("h", 4), ("h", 6), ("h", 8), ("h", 10), ("H", 12), ("B", 16),
                         ("B", 17), ("B", 21), ("f", 22), ("f", 26), ("H", 30))
)  # fmt: skip

# --- v2 game state (type 4): 24 bytes ------------------------------------------------------------
# build version, game/session state, ambient and track temperature, rain and snow density, wind
# speed, wind direction x/y, pad.
_GAME_STATE = struct.Struct("<IIBBBBHBbbBBbbbxx")

# --- v2 time stats (type 7): 1040 bytes: changed timestamp, 32 x (fastest lap, last lap, last
# sector, fastest sectors x3, online rep, multiplayer index, pad)
_TIME_STATS_HEAD = struct.Struct("<IIBBBBI")
_STATS = "6fIH2x"
_STATS_SIZE = struct.calcsize("<" + _STATS)  # 32

# --- v2 participant vehicle names (type 8): 16 x (index u16, pad, class u32, name 64) = 1164;
# the last part of the series: 60 x (class index u32, name 20) = 1452
_VEHICLE = struct.Struct("<H2xI64s")
_CLASS = struct.Struct("<I20s")
_VEHICLES_PER_PACKET = 16
_CLASSES_PER_PACKET = 60
#: Packet types sent every tick together (telemetry, timings): one sample per tick.
_PAIRED = frozenset({0, 3})
#: Bound on the class-name table (class indices are arbitrary u32 values).
_MAX_CLASSES = 256

#: v2 (type -> accepted sizes).
PACKET_SIZES: dict[int, tuple[int, ...]] = {
    0: (559, 538),
    1: (_RACE.size,),
    2: (_PARTICIPANTS.size,),
    3: (_TIMINGS_HEAD.size + PARTICIPANTS_V2 * _CAR_V2_SIZE + _TIMINGS_TAIL.size,),
    4: (_GAME_STATE.size,),
    7: (_TIME_STATS_HEAD.size + PARTICIPANTS_V2 * _STATS_SIZE,),
    8: (12 + _VEHICLES_PER_PACKET * _VEHICLE.size, 12 + _CLASSES_PER_PACKET * _CLASS.size),
}
_V2_SIZES = frozenset(s for sizes in PACKET_SIZES.values() for s in sizes)

# --- v1 (Project CARS 1) -----------------------------------------------------------------------
# telemetry 1367 B: build version, packet type (low 2 bits; sequence above), game/session state,
# viewed index, participant count, unfiltered throttle/brake/steering/clutch, race state flags,
# laps in event; 21 timing floats; joypad; highest flag; pit mode/schedule; oil temp, oil
# pressure, water temp, water pressure, fuel pressure, car flags, fuel capacity, brake,
# throttle, clutch, steering; fuel level, speed; rpm, max rpm; gear byte, boost, enforced pit
# stop lap, crash state; odometer; seven vectors; tyre flags, terrain, tyre y, tyre rps, slip
# speed, tyre temp, grip, height above ground, lateral stiffness, wear, brake/suspension
# damage, brake temps, five u16 tyre temperature quads, wheel local y, ride height, suspension
# travel, suspension velocity, air pressure; engine speed, torque; aero and engine damage;
# ambient/track temperature, rain, wind speed, wind direction x/y; 56 x participant info;
# track length, wings x2, dpad.
_V1_HEAD = struct.Struct(
    "<HBBbbBBbBBB" "21f" "HBB" "hHhHHBBBBBb" "ff" "HH" "BBbB" "f" + "3f" * 7
    + "4B4B4f4f4f4B4B4f4f4B4B4B4h" + "4H" * 5 + "4f4f4f4f4H" "ff" "BB" "bbBbbb"
)  # fmt: skip
# participant info v1 (16 B): world position x3 (s16 m), lap distance, race position (top bit:
# active), laps completed (top bit: lap invalidated), current lap, sector, last sector time.
_CAR_V1 = "3hHBBBBf"
_CAR_V1_SIZE = struct.calcsize("<" + _CAR_V1)  # 16
_V1_TAIL = struct.Struct("<f2BB")  # track length, wings x2, dpad
_V1_TELEMETRY_SIZE = _V1_HEAD.size + PARTICIPANTS_V1 * _CAR_V1_SIZE + _V1_TAIL.size  # 1367
_V1_CARS_AT = _V1_HEAD.size
_V1_CARS_END = _V1_CARS_AT + PARTICIPANTS_V1 * _CAR_V1_SIZE
#: The head and the tail of a v1 telemetry packet in one unpack (the participants padded over).
_V1_HEAD_TAIL = struct.Struct(_V1_HEAD.format + f"{_V1_CARS_END - _V1_CARS_AT}x" + _V1_TAIL.format[1:])
_V1_TAIL_SPEC: list[tuple[str | None, int]] = [("_track_length", 1), ("_wings", 2), ("_dpad", 1)]


# world position x3 and lap distance of every car (the other fields: bytes 8-15, see _Columns)
_V1_X, _V1_Y, _V1_Z, _V1_DISTANCE = (
    _column(code, offset, _CAR_V1_SIZE, PARTICIPANTS_V1)
    for code, offset in (("h", 0), ("h", 2), ("h", 4), ("H", 6))
)
#: Every car's last sector time, from bytes 8-15 of every car (see _v1_status).
_V1_SECTOR_TIMES = struct.Struct("<" + "4xf" * PARTICIPANTS_V1)
_V1_STRINGS_SIZE = 1347
_V1_MORE_STRINGS_SIZE = 1028
V1_SIZES = frozenset({_V1_TELEMETRY_SIZE, _V1_STRINGS_SIZE, _V1_MORE_STRINGS_SIZE})
#: Packet type (low 2 bits of byte 2) -> its size.
_V1_KIND_SIZES = {0: _V1_TELEMETRY_SIZE, 1: _V1_STRINGS_SIZE, 2: _V1_MORE_STRINGS_SIZE}
# strings 1347 B: build, type, car name @3, car class @67, track location @131, track variation
# @195 (64 B each), 16 participant names @259 (64 B each), 16 fastest lap times @1283 (f32): the
# offsets of real captures (names, class and times unused)
_V1_STRINGS = struct.Struct("<HB64s64x64s64s")
_V1_SPEC: list[tuple[str | None, int]] = [
    ("build_version", 1),
    (None, 1),  # packet type
    ("_game_session_state", 1),
    ("viewed_participant_index", 1),
    ("num_participants", 1),
    ("unfiltered_throttle", 1),
    ("unfiltered_brake", 1),
    ("unfiltered_steering", 1),
    ("unfiltered_clutch", 1),
    ("_race_state_flags", 1),
    ("laps_in_event", 1),
    ("best_lap_time", 1),
    ("last_lap_time", 1),
    ("current_time", 1),
    ("split_time_ahead", 1),
    ("split_time_behind", 1),
    ("split_time", 1),
    ("event_time_remaining", 1),
    ("personal_fastest_lap_time", 1),
    ("world_fastest_lap_time", 1),
    ("current_sector1_time", 1),
    ("current_sector2_time", 1),
    ("current_sector3_time", 1),
    ("fastest_sector1_time", 1),
    ("fastest_sector2_time", 1),
    ("fastest_sector3_time", 1),
    ("personal_fastest_sector1_time", 1),
    ("personal_fastest_sector2_time", 1),
    ("personal_fastest_sector3_time", 1),
    ("world_fastest_sector1_time", 1),
    ("world_fastest_sector2_time", 1),
    ("world_fastest_sector3_time", 1),
    ("joypad", 1),
    ("highest_flag", 1),
    ("pit_mode_schedule", 1),
    ("oil_temp", 1),
    ("oil_pressure", 1),
    ("water_temp", 1),
    ("water_pressure", 1),
    ("fuel_pressure", 1),
    ("car_flags", 1),
    ("fuel_capacity", 1),
    ("brake", 1),
    ("throttle", 1),
    ("clutch", 1),
    ("steering", 1),
    ("fuel_level", 1),
    ("speed", 1),
    ("rpm", 1),
    ("max_rpm", 1),
    ("_gear_byte", 1),
    ("boost_amount", 1),
    ("enforced_pit_stop_lap", 1),
    ("crash_state", 1),
    ("odometer", 1),
    *_MOTION,
    ("tyre_slip_speed", 4),
    ("tyre_temp", 4),
    ("tyre_grip", 4),
    ("tyre_height_above_ground", 4),
    ("tyre_lateral_stiffness", 4),
    *_WEAR_AND_TEMPS,
    *_SUSPENSION,
    ("air_pressure", 4),
    ("engine_speed", 1),
    ("engine_torque", 1),
    ("aero_damage", 1),
    ("engine_damage", 1),
    ("ambient_temperature", 1),
    ("track_temperature", 1),
    ("rain_density", 1),
    ("wind_speed", 1),
    ("wind_direction_x", 1),
    ("wind_direction_y", 1),
]

# byte -> masked byte tables for bit fields read straight from a stride slice of the datagram
_LOW7 = bytes(b & 0x7F for b in range(256))
_LOW3 = bytes(b & 0x07 for b in range(256))
_TOP = bytes(b >> 7 for b in range(256))
_BIT3 = bytes(b >> 3 & 1 for b in range(256))
#: v1 race state flags (low 6 bits) -> race state, lap invalidated, anti-lock active, boost active.
_V1_RACE_FLAGS = tuple((f & 0x07, f >> 3 & 1, f >> 4 & 1, f >> 5 & 1) for f in range(64))
#: Gear byte -> (gear, number of gears): low nibble 0 neutral, 1.. forward, 15 reverse (-1).
_GEARS = tuple((-1 if g & 15 == 15 else g & 15, g >> 4) for g in range(256))
_GEAR_KEYS = ("gear", "num_gears")
_COMPOUND_KEYS = ("tyre_compound_fl", "tyre_compound_fr", "tyre_compound_rl", "tyre_compound_rr")
#: Channels a v1 telemetry packet adds to its head's layout, in their order: the bit fields,
#: the gear, every car, the viewed car (only when the viewed index is a car), the tail.
_V1_VIEWED_KEYS = ("world_position_x", "world_position_y", "world_position_z", "current_lap_distance",
                   "race_position", "laps_completed", "current_lap", "sector")  # fmt: skip
_V1_EXTRA = (
    "game_state", "session_state", "race_state", "lap_invalidated", "anti_lock_active", "boost_active",
    *_GEAR_KEYS,
    "all_world_position_x", "all_world_position_y", "all_world_position_z", "all_current_lap_distance",
    "all_race_position", "all_is_active", "all_laps_completed", "all_lap_invalidated", "all_current_lap",
    "all_sector", "all_last_sector_time",
    *_V1_VIEWED_KEYS,
    "track_length", "wings", "dpad",
)  # fmt: skip


def _position(spec: Sequence[tuple[str | None, int]], name: str) -> int:
    pos = 0
    for entry, count in spec:
        if entry == name:
            return pos
        pos += count
    raise KeyError(name)


def _mapped(spec: Sequence[tuple[str | None, int]], extra: Sequence[str] | None = None) -> TupleLayout:
    """The layout of ``spec`` without the names starting with "_" (read by position instead);
    ``extra``: the presized form, with these keys set by the decoder (see TupleLayout)."""
    return TupleLayout([(None if n is None or n[0] == "_" else n, c) for n, c in spec], extra=extra)


def _track(location: str, variation: str) -> str:
    return f"{location} {variation}".strip() if variation and variation != location else location


class _Session:
    """The session signals both versions share: game state, session state, track, restarts."""

    __slots__ = ("car", "game_state", "generation", "info", "packet_number", "session_state", "track")

    def __init__(self) -> None:
        self.generation = 0
        self.game_state: int | None = None
        self.session_state: int | None = None
        self.track: str | None = None
        self.car: str | None = None
        self.packet_number: int | None = None
        self.info: dict[str, str] | None = None

    def new(self) -> None:
        self.generation += 1

    def states(self, game: int, session: int) -> None:
        prev_game, prev_session = self.game_state, self.session_state
        entered_play = game == _GAME_PLAYING and prev_game in _GAME_BEFORE_PLAY
        other_session = bool(prev_session and session and session != prev_session)
        if entered_play or other_session:
            self.new()
        self.game_state, self.session_state = game, session

    def set_track(self, track: str) -> None:
        if track and track != self.track:
            if self.track:
                self.new()
            self.track = track
            self.info = dict(self.info or {}, track=track)

    def set_car(self, car: str) -> None:
        if car and car != self.car:
            self.car = car
            self.info = dict(self.info or {}, car=car)

    def counter(self, number: int) -> None:
        prev = self.packet_number
        if prev is not None and number + PACKET_NUMBER_RESET < prev:
            self.new()
        self.packet_number = number


class _Columns:
    """The per-car status bytes of every participant entry, as channel tuples, remembered.

    ``convert`` turns the raw columns (v2: stride slices of the datagram, one byte of every car;
    v1: an array of bytes 8-15 of every car, one u64 each, cheaper to cut and compare than eight
    stride slices) into the channels' tuples. Race positions, laps, sectors, states, flags and
    (v1) last sector times of a field of cars change a few times a lap, not every packet, so
    the last columns' tuples are kept and reused while the columns are the same: a compare
    instead of building 32 or 56 values per channel again (tuples are immutable, sharing them
    is safe).
    """

    __slots__ = ("_convert", "_key", "_value")

    def __init__(self, convert: Callable[[Any], tuple[tuple[Any, ...], ...]]) -> None:
        self._convert = convert
        self._key: object = None
        self._value: tuple[tuple[Any, ...], ...] = ()

    def __call__(self, columns: object) -> tuple[tuple[Any, ...], ...]:
        if columns != self._key:
            self._value = self._convert(columns)
            self._key = columns
        return self._value


def _v2_status(columns: tuple[bytes, ...]) -> tuple[tuple[int, ...], ...]:
    """v2 participant bytes 14 (race position, active), 15 (sector), 18-19 (car index u16: index,
    human) and 20 (race state, lap invalidated) -> those seven channels."""
    position, sector, index_low, index_high, state = columns
    index = bytearray(2 * len(index_low))  # the u16s without their top bit, little-endian
    index[0::2] = index_low
    index[1::2] = index_high.translate(_LOW7)
    return (
        tuple(position.translate(_LOW7)),
        tuple(position.translate(_TOP)),
        tuple(sector.translate(_LOW3)),
        tuple(state.translate(_LOW3)),
        tuple(state.translate(_BIT3)),
        _CAR_INDICES.unpack(index),
        tuple(index_high.translate(_TOP)),
    )


def _v1_status(key: array[int]) -> tuple[tuple[Any, ...], ...]:
    """v1 participant bytes 8-15 of every car (an array of one u64 a car) -> race position and
    active (byte 8), laps completed and lap invalidated (9), current lap (10), sector (11) and
    last sector time (12-15, f32): seven channels. Sector times change at sector lines, a few
    times a lap per car, like the status bytes."""
    raw = key.tobytes()
    position = raw[0::8]
    laps = raw[1::8]
    return (
        tuple(position.translate(_LOW7)),
        tuple(position.translate(_TOP)),
        tuple(laps.translate(_LOW7)),
        tuple(laps.translate(_TOP)),
        tuple(raw[2::8]),
        tuple(raw[3::8].translate(_LOW3)),
        _V1_SECTOR_TIMES.unpack(raw),
    )


class _Base:
    """Channel selection and the decoded result, shared by both versions."""

    protocol = ""
    schema_file = ""
    #: The track comes in a packet of its own (race definition, strings): a new session's header
    #: waits a little for it (``recorder.info_wait_s``).
    awaits_session_info: tuple[str, ...] = ("track",)

    def __init__(self, channels: Sequence[str] | None) -> None:
        self.definition: dict[str, Any]
        self.definition, self._keep = selected_definition(
            self.schema_file, channels, f"{self.protocol}.channels"
        )
        self.skipped = DropCounter()
        self.session = _Session()
        self._texts = RecentTexts()

    def _result(self, values: dict[str, Any]) -> Decoded:
        if self._keep is not None:
            values = {k: v for k, v in values.items() if k in self._keep}
        session = self.session
        info = session.info  # new session info goes out once, with the next sample
        if info is not None:
            session.info = None
        # positional (values, source_time_ns, session_key, new_session, session_info): faster
        return Decoded(values, None, session.generation, False, info)


class Pcars2Decoder(_Base):
    """Decodes one SMS UDP v2 datagram (Project CARS 2, Automobilista 2: "Project CARS 2" protocol).

    ``skipped`` counts valid packets that carry no channel (weather and vehicle-name types
    the game documents as not sent). The viewed car's index comes from the last telemetry
    packet (before one: the timings' local participant index).
    """

    protocol = "pcars2"
    schema_file = "pcars2.wrtf.yaml"

    def __init__(self, *, channels: Sequence[str] | None = None) -> None:
        super().__init__(channels)
        extra = (*_GEAR_KEYS, *_COMPOUND_KEYS)
        self._telemetry = {
            559: (struct.Struct(_TELEMETRY + _PATCH5_TAIL), _mapped(_TELEMETRY_SPEC + _PATCH5_SPEC, extra)),
            538: (struct.Struct(_TELEMETRY), _mapped(_TELEMETRY_SPEC, extra)),
        }
        self._i_gear = _position(_TELEMETRY_SPEC, "_gear_byte")
        self._i_viewed = _position(_TELEMETRY_SPEC, "viewed_participant_index")
        self._i_compound = _position(_TELEMETRY_SPEC, "_compound_fl")
        self._race = _mapped(_RACE_SPEC)
        self._i_track = _position(_RACE_SPEC, "_track_location")
        self._i_laps_time = _position(_RACE_SPEC, "_laps_time_in_event")
        self._stats = struct.Struct("<" + _STATS * PARTICIPANTS_V2)
        self._status = _Columns(_v2_status)
        self.viewed: int | None = None
        self._local: int | None = None
        self._names = [""] * PARTICIPANTS_V2
        self._vehicles = [""] * PARTICIPANTS_V2
        self._vehicle_class = [0] * PARTICIPANTS_V2
        self._classes: dict[int, str] = {}
        self._nationality = [0] * PARTICIPANTS_V2
        self._mp_index = [0] * PARTICIPANTS_V2
        self._pending: tuple[int, int | None, dict[str, Any]] | None = None
        self._handlers: dict[int, Callable[[bytes], dict[str, Any] | None]] = {
            0: self._telemetry_packet,
            1: self._race_packet,
            2: self._participants_packet,
            3: self._timings_packet,
            4: self._game_state_packet,
            7: self._time_stats_packet,
            8: self._names_packet,
        }

    def decode(self, data: bytes) -> Decoded | None:
        size = len(data)
        if size < _BASE.size:
            raise DecodeError(f"pcars2: {size}-byte datagram is shorter than a header", reason="wrong_size")
        number, _category, _part, _parts, kind, _version = _BASE.unpack_from(data)
        sizes = PACKET_SIZES.get(kind)
        if sizes is None or size not in sizes:
            if size in V1_SIZES and size not in _V2_SIZES:
                raise DecodeError(
                    f"pcars2: a {size}-byte Project CARS 1 datagram (the game's UDP protocol is"
                    " set to Project CARS 1; record it with protocol pcars)",
                    reason="other_version",
                )
            if sizes is None:
                if kind in (5, 6):  # weather, vehicle names: documented, never sent
                    self.skipped.add(f"unmapped_packet_{kind}")
                    return None
                raise DecodeError(f"pcars2: unknown packet type {kind}", reason="unknown_packet_id")
            raise DecodeError(
                f"pcars2: packet type {kind} is {size} bytes; expected {' or '.join(map(str, sizes))}",
                reason="wrong_size",
            )
        self.session.counter(number)
        values = self._handlers[kind](data)
        if values is None:
            return None
        if kind in _PAIRED:
            paired = self._pair(kind, values)
            if paired is None:
                return None
            values = paired
        return self._result(values)

    def _pair(self, kind: int, values: dict[str, Any]) -> dict[str, Any] | None:
        """Telemetry and timings of one game tick become one sample (placed by arrival, two
        samples of one tick would go to two ticks). The first of the two is held until the
        other arrives with the same tick count; a packet that finds no partner releases what
        was held (it is returned, the new one held in its place)."""
        tick = values.get("tick_count")  # None: a pre-patch-5 telemetry packet has none
        pending = self._pending
        if pending is None:
            self._pending = (kind, tick, values)
            return None
        held_kind, held_tick, held = pending
        if held_kind != kind and (held_tick is None or tick is None or held_tick == tick):
            self._pending = None
            held.update(values)
            return held
        self._pending = (kind, tick, values)
        return held

    # --- one method per packet type: the values; None when nothing is recorded -------------

    def _telemetry_packet(self, data: bytes) -> dict[str, Any]:
        compiled, layout = self._telemetry[len(data)]
        t = compiled.unpack(data)
        values = layout.build(t)
        values["gear"], values["num_gears"] = _GEARS[t[self._i_gear]]
        c = self._i_compound
        texts = self._texts
        values["tyre_compound_fl"] = texts[t[c]]
        values["tyre_compound_fr"] = texts[t[c + 1]]
        values["tyre_compound_rl"] = texts[t[c + 2]]
        values["tyre_compound_rr"] = texts[t[c + 3]]
        viewed = t[self._i_viewed]
        if viewed != self.viewed:
            self.viewed = viewed
            self._viewed_strings(values)
        return values

    def _viewed_index(self) -> int | None:
        viewed = self.viewed if self.viewed is not None else self._local
        return viewed if viewed is not None and 0 <= viewed < PARTICIPANTS_V2 else None

    def _viewed_strings(self, values: dict[str, Any]) -> None:
        """The viewed car's driver, vehicle and class names (and the session's car)."""
        i = self._viewed_index()
        if i is None:
            return
        values["participant_name"] = self._names[i]
        vehicle = self._vehicles[i]
        values["vehicle_name"] = vehicle
        values["class_name"] = self._classes.get(self._vehicle_class[i], "")
        self.session.set_car(vehicle)

    def _race_packet(self, data: bytes) -> dict[str, Any] | None:
        values: dict[str, Any] = {}
        t = _RACE.unpack(data)
        values.update(self._race.build(t))
        laps_time = t[self._i_laps_time]
        values["laps_time_in_event"] = laps_time & 0x7FFF
        values["is_timed_session"] = laps_time >> 15
        i = self._i_track
        self.session.set_track(_track(cstr(t[i]), cstr(t[i + 1])))
        return values

    def _participants_packet(self, data: bytes) -> dict[str, Any] | None:
        values: dict[str, Any] = {}
        t = _PARTICIPANTS.unpack(data)
        base = _first_slot(data, _NAMES_PER_PACKET, PARTICIPANTS_V2)
        n = min(_NAMES_PER_PACKET, PARTICIPANTS_V2 - base)
        for j in range(n):  # after the base (6) and the timestamp: 16 names, nationalities, indices
            self._names[base + j] = cstr(t[7 + j])
            self._nationality[base + j] = t[23 + j]
            self._mp_index[base + j] = t[39 + j]
        values["participants_changed_timestamp"] = t[6]
        values["all_nationality"] = tuple(self._nationality)
        values["all_mp_index"] = tuple(self._mp_index)
        self._viewed_strings(values)
        return values

    def _timings_packet(self, data: bytes) -> dict[str, Any]:
        t = _TIMINGS.unpack(data)
        local = t[-2]
        self._local = local
        at, end, size = _TIMINGS_CARS_AT, _TIMINGS_CARS_END, _CAR_V2_SIZE
        status = (data[at + 14 : end : size], data[at + 15 : end : size], data[at + 18 : end : size],
                  data[at + 19 : end : size], data[at + 20 : end : size])  # fmt: skip
        race_position, active, sector, race_state, invalidated, car_index, human = self._status(status)
        distance = _V2_DISTANCE.unpack_from(data, at)
        flag = _V2_FLAG.unpack_from(data, at)
        pit = _V2_PIT.unpack_from(data, at)
        lap = _V2_LAP.unpack_from(data, at)
        time = _V2_TIME.unpack_from(data, at)
        sector_time = _V2_SECTOR_TIME.unpack_from(data, at)
        values = {
            "num_participants": t[6],
            "participants_changed_timestamp": t[7],
            "event_time_remaining": t[8],
            "split_time_ahead": t[9],
            "split_time_behind": t[10],
            "split_time": t[11],
            "local_participant_index": local,
            "tick_count": t[-1],
            "all_world_position_x": _V2_X.unpack_from(data, at),
            "all_world_position_y": _V2_Y.unpack_from(data, at),
            "all_world_position_z": _V2_Z.unpack_from(data, at),
            "all_orientation_heading": _V2_HEADING.unpack_from(
                data, at
            ),  # quantised, as sent (see the definition)
            "all_orientation_pitch": _V2_PITCH.unpack_from(data, at),
            "all_orientation_bank": _V2_BANK.unpack_from(data, at),
            "all_current_lap_distance": distance,
            "all_race_position": race_position,
            "all_is_active": active,
            "all_sector": sector,
            "all_highest_flag": flag,
            "all_pit_mode_schedule": pit,
            "all_car_index": car_index,
            "all_is_human": human,
            "all_race_state": race_state,
            "all_lap_invalidated": invalidated,
            "all_current_lap": lap,
            "all_current_time": time,
            "all_current_sector_time": sector_time,
            "all_mp_participant_index": _V2_MP_INDEX.unpack_from(data, at),
        }
        i = self._viewed_index()
        if i is not None:
            values["current_lap_distance"] = distance[i]
            values["race_position"] = race_position[i]
            values["sector"] = sector[i]
            values["highest_flag"] = flag[i]
            values["pit_mode_schedule"] = pit[i]
            values["race_state"] = race_state[i]
            values["lap_invalidated"] = invalidated[i]
            values["current_lap"] = lap[i]
            values["current_time"] = time[i]
            values["current_sector_time"] = sector_time[i]
        return values

    def _game_state_packet(self, data: bytes) -> dict[str, Any] | None:
        values: dict[str, Any] = {}
        t = _GAME_STATE.unpack(data)
        state = t[7]
        game, session = state & 0x07, state >> 4
        values["build_version"] = t[6]
        values["game_state"] = game
        values["session_state"] = session
        values["ambient_temperature"] = t[8]
        values["track_temperature"] = t[9]
        values["rain_density"] = t[10]
        values["snow_density"] = t[11]
        values["wind_speed"] = t[12]
        values["wind_direction_x"] = t[13]
        values["wind_direction_y"] = t[14]
        self.session.states(game, session)
        return values

    def _time_stats_packet(self, data: bytes) -> dict[str, Any] | None:
        values: dict[str, Any] = {}
        at = _TIME_STATS_HEAD.size
        t = self._stats.unpack_from(data, at)
        k = 8
        values["participants_changed_timestamp"] = _TIME_STATS_HEAD.unpack_from(data)[6]
        values["all_fastest_lap_time"] = t[0::k]
        values["all_last_lap_time"] = t[1::k]
        values["all_last_sector_time"] = t[2::k]
        values["all_fastest_sector1_time"] = t[3::k]
        values["all_fastest_sector2_time"] = t[4::k]
        values["all_fastest_sector3_time"] = t[5::k]
        i = self._viewed_index()
        if i is not None:
            values["fastest_lap_time"] = t[i * k]
            values["last_lap_time"] = t[i * k + 1]
            values["last_sector_time"] = t[i * k + 2]
            values["fastest_sector1_time"] = t[i * k + 3]
            values["fastest_sector2_time"] = t[i * k + 4]
            values["fastest_sector3_time"] = t[i * k + 5]
        return values

    def _names_packet(self, data: bytes) -> dict[str, Any] | None:
        values: dict[str, Any] = {}
        if len(data) == PACKET_SIZES[8][1]:  # the last part: class names
            for j in range(_CLASSES_PER_PACKET):
                index, name = _CLASS.unpack_from(data, 12 + j * _CLASS.size)
                if not name[:1].strip(b"\x00"):
                    continue
                if index not in self._classes and len(self._classes) >= _MAX_CLASSES:
                    self._classes.clear()  # bounded: a flood of odd indices must not grow memory
                self._classes[index] = cstr(name)
        else:
            for j in range(_VEHICLES_PER_PACKET):
                index, vehicle_class, name = _VEHICLE.unpack_from(data, 12 + j * _VEHICLE.size)
                if index < PARTICIPANTS_V2 and name[:1].strip(b"\x00"):
                    self._vehicles[index] = cstr(name)
                    self._vehicle_class[index] = vehicle_class
        self._viewed_strings(values)
        return values or None


def _first_slot(data: bytes, per_packet: int, slots: int) -> int:
    """The first participant slot a partial packet fills (partial index counts from 1).

    :raises DecodeError: a partial index beyond the slots.
    """
    part = data[8]
    base = max(part - 1, 0) * per_packet
    if base >= slots:
        raise DecodeError(f"partial packet index {part} is beyond {slots} participants", reason="bad_header")
    return base


class Pcars1Decoder(_Base):
    """Decodes one Project CARS 1 (SMS UDP v1) datagram.

    The 1347-byte strings packet names the car and track (session info, no channels); the
    1028-byte one (more participant names) is counted in ``skipped``. The viewed car's position,
    lap and sector come from its participant entry (positions are whole metres).
    """

    protocol = "pcars"
    schema_file = "pcars.wrtf.yaml"

    def __init__(self, *, channels: Sequence[str] | None = None) -> None:
        super().__init__(channels)
        self._layout = _mapped(_V1_SPEC + _V1_TAIL_SPEC, _V1_EXTRA)
        self._i_tail = _position(_V1_SPEC + _V1_TAIL_SPEC, "_track_length")
        self._i_state = _position(_V1_SPEC, "_game_session_state")
        self._i_flags = _position(_V1_SPEC, "_race_state_flags")
        self._i_gear = _position(_V1_SPEC, "_gear_byte")
        self._i_viewed = _position(_V1_SPEC, "viewed_participant_index")
        self._status = _Columns(_v1_status)

    def decode(self, data: bytes) -> Decoded | None:
        size = len(data)
        if size not in V1_SIZES:
            if size in _V2_SIZES:
                raise DecodeError(
                    f"pcars: a {size}-byte Project CARS 2 datagram (the game's UDP protocol is set to"
                    " Project CARS 2; record it with protocol pcars2)",
                    reason="other_version",
                )
            raise DecodeError(
                f"pcars: {size}-byte datagram; expected 1367, 1347 or 1028", reason="wrong_size"
            )
        kind = data[2] & 0x03
        if _V1_KIND_SIZES.get(kind) != size:
            raise DecodeError(f"pcars: packet type {kind} in a {size}-byte datagram", reason="bad_header")
        if kind == 1:
            _build, _type, car, location, variation = _V1_STRINGS.unpack_from(data)
            self.session.set_track(_track(cstr(location), cstr(variation)))
            self.session.set_car(cstr(car))
            return None
        if kind == 2:
            self.skipped.add("participant_strings")
            return None
        t = _V1_HEAD_TAIL.unpack_from(data)
        values = self._layout.build(t)
        state = t[self._i_state]
        game, session_state = state & 0x07, state >> 4
        values["game_state"] = game
        values["session_state"] = session_state
        (
            values["race_state"],
            values["lap_invalidated"],
            values["anti_lock_active"],
            values["boost_active"],
        ) = _V1_RACE_FLAGS[t[self._i_flags] & 0x3F]
        values["gear"], values["num_gears"] = _GEARS[t[self._i_gear]]
        at, end = _V1_CARS_AT, _V1_CARS_END
        x = values["all_world_position_x"] = _V1_X.unpack_from(data, at)
        y = values["all_world_position_y"] = _V1_Y.unpack_from(data, at)
        z = values["all_world_position_z"] = _V1_Z.unpack_from(data, at)
        distance = values["all_current_lap_distance"] = _V1_DISTANCE.unpack_from(data, at)
        # bytes 8-15 of every car (the second u64 of its 16): compared as one array, cheaper
        # than eight stride slices of the datagram
        race_position, active, completed, invalidated, lap, sector, times = self._status(
            array("Q", data[at:end])[1::2]
        )
        values["all_race_position"] = race_position
        values["all_is_active"] = active
        values["all_laps_completed"] = completed
        values["all_lap_invalidated"] = invalidated
        values["all_current_lap"] = lap
        values["all_sector"] = sector
        values["all_last_sector_time"] = times
        viewed = t[self._i_viewed]
        if 0 <= viewed < PARTICIPANTS_V1:
            values["world_position_x"] = x[viewed]
            values["world_position_y"] = y[viewed]
            values["world_position_z"] = z[viewed]
            values["current_lap_distance"] = distance[viewed]
            values["race_position"] = race_position[viewed]
            values["laps_completed"] = completed[viewed]
            values["current_lap"] = lap[viewed]
            values["sector"] = sector[viewed]
        else:  # no car viewed: no viewed car's channels (the template has their keys)
            for key in _V1_VIEWED_KEYS:
                del values[key]
        tail = self._i_tail
        values["track_length"] = t[tail]
        values["wings"] = t[tail + 1 : tail + 3]
        values["dpad"] = t[tail + 3]
        signals = self.session
        if game != signals.game_state or session_state != signals.session_state:
            signals.states(game, session_state)  # (unchanged states signal nothing)
        return self._result(values)


def looks_like_v2(data: bytes) -> bool:
    """A v2 datagram: the PacketBase's type byte (at 10) names a packet of exactly this size."""
    return len(data) >= _BASE.size and len(data) in PACKET_SIZES.get(data[10], ())


def looks_like_v1(data: bytes) -> bool:
    """A v1 datagram: one of its three sizes, and the type bits of byte 2 name that size."""
    return _V1_KIND_SIZES.get(data[2] & 0x03) == len(data) if len(data) in V1_SIZES else False
