"""UBX framer and decoder against pyubx2's own parse of real u-blox logs, plus hostile bytes.

The oracle is pyubx2 (``UBXReader``): it finds the frames in the real logs of
../shared/data/gnss/ubx (NMEA interleaved), and its NAV-PVT fields, scaled to SI units, must
equal the decoder's channel by channel. The framer is fuzzed with Hypothesis: random bytes,
truncations and bit flips give counted drops and only frames whose checksum holds, never an
exception.
"""

from __future__ import annotations

import io
import math
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyubx2 import POLL, SET, UBXMessage, UBXReader

from wrtfd.decoders.base import DropCounter
from wrtfd.decoders.ubx import (
    MAX_PAYLOAD_BYTES,
    UbxDecoder,
    UbxFeed,
    UbxFramer,
    frame_ubx,
    parse_mon_ver,
    ubx_checksum,
)
from wrtfd.decoders.ubx_config import config_steps, receiver_info
from wrtfd.errors import DecodeError

LOGS = ("pyubx2__pygpsdata-MIXED.log", "pyubx2__pygpsdata-NAV.log")


def _log(shared_data: Path, name: str) -> bytes:
    return (shared_data / "gnss" / "ubx" / name).read_bytes()


def _pyubx2_frames(data: bytes, prefix: bytes = b"\xb5\x62") -> list[tuple[bytes, object]]:
    reader = UBXReader(io.BytesIO(data), protfilter=7, quitonerror=0)
    return [(raw, parsed) for raw, parsed in reader if raw.startswith(prefix)]


@pytest.mark.parametrize("name", LOGS)
def test_framer_finds_the_frames_pyubx2_finds(shared_data: Path, name: str) -> None:
    data = _log(shared_data, name)
    expected = [raw for raw, _ in _pyubx2_frames(data)]
    framer = UbxFramer()
    # fed in uneven chunks, as a serial port delivers them
    got: list[bytes] = []
    for pos in range(0, len(data), 37):
        got += framer.feed(data[pos : pos + 37])
    assert got == expected
    assert framer.drops.as_dict() == {}
    assert framer.pending_bytes == 0
    assert framer.nmea_lines == len(_pyubx2_frames(data, b"$"))


def _f32(value: float) -> float:
    return float(np.float32(value))


@pytest.mark.parametrize("name", LOGS)
def test_nav_pvt_equals_pyubx2_field_by_field(shared_data: Path, name: str) -> None:
    data = _log(shared_data, name)
    decoder = UbxDecoder()
    checked = 0
    for raw, msg in _pyubx2_frames(data):
        if msg.identity != "NAV-PVT":  # type: ignore[attr-defined]
            with pytest.raises(DecodeError) as err:
                decoder.decode(raw)
            assert err.value.reason == "unused_message"
            continue
        m: object = msg
        decoded = decoder.decode(raw)
        assert decoded is not None
        v = decoded.values
        g = m.__getattribute__
        assert v["itow_ms"] == g("iTOW")
        assert v["fix_type"] == g("fixType")
        assert v["fix_ok"] == bool(g("gnssFixOk"))
        assert v["carrier_solution"] == g("carrSoln")
        assert v["satellites_used"] == g("numSV")
        ok = g("gnssFixOk") == 1 and 0 < g("fixType") < 5
        if ok:
            # pyubx2 gives degrees (scaled by 1e-7 as a double); the same double here
            assert v["lat_deg"] == pytest.approx(g("lat"), rel=0, abs=1e-12)
            assert v["lon_deg"] == pytest.approx(g("lon"), rel=0, abs=1e-12)
            assert round(v["lat_deg"] * 1e7) == round(g("lat") * 1e7)
            assert _f32(v["height_m"]) == _f32(g("height") / 1000)
            assert _f32(v["alt_msl_m"]) == _f32(g("hMSL") / 1000)
            assert _f32(v["speed_mps"]) == _f32(g("gSpeed") / 1000)
            assert _f32(v["course_deg"]) == _f32(g("headMot"))
            assert _f32(v["vel_n_mps"]) == _f32(g("velN") / 1000)
            assert _f32(v["vel_e_mps"]) == _f32(g("velE") / 1000)
            assert _f32(v["vel_d_mps"]) == _f32(g("velD") / 1000)
            assert v["fix_mode"] == (3 if g("fixType") in (3, 4) else 2)
        else:
            assert math.isnan(v["lat_deg"]) and math.isnan(v["lon_deg"])
            assert v["fix_mode"] == 1
        assert _f32(v["h_acc_m"]) == _f32(g("hAcc") / 1000)
        assert _f32(v["v_acc_m"]) == _f32(g("vAcc") / 1000)
        assert _f32(v["speed_acc_mps"]) == _f32(g("sAcc") / 1000)
        assert _f32(v["heading_acc_deg"]) == _f32(g("headAcc"))
        assert _f32(v["pdop"]) == _f32(g("pDOP"))
        assert v["message"] == 1
        # the source clock: UTC when date and time are valid, else iTOW
        if g("validDate") and g("validTime"):
            second = (
                np.datetime64(
                    f"{g('year'):04d}-{g('month'):02d}-{g('day'):02d}T{g('hour'):02d}:{g('min'):02d}:{g('second'):02d}"
                )
                .astype("datetime64[ns]")
                .astype(np.int64)
            )
            assert decoded.source_time_ns == int(second) + g("nano")
            assert v["fix_time_utc_us"] == (int(second) + g("nano")) // 1000
        else:
            assert decoded.source_time_ns == g("iTOW") * 1_000_000
            assert v["fix_time_utc_us"] == 0
        checked += 1
    assert checked >= 1
    if name.endswith("MIXED.log"):
        assert checked >= 30


