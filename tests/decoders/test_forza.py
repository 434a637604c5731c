"""Forza Data Out: the real FM2023 capture and synthetic packets for the other three sizes.

Synthetic packets are written with ``struct.pack_into`` at the offsets of the layout tables in
``shared/spec/protocols/forza.md``, independently of the decoder's own format strings.
"""

from __future__ import annotations

import itertools
import math
import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wrtfd.decoders.forza import ForzaDecoder
from wrtfd.errors import DecodeError

CAPTURE = ("udp", "forza_fm2023", "fm2023_dash_331B_x1793.bin")


def _capture(shared_data: Path) -> list[bytes]:
    raw = shared_data.joinpath(*CAPTURE).read_bytes()
    assert len(raw) % 331 == 0
    return [raw[i : i + 331] for i in range(0, len(raw), 331)]


def test_fm2023_capture_decodes_with_plausible_values(shared_data: Path) -> None:
    packets = _capture(shared_data)
    dec = ForzaDecoder()
    out = [dec.decode(p) for p in packets]
    assert len(out) == 1793
    stamps = [o.values["timestamp_ms"] for o in out]
    assert all(b > a for a, b in itertools.pairwise(stamps)), "TimestampMS must increase"
    assert [o.source_time_ns for o in out] == [s * 1_000_000 for s in stamps]
    assert not any(o.new_session for o in out[1:])
    for o in out:
        v = o.values
        assert v["is_race_on"] is True
        assert 0.0 <= v["speed"] < 120.0  # m/s
        assert 0.0 < v["engine_rpm"] <= v["engine_max_rpm"] + 1.0
        assert v["engine_idle_rpm"] < v["engine_max_rpm"]
        for wheel_channel in ("wheel_rotation_speed", "tire_temp", "tire_wear", "suspension_travel_m"):
            assert len(v[wheel_channel]) == 4
        assert all(0.0 <= w <= 1.0 for w in v["tire_wear"])
        assert 0 <= v["gear"] <= 11  # 11 = neutral in FM2023
        # the car-frame velocity vector and the dash speed describe the same motion
        vel = math.sqrt(v["velocity_x"] ** 2 + v["velocity_y"] ** 2 + v["velocity_z"] ** 2)
        assert vel == pytest.approx(v["speed"], rel=0.02, abs=0.05)
    assert out[0].session_info == {"car": "car ordinal 445", "track": "track ordinal 1640"}
    assert all(o.session_info is None for o in out[1:])


def _sled(race_on: int = 1, ts: int = 1000) -> bytearray:
    buf = bytearray(232)
    struct.pack_into("<iI", buf, 0, race_on, ts)
    struct.pack_into("<3f", buf, 8, 8000.0, 900.0, 4321.5)  # max, idle, current rpm
    struct.pack_into("<4f", buf, 100, 1.0, 2.0, 3.0, 4.0)  # WheelRotationSpeed FL, FR, RL, RR
    struct.pack_into("<4i", buf, 116, 0, 1, 0, 1)  # WheelOnRumbleStrip
    struct.pack_into("<4f", buf, 196, 0.1, 0.2, 0.3, 0.4)  # SuspensionTravelMeters
    struct.pack_into("<5i", buf, 212, 3275, 5, 800, 2, 8)  # ordinal, class, PI, drivetrain, cylinders
    return buf


def _dash(buf: bytearray, at: int) -> None:
    """Dash block at ``at`` (232 for FM7/FM2023, 244 for Horizon)."""
    struct.pack_into("<3f", buf, at, 10.0, 20.0, 30.0)  # PositionX/Y/Z
    struct.pack_into("<f", buf, at + 12, 55.5)  # Speed
    struct.pack_into("<4f", buf, at + 24, 180.0, 181.0, 182.0, 183.0)  # TireTemp
    struct.pack_into("<H", buf, at + 68, 7)  # LapNumber
    struct.pack_into("<6B", buf, at + 70, 3, 255, 10, 0, 0, 4)  # position, accel, brake, clutch, hb, gear
    struct.pack_into("<3b", buf, at + 76, -127, 5, -6)  # steer, driving line, AI brake diff


def test_sled_232() -> None:
    v = ForzaDecoder().decode(bytes(_sled())).values
    assert v["engine_rpm"] == pytest.approx(4321.5)
    assert v["wheel_rotation_speed"] == (1.0, 2.0, 3.0, 4.0)
    assert v["wheel_on_rumble_strip"] == (0, 1, 0, 1)
    assert v["suspension_travel_m"] == pytest.approx((0.1, 0.2, 0.3, 0.4))
    assert (v["car_ordinal"], v["car_class"], v["num_cylinders"]) == (3275, 5, 8)
    assert "speed" not in v and "track_ordinal" not in v


