"""LFS / BeamNG OutGauge, OutSim v1 and OutSim2 from packets built at the documented offsets
(``shared/spec/protocols/lfs_outgauge_outsim.md``)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wrtfd.decoders.outgauge import (
    OSO_DRIVE,
    OSO_HEADER,
    OSO_ID,
    OSO_MAIN,
    OSO_TIME,
    OSO_WHEELS,
    OutGaugeDecoder,
    OutSim2Decoder,
    OutSimDecoder,
    outsim2_size,
)
from wrtfd.errors import ConfigError, DecodeError


def _outgauge(with_id: bool = False) -> bytes:
    """The values of node-insim's real 92-byte LFS packet (XRT), written at the table's offsets."""
    buf = bytearray(96 if with_id else 92)
    struct.pack_into("<I", buf, 0, 67480)
    buf[4:7] = b"XRT"
    struct.pack_into("<HBB", buf, 8, 0x8000 | 0x4000 | 0x2000, 3, 1)  # OG_BAR|OG_KM|OG_TURBO, gear, PLID
    struct.pack_into("<3f", buf, 12, 11.197486877441406, 2450.390625, -0.99998969)  # speed, rpm, turbo
    struct.pack_into("<f", buf, 28, 0.99985212)  # fuel
    struct.pack_into("<II", buf, 40, 0x766, 0x40)  # DashLights, ShowLights
    struct.pack_into("<3f", buf, 48, 0.0093475, 0.0, 0.15833)  # throttle, brake, clutch
    buf[60:70] = b"Fuel 99.9%"
    buf[76:92] = b"Brake Bal Fr 75%"
    if with_id:
        struct.pack_into("<i", buf, 92, -42)
    return bytes(buf)


def test_outgauge_92() -> None:
    out = OutGaugeDecoder().decode(_outgauge())
    v = out.values
    assert (v["time_ms"], v["car"], v["flags"], v["gear"], v["plid"]) == (67480, "XRT", 0xE000, 3, 1)
    assert v["speed"] == pytest.approx(11.197486877441406)
    assert v["rpm"] == pytest.approx(2450.390625)
    assert v["turbo"] == pytest.approx(-0.99998969)
    assert v["fuel"] == pytest.approx(0.99985212)
    assert v["dash_lights"] == 0x766 and v["show_lights"] == 0x40
    assert v["clutch"] == pytest.approx(0.15833)
    assert (v["display1"], v["display2"]) == ("Fuel 99.9%", "Brake Bal Fr 75%")
    assert "id" not in v
    assert out.session_info == {"car": "XRT"}
    assert out.source_time_ns == 67480 * 1_000_000


def test_outgauge_96_with_id() -> None:
    dec = OutGaugeDecoder()
    out = dec.decode(_outgauge(with_id=True))
    assert out.values["id"] == -42
    assert dec.decode(_outgauge(with_id=True)).session_info is None  # same car: no new info


def _outsim_main(buf: bytearray, at: int) -> None:
    struct.pack_into("<3f", buf, at, 0.1, 0.2, 0.3)  # AngVel
    struct.pack_into("<3f", buf, at + 12, 1.5, -0.25, 0.125)  # heading, pitch, roll
    struct.pack_into("<3f", buf, at + 24, 9.0, 8.0, 7.0)  # accel
    struct.pack_into("<3f", buf, at + 36, 30.0, 31.0, 32.0)  # vel
    struct.pack_into("<3i", buf, at + 48, 65536 * 100, -65536 // 2, 65536 * 3)  # pos, 1 m = 65536


def test_outsim_v1_64_and_68() -> None:
    buf = bytearray(64)
    struct.pack_into("<I", buf, 0, 1234)
    _outsim_main(buf, 4)
    v = OutSimDecoder().decode(bytes(buf)).values
    assert v["time_ms"] == 1234
    assert (v["heading"], v["pitch"], v["roll"]) == (1.5, -0.25, 0.125)
    assert (v["vel_x"], v["accel_z"]) == (30.0, 7.0)
    assert (v["pos_x"], v["pos_y"], v["pos_z"]) == (100.0, -0.5, 3.0)
    with_id = bytes(buf) + struct.pack("<i", 9)
    assert OutSimDecoder().decode(with_id).values["id"] == 9


def test_outsim2_full_1ff() -> None:
    assert outsim2_size(0xFF) == 272 and outsim2_size(0x1FF) == 280
    buf = bytearray(280)
    buf[0:4] = b"LFST"
    struct.pack_into("<iI", buf, 4, 77, 5555)  # ID, Time (ID first in OutSim2)
    _outsim_main(buf, 12)
    struct.pack_into("<5f", buf, 72, 0.9, 0.1, -0.2, 0.0, 1.0)  # inputs
    struct.pack_into("<B3xff", buf, 92, 4, 600.0, 350.0)  # gear, engine ang vel, max torque
    struct.pack_into("<ff", buf, 104, 1200.0, 3400.0)  # distances
    for wheel in range(4):  # RL, RR, FL, FR on the wire
        struct.pack_into("<7f4B2f", buf, 112 + 40 * wheel, 0.01 * (wheel + 1), 0, 0, 0, 1000.0 * (wheel + 1),
                         0, 0, 60 + wheel, 0, 1, 0, 0.5, 0.25)  # fmt: skip
    struct.pack_into("<ff", buf, 272, 12.5, 0.0)  # steer torque, spare
    dec = OutSim2Decoder(opts="1ff")
    names = {f["name"] for f in dec.definition["frame"]["fields"]}
    v = dec.decode(bytes(buf)).values
    assert set(v) == names
    assert (v["id"], v["time_ms"], v["gear"]) == (77, 5555, 4)
    assert v["pos_x"] == 100.0 and v["input_steer"] == pytest.approx(-0.2)
    assert (v["engine_ang_vel"], v["max_torque_at_vel"]) == (600.0, 350.0)
    assert (v["current_lap_dist"], v["indexed_distance"]) == (1200.0, 3400.0)
    # reordered to FL, FR, RL, RR
    assert v["vertical_load"] == (3000.0, 4000.0, 1000.0, 2000.0)
    assert v["air_temp"] == (62, 63, 60, 61)
    assert v["touching"] == (1, 1, 1, 1)
    assert v["steer_torque"] == 12.5


def test_outsim2_partial_options() -> None:
    opts = OSO_TIME | OSO_DRIVE
    dec = OutSim2Decoder(opts=opts)
    assert dec.size == 16
    assert [f["name"] for f in dec.definition["frame"]["fields"]] == [
        "time_ms", "gear", "engine_ang_vel", "max_torque_at_vel",
    ]  # fmt: skip
    v = dec.decode(struct.pack("<IB3xff", 10, 2, 1.0, 2.0)).values
    assert v == {"time_ms": 10, "gear": 2, "engine_ang_vel": 1.0, "max_torque_at_vel": 2.0}
    with pytest.raises(DecodeError) as err:
        dec.decode(bytes(272))
    assert err.value.reason == "wrong_size"


def test_outsim2_header_checked() -> None:
    dec = OutSim2Decoder(opts=OSO_HEADER | OSO_ID | OSO_MAIN | OSO_WHEELS)
    assert dec.size == 4 + 4 + 60 + 160
    with pytest.raises(DecodeError) as err:
        dec.decode(b"XXXX" + bytes(dec.size - 4))
    assert err.value.reason == "bad_magic"
    assert dec.decode(b"LFST" + bytes(dec.size - 4)).values["susp_deflect"] == (0.0, 0.0, 0.0, 0.0)


@pytest.mark.parametrize("opts", [0, "zz", 0x200, OSO_HEADER])
def test_outsim2_bad_options(opts: int | str) -> None:
    with pytest.raises(ConfigError):
        OutSim2Decoder(opts=opts)


@given(st.binary(max_size=300).filter(lambda b: len(b) not in (92, 96, 64, 68, 280)))
def test_wrong_sizes_are_dropped(data: bytes) -> None:
    for dec in (OutGaugeDecoder(), OutSimDecoder(), OutSim2Decoder()):
        with pytest.raises(DecodeError) as err:
            dec.decode(data)
        assert err.value.reason in ("wrong_size", "bad_magic")