def test_time_falls_back_to_itow_without_a_valid_date() -> None:
    msg = UBXMessage("NAV", "NAV-PVT", 0, iTOW=123456789, year=2024, month=5, day=1, validDate=0, validTime=1)
    decoded = UbxDecoder().decode(msg.serialize())
    assert decoded is not None
    assert decoded.source_time_ns == 123456789 * 1_000_000
    assert decoded.values["fix_time_utc_us"] == 0
    assert math.isnan(decoded.values["lat_deg"])  # fixType 0: no position
    time_only = UBXMessage("NAV", "NAV-PVT", 0, iTOW=1, fixType=5, gnssFixOk=1, lat=45.0, lon=7.0)
    values = UbxDecoder().decode(time_only.serialize()).values  # type: ignore[union-attr]
    assert (values["fix_type"], values["fix_mode"], values["fix_ok"]) == (5, 1, True)
    assert math.isnan(values["lat_deg"])  # a time-only fix has no position


def test_hnr_pvt_updates_what_it_carries() -> None:
    decoder = UbxDecoder()
    pvt = UBXMessage(
        "NAV",
        "NAV-PVT",
        0,
        iTOW=1000,
        fixType=3,
        gnssFixOk=1,
        numSV=11,
        lat=45.5,
        lon=7.25,
        pDOP=1.5,
        velN=1500,
    )
    hnr = UBXMessage(
        "HNR",
        "HNR-PVT",
        0,
        iTOW=1040,
        gpsFix=3,
        GPSfixOK=1,
        lat=45.50001,
        lon=7.25002,
        gSpeed=12345,
        headMot=91.5,
    )
    decoder.decode(pvt.serialize())
    decoded = decoder.decode(hnr.serialize())
    assert decoded is not None
    v = decoded.values
    assert v["message"] == 2
    assert v["itow_ms"] == 1040
    assert v["lat_deg"] == pytest.approx(45.50001, abs=1e-9)
    assert v["lon_deg"] == pytest.approx(7.25002, abs=1e-9)
    assert v["speed_mps"] == pytest.approx(12.345)
    assert v["course_deg"] == pytest.approx(91.5)
    assert v["satellites_used"] == 11  # held from NAV-PVT
    assert v["pdop"] == pytest.approx(1.5)
    assert v["vel_n_mps"] == pytest.approx(1.5)


def test_drops_are_counted_with_reasons() -> None:
    good = frame_ubx(0x01, 0x07, bytes(92))
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    unknown = frame_ubx(0x77, 0x01, b"abc")
    too_long = b"\xb5\x62\x01\x07" + struct.pack("<H", MAX_PAYLOAD_BYTES + 1)
    nmea = b"$GNGGA,120000.00,,,,,0,00,99.99,,,,,,*7E\r\n"
    framer = UbxFramer()
    frames = framer.feed(bytes(bad) + b"\x00\x11garbage" + unknown + nmea + too_long + good)
    assert frames == [good]
    # garbage: the bad frame's body with the noise after it, and the over-long frame's header
    # (each frame is skipped by its sync only, so a real frame inside it would still be found)
    assert framer.drops.as_dict() == {"bad_checksum": 1, "garbage": 2, "too_long": 1, "unknown_class": 1}
    assert framer.nmea_lines == 1


