"""Encode simulated car states as the games' own UDP datagrams.

Layouts follow ``shared/spec/protocols/{forza,f1,lfs_outgauge_outsim}.md`` (little-endian,
packed); each encoder is independent of wrtfd's decoders on purpose, so the two cross-check each
other. Track coordinates (x, z ground, y altitude) go into each game's world frame:

- Forza and F1: world X, Y (up), Z as they are.
- LFS OutSim: X right, Y forward, Z up, so (X, Y, Z) = (x, -z, y) keeps the frame right-handed;
  positions are fixed point (65536 = 1 m).

Session signals: Forza sends ``IsRaceOn = 0`` in the menus before and after driving; F1 sends
Session packets twice a second throughout, an ``SSTA`` event when driving starts and ``SEND``
when the session ends, Motion only while the player drives; OutGauge/OutSim are sent only while
driving (LFS sends them only when viewing a car).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from wrtfd.simulate.car import CarSpec, CarState
from wrtfd.simulate.encoding import Encoder, EncoderOptions, TrackInfo, _s8, _u8, _u16

if TYPE_CHECKING:
    from wrtfd.protocols import Simulator

__all__ = [
    "ENCODERS",
    "Encoder",
    "F1Encoder",
    "ForzaEncoder",
    "OutGaugeEncoder",
    "OutSimEncoder",
    "TrackInfo",
    "f1_encoder",
    "forza_encoder",
    "make_encoder",
    "outgauge_encoder",
    "outsim_encoder",
]

MPS_TO_KMH = 3.6


def _yaw(state: CarState) -> float:
    """Heading angle from +Z towards +X (radians)."""
    return math.atan2(state.heading_x, state.heading_z)


# --- Forza Data Out ---------------------------------------------------------------------------

# Sled: IsRaceOn s32, TimestampMS u32, 27 f32 (engine, accel, velocity, angular velocity, yaw/pitch/roll,
# suspension travel x4, slip ratio x4, wheel speed x4), 4 s32 rumble strips, 20 f32 (puddles, surface
# rumble, slip angle, combined slip, suspension metres, each x4), 5 s32 (car ordinal, class, PI,
# drivetrain, cylinders).
_FORZA_SLED = struct.Struct("<iI27f4i20f5i")
# Dash: 17 f32 (position x3, speed, power, torque, tyre temps x4, boost, fuel, distance, best/last/
# current lap, race time), LapNumber u16, RacePosition/Accel/Brake/Clutch/HandBrake/Gear u8, Steer/
# driving line/AI brake difference s8.
_FORZA_DASH = struct.Struct("<17fH6B3b")
_FORZA_HORIZON = struct.Struct("<Iff")  # CarGroup, SmashableVelDiff, SmashableMass
_FORZA_FM2023 = struct.Struct("<4fi")  # TireWear x4, TrackOrdinal
FORZA_SIZES = {"sled": 232, "fm7": 311, "horizon": 324, "fm2023": 331}


class ForzaEncoder:
    """Forza Data Out. ``variant``: sled (232), fm7 (311), horizon (324: FH4/5/6) or fm2023 (331)."""

    name = "forza"
    default_port = 5301
    rate_hz = 60.0

    def __init__(self, track: TrackInfo, *, variant: str = "fm2023", car: CarSpec | None = None) -> None:
        if variant not in FORZA_SIZES:
            raise ValueError(f"forza variant must be one of {', '.join(FORZA_SIZES)}")
        self.variant = variant
        self.track = track
        self.car = car or CarSpec()
        self._race_start_t: float | None = None

    def encode(self, state: CarState, *, first: bool, last: bool) -> list[bytes]:
        c = self.car
        ts = round(state.t_s * 1000.0) & 0xFFFFFFFF
        if not state.racing:
            # menus: the game keeps sending, with IsRaceOn = 0 and the rest zero
            sled = _FORZA_SLED.pack(0, ts, *([0.0] * 27), *([0] * 4), *([0.0] * 20), *([0] * 5))
            dash = _FORZA_DASH.pack(*([0.0] * 17), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        else:
            if self._race_start_t is None:
                self._race_start_t = state.t_s
            v = state.speed_mps
            wheel = v / c.wheel_radius_m
            sled = _FORZA_SLED.pack(
                1,
                ts,
                c.max_rpm,
                c.idle_rpm,
                state.rpm,
                state.accel_lat_mps2,
                0.0,
                state.accel_long_mps2,  # local frame: X right, Y up, Z forward
                0.0,
                0.0,
                v,
                0.0,
                state.yaw_rate_rps,
                0.0,
                _yaw(state),
                state.pitch_rad,
                0.0,
                *([0.45] * 4),
                *([0.02 if state.throttle > 0.9 else 0.0] * 4),
                *([wheel] * 4),
                0,
                0,
                0,
                0,
                *([0.0] * 4),
                *([0.0] * 4),
                *([0.01] * 4),
                *([0.02] * 4),
                *([0.05] * 4),
                3117,
                4,
                801,
                1,
                8,
            )
            power = state.throttle * c.power_w
            omega = state.rpm * 2 * math.pi / 60.0
            dash = _FORZA_DASH.pack(
                state.x,
                state.y,
                state.z,
                v,
                power,
                power / omega if omega > 0 else 0.0,
                *([185.0] * 4),
                0.0,
                0.8,
                state.progress_m,
                state.best_lap_s,
                state.last_lap_s,
                state.lap_time_s,
                state.t_s - self._race_start_t,
                max(0, state.lap - 1),
                1,
                _u8(state.throttle * 255),
                _u8(state.brake * 255),
                _u8(state.clutch * 255),
                0,
                state.gear,
                _s8(state.steer * 127),
                0,
                0,
            )
        if self.variant == "sled":
            return [sled]
        if self.variant == "fm7":
            return [sled + dash]
        if self.variant == "horizon":
            return [sled + _FORZA_HORIZON.pack(0, 0.0, 0.0) + dash + b"\x00"]
        return [sled + dash + _FORZA_FM2023.pack(0.05, 0.05, 0.06, 0.06, 0)]


# --- EA F1 (2024 / 2025 formats) --------------------------------------------------------------

# Header: packetFormat u16, gameYear, major, minor, packetVersion, packetId u8, sessionUID u64,
# sessionTime f32, frameIdentifier u32, overallFrameIdentifier u32, playerCarIndex, secondary u8.
_F1_HEADER = struct.Struct("<HBBBBBQfIIBB")
# Motion per car (60): position x3, velocity x3 f32, forward x3 and right x3 s16/32767, g-forces x3,
# yaw/pitch/roll.
_F1_MOTION_CAR = struct.Struct("<ffffffhhhhhhffffff")
# Car telemetry per car (60): speed u16 km/h, throttle/steer/brake f32, clutch u8, gear s8, rpm u16, drs,
# rev lights %, rev bits u16, brake temps u16 x4, tyre surface/inner u8 x4, engine temp u16,
# pressures f32 x4, surface types u8 x4.
_F1_TELEMETRY_CAR = struct.Struct("<HfffBbHBBH4H4B4BH4f4B")
_F1_TELEMETRY_TRAILER = struct.Struct("<BBb")  # MFD panel, secondary MFD panel, suggested gear
# Lap data per car (57, 2024+): last/current lap ms u32, sector 1/2 (ms part u16 + minutes u8), deltas
# (ms u16 + min u8) x2, lapDistance/totalDistance/safetyCarDelta f32, 15 u8 (position .. pit lane timer
# active), pit lane/stop timers u16 x2, serve pen u8, speed trap f32, speed trap lap u8.
_F1_LAP_CAR = struct.Struct("<IIHBHBHBHBfffBBBBBBBBBBBBBBBHHBfB")
_F1_LAP_TRAILER = struct.Struct("<BB")
F1_SIZES = {0: 1349, 1: 753, 2: 1285, 3: 45, 6: 1352}
F1_CARS = 22
F1_SESSION_TIME_TRIAL = 18  # 2024/2025 session type table


class F1Encoder:
    """EA F1 UDP (``packet_format`` 2024 or 2025): Motion, Lap Data, Car Telemetry every tick,
    Session at 2 Hz, Event SSTA/SEND at the start and end. The player is car 0. A lap in
    ``invalid_laps`` gets currentLapInvalid from half-way round to its end, as a game latches it
    after a cut."""

    name = "f1"
    default_port = 20777
    rate_hz = 60.0

    def __init__(
        self,
        track: TrackInfo,
        *,
        session_uid: int,
        packet_format: int = 2024,
        car: CarSpec | None = None,
        invalid_laps: frozenset[int] = frozenset(),
    ) -> None:
        if packet_format not in (2024, 2025):
            raise ValueError("f1 packet format must be 2024 or 2025")
        self.track = track
        self.invalid_laps = invalid_laps
        self.uid = session_uid & 0xFFFFFFFFFFFFFFFF
        self.packet_format = packet_format
        self.car = car or CarSpec()
        self.frame = 0
        self._next_session_t = 0.0
        self._driving = False

    def _header(self, packet_id: int, state: CarState) -> bytes:
        year = self.packet_format % 100
        return _F1_HEADER.pack(
            self.packet_format, year, 1, 0, 1, packet_id, self.uid, state.t_s, self.frame, self.frame, 0, 255
        )

    def _pad(self, packet_id: int, body: bytes) -> bytes:
        return body + bytes(F1_SIZES[packet_id] - len(body))

    def event(self, code: bytes, state: CarState) -> bytes:
        return self._pad(3, self._header(3, state) + code)

    def session(self, state: CarState) -> bytes:
        buf = bytearray(self._header(1, state) + bytes(F1_SIZES[1] - _F1_HEADER.size))
        struct.pack_into(
            "<BbbBHBbB",
            buf,
            29,
            0,
            32,
            24,
            self.track.laps,
            _u16(self.track.length_m),
            F1_SESSION_TIME_TRIAL,
            -1,
            0,
        )
        struct.pack_into("<HHB", buf, 38, 3600, 3600, 80)
        s = self.track.sectors_m
        if len(s) >= 3:
            struct.pack_into("<ff", buf, 745, s[1], s[2])
        return bytes(buf)

    def motion(self, state: CarState) -> bytes:
        v = state.speed_mps
        fx, fz = state.heading_x, state.heading_z
        car = _F1_MOTION_CAR.pack(
            state.x,
            state.y,
            state.z,
            v * fx,
            0.0,
            v * fz,
            round(fx * 32767),
            0,
            round(fz * 32767),
            round(-fz * 32767),
            0,
            round(fx * 32767),
            state.accel_lat_mps2 / 9.81,
            state.accel_long_mps2 / 9.81,
            1.0,
            _yaw(state),
            state.pitch_rad,
            0.0,
        )
        return self._pad(0, self._header(0, state) + car)

    def telemetry(self, state: CarState) -> bytes:
        car = _F1_TELEMETRY_CAR.pack(
            _u16(state.speed_mps * MPS_TO_KMH),
            state.throttle,
            state.steer,
            state.brake,
            _u8(state.clutch * 100),
            state.gear if state.racing else 0,
            _u16(state.rpm),
            0,
            _u8(100 * state.rpm / self.car.max_rpm),
            0,
            400,
            400,
            450,
            450,
            95,
            95,
            96,
            96,
            98,
            98,
            99,
            99,
            105,
            22.5,
            22.5,
            23.0,
            23.0,
            0,
            0,
            0,
            0,
        )
        body = self._header(6, state) + car + bytes(_F1_TELEMETRY_CAR.size * (F1_CARS - 1))
        return body + _F1_TELEMETRY_TRAILER.pack(255, 255, 0)

    def lap_data(self, state: CarState) -> bytes:
        sec = state.sector_times_s
        s1 = round(sec[0] * 1000) if len(sec) >= 1 else 0
        s2 = round(sec[1] * 1000) if len(sec) >= 2 else 0
        invalid = state.lap in self.invalid_laps and state.lap_distance_m >= self.track.length_m / 2
        car = _F1_LAP_CAR.pack(
            round(state.last_lap_s * 1000),
            round(state.lap_time_s * 1000),
            s1 % 60000,
            s1 // 60000,
            s2 % 60000,
            s2 // 60000,
            0,
            0,
            0,
            0,
            state.lap_distance_m,
            state.total_distance_m,
            0.0,
            1,
            max(1, state.lap),
            0,
            0,
            min(2, state.sector),
            1 if invalid else 0,  # currentLapInvalid
            0,
            0,
            0,
            0,
            0,
            1,
            1 if state.lap >= 1 else 3,
            2,
            0,
            0,
            0,
            0,
            0.0,
            255,
        )
        body = self._header(2, state) + car + bytes(_F1_LAP_CAR.size * (F1_CARS - 1))
        return body + _F1_LAP_TRAILER.pack(255, 255)

    def encode(self, state: CarState, *, first: bool, last: bool) -> list[bytes]:
        out: list[bytes] = []
        self.frame += 1
        if state.t_s >= self._next_session_t or first:
            out.append(self.session(state))
            self._next_session_t = state.t_s + 0.5
        if state.racing and not self._driving:
            self._driving = True
            out.append(self.event(b"SSTA", state))
        if state.racing:
            out.append(self.motion(state))
        out.append(self.lap_data(state))
        out.append(self.telemetry(state))
        if last:
            out.append(self.event(b"SEND", state))
        return out


# --- Live for Speed OutGauge / OutSim ----------------------------------------------------------

# OutGauge (92): Time u32 ms, Car char[4], Flags u16, Gear u8 (0 R, 1 N, 2 = 1st), PLID u8, Speed, RPM,
# Turbo, EngTemp, Fuel, OilPressure, OilTemp f32, DashLights, ShowLights u32, Throttle, Brake, Clutch
# f32, Display1, Display2 char[16].
_OUTGAUGE = struct.Struct("<I4sHBBfffffffIIfff16s16s")
OG_KM = 0x4000
OG_BAR = 0x8000
DL_SHIFT = 1 << 0
# OutSim v1 (64): Time u32, AngVel f32 x3, Heading, Pitch, Roll f32, Accel f32 x3, Vel f32 x3, Pos s32 x3.
_OUTSIM = struct.Struct("<I3f3f3f3f3i")


class OutGaugeEncoder:
    """LFS OutGauge (92 bytes); sent while driving only."""

    name = "outgauge"
    default_port = 30000
    rate_hz = 60.0

    def __init__(self, track: TrackInfo, *, car: CarSpec | None = None) -> None:
        self.track = track
        self.car = car or CarSpec()

    def encode(self, state: CarState, *, first: bool, last: bool) -> list[bytes]:
        if not state.racing:
            return []
        shift = state.rpm >= self.car.upshift_rpm
        return [
            _OUTGAUGE.pack(
                round(state.t_s * 1000) & 0xFFFFFFFF,
                b"WRT\x00",
                OG_KM | OG_BAR,
                state.gear + 1,
                1,
                state.speed_mps,
                state.rpm,
                0.0,
                90.0,
                0.8,
                4.0,
                100.0,
                DL_SHIFT,
                DL_SHIFT if shift else 0,
                state.throttle,
                state.brake,
                state.clutch,
                b"Fuel 80.0%",
                f"Lap {max(state.lap, 0)}".encode(),
            )
        ]


class OutSimEncoder:
    """LFS OutSim v1 (64 bytes) with positions in LFS axes; sent while driving only."""

    name = "outsim"
    default_port = 30001
    rate_hz = 60.0

    def __init__(self, track: TrackInfo, *, car: CarSpec | None = None) -> None:
        self.track = track

    def encode(self, state: CarState, *, first: bool, last: bool) -> list[bytes]:
        if not state.racing:
            return []
        v = state.speed_mps
        dx, dy = state.heading_x, -state.heading_z  # travel direction in LFS X/Y
        heading = math.atan2(-dx, dy)  # anticlockwise from +Y seen from above
        # lateral acceleration towards the right of travel, in LFS axes: right = (dy, -dx)
        ax = state.accel_long_mps2 * dx + state.accel_lat_mps2 * dy
        ay = state.accel_long_mps2 * dy - state.accel_lat_mps2 * dx
        return [
            _OUTSIM.pack(
                round(state.t_s * 1000) & 0xFFFFFFFF,
                0.0,
                0.0,
                -state.yaw_rate_rps,  # about Z (up): a right turn is clockwise
                heading,
                state.pitch_rad,
                0.0,
                ax,
                ay,
                0.0,
                v * dx,
                v * dy,
                0.0,
                round(state.x * 65536),
                round(-state.z * 65536),
                round(state.y * 65536),
            )
        ]


def forza_encoder(track: TrackInfo, options: EncoderOptions) -> ForzaEncoder:
    return ForzaEncoder(track, variant=options.forza_format, car=options.car)


def f1_encoder(track: TrackInfo, options: EncoderOptions) -> F1Encoder:
    import random

    uid = random.Random(options.seed).getrandbits(64)
    return F1Encoder(
        track,
        session_uid=uid,
        packet_format=options.f1_format,
        car=options.car,
        invalid_laps=options.invalid_laps,
    )


def outgauge_encoder(track: TrackInfo, options: EncoderOptions) -> OutGaugeEncoder:
    return OutGaugeEncoder(track, car=options.car)


def outsim_encoder(track: TrackInfo, options: EncoderOptions) -> OutSimEncoder:
    return OutSimEncoder(track, car=options.car)


def _simulators() -> dict[str, Simulator]:
    from wrtfd.protocols import Simulator, all_protocols

    return {
        name: info.simulator
        for name, info in all_protocols().items()
        if isinstance(info.simulator, Simulator)
    }


class _Encoders(Mapping[str, str]):
    """Protocol -> what its simulator sends, read from the protocol descriptors."""

    def __getitem__(self, name: str) -> str:
        return _simulators()[name].note

    def __iter__(self) -> Iterator[str]:
        return iter(_simulators())

    def __len__(self) -> int:
        return len(_simulators())


#: Protocol -> what the simulator sends (the descriptors' ``simulator`` notes).
ENCODERS: Mapping[str, str] = _Encoders()


def make_encoder(
    protocol: str,
    track: TrackInfo,
    *,
    seed: int = 0,
    forza_format: str = "fm2023",
    f1_format: int = 2024,
    car: CarSpec | None = None,
    gt7_variant: str = "C",
    invalid_laps: frozenset[int] = frozenset(),
) -> Encoder:
    """The encoder for ``protocol`` (its descriptor's simulator, imported now).

    :raises ValueError: for an unknown protocol or option.
    """
    from wrtfd.protocols import load

    simulator = _simulators().get(protocol)
    if simulator is None:
        raise ValueError(f"unknown protocol {protocol!r}; known: {', '.join(ENCODERS)}")
    options = EncoderOptions(seed, car, forza_format, f1_format, gt7_variant, invalid_laps)
    encoder: Encoder = load(simulator.factory)(track, options)
    return encoder
