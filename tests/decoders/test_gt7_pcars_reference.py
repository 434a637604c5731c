"""The fast GT7 and Project CARS decoders give exactly what a plain decode gives: every channel,
its type and the key order, on real and simulated packets and on random ones.

The reference decoders here are the straightforward way to read the layouts the decoder modules
document (``_A_SPEC``, ``_TELEMETRY_SPEC``, ``_CAR_V2``, ``_V1_SPEC``...): one unpack, a walk
over the spec, every per-car field read car by car, every bit field masked one value at a time,
texts through ``cstr``. The decoders take shortcuts for speed (``bench/bench_decoders.py``):
presized dict templates, remembered texts, flag templates and per-car status columns, stride
slices. Sequences here repeat and change those inputs so that both the remembered and the fresh
paths are compared, and cross the memories' bounds.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.decoders.gt7_capture import SIZE, captures, close_packet, open_packet
from wrtfd.decoders import gt7, pcars
from wrtfd.decoders._common import cstr
from wrtfd.simulate import Simulation, TrackInfo, make_encoder
from wrtfd.tracks import LanePath, load_track

REPO = Path(__file__).resolve().parents[2]
Spec = list[tuple[str | None, int]]

GT7_LAYOUTS: dict[str, tuple[str, Spec]] = {
    "A": (gt7._A, gt7._A_SPEC),
    "B": (gt7._A + gt7._B, gt7._A_SPEC + gt7._B_SPEC),
    "~": (gt7._A + gt7._B + gt7._TILDE, gt7._A_SPEC + gt7._B_SPEC + gt7._TILDE_SPEC),
    "C": (gt7._A + gt7._B + gt7._TILDE + gt7._C, gt7._A_SPEC + gt7._B_SPEC + gt7._TILDE_SPEC + gt7._C_SPEC),
}
#: The flag bits of the document, bit 0 first.
GT7_FLAGS = ("on_track", "paused", "loading", "in_gear", "has_turbo", "rev_limiter_alert",
             "handbrake", "lights", "high_beams", "low_beams", "asm_active", "tcs_active")  # fmt: skip
LETTER_BY_SIZE = {size: letter for letter, size in SIZE.items()}


def canon(values: Mapping[str, Any]) -> str:
    """Keys in order, values with their types (``repr``: a NaN equals a NaN, 1 is not True)."""
    return repr(list(values.items()))


def walk(spec: Spec, t: tuple[Any, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(channels: names not starting with "_", as scalars or tuples; the "_" items by name)."""
    values: dict[str, Any] = {}
    hidden: dict[str, Any] = {}
    pos = 0
    for name, count in spec:
        item = t[pos] if count == 1 else tuple(t[pos : pos + count])
        if name is not None:
            (hidden if name[0] == "_" else values)[name] = item
        pos += count
    return values, hidden


# --- GT7 -----------------------------------------------------------------------------------------


def gt7_reference(data: bytes) -> dict[str, Any]:
    letter = LETTER_BY_SIZE[len(data)]
    fmt, spec = GT7_LAYOUTS[letter]
    plain = open_packet(data, letter)
    values, hidden = walk(spec, struct.unpack("<" + fmt, plain))
    for bit, name in enumerate(GT7_FLAGS):
        values[name] = bool(values["flags"] >> bit & 1)
    values["gear"] = hidden["_gear_byte"] & 0x0F
    values["suggested_gear"] = hidden["_gear_byte"] >> 4
    values["packet_size"] = len(data)
    if letter == "C":
        values["surface_types"] = cstr(hidden["_surface_types"])
        values["car_category"] = cstr(hidden["_car_category"])
    return values


def assert_gt7_matches(packets: list[bytes]) -> int:
    dec = gt7.Gt7Decoder()
    for i, data in enumerate(packets):
        assert canon(dec.decode(data).values) == canon(gt7_reference(data)), i
    return len(packets)


def oval_states(laps: int = 1) -> tuple[TrackInfo, list[Any]]:
    track = load_track(REPO / "config" / "tracks" / "oval.trk")
    path = LanePath(track)
    return TrackInfo(track.name, path.length_m, (0.0,), 1), list(Simulation(path, laps=laps, seed=5).states())


def test_gt7_simulated_laps_of_every_variant_match_the_reference() -> None:
    info, states = oval_states()
    for letter in "AB~C":
        enc = make_encoder("gt7", info, gt7_variant=letter)
        packets = [p for i, s in enumerate(states[::7]) for p in enc.encode(s, first=i == 0, last=False)]
        assert assert_gt7_matches(packets) > 100