def test_feed_routes_acks_and_samples() -> None:
    control: list[tuple[int, int, bytes]] = []
    samples: list[object] = []
    feed = UbxFeed("gps", UbxDecoder(), control=lambda c, i, p: control.append((c, i, p)))
    ack = frame_ubx(0x05, 0x01, b"\x06\x8a")
    pvt = bytes(UBXMessage("NAV", "NAV-PVT", 0, iTOW=5, fixType=3, gnssFixOk=1, lat=1.0, lon=2.0).serialize())
    sat = bytes(UBXMessage("NAV", "NAV-DOP", 0, iTOW=5).serialize())
    frames, taken = feed.feed(7, ack + pvt + sat, samples.append)
    assert (frames, taken) == (3, 1)
    assert control == [(0x05, 0x01, b"\x06\x8a")]
    assert feed.drops.as_dict() == {"unused_message": 1}


@st.composite
def _streams(draw: st.DrawFn) -> bytes:
    """Real-looking frames and sentences, cut, corrupted and mixed with noise."""
    parts: list[bytes] = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.integers(0, 4))
        if kind == 0:
            parts.append(draw(st.binary(max_size=64)))
        elif kind == 1:
            payload = draw(st.binary(max_size=120))
            parts.append(frame_ubx(draw(st.integers(0, 255)), draw(st.integers(0, 255)), payload))
        elif kind == 2:
            frame = bytearray(frame_ubx(0x01, 0x07, draw(st.binary(min_size=92, max_size=92))))
            flip = draw(st.integers(0, len(frame) - 1))
            frame[flip] ^= draw(st.integers(1, 255))
            parts.append(bytes(frame))
        elif kind == 3:
            whole = frame_ubx(0x01, 0x07, bytes(92))
            parts.append(whole[: draw(st.integers(0, len(whole)))])
        else:
            parts.append(b"$" + draw(st.binary(max_size=300)) + draw(st.sampled_from([b"", b"\r\n"])))
    return b"".join(parts)


@settings(max_examples=300, deadline=None)
@given(_streams(), st.lists(st.integers(1, 50), min_size=1, max_size=10))
def test_framer_fuzz_only_counted_drops(data: bytes, cuts: list[int]) -> None:
    drops = DropCounter()
    framer = UbxFramer(drops=drops)
    decoder = UbxDecoder()
    frames: list[bytes] = []
    pos = 0
    i = 0
    while pos < len(data):
        step = cuts[i % len(cuts)]
        frames += framer.feed(data[pos : pos + step])
        pos += step
        i += 1
    # chunking never changes what is found
    assert frames == UbxFramer().feed(data)
    for frame in frames:
        assert frame[:2] == b"\xb5\x62"
        assert ubx_checksum(frame[2:-2]) == frame[-2:]
        assert len(frame) == 8 + int.from_bytes(frame[4:6], "little")
        try:
            decoder.decode(frame)
        except DecodeError as exc:
            assert exc.reason in {"bad_length", "unused_message", "unknown_class", "malformed"}
    assert set(drops.as_dict()) <= {"bad_checksum", "too_long", "unknown_class", "garbage", "line_too_long"}
    assert framer.pending_bytes <= MAX_PAYLOAD_BYTES + 8 + MAX_PAYLOAD_BYTES


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=0, max_size=200))
def test_decoder_never_raises_anything_but_decode_error(data: bytes) -> None:
    try:
        UbxDecoder().decode(data)
    except DecodeError:
        pass
    try:
        parse_mon_ver(data)
    except DecodeError:
        pass


# --- the set-up, read back by pyubx2 -------------------------------------------------------------

M8 = receiver_info("ROM CORE 3.01 (107888)", "00080000", ("FWVER=SPG 3.01", "PROTVER=18.00"))
M10 = receiver_info("ROM SPG 5.10", "000A0000", ("FWVER=SPG 5.10", "PROTVER=34.10", "MOD=MAX-M10S"))


def test_generations_from_mon_ver_strings() -> None:
    assert not M8.valset and M8.protocol_version == 18.0
    assert M10.valset and M10.module == "MAX-M10S"
    assert receiver_info("EXT CORE 1.00", "00190000", ("PROTVER=27.12", "MOD=ZED-F9P")).valset
    assert receiver_info("x", "00190000", ()).valset  # hardware version alone
    assert not receiver_info("x", "00070000", ()).valset
    assert receiver_info("x", "00080000", ("MOD=NEO-M8U",)).fusion
    sw, hw, ext = parse_mon_ver(
        b"ROM SPG 5.10".ljust(30, b"\0") + b"000A0000".ljust(10, b"\0") + b"PROTVER=34.10".ljust(30, b"\0")
    )
    assert (sw, hw, ext) == ("ROM SPG 5.10", "000A0000", ("PROTVER=34.10",))


