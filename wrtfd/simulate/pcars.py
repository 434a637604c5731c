"""Project CARS 2 / AMS2 (SMS UDP v2) and Project CARS 1 (v1) packets for the simulator.

Written from ``shared/spec/protocols/pcars2_ams2.md`` and ``wave2-games.md`` independently of
:mod:`wrtfd.decoders.pcars`, so the two cross-check each other. The simulated car is
participant 0 and the only one on track. What is sent when follows SMS's header notes:

- v2 while driving: telemetry and timings every tick, time stats when a sector or lap ends,
  race definition, participants (two parts of 16 names) and vehicle/class names (two parts of
  16 vehicles, then the class names) when driving starts and every 10 s; game state when the
  state changes and every 5 s (front end while not driving). Nothing else in the menus.
- v1: the telemetry packet every tick (front-end game state and zero inputs in the menus) and
  the strings packet (car, track) at the start and every 5 s.
"""

from __future__ import annotations

import math
import struct

from wrtfd.simulate.car import CarSpec, CarState
from wrtfd.simulate.encoding import EncoderOptions, TrackInfo, _s8, _u8, _u16

__all__ = [
    "CLASS_NAME",
    "DRIVER",
    "VEHICLE",
    "Pcars1Encoder",
    "Pcars2Encoder",
    "pcars1_encoder",
    "pcars2_encoder",
]

DRIVER = "Sim Driver"
VEHICLE = "Simulated GT"
CLASS_NAME = "GT Sim"
CLASS_INDEX = 7
_GAME_FRONT_END = 1
_GAME_PLAYING = 2
_SESSION_TIME_ATTACK = 6
_RACE_STATE_RACING = 2

# v2 PacketBase: packet number, category packet number, partial index, partial count, type, version
_BASE = struct.Struct("<IIBBBB")
# telemetry body after the base (547 B): see the spec's sTelemetryData table, offsets 12..558
_TELEMETRY = struct.Struct(
    "<bBBbBBhHhHHBBBBffHHbBBBf21f4B4B4f4f4B4f4B4B4B4h32H4f4f4f4f4H4Hff2BBBBIB40s40s40s40sf3fBI"
)
_RACE = struct.Struct("<9f64s64s64s64sHbx")
_PARTICIPANTS = struct.Struct("<I" + "64s" * 16 + "16I16H")
_TIMINGS_HEAD = struct.Struct("<bIffff")
_CAR = struct.Struct("<3h3hHBBBBHBBffH")  # participant info, 32 B
_TIMINGS_TAIL = struct.Struct("<HI")
_GAME_STATE = struct.Struct("<HBbbBBbbbxx")
_STAT = struct.Struct("<6fIH2x")
_VEHICLE = struct.Struct("<H2xI64s")
_CLASS = struct.Struct("<I20s")
PARTICIPANTS = 32

# v1 telemetry head (464 B) and participant info (16 B), tail (3 B): see wave2-games.md
_V1_HEAD = struct.Struct(
    "<HBBbbBBbBBB21fHBBhHhHHBBBBBbffHHBBbBf21f4B4B4f4f4f4B4B4f4f4B4B4B4h20H4f4f4f4f4HffBBbbBbbb"
)
_V1_CAR = struct.Struct("<3hHBBBBf")
_V1_TAIL = struct.Struct("<f2BB")
# car name @3, class @67, track location @131, variation @195, 16 names @259, 16 lap times @1283
_V1_STRINGS = struct.Struct("<HB64s64s64s64s1024s64s")
V1_PARTICIPANTS = 56


def _quantise(angle: float, half_range: float) -> int:
    return max(-32768, min(32767, round(angle / half_range * 32768)))


