"""Project CARS 2 / AMS2 (v2) and Project CARS 1 (v1) decoders against packets built here at the
offsets of the protocol documents (``pcars2_ams2.md``, ``wave2-games.md``): every packet type,
partial packets, bit fields, the viewed car as scalars, the other version and malformed packets
as drops with a reason, session signals."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from wrtfd.decoders.pcars import Pcars1Decoder, Pcars2Decoder
from wrtfd.errors import DecodeError

SIZES = {0: 559, 1: 308, 2: 1136, 3: 1063, 4: 24, 7: 1040}


class Game:
    """Packets of one v2 game run: PacketBase numbering as the document describes."""

    def __init__(self, first: int = 1) -> None:
        self.number = first

    def packet(self, kind: int, size: int, part: int = 1, parts: int = 1) -> bytearray:
        buf = bytearray(size)
        struct.pack_into("<IIBBBB", buf, 0, self.number, self.number, part, parts, kind, 2)
        self.number += 1
        return buf

    def telemetry(
        self, viewed: int = 3, *, size: int = 559, speed: float = 51.5, tick: int = 77_001
    ) -> bytes:
        buf = self.packet(0, size)
        struct.pack_into("<bBBbBB", buf, 12, viewed, 255, 10, -20, 0, 0b10010)
        struct.pack_into("<hH", buf, 18, 104, 420)  # oil temp, oil pressure
        buf[29], buf[30] = 12, 240  # brake, throttle
        struct.pack_into("<ff", buf, 32, 0.62, speed)  # fuel level, speed
        struct.pack_into("<HH", buf, 40, 7012, 8500)  # rpm, max rpm
        buf[45] = 0x63  # 6 gears, in 3rd
        struct.pack_into("<3f", buf, 76, 1.0, 0.0, 51.49)  # world velocity
        struct.pack_into("<4h", buf, 208, 350, 351, 300, 301)  # brake temps
        struct.pack_into("<4f", buf, 296, 0.05, 0.05, 0.06, 0.06)  # ride height
        struct.pack_into("<I", buf, 373, 0xA5)  # joypad (the document: 373, not the header's 376)
        buf[378 : 378 + 10] = b"Slick Soft"
        buf[378 + 120 : 378 + 132] = b"Slick Medium"
        if size == 559:
            struct.pack_into("<f3fBI", buf, 538, 1.8, -120.5, 12.25, 880.75, 140, tick)
        return bytes(buf)

    def timings(self, local: int = 3, tick: int = 77_001) -> bytes:
        buf = self.packet(3, 1063)
        struct.pack_into("<bIffff", buf, 12, 4, 9, -3.0, 0.8, 1.6, 0.2)
        for i in range(4):
            at = 33 + 32 * i
            struct.pack_into("<3h3hH", buf, at, -120 + i, 12, 880 - i, 16384, -8192, 0, 1000 + i)
            buf[at + 14] = (i + 1) | (0x80 if i != 2 else 0)  # race position, top bit: active
            buf[at + 15] = 2 | 0x50  # sector 2 + precision bits
            buf[at + 16], buf[at + 17] = 0x21, 0x10
            struct.pack_into("<H", buf, at + 18, (100 + i) | (0x8000 if i == 3 else 0))  # car index, human
            buf[at + 20] = 2 | (0x08 if i == 1 else 0)  # racing; car 1's lap invalidated
            buf[at + 21] = 5
            struct.pack_into("<ffH", buf, at + 22, 61.5 + i, 20.25, 40 + i)
        struct.pack_into("<HI", buf, 1057, local, tick)
        return bytes(buf)

    def race(self, location: bytes = b"Spa-Francorchamps", variation: bytes = b"Grand Prix") -> bytes:
        buf = self.packet(1, 308)
        struct.pack_into("<9f", buf, 12, 137.5, 139.25, 40.0, 50.0, 49.25, 39.5, 49.0, 48.0, 7004.0)
        buf[48 : 48 + len(location)] = location
        buf[112 : 112 + len(variation)] = variation
        struct.pack_into("<Hb", buf, 304, 0x8000 | 6, 12)  # timed: 6 x 5 minutes; pit stop lap 12
        return bytes(buf)

    def participants(self, part: int, names: dict[int, bytes]) -> bytes:
        buf = self.packet(2, 1136, part, 2)
        struct.pack_into("<I", buf, 12, 9)
        for j, name in names.items():
            buf[16 + 64 * j : 16 + 64 * j + len(name)] = name
            struct.pack_into("<I", buf, 1040 + 4 * j, 250 + j)
            struct.pack_into("<H", buf, 1104 + 2 * j, 500 + j)
        return bytes(buf)

    def game_state(self, game: int, session: int) -> bytes:
        buf = self.packet(4, 24)
        struct.pack_into("<HBbbBBbbb", buf, 12, 1234, game | session << 4, 21, 33, 40, 0, 3, -1, 1)
        return bytes(buf)

    def time_stats(self) -> bytes:
        buf = self.packet(7, 1040)
        struct.pack_into("<I", buf, 12, 9)
        for i in range(4):
            struct.pack_into("<6fIH", buf, 16 + 32 * i, 120.0 + i, 121.0 + i, 40.0, 39.0, 41.0, 40.5, 0, i)
        return bytes(buf)

    def vehicles(self, part: int, names: dict[int, tuple[int, bytes]]) -> bytes:
        buf = self.packet(8, 1164, part, 3)
        for j, (index, (cls, name)) in enumerate(names.items()):
            struct.pack_into("<H2xI64s", buf, 12 + 72 * j, index, cls, name)
        return bytes(buf)

    def classes(self, classes: dict[int, bytes]) -> bytes:
        buf = self.packet(8, 1452, 3, 3)
        for j, (index, name) in enumerate(classes.items()):
            struct.pack_into("<I20s", buf, 12 + 24 * j, index, name)
        return bytes(buf)


def telemetry_values(dec: Pcars2Decoder, packet: bytes, tick: int = 77_001) -> dict[str, Any]:
    """A telemetry packet's channels: it waits for the timings packet of its tick."""
    assert dec.decode(packet) is None
    d = dec.decode(Game(900).timings(tick=tick))
    assert d is not None
    return dict(d.values)


