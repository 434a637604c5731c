"""GT7 decoder: the real PS5 captures decode to what the data README says they hold; the B, ~ and
C variants, built and encrypted from the protocol document, decode to the values put in; a wrong
key, a packet that does not decrypt, or a wrong size are drops with a reason; session signals."""

from __future__ import annotations

import math
import struct
from itertools import pairwise
from pathlib import Path

import pytest

from tests.decoders.gt7_capture import SIZE, captures, close_packet, open_packet
from wrtfd.decoders.gt7 import Gt7Decoder
from wrtfd.errors import ConfigError, DecodeError

#: Car codes the README lists, by the track files they were driven on.
README_CARS = {3450, 3531, 3311, 1927, 140, 3209}


def test_every_capture_decodes_as_the_readme_and_index_say(shared_data: Path) -> None:
    files = captures(shared_data)
    assert len(files) == 33 and sum(len(c.packets) for c in files) == 4912
    cars_by_file: dict[str, set[int]] = {}
    for cap in files:
        dec = Gt7Decoder()
        decoded = [dec.decode(p) for p in cap.packets]
        values = [d.values for d in decoded]
        for v, row in zip(values, cap.index, strict=True):
            assert v["packet_size"] == 296
            assert (v["packet_id"], v["lap_count"], v["laps_in_race"]) == (
                row.packet_id,
                row.lap_count,
                row.laps_in_race,
            )
            assert (v["best_lap_ms"], v["last_lap_ms"]) == (row.best_lap_ms, row.last_lap_ms)
            assert v["on_track"] and not v["paused"] and not v["loading"]
            assert 0.0 < v["fuel_capacity"] <= 100.0 and 0.0 <= v["fuel_level"] <= v["fuel_capacity"]
        ids = [v["packet_id"] for v in values]
        assert all(10 <= b - a <= 145 for a, b in pairwise(ids)), cap.name  # README: steps of 10 to 145
        for a, b in pairwise(values):  # thinned at 50 m: neighbours at most about 51 m apart
            gap = math.dist(
                (a["position_x"], a["position_y"], a["position_z"]),
                (b["position_x"], b["position_y"], b["position_z"]),
            )
            assert gap <= 52.0, (cap.name, gap)
        # the packet id is the source clock: 60 ticks per second
        assert [d.source_time_ns for d in decoded] == [i * 1_000_000_000 // 60 for i in ids]
        assert len({d.session_key for d in decoded}) == 1  # one drive per file
        cars_by_file[cap.name] = {v["car_code"] for v in values}
    assert set().union(*cars_by_file.values()) == README_CARS
    assert cars_by_file["lake_louise__tri_oval"] == {1927}  # the Quattro S1 on loose surfaces
    assert cars_by_file["circuit_gilles_villeneuve__full_course"] == {140}
    assert cars_by_file["autodromo_nazionale_monza__no_chicane"] == {3209}


def test_daytona_is_a_lap_in_sixth_at_75_mps_and_speed_agrees_with_the_tick_clock(shared_data: Path) -> None:
    cap = next(c for c in captures(shared_data) if c.name == "daytona_international_speedway__tri_oval")
    dec = Gt7Decoder()
    values = [dec.decode(p).values for p in cap.packets]
    assert {v["gear"] for v in values} == {6}
    assert all(70.0 < v["speed"] < 80.0 for v in values)
    for a, b in pairwise(values):
        dt_s = (b["packet_id"] - a["packet_id"]) / 60.0
        gap = math.dist((a["position_x"], a["position_z"]), (b["position_x"], b["position_z"]))
        # distance covered between neighbours = mean speed x time from the tick counter
        assert gap == pytest.approx(0.5 * (a["speed"] + b["speed"]) * dt_s, rel=0.05)
        # and the velocity vector's length is the speed field (velocity, not acceleration)
        assert math.hypot(a["velocity_x"], a["velocity_y"], a["velocity_z"]) == pytest.approx(
            a["speed"], rel=1e-3
        )
    # wheel rotation (rad/s, negative rolling forward) x tyre radius (m) is about the road speed
    for v in values:
        assert -v["wheel_rotation"][0] * v["tyre_radius"][0] == pytest.approx(v["speed"], rel=0.05)


def plain_a(**fields: float) -> bytearray:
    """A 296-byte plaintext at the document's offsets (the rest zero)."""
    buf = bytearray(296)
    struct.pack_into("<I", buf, 0x00, 0x47375330)
    struct.pack_into("<3f", buf, 0x04, fields.get("x", 10.0), 2.0, fields.get("z", -5.0))
    struct.pack_into("<f", buf, 0x3C, 6500.0)  # rpm
    struct.pack_into("<f", buf, 0x4C, fields.get("speed", 42.5))
    struct.pack_into("<I", buf, 0x70, int(fields.get("packet_id", 5000)))
    struct.pack_into("<hhii", buf, 0x74, int(fields.get("lap", 3)), 10, 95123, 96001)
    struct.pack_into("<H", buf, 0x8E, int(fields.get("flags", 0b1001)))  # on track, in gear
    buf[0x90] = 0x34  # current gear 4, suggested 3
    buf[0x91], buf[0x92] = 200, 17
    struct.pack_into("<8f", buf, 0x104, 3.1, 2.2, 1.7, 1.3, 1.1, 0.9, 0.0, 0.0)
    struct.pack_into("<i", buf, 0x124, 3311)
    return buf


def test_variants_b_tilde_c_from_the_document() -> None:
    base = bytes(plain_a())
    b_ext = struct.pack("<5f", 1.25, -0.5, 0.1, -0.2, 0.3)  # 0x128 wheel angle, ffb, sway, heave, surge
    tilde_ext = struct.pack("<BBBB4fff", 250, 180, 1, 2, 0.1, 0.2, 0.3, 0.4, 12.5, 7.0)  # 0x13C..0x157
    c_ext = struct.pack("<4sIfff4s", b"TDCT", 61234, 0.05, 0.04, 2.9, b"GR4\x00")  # 0x158..0x16F
    plains = {
        "A": base,
        "B": base + b_ext,
        "~": base + b_ext + tilde_ext,
        "C": base + b_ext + tilde_ext + c_ext,
    }
    dec = Gt7Decoder()
    for i, (letter, plain) in enumerate(plains.items()):
        assert len(plain) == SIZE[letter]
        v = dec.decode(close_packet(plain, letter, 0x12345678 + i)).values
        assert dec.variant is not None and dec.variant.letter == letter
        assert v["packet_size"] == SIZE[letter]
        assert (v["gear"], v["suggested_gear"], v["throttle"], v["brake"]) == (4, 3, 200, 17)
        assert v["speed"] == 42.5 and v["car_code"] == 3311 and v["lap_count"] == 3
        assert v["gear_ratios"][:2] == pytest.approx((3.1, 2.2))
        assert ("steering_wheel_angle" in v) == (letter != "A")
        assert ("throttle_input" in v) == (letter in "~C")
        assert ("surface_types" in v) == (letter == "C")
    v = dec.decode(close_packet(plains["C"], "C", 99)).values
    assert v["steering_wheel_angle"] == 1.25 and v["steering_force_feedback"] == -0.5
    assert (v["sway"], v["heave"], v["surge"]) == pytest.approx((0.1, -0.2, 0.3))
    assert (v["throttle_input"], v["brake_output"], v["unknown_0x13e"], v["unknown_0x13f"]) == (
        250,
        180,
        1,
        2,
    )
    assert v["torque_vectoring"] == pytest.approx((0.1, 0.2, 0.3, 0.4)) and v["energy_recovery"] == 12.5
    assert v["surface_types"] == "TDCT" and v["car_category"] == "GR4" and v["current_lap_ms"] == 61234
    assert (v["wheel_steer_angle_fl"], v["wheel_steer_angle_fr"]) == pytest.approx((0.05, 0.04))


def test_flags_become_channels() -> None:
    dec = Gt7Decoder()
    v = dec.decode(close_packet(bytes(plain_a(flags=0b1100_0100_0110)), "A", 7)).values
    names = ("on_track", "paused", "loading", "in_gear", "has_turbo", "rev_limiter_alert",
             "handbrake", "lights", "high_beams", "low_beams", "asm_active", "tcs_active")  # fmt: skip
    on = {k for k in names if v[k]}
    assert on == {"paused", "loading", "handbrake", "asm_active", "tcs_active"}
    assert v["flags"] == 0b1100_0100_0110


def test_wrong_key_undecryptable_and_wrong_size_are_drops() -> None:
    plain = bytes(plain_a())
    dec = Gt7Decoder()
    good = close_packet(plain, "A", 4242)
    assert dec.decode(good).values["packet_id"] == 5000
    cases = {
        "wrong key": close_packet(
            plain, "A", 4242, key=b"Simulator Interface Packet ver 0.0 (GT Sport)"[:32]
        ),
        "B's XOR on an A packet": close_packet(plain + bytes(20), "A", 4242),  # 316 B: read as B
        "IV bytes changed": good[:0x40] + b"\x00\x00\x00\x01" + good[0x44:],
        "magic flipped": bytes([good[0] ^ 0x01])
        + good[1:],  # a stream cipher: the flip reaches the plaintext
    }
    for what, data in cases.items():
        with pytest.raises(DecodeError) as err:
            dec.decode(data)
        assert err.value.reason == "bad_magic", what
    for size in (0, 1, 295, 297, 400, 1500):
        with pytest.raises(DecodeError) as err:
            dec.decode(good[:size] if size <= 296 else good + bytes(size - 296))
        assert err.value.reason == "wrong_size"


def test_decrypts_the_captures_as_the_document_says(shared_data: Path) -> None:
    """Cross-check: the document's decryption (done here with pycryptodome directly) and the
    decoder's agree on every value of a capture."""
    cap = captures(shared_data)[0]
    dec = Gt7Decoder()
    for packet in cap.packets[:20]:
        plain = open_packet(packet)
        assert plain[:4] == b"0S7G"
        v = dec.decode(packet).values
        assert v["packet_id"] == struct.unpack_from("<I", plain, 0x70)[0]
        assert v["position_x"] == struct.unpack_from("<f", plain, 0x04)[0]
        assert v["car_code"] == struct.unpack_from("<i", plain, 0x124)[0]
        assert v["engine_rpm"] == struct.unpack_from("<f", plain, 0x3C)[0]


def drive(dec: Gt7Decoder, packets: list[bytearray]) -> list[tuple[bool, object]]:
    out = []
    for i, p in enumerate(packets):
        d = dec.decode(close_packet(bytes(p), "A", 1000 + i))
        out.append((d.new_session, d.session_key))
    return out


def test_sessions_start_on_track_entry_game_restart_and_lap_reset() -> None:
    dec = Gt7Decoder()
    menu = [plain_a(flags=0, packet_id=10_000 + i, lap=0) for i in range(3)]
    race = [plain_a(packet_id=10_003 + i, lap=1 + i // 2) for i in range(4)]  # laps 1, 1, 2, 2
    restart = [plain_a(packet_id=10_007 + i, lap=1) for i in range(2)]  # the race restarted: lap 1 again
    relaunch = [plain_a(packet_id=5 + i, lap=1) for i in range(2)]  # the game restarted: ids from 0
    signals = drive(dec, menu + race + restart + relaunch)
    starts = [i for i, (new, _key) in enumerate(signals) if new]
    assert starts == [3, 7, 9]
    keys = [key for _new, key in signals]
    assert keys == [0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3]
    # pausing keeps the session (on track, paused flag) and so do menus before the race
    dec = Gt7Decoder()
    paused = [plain_a(packet_id=1 + i, flags=0b1011 if i % 2 else 0b1001) for i in range(6)]
    assert not any(new for new, _ in drive(dec, paused))


def test_session_info_names_the_car_once() -> None:
    dec = Gt7Decoder()
    infos = [
        dec.decode(close_packet(bytes(plain_a(packet_id=10 + i)), "A", i)).session_info for i in range(3)
    ]
    assert infos == [{"car": "car code 3311", "track": ""}, None, None]


def test_channel_selection() -> None:
    dec = Gt7Decoder(channels=["speed", "lap_count", "on_track"])
    v = dec.decode(close_packet(bytes(plain_a()), "A", 3)).values
    assert v == {"speed": 42.5, "lap_count": 3, "on_track": True}
    assert [f["name"] for f in dec.definition["frame"]["fields"]] == ["speed", "lap_count", "on_track"]
    with pytest.raises(ConfigError):
        Gt7Decoder(channels=["warp_speed"])