class _Common:
    """What both versions derive from a state: yaw, sector bookkeeping, the gear byte."""

    name = ""
    default_port = 5606
    rate_hz = 60.0

    def __init__(self, track: TrackInfo, car: CarSpec | None = None) -> None:
        self.track = track
        self.car = car or CarSpec()
        self.tick = 0

    def gear_byte(self, state: CarState) -> int:
        return (state.gear & 0x0F) | (len(self.car.gear_ratios) << 4) if state.racing else 0


class Pcars2Encoder(_Common):
    """SMS UDP v2 ("Project CARS 2" protocol, patch 5)."""

    name = "pcars2"

    def __init__(self, track: TrackInfo, *, car: CarSpec | None = None) -> None:
        super().__init__(track, car)
        self.packet_number = 0
        self.category: dict[int, int] = {}
        self._next_names_t = -math.inf
        self._next_state_t = -math.inf
        self._game_state: int | None = None
        self._sectors_done = -1
        self._lap = -1

    def base(self, kind: int, version: int, part: int = 1, parts: int = 1) -> bytes:
        self.packet_number += 1
        self.category[kind] = self.category.get(kind, 0) + 1
        return _BASE.pack(self.packet_number, self.category[kind], part, parts, kind, version)

    def telemetry(self, s: CarState) -> bytes:
        c = self.car
        v = s.speed_mps
        yaw = math.atan2(s.heading_x, s.heading_z)
        wheel_rps = v / (2 * math.pi * c.wheel_radius_m)
        body = _TELEMETRY.pack(
            0, _u8(s.throttle * 255), _u8(s.brake * 255), _s8(s.steer * 127), _u8(s.clutch * 255), 2,
            105, 450, 90, 150, 300, 80, _u8(s.brake * 255), _u8(s.throttle * 255), _u8(s.clutch * 255),
            0.75, v, _u16(s.rpm), _u16(c.max_rpm), _s8(s.steer * 127), self.gear_byte(s), 0, 0,
            s.total_distance_m / 1000.0,
            0.0, yaw, 0.0,  # orientation
            0.0, 0.0, v,  # local velocity
            v * s.heading_x, 0.0, v * s.heading_z,  # world velocity
            0.0, s.yaw_rate_rps, 0.0,  # angular velocity
            s.accel_lat_mps2, 0.0, s.accel_long_mps2,  # local acceleration
            0.0, 0.0, 0.0,  # world acceleration
            0.0, 0.5, 0.0,  # extents centre
            *([7] * 4), *([0] * 4), *([0.0] * 4), *([wheel_rps] * 4), *([85] * 4), *([0.0] * 4),
            *([10] * 4), *([0] * 4), *([0] * 4), *([400] * 4), *([358] * 32),
            *([0.0] * 4), *([0.08] * 4), *([0.05] * 4), *([0.0] * 4), *([80] * 4), *([180] * 4),
            s.rpm * 2 * math.pi / 60.0, 400.0 * s.throttle, 5, 5, 0, 0, 0, 0, 0,
            b"Slick Soft", b"Slick Soft", b"Slick Medium", b"Slick Medium",
            1.0, s.x, s.y, s.z, 128, self.tick,
        )  # fmt: skip
        return self.base(0, 2) + body

    def timings(self, s: CarState) -> bytes:
        sec_done = sum(s.sector_times_s)
        yaw = math.atan2(s.heading_x, s.heading_z)
        player = _CAR.pack(
            round(s.x), round(s.y), round(s.z),
            _quantise(yaw, math.pi), _quantise(s.pitch_rad, math.pi / 2), 0,
            _u16(max(0.0, s.lap_distance_m)), 1 | 0x80, s.sector & 0x07, 0, 0, 0,
            _RACE_STATE_RACING, max(1, s.lap), s.lap_time_s, s.lap_time_s - sec_done, 0,
        )  # fmt: skip
        body = _TIMINGS_HEAD.pack(1, 1, -1.0 - max(0, self.track.laps - max(s.lap, 0)), 0.0, 0.0, 0.0)
        body += player + bytes(_CAR.size * (PARTICIPANTS - 1)) + _TIMINGS_TAIL.pack(0, self.tick)
        return self.base(3, 1) + body

    def game_state(self, game: int) -> bytes:
        body = _GAME_STATE.pack(1200, game | (_SESSION_TIME_ATTACK << 4), 22, 30, 0, 0, 2, 1, 0)
        return self.base(4, 2) + body

    def race(self) -> bytes:
        s = self.track.sectors_m
        body = _RACE.pack(
            -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, self.track.length_m,
            self.track.name.encode()[:63], b"", self.track.name.encode()[:63], b"",
            self.track.laps, -1 if len(s) < 3 else 0,
        )  # fmt: skip
        return self.base(1, 1) + body

    def participants(self) -> list[bytes]:
        out = []
        for part in (1, 2):
            names = [DRIVER.encode() if part == 1 and i == 0 else b"" for i in range(16)]
            nationality = [250 if part == 1 and i == 0 else 0 for i in range(16)]
            body = _PARTICIPANTS.pack(1, *names, *nationality, *range((part - 1) * 16, part * 16))
            out.append(self.base(2, 1, part, 2) + body)
        return out

    def names(self) -> list[bytes]:
        out = []
        for part in (1, 2):
            body = b"".join(
                _VEHICLE.pack(i, CLASS_INDEX, VEHICLE.encode() if i == 0 else b"")
                for i in range((part - 1) * 16, part * 16)
            )
            out.append(self.base(8, 2, part, 3) + body)
        classes = _CLASS.pack(CLASS_INDEX, CLASS_NAME.encode()) + bytes(_CLASS.size * 59)
        out.append(self.base(8, 2, 3, 3) + classes)
        return out

    def time_stats(self, s: CarState) -> bytes:
        best = s.best_lap_s if s.best_lap_s > 0 else -1.0
        last = s.last_lap_s if s.last_lap_s > 0 else -1.0
        last_sector = s.sector_times_s[-1] if s.sector_times_s else -1.0
        player = _STAT.pack(best, last, last_sector, -1.0, -1.0, -1.0, 0, 0)
        body = struct.pack("<I", 1) + player + bytes(_STAT.size * (PARTICIPANTS - 1))
        return self.base(7, 1) + body

    def encode(self, state: CarState, *, first: bool, last: bool) -> list[bytes]:
        self.tick += 1
        out: list[bytes] = []
        game = _GAME_PLAYING if state.racing else _GAME_FRONT_END
        if game != self._game_state or state.t_s >= self._next_state_t:
            out.append(self.game_state(game))
            self._game_state = game
            self._next_state_t = state.t_s + 5.0
        if not state.racing:
            self._next_names_t = -math.inf  # announce everything again when driving starts
            return out
        if state.t_s >= self._next_names_t:
            out += [self.race(), *self.participants(), *self.names()]
            self._next_names_t = state.t_s + 10.0
        out.append(self.telemetry(state))
        out.append(self.timings(state))
        done = len(state.sector_times_s)
        if done != self._sectors_done or state.lap != self._lap:
            if self._sectors_done >= 0:
                out.append(self.time_stats(state))
            self._sectors_done, self._lap = done, state.lap
        return out