def test_telemetry_channels_at_the_documented_offsets() -> None:
    dec = Pcars2Decoder()
    v = telemetry_values(dec, Game().telemetry())
    assert v["viewed_participant_index"] == 3
    assert (v["unfiltered_throttle"], v["unfiltered_brake"], v["unfiltered_steering"]) == (255, 10, -20)
    assert v["car_flags"] == 0b10010 and (v["oil_temp"], v["oil_pressure"]) == (104, 420)
    assert (v["brake"], v["throttle"], v["rpm"], v["max_rpm"]) == (12, 240, 7012, 8500)
    assert v["speed"] == 51.5 and v["fuel_level"] == pytest.approx(0.62)
    assert (v["gear"], v["num_gears"]) == (3, 6)
    assert v["world_velocity"] == pytest.approx((1.0, 0.0, 51.49))
    assert v["brake_temp"] == (350, 351, 300, 301)
    assert v["ride_height"] == pytest.approx((0.05, 0.05, 0.06, 0.06))
    assert v["joypad"] == 0xA5
    assert (v["tyre_compound_fl"], v["tyre_compound_rr"], v["tyre_compound_fr"]) == (
        "Slick Soft",
        "Slick Medium",
        "",
    )
    assert (v["full_position_x"], v["full_position_y"], v["full_position_z"]) == (-120.5, 12.25, 880.75)
    assert (v["turbo_boost_pressure"], v["brake_bias"], v["tick_count"]) == (pytest.approx(1.8), 140, 77_001)
    # before patch 5: 538 bytes, without the last four fields
    old = telemetry_values(dec, Game().telemetry(size=538), tick=5)  # no tick count: pairs with any
    assert old["speed"] == 51.5 and "full_position_x" not in old and old["tick_count"] == 5


def test_reverse_gear() -> None:
    data = bytearray(Game().telemetry())
    data[45] = 0x6F
    assert telemetry_values(Pcars2Decoder(), bytes(data))["gear"] == -1