def _parsed(raw: bytes) -> object:
    return UBXReader.parse(raw, msgmode=SET)


def test_m10_gets_valset_one_key_each_in_ram() -> None:
    steps = config_steps(M10, rate_hz=25, port="uart1", current_baud=9600, nmea_off=True, baud=115200)
    got = []
    for step in steps:
        msg = _parsed(step.message)
        assert (step.msg_class, step.msg_id) == (0x06, 0x8A)
        assert msg.identity == "CFG-VALSET"  # type: ignore[attr-defined]
        assert (msg.ram, msg.bbr, msg.flash) == (1, 0, 0)  # type: ignore[attr-defined]
        keys = {k: v for k, v in vars(msg).items() if k.startswith("CFG_")}
        assert len(keys) == 1
        got.append(next(iter(keys.items())))
    assert got == [
        ("CFG_RATE_MEAS", 40),
        ("CFG_RATE_NAV", 1),
        ("CFG_MSGOUT_UBX_NAV_PVT_UART1", 1),
        ("CFG_NAVSPG_DYNMODEL", 4),
        ("CFG_UART1OUTPROT_NMEA", 0),
        ("CFG_UART1_BAUDRATE", 115200),
    ]
    assert [s.baud for s in steps] == [None] * 5 + [115200]


def test_m8_gets_the_legacy_messages() -> None:
    steps = config_steps(M8, rate_hz=10, port="uart1", current_baud=9600, nmea_off=True, baud=115200)
    msgs = [_parsed(s.message) for s in steps]
    assert [m.identity for m in msgs] == ["CFG-RATE", "CFG-MSG", "CFG-NAV5", "CFG-PRT"]  # type: ignore[attr-defined]
    rate, msg, nav5, prt = msgs
    assert (rate.measRate, rate.navRate) == (100, 1)  # type: ignore[attr-defined]
    assert (msg.msgClass, msg.msgID, msg.rateUART1) == (1, 7, 1)  # type: ignore[attr-defined]
    assert (nav5.dyn, nav5.dynModel) == (1, 4)  # type: ignore[attr-defined]
    assert (prt.portID, prt.baudRate, prt.outUBX, prt.outNMEA, prt.inUBX) == (1, 115200, 1, 0, 1)  # type: ignore[attr-defined]
    assert steps[-1].baud == 115200
    # nothing asked beyond the defaults: no CFG-PRT at all
    plain = config_steps(M8, rate_hz=5, port="usb", current_baud=9600)
    assert [_parsed(s.message).identity for s in plain] == ["CFG-RATE", "CFG-MSG", "CFG-NAV5"]  # type: ignore[attr-defined]


def test_fusion_modules_get_hnr_pvt() -> None:
    m8u = receiver_info("ROM CORE 3.01", "00080000", ("PROTVER=19.20", "MOD=NEO-M8U"))
    steps = config_steps(m8u, rate_hz=10, port="uart1", current_baud=9600)
    parsed: list[Any] = [_parsed(s.message) for s in steps]
    msgs = [(m.msgClass, m.msgID) for m in parsed if m.identity == "CFG-MSG"]
    assert msgs == [(0x01, 0x07), (0x28, 0x00)]
    f9r = receiver_info("EXT CORE 1.00", "00190000", ("PROTVER=33.21", "MOD=ZED-F9R"))
    keys = [s.what for s in config_steps(f9r, rate_hz=10, port="usb", current_baud=9600)]
    assert "CFG-VALSET CFG_MSGOUT_UBX_HNR_PVT_USB=1" in keys


def test_mon_ver_poll_is_what_pyubx2_builds() -> None:
    from wrtfd.decoders.ubx_config import mon_ver_poll

    assert mon_ver_poll() == b"\xb5\x62\x0a\x04\x00\x00\x0e\x34"
    assert mon_ver_poll() == UBXMessage("MON", "MON-VER", POLL).serialize()


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="rate_hz"):
        config_steps(M10, rate_hz=30, port="uart1", current_baud=9600)
    with pytest.raises(ValueError, match="port"):
        config_steps(M10, rate_hz=10, port="spi2", current_baud=9600)