def test_gt7_real_captures_match_the_reference(shared_data: Path) -> None:
    packets = [p for cap in captures(shared_data) for p in cap.packets]
    assert assert_gt7_matches(packets) == 4912


def gt7_random_packets(rng: random.Random, n: int) -> Iterator[bytes]:
    """Random plaintexts with the magic, of random variants: flags from a few values (repeats)
    or anything (more than the decoder remembers), texts likewise, NULs inside them."""
    common_flags = [0b1001, 0b1011, 0b1000_0000_1001, 0]
    common_texts = [b"TTTT", b"GR3\x00", b"\x00\x00\x00\x00", b"D\x00TX"]
    for _ in range(n):
        letter = rng.choice("AB~C")
        plain = bytearray(rng.randbytes(SIZE[letter]))
        struct.pack_into("<I", plain, 0x00, 0x47375330)
        flags = rng.choice(common_flags) if rng.random() < 0.7 else rng.getrandbits(16)
        struct.pack_into("<H", plain, 0x8E, flags)
        if letter == "C":
            for at in (0x158, 0x16C):
                text = rng.choice(common_texts) if rng.random() < 0.7 else rng.randbytes(4)
                plain[at : at + 4] = text
        yield close_packet(bytes(plain), letter, rng.getrandbits(32))


def test_gt7_random_packets_match_the_reference() -> None:
    assert assert_gt7_matches(list(gt7_random_packets(random.Random(7), 1500))) == 1500


# --- Project CARS 2 ------------------------------------------------------------------------------


def pcars2_telemetry_reference(data: bytes) -> dict[str, Any]:
    patch5 = len(data) == 559
    fmt = pcars._TELEMETRY + (pcars._PATCH5_TAIL if patch5 else "")
    spec = pcars._TELEMETRY_SPEC + (pcars._PATCH5_SPEC if patch5 else [])
    values, hidden = walk(spec, struct.unpack(fmt, data))
    gear = hidden["_gear_byte"]
    values["gear"] = -1 if gear & 0x0F == 15 else gear & 0x0F
    values["num_gears"] = gear >> 4
    for wheel in ("fl", "fr", "rl", "rr"):
        values[f"tyre_compound_{wheel}"] = cstr(hidden[f"_compound_{wheel}"])
    return values


def pcars2_timings_reference(data: bytes, viewed: int | None) -> dict[str, Any]:
    """``viewed``: the last telemetry's viewed index (None: the local participant is viewed)."""
    head = struct.unpack_from("<IIBBBBbIffff", data)
    cars = [struct.unpack_from("<" + pcars._CAR_V2, data, 33 + 32 * i) for i in range(32)]
    local, tick = struct.unpack_from("<HI", data, 33 + 32 * 32)

    def every(item: int, mask: int = -1, shift: int = 0) -> tuple[int, ...]:
        return tuple(c[item] >> shift & mask for c in cars)

    values: dict[str, Any] = {
        "num_participants": head[6],
        "participants_changed_timestamp": head[7],
        "event_time_remaining": head[8],
        "split_time_ahead": head[9],
        "split_time_behind": head[10],
        "split_time": head[11],
        "local_participant_index": local,
        "tick_count": tick,
    }
    names = ("all_world_position_x", "all_world_position_y", "all_world_position_z",
             "all_orientation_heading", "all_orientation_pitch", "all_orientation_bank",
             "all_current_lap_distance")  # fmt: skip
    for item, name in enumerate(names):
        values[name] = tuple(c[item] for c in cars)
    values["all_race_position"] = every(7, 0x7F)
    values["all_is_active"] = every(7, 1, 7)
    values["all_sector"] = every(8, 0x07)
    values["all_highest_flag"] = tuple(c[9] for c in cars)
    values["all_pit_mode_schedule"] = tuple(c[10] for c in cars)
    values["all_car_index"] = every(11, 0x7FFF)
    values["all_is_human"] = every(11, 1, 15)
    values["all_race_state"] = every(12, 0x07)
    values["all_lap_invalidated"] = every(12, 1, 3)
    values["all_current_lap"] = tuple(c[13] for c in cars)
    values["all_current_time"] = tuple(c[14] for c in cars)
    values["all_current_sector_time"] = tuple(c[15] for c in cars)
    values["all_mp_participant_index"] = tuple(c[16] for c in cars)
    i = viewed if viewed is not None else local
    if 0 <= i < 32:
        c = cars[i]
        values["current_lap_distance"] = c[6]
        values["race_position"] = c[7] & 0x7F
        values["sector"] = c[8] & 0x07
        values["highest_flag"] = c[9]
        values["pit_mode_schedule"] = c[10]
        values["race_state"] = c[12] & 0x07
        values["lap_invalidated"] = c[12] >> 3 & 1
        values["current_lap"] = c[13]
        values["current_time"] = c[14]
        values["current_sector_time"] = c[15]
    return values