def test_timings_arrays_bit_fields_and_the_viewed_car() -> None:
    g = Game()
    dec = Pcars2Decoder()
    assert dec.decode(g.timings(local=1, tick=10)) is None  # waits for its telemetry
    before = dec.decode(g.timings(local=1, tick=11))  # another tick: the first goes alone
    assert before is not None and before.values["tick_count"] == 10
    assert before.values["race_position"] == 2  # no telemetry yet: the local participant
    assert dec.decode(g.telemetry(viewed=3)) is not None  # tick 77 001: the held timings go
    v = dec.decode(g.timings(local=1)).values  # type: ignore[union-attr]
    assert v["speed"] == 51.5  # telemetry and timings of one tick: one sample
    assert v["num_participants"] == 4 and v["local_participant_index"] == 1 and v["tick_count"] == 77_001
    assert (v["event_time_remaining"], v["split_time_ahead"], v["split_time_behind"]) == pytest.approx(
        (-3.0, 0.8, 1.6)
    )
    assert len(v["all_world_position_x"]) == 32
    assert v["all_world_position_x"][:4] == (-120, -119, -118, -117) and v["all_world_position_z"][3] == 877
    # quantised as sent: heading x pi/32768 = pi/2, pitch x pi/65536 = -pi/8
    assert (v["all_orientation_heading"][0], v["all_orientation_pitch"][0]) == (16384, -8192)
    assert v["all_current_lap_distance"][:4] == (1000, 1001, 1002, 1003)
    assert v["all_race_position"][:4] == (1, 2, 3, 4)
    assert v["all_is_active"][:5] == (1, 1, 0, 1, 0)
    assert v["all_sector"][:2] == (2, 2)
    assert v["all_car_index"][:4] == (100, 101, 102, 103) and v["all_is_human"][:4] == (0, 0, 0, 1)
    assert v["all_race_state"][:4] == (2, 2, 2, 2) and v["all_lap_invalidated"][:4] == (0, 1, 0, 0)
    assert v["all_current_time"][:2] == (61.5, 62.5) and v["all_mp_participant_index"][:2] == (40, 41)
    # the viewed car (3) as scalars
    assert (v["race_position"], v["current_lap"], v["current_lap_distance"], v["sector"]) == (4, 5, 1003, 2)
    assert (v["current_time"], v["current_sector_time"]) == (64.5, 20.25)
    assert (v["race_state"], v["lap_invalidated"], v["highest_flag"], v["pit_mode_schedule"]) == (
        2,
        0,
        0x21,
        0x10,
    )


def test_participants_in_two_parts_names_vehicles_and_classes() -> None:
    g = Game()
    dec = Pcars2Decoder()
    dec.decode(g.telemetry(viewed=17))
    first = dec.decode(g.participants(1, {0: b"Alice", 1: b"Bob"})).values  # type: ignore[union-attr]
    assert first["participant_name"] == "" and first["all_nationality"][:2] == (250, 251)
    second = dec.decode(g.participants(2, {1: b"Carla"})).values  # type: ignore[union-attr]
    assert second["participant_name"] == "Carla"  # slot 16 + 1 = the viewed car
    assert second["all_nationality"][:2] == (250, 251) and second["all_nationality"][17] == 251
    assert second["all_mp_index"][17] == 501 and second["participants_changed_timestamp"] == 9
    v = dec.decode(g.vehicles(2, {17: (7, b"Porsche 911 GT3 R"), 18: (8, b"Other")}))
    assert v is not None and v.values["vehicle_name"] == "Porsche 911 GT3 R" and v.values["class_name"] == ""
    assert v.session_info == {"car": "Porsche 911 GT3 R"}
    c = dec.decode(g.classes({7: b"GT3", 8: b"GTE"}))
    assert c is not None and c.values["class_name"] == "GT3" and c.session_info is None  # the car is known


def test_race_definition_game_state_and_time_stats() -> None:
    g = Game()
    dec = Pcars2Decoder()
    race = dec.decode(g.race())
    assert race is not None and race.session_info == {"track": "Spa-Francorchamps Grand Prix"}
    v = race.values
    assert (v["world_fastest_lap_time"], v["personal_fastest_lap_time"], v["track_length"]) == (
        137.5,
        139.25,
        7004.0,
    )
    assert (v["laps_time_in_event"], v["is_timed_session"], v["enforced_pit_stop_lap"]) == (6, 1, 12)
    state = dec.decode(g.game_state(2, 5)).values  # type: ignore[union-attr]
    assert (state["game_state"], state["session_state"], state["build_version"]) == (2, 5, 1234)
    assert (state["ambient_temperature"], state["track_temperature"], state["rain_density"]) == (21, 33, 40)
    assert (state["wind_speed"], state["wind_direction_x"], state["wind_direction_y"]) == (3, -1, 1)
    dec.decode(g.telemetry(viewed=2))
    stats = dec.decode(g.time_stats()).values  # type: ignore[union-attr]
    assert stats["all_fastest_lap_time"][:4] == (120.0, 121.0, 122.0, 123.0)
    assert stats["all_last_lap_time"][3] == 124.0 and stats["all_fastest_sector3_time"][0] == 40.5
    assert (stats["fastest_lap_time"], stats["last_lap_time"], stats["last_sector_time"]) == (
        122.0,
        123.0,
        40.0,
    )