def test_fm7_dash_311() -> None:
    buf = _sled() + bytearray(79)
    _dash(buf, 232)
    v = ForzaDecoder().decode(bytes(buf)).values
    assert v["speed"] == pytest.approx(55.5)
    assert v["tire_temp"] == (180.0, 181.0, 182.0, 183.0)
    assert (v["lap_number"], v["race_position"], v["accel"], v["brake"], v["gear"]) == (7, 3, 255, 10, 4)
    assert (v["steer"], v["normalized_driving_line"], v["normalized_ai_brake_difference"]) == (-127, 5, -6)
    assert "car_group" not in v


def test_horizon_324_with_the_12_byte_block() -> None:
    buf = _sled() + bytearray(92)
    struct.pack_into("<Iff", buf, 232, 17, 3.5, 120.0)  # CarGroup, SmashableVelDiff, SmashableMass
    _dash(buf, 244)
    buf[323] = 0xAA  # trailing pad byte is ignored
    v = ForzaDecoder(game="fh5").decode(bytes(buf))
    assert (v.values["car_group"], v.values["smashable_vel_diff"], v.values["smashable_mass"]) == (
        17,
        3.5,
        120.0,
    )
    assert v.values["speed"] == pytest.approx(55.5)
    assert v.values["position_x"] == 10.0
    assert v.values["gear"] == 4 and v.values["steer"] == -127
    assert v.session_info == {"car": "car ordinal 3275", "track": "", "game": "fh5"}


def test_fm2023_331_tail() -> None:
    buf = _sled() + bytearray(99)
    _dash(buf, 232)
    struct.pack_into("<4fi", buf, 311, 0.1, 0.2, 0.3, 0.4, 1640)  # TireWear, TrackOrdinal (unaligned)
    v = ForzaDecoder().decode(bytes(buf)).values
    assert v["tire_wear"] == pytest.approx((0.1, 0.2, 0.3, 0.4))
    assert v["track_ordinal"] == 1640
    assert v["speed"] == pytest.approx(55.5)


def test_session_signals() -> None:
    dec = ForzaDecoder()
    first = dec.decode(bytes(_sled(race_on=0, ts=100)))
    assert not first.new_session
    start = dec.decode(bytes(_sled(race_on=1, ts=200_000)))
    assert start.new_session and start.session_key != first.session_key
    assert not dec.decode(bytes(_sled(race_on=1, ts=200_016))).new_session
    assert not dec.decode(bytes(_sled(race_on=1, ts=200_010))).new_session  # reordered by the network
    reset = dec.decode(bytes(_sled(race_on=1, ts=5)))
    assert reset.new_session
    assert not dec.decode(bytes(_sled(race_on=0, ts=30))).new_session  # 1 -> 0 is not a start


@given(st.binary(max_size=400).filter(lambda b: len(b) not in (232, 311, 324, 331)))
def test_other_sizes_are_dropped(data: bytes) -> None:
    with pytest.raises(DecodeError) as err:
        ForzaDecoder().decode(data)
    assert err.value.reason == "wrong_size"


#: Dash field offsets from forza.md, for FM7/FM2023 (the Horizon offsets are these + 12).
_DASH_AT = {"speed": (244, "<f"), "lap_number": (300, "<H"), "gear": (307, "<B"), "steer": (308, "<b")}


@given(
    size=st.sampled_from([311, 324, 331]),
    speed=st.floats(-1e6, 1e6, width=32),
    lap=st.integers(0, 65535),
    gear=st.integers(0, 255),
    steer=st.integers(-128, 127),
    rpm=st.floats(0, 20000, width=32),
    ordinal=st.integers(-(2**31), 2**31 - 1),
)
def test_random_dash_values_round_trip(
    size: int, speed: float, lap: int, gear: int, steer: int, rpm: float, ordinal: int
) -> None:
    buf = bytearray(size)
    struct.pack_into("<f", buf, 16, rpm)  # CurrentEngineRpm
    struct.pack_into("<i", buf, 212, ordinal)  # CarOrdinal
    shift = 12 if size == 324 else 0
    values = {"speed": speed, "lap_number": lap, "gear": gear, "steer": steer}
    for name, (at, fmt) in _DASH_AT.items():
        struct.pack_into(fmt, buf, at + shift, values[name])
    v = ForzaDecoder().decode(bytes(buf)).values
    assert (v["speed"], v["lap_number"], v["gear"], v["steer"]) == (speed, lap, gear, steer)
    assert (v["engine_rpm"], v["car_ordinal"]) == (rpm, ordinal)
