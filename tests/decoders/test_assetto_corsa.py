"""Assetto Corsa RTCarInfo from the real Monza capture; handshake response decoding."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from wrtfd.decoders.assetto_corsa import (
    HANDSHAKE_RESPONSE_SIZE,
    OP_SUBSCRIBE_UPDATE,
    AssettoCorsaDecoder,
    decode_handshake,
    encode_request,
)
from wrtfd.errors import DecodeError


def ac_capture(shared_data: Path) -> list[bytes]:
    base = shared_data / "udp" / "assetto_corsa" / "AssettoCorsa_monza_A8LMS.raw"
    raw = base.read_bytes()
    rows = base.with_name(base.name + ".index.tsv").read_text().splitlines()[1:]
    return [raw[int(r.split("\t")[3]) : int(r.split("\t")[3]) + int(r.split("\t")[4])] for r in rows]


def handshake_response(car: str = "ks_audi_r8_lms", track: str = "monza", config: str = "") -> bytes:
    """A 408-byte response; text after the NUL is garbage, as AC sends it."""

    def utf16(text: str) -> bytes:
        return (text + "\x00junk").encode("utf-16-le").ljust(100, b"\x00")[:100]

    return struct.pack(
        "<100s100sii100s100s", utf16(car), utf16("Driver"), 4242, 1, utf16(track), utf16(config)
    )


def test_capture_decodes_every_datagram(shared_data: Path) -> None:
    packets = ac_capture(shared_data)
    assert len(packets) == 8641
    dec = AssettoCorsaDecoder()
    out = [dec.decode(p) for p in packets]
    assert all(o is not None for o in out)
    for o in out:
        assert o is not None
        v = o.values
        assert v["speed_kmh"] == pytest.approx(v["speed_ms"] * 3.6, rel=1e-3, abs=1e-3)
        assert v["speed_mph"] == pytest.approx(v["speed_kmh"] / 1.609344, rel=1e-3, abs=1e-3)
        assert 0 <= v["gear"] <= 8
        assert 0.0 <= v["car_position_normalized"] <= 1.0
        assert len(v["wheel_angular_speed"]) == 4
        assert v["is_abs_enabled"] in (0, 1)
    assert max(o.values["speed_kmh"] for o in out if o is not None) > 200  # Monza straight


def test_handshake_response_sets_session() -> None:
    resp = decode_handshake(handshake_response())
    assert (resp.car_name, resp.driver_name, resp.track_name, resp.identifier) == (
        "ks_audi_r8_lms", "Driver", "monza", 4242,
    )  # fmt: skip
    dec = AssettoCorsaDecoder()
    assert dec.decode(handshake_response()) is None
    car_info = struct.pack("<4si", b"a\x00\x00\x00", 328) + bytes(320)
    first = dec.decode(car_info)
    assert first is not None and first.session_info == {
        "car": "ks_audi_r8_lms",
        "track": "monza",
        "driver": "Driver",
    }
    assert not first.new_session
    second = dec.decode(car_info)
    assert second is not None and second.session_info is None
    dec.decode(handshake_response(track="spa"))
    third = dec.decode(car_info)
    assert third is not None and third.new_session and third.session_key != first.session_key


def test_requests_and_bad_packets() -> None:
    assert encode_request(OP_SUBSCRIBE_UPDATE) == struct.pack("<iii", 1, 1, 1)
    dec = AssettoCorsaDecoder()
    with pytest.raises(DecodeError) as err:
        dec.decode(struct.pack("<4si", b"a\x00\x00\x00", 999) + bytes(320))
    assert err.value.reason == "bad_header"
    with pytest.raises(DecodeError):
        decode_handshake(bytes(HANDSHAKE_RESPONSE_SIZE - 1))
    assert dec.decode(bytes(212)) is None and dec.skipped.as_dict() == {"rtlap": 1}