def test_sessions_menu_to_play_session_change_track_change_and_restart() -> None:
    g = Game(first=50_000)
    dec = Pcars2Decoder()
    seq = [
        g.game_state(1, 1),  # front end
        g.telemetry(),
        g.game_state(2, 1),  # playing practice: a new session
        g.game_state(3, 1),  # paused: same
        g.game_state(2, 1),  # playing again: same
        g.game_state(2, 3),  # qualifying: new
        g.race(),  # a track is known: same
        g.race(b"Monza"),  # another track: new
    ]
    keys = [d.session_key if (d := dec.decode(p)) is not None else None for p in seq]
    assert keys == [0, None, 1, 1, 1, 2, 2, 3]  # (the telemetry waits for its timings)
    g.number = 10  # the game restarted: packet numbers from the start
    assert dec.decode(g.timings()).session_key == 4  # type: ignore[union-attr]


def test_telemetry_and_timings_of_a_tick_make_one_sample_in_either_order() -> None:
    g = Game()
    dec = Pcars2Decoder()
    assert dec.decode(g.timings(tick=5)) is None
    first = dec.decode(g.telemetry(tick=5))  # timings first, then the telemetry of its tick
    assert first is not None and first.values["tick_count"] == 5
    assert first.values["speed"] == 51.5 and len(first.values["all_race_position"]) == 32
    assert dec.decode(g.telemetry(tick=6)) is None
    second = dec.decode(g.timings(tick=6))
    assert second is not None and second.values["speed"] == 51.5 and second.values["current_lap"] == 5
    assert dec.decode(g.telemetry(tick=7)) is None
    alone = dec.decode(g.telemetry(tick=8))  # no timings for tick 7: it goes alone, 8 waits
    assert alone is not None and alone.values["tick_count"] == 7 and "all_race_position" not in alone.values
    other = dec.decode(g.game_state(2, 5))  # other packet types are never held
    assert other is not None and set(other.values) == {
        "build_version", "game_state", "session_state", "ambient_temperature", "track_temperature",
        "rain_density", "snow_density", "wind_speed", "wind_direction_x", "wind_direction_y",
    }  # fmt: skip


def test_malformed_and_other_version_are_drops() -> None:
    dec = Pcars2Decoder()
    g = Game()
    good = {k: g.packet(k, n) for k, n in SIZES.items()}
    for kind, packet in good.items():
        for cut in (0, 5, 11, len(packet) - 1):
            with pytest.raises(DecodeError) as err:
                dec.decode(bytes(packet[:cut]))
            assert err.value.reason in ("wrong_size", "unknown_packet_id"), (kind, cut)
    with pytest.raises(DecodeError) as err:
        dec.decode(bytes(g.packet(9, 100)))
    assert err.value.reason == "unknown_packet_id"
    assert dec.decode(bytes(g.packet(5, 100))) is None and dec.skipped.as_dict() == {"unmapped_packet_5": 1}
    with pytest.raises(DecodeError) as err:
        dec.decode(bytes(g.packet(2, 1136, part=3, parts=3)))  # names 32..47: beyond 32 participants
    assert err.value.reason == "bad_header"
    for v1 in (V1().telemetry(), V1().strings()):
        with pytest.raises(DecodeError) as err:
            dec.decode(v1)
        assert err.value.reason == "other_version"
    with pytest.raises(DecodeError) as err:
        Pcars1Decoder().decode(Game().telemetry())
    assert err.value.reason == "other_version"


class V1:
    """Project CARS 1 packets at the document's offsets."""

    def telemetry(self, *, viewed: int = 1, state: int = 2 | 5 << 4) -> bytes:
        buf = bytearray(1367)
        struct.pack_into("<HBBbb", buf, 0, 1122, 0 | 9 << 2, state, viewed, 3)
        buf[10] = 2 | 0x08 | 0x20  # racing, lap invalidated, boost active
        buf[11] = 12  # laps in event
        struct.pack_into("<3f", buf, 12, 98.5, 99.25, 31.5)  # best, last, current lap time
        struct.pack_into("<ff", buf, 116, 0.4, 64.0)  # fuel level, speed
        struct.pack_into("<HH", buf, 124, 8200, 9000)
        buf[128] = 0x54  # 5 gears, 4th
        struct.pack_into("<4f", buf, 260, 0.5, 0.5, 0.6, 0.6)  # tyre slip speed
        for i in range(3):
            at = 464 + 16 * i
            struct.pack_into("<3hHBBBBf", buf, at, 300 + i, 5, -700 - i, 2000 + i, (i + 1) | 0x80,
                             4 | (0x80 if i == 1 else 0), 5, 3, 30.5 + i)  # fmt: skip
        struct.pack_into("<f2BB", buf, 1360, 5793.0, 4, 6, 0)
        return bytes(buf)

    def strings(
        self,
        car: bytes = b"Audi R18",
        track: bytes = b"Le Mans",
        variation: bytes = b"Circuit",
        car_class: bytes = b"LMP1",
        names: tuple[bytes, ...] = (b"Jane Player", b"Ai Driver"),
    ) -> bytes:
        """sParticipantInfoStrings as real captures lay it out: build, type, car name @3, car
        class @67, track location @131, variation @195 (64 B each), 16 names @259 (64 B each),
        16 fastest lap times @1283 (f32)."""
        packed = struct.pack(
            "<HB64s64s64s64s" + "64s" * 16 + "16f",
            1122, 1, car, car_class, track, variation,
            *(names + (b"",) * (16 - len(names))),
            *([101.25] * len(names) + [-1.0] * (16 - len(names))),
        )  # fmt: skip
        assert len(packed) == 1347
        return packed