def assert_pcars2_pairs_match(pairs: list[tuple[bytes, bytes]]) -> int:
    """Telemetry then timings of one tick: the decoder gives one sample of both (no names were
    sent, so the viewed car's names are empty when the viewed index changes to a car)."""
    dec = pcars.Pcars2Decoder()
    viewed: int | None = None
    for i, (telemetry, timings) in enumerate(pairs):
        assert dec.decode(telemetry) is None  # held for its timings
        expected = pcars2_telemetry_reference(telemetry)
        if expected["viewed_participant_index"] != viewed:
            viewed = expected["viewed_participant_index"]
            if 0 <= viewed < 32:
                expected |= {"participant_name": "", "vehicle_name": "", "class_name": ""}
        expected |= pcars2_timings_reference(timings, viewed)
        decoded = dec.decode(timings)
        assert decoded is not None and canon(decoded.values) == canon(expected), i
    return len(pairs)


def header(kind: int, number: int) -> bytes:
    return struct.pack("<IIBBBB", number, number, 1, 1, kind, 2)


def pcars2_random_pairs(rng: random.Random, n: int) -> Iterator[tuple[bytes, bytes]]:
    """Random bodies; the viewed index valid, invalid or negative; every other pair keeps the
    last timings' per-car status bytes (race position, sector, car index, race state) and
    changes the rest, so that remembered and fresh status columns both occur."""
    timings = bytearray(1063)
    for k in range(n):
        size = 559 if rng.random() < 0.8 else 538
        telemetry = bytearray(header(0, 2 * k) + rng.randbytes(size - 12))
        telemetry[12] = rng.choice((0, 3, 31)) if rng.random() < 0.6 else rng.randrange(256)
        tick = rng.getrandbits(32)
        if size == 559:
            struct.pack_into("<I", telemetry, 555, tick)
        fresh = bytearray(header(3, 2 * k + 1) + rng.randbytes(1063 - 12))
        if k % 2:  # same status bytes as the last timings, everything else new
            for car in range(32):
                at = 33 + 32 * car
                for off in (14, 15, 18, 19, 20):
                    fresh[at + off] = timings[at + off]
        timings = fresh
        struct.pack_into("<H", timings, 1057, rng.choice((0, 5, 31, 32, 65535)))
        struct.pack_into("<I", timings, 1059, tick)
        yield bytes(telemetry), bytes(timings)


def test_pcars2_random_telemetry_and_timings_match_the_reference() -> None:
    assert assert_pcars2_pairs_match(list(pcars2_random_pairs(random.Random(11), 600))) == 600


def test_pcars2_simulated_lap_matches_the_reference() -> None:
    info, states = oval_states()
    enc = make_encoder("pcars2", info)
    packets = [p for i, s in enumerate(states) for p in enc.encode(s, first=i == 0, last=False)]
    telemetry = [p for p in packets if p[10] == 0]
    timings = [p for p in packets if p[10] == 3]
    assert len(telemetry) == len(timings) > 900
    assert assert_pcars2_pairs_match(list(zip(telemetry, timings, strict=True))) == len(timings)


# --- Project CARS 1 ------------------------------------------------------------------------------