class Pcars1Encoder(_Common):
    """SMS UDP v1 (Project CARS 1): the telemetry packet, and the strings packet now and then."""

    name = "pcars"

    def __init__(self, track: TrackInfo, *, car: CarSpec | None = None) -> None:
        super().__init__(track, car)
        self.sequence = 0
        self._next_strings_t = -math.inf

    def _type(self, kind: int) -> int:
        self.sequence = (self.sequence + 1) & 0x3F
        return kind | self.sequence << 2

    def strings(self) -> bytes:
        name = self.track.name.encode()[:63]
        driver = DRIVER.encode().ljust(64, b"\x00")
        return _V1_STRINGS.pack(
            1200,
            self._type(1),
            VEHICLE.encode(),
            CLASS_NAME.encode(),
            name,
            b"",
            driver + bytes(960),
            struct.pack("<16f", -1.0, *[0.0] * 15),
        )

    def telemetry(self, s: CarState) -> bytes:
        c = self.car
        racing = s.racing
        v = s.speed_mps if racing else 0.0
        yaw = math.atan2(s.heading_x, s.heading_z)
        best = s.best_lap_s if s.best_lap_s > 0 else -1.0
        last = s.last_lap_s if s.last_lap_s > 0 else -1.0
        sectors = (*s.sector_times_s, -1.0, -1.0, -1.0)[:3]
        game = _GAME_PLAYING if racing else _GAME_FRONT_END
        x, y, z = (s.x, s.y, s.z) if racing else (0.0, 0.0, 0.0)
        head = _V1_HEAD.pack(
            1200, self._type(0), game | (_SESSION_TIME_ATTACK << 4), 0, 1,
            _u8(s.throttle * 255) if racing else 0, _u8(s.brake * 255) if racing else 0,
            _s8(s.steer * 127) if racing else 0, 0, _RACE_STATE_RACING if racing else 1, self.track.laps,
            best, last, s.lap_time_s, 0.0, 0.0, 0.0, -1.0, best, best, *sectors,
            *([-1.0] * 9),
            0, 0, 0, 105, 450, 90, 150, 300, 2, 80,
            _u8(s.brake * 255) if racing else 0, _u8(s.throttle * 255) if racing else 0, 0,
            _s8(s.steer * 127) if racing else 0, 0.75, v, _u16(s.rpm) if racing else 0, _u16(c.max_rpm),
            self.gear_byte(s), 0, -1, 0, s.total_distance_m / 1000.0,
            0.0, yaw, 0.0, 0.0, 0.0, v, v * s.heading_x, 0.0, v * s.heading_z,
            0.0, s.yaw_rate_rps if racing else 0.0, 0.0, s.accel_lat_mps2 if racing else 0.0, 0.0,
            s.accel_long_mps2 if racing else 0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.0,
            *([7] * 4), *([0] * 4), *([0.0] * 4), *([v / (2 * math.pi * c.wheel_radius_m)] * 4),
            *([0.0] * 4), *([85] * 4), *([255] * 4), *([0.0] * 4), *([1.0] * 4), *([10] * 4),
            *([0] * 4), *([0] * 4), *([400] * 4), *([358] * 20),
            *([0.0] * 4), *([0.08] * 4), *([0.05] * 4), *([0.0] * 4), *([180] * 4),
            s.rpm * 2 * math.pi / 60.0 if racing else 0.0, 400.0 * s.throttle if racing else 0.0,
            0, 0, 22, 30, 0, 2, 1, 0,
        )  # fmt: skip
        player = _V1_CAR.pack(
            round(x), round(y), round(z), _u16(max(0.0, s.lap_distance_m)) if racing else 0, 1 | 0x80,
            max(0, s.lap - 1), max(1, s.lap), s.sector & 0x07,
            s.sector_times_s[-1] if s.sector_times_s else -1.0,
        )  # fmt: skip
        cars = player + bytes(_V1_CAR.size * (V1_PARTICIPANTS - 1))
        return head + cars + _V1_TAIL.pack(self.track.length_m, 5, 5, 0)

    def encode(self, state: CarState, *, first: bool, last: bool) -> list[bytes]:
        self.tick += 1
        out: list[bytes] = []
        if state.t_s >= self._next_strings_t:
            out.append(self.strings())
            self._next_strings_t = state.t_s + 5.0
        out.append(self.telemetry(state))
        return out


def pcars2_encoder(track: TrackInfo, options: EncoderOptions) -> Pcars2Encoder:
    return Pcars2Encoder(track, car=options.car)


def pcars1_encoder(track: TrackInfo, options: EncoderOptions) -> Pcars1Encoder:
    return Pcars1Encoder(track, car=options.car)