def test_pcars1_telemetry_participants_and_the_viewed_car() -> None:
    dec = Pcars1Decoder()
    d = dec.decode(V1().telemetry())
    assert d is not None
    v = d.values
    assert (v["build_version"], v["game_state"], v["session_state"], v["num_participants"]) == (1122, 2, 5, 3)
    assert (v["race_state"], v["lap_invalidated"], v["anti_lock_active"], v["boost_active"]) == (2, 1, 0, 1)
    assert (v["best_lap_time"], v["last_lap_time"], v["current_time"], v["laps_in_event"]) == (
        98.5,
        99.25,
        31.5,
        12,
    )
    assert (v["speed"], v["rpm"], v["gear"], v["num_gears"]) == (64.0, 8200, 4, 5)
    assert v["tyre_slip_speed"] == pytest.approx((0.5, 0.5, 0.6, 0.6))
    assert len(v["all_world_position_x"]) == 56 and v["all_world_position_x"][:3] == (300, 301, 302)
    assert v["all_race_position"][:3] == (1, 2, 3) and v["all_is_active"][:4] == (1, 1, 1, 0)
    assert v["all_laps_completed"][:3] == (4, 4, 4) and v["all_lap_invalidated"][:3] == (0, 1, 0)
    assert v["all_last_sector_time"][2] == 32.5
    assert (v["world_position_x"], v["world_position_z"], v["current_lap_distance"]) == (301, -701, 2001)
    assert (v["race_position"], v["laps_completed"], v["current_lap"], v["sector"]) == (2, 4, 5, 3)
    assert (v["track_length"], v["wings"]) == (5793.0, (4, 6))


def test_pcars1_strings_name_car_and_track_and_other_packets() -> None:
    dec = Pcars1Decoder()
    assert dec.decode(V1().strings()) is None
    first = dec.decode(V1().telemetry())
    assert first is not None and first.session_info == {"track": "Le Mans Circuit", "car": "Audi R18"}
    assert dec.decode(V1().telemetry()).session_info is None  # type: ignore[union-attr]
    more = bytearray(1028)
    more[2] = 2
    assert dec.decode(bytes(more)) is None and dec.skipped.as_dict() == {"participant_strings": 1}
    dec.decode(V1().strings(track=b"Monza", variation=b""))
    assert dec.decode(V1().telemetry()).session_key == 1  # type: ignore[union-attr]
    # a strings packet whose car and track fields are empty names no track (not the first
    # participant's name, which follows the variation) and starts no session
    assert dec.decode(V1().strings(car=b"", track=b"", variation=b"", car_class=b"")) is None
    later = dec.decode(V1().telemetry())
    assert later is not None and later.session_key == 1 and later.session_info is None
    mislabelled = bytearray(V1().telemetry())
    mislabelled[2] = 1  # says "strings" in a telemetry-sized datagram
    with pytest.raises(DecodeError) as err:
        dec.decode(bytes(mislabelled))
    assert err.value.reason == "bad_header"
    for size in (0, 100, 1366, 1368):
        with pytest.raises(DecodeError) as err:
            dec.decode(bytes(size))
        assert err.value.reason == "wrong_size"


def test_pcars1_menu_to_play_is_a_new_session() -> None:
    dec = Pcars1Decoder()
    keys = [dec.decode(V1().telemetry(state=s)).session_key for s in (1, 1, 2, 3, 2)]  # type: ignore[union-attr]
    assert keys == [0, 0, 1, 1, 1]