def pcars1_reference(data: bytes) -> dict[str, Any]:
    values, hidden = walk(pcars._V1_SPEC, pcars._V1_HEAD.unpack_from(data))
    state = hidden["_game_session_state"]
    values["game_state"] = state & 0x07
    values["session_state"] = state >> 4
    flags = hidden["_race_state_flags"]
    values["race_state"] = flags & 0x07
    values["lap_invalidated"] = flags >> 3 & 1
    values["anti_lock_active"] = flags >> 4 & 1
    values["boost_active"] = flags >> 5 & 1
    gear = hidden["_gear_byte"]
    values["gear"] = -1 if gear & 0x0F == 15 else gear & 0x0F
    values["num_gears"] = gear >> 4
    at = pcars._V1_HEAD.size
    cars = [struct.unpack_from("<" + pcars._CAR_V1, data, at + 16 * i) for i in range(56)]
    values["all_world_position_x"] = tuple(c[0] for c in cars)
    values["all_world_position_y"] = tuple(c[1] for c in cars)
    values["all_world_position_z"] = tuple(c[2] for c in cars)
    values["all_current_lap_distance"] = tuple(c[3] for c in cars)
    values["all_race_position"] = tuple(c[4] & 0x7F for c in cars)
    values["all_is_active"] = tuple(c[4] >> 7 for c in cars)
    values["all_laps_completed"] = tuple(c[5] & 0x7F for c in cars)
    values["all_lap_invalidated"] = tuple(c[5] >> 7 for c in cars)
    values["all_current_lap"] = tuple(c[6] for c in cars)
    values["all_sector"] = tuple(c[7] & 0x07 for c in cars)
    values["all_last_sector_time"] = tuple(c[8] for c in cars)
    viewed = values["viewed_participant_index"]
    if 0 <= viewed < 56:
        c = cars[viewed]
        values["world_position_x"], values["world_position_y"], values["world_position_z"] = c[:3]
        values["current_lap_distance"] = c[3]
        values["race_position"] = c[4] & 0x7F
        values["laps_completed"] = c[5] & 0x7F
        values["current_lap"] = c[6]
        values["sector"] = c[7] & 0x07
    track_length, wing_front, wing_rear, dpad = struct.unpack_from("<f2BB", data, at + 16 * 56)
    values["track_length"] = track_length
    values["wings"] = (wing_front, wing_rear)
    values["dpad"] = dpad
    return values


def assert_pcars1_matches(packets: list[bytes]) -> int:
    dec = pcars.Pcars1Decoder()
    for i, data in enumerate(packets):
        decoded = dec.decode(data)
        assert decoded is not None and canon(decoded.values) == canon(pcars1_reference(data)), i
    return len(packets)


def pcars1_random_packets(rng: random.Random, n: int) -> Iterator[bytes]:
    """Random telemetry bodies (type 0); the viewed index valid or not; half of the packets keep
    the last one's per-car status bytes (race position, laps, current lap, sector) and last
    sector times (the decoder's remembered columns), a quarter of them with one bit of one car's
    sector time flipped (the columns are fresh)."""
    last = bytearray(1367)
    for _ in range(n):
        data = bytearray(rng.randbytes(1367))
        data[2] &= 0xFC  # packet type 0: telemetry
        data[3] = rng.randrange(256)
        data[4] = rng.choice((0, 7, 55)) if rng.random() < 0.6 else rng.choice((56, 127, 128, 255))
        keep = rng.random()
        if keep < 0.75:
            for car in range(56):
                at = 464 + 16 * car
                data[at + 8 : at + 16] = last[at + 8 : at + 16]
            if keep >= 0.5:
                at = 464 + 16 * rng.randrange(56) + 12 + rng.randrange(4)
                data[at] = last[at] ^ 1 << rng.randrange(8)
        last = data
        yield bytes(data)


def test_pcars1_random_telemetry_matches_the_reference() -> None:
    assert assert_pcars1_matches(list(pcars1_random_packets(random.Random(13), 800))) == 800


def test_pcars1_simulated_lap_matches_the_reference() -> None:
    info, states = oval_states()
    enc = make_encoder("pcars", info)
    packets = [p for i, s in enumerate(states) for p in enc.encode(s, first=i == 0, last=False)]
    telemetry = [p for p in packets if len(p) == 1367]
    assert assert_pcars1_matches(telemetry) > 1000


@settings(max_examples=150)
@given(body=st.binary(min_size=1367, max_size=1367), viewed=st.integers(0, 255))
def test_pcars1_any_telemetry_body_matches_the_reference(body: bytes, viewed: int) -> None:
    data = bytearray(body)
    data[2] &= 0xFC
    data[4] = viewed
    assert assert_pcars1_matches([bytes(data)]) == 1


@settings(max_examples=150)
@given(body=st.binary(min_size=1063 - 12, max_size=1063 - 12), local=st.integers(0, 0xFFFF))
def test_pcars2_any_timings_body_matches_the_reference(body: bytes, local: int) -> None:
    timings = bytearray(header(3, 1) + body)
    struct.pack_into("<H", timings, 1057, local)
    dec = pcars.Pcars2Decoder()
    dec.decode(bytes(timings))  # held
    decoded = dec.decode(bytes(timings))  # a second one releases it (no telemetry: the local car is viewed)
    expected = pcars2_timings_reference(bytes(timings), None)
    assert decoded is not None and canon(decoded.values) == canon(expected)
