"""The fields lap records read (the descriptors' ``lap_facts``) decoded from packets built here
with ``struct`` from the published layouts (shared/spec/protocols): the player's flag only, the
Session packet's weather and temperatures."""

from __future__ import annotations

import struct

from wrtfd.decoders.f1 import F1Decoder
from wrtfd.protocols import all_protocols

HEADER = struct.Struct("<HBBBBBQfIIBB")  # f1.md "Header": 29 bytes
LAP_CAR = struct.Struct("<IIHBHBHBHBfffBBBBBBBBBBBBBBBHHBfB")  # f1.md "Lap Data" 2024: 57 bytes
PLAYER = 3


def _lap_data(invalid: dict[int, int]) -> bytes:
    cars = b""
    for i in range(22):
        fields: list[float] = [0] * 33
        fields[10:13] = [100.0, 100.0, 0.0]  # lapDistance, totalDistance, safetyCarDelta
        fields[13], fields[14] = i + 1, 2  # carPosition, currentLapNum
        fields[18] = invalid.get(i, 0)  # currentLapInvalid, offset 37
        fields[31] = 0.0  # speedTrapFastestSpeed
        cars += LAP_CAR.pack(*fields)
    packet = HEADER.pack(2024, 24, 1, 0, 1, 2, 77, 12.5, 10, 10, PLAYER, 255) + cars + bytes([255, 255])
    assert len(packet) == 1285  # f1.md: Lap Data 2024
    return packet


def _session(weather: int, track_c: int, air_c: int) -> bytes:
    body = bytearray(753)  # f1.md: Session 2024
    body[:29] = HEADER.pack(2024, 24, 1, 0, 1, 1, 77, 12.5, 10, 10, PLAYER, 255)
    struct.pack_into("<Bbb", body, 29, weather, track_c, air_c)  # offsets 29, 30, 31
    return bytes(body)


def test_f1_lap_facts_fields_are_the_players_flag_and_the_sessions_conditions() -> None:
    facts = all_protocols()["f1"].lap_facts
    assert facts is not None and facts.invalid is not None
    dec = F1Decoder()
    mine = dec.decode(_lap_data({PLAYER: 1}))
    assert mine is not None and mine.values[facts.invalid] == 1
    others = dec.decode(_lap_data({0: 1, 5: 1}))
    assert others is not None and others.values[facts.invalid] == 0
    session = dec.decode(_session(3, -2, 17))
    assert session is not None
    got = {key: session.values[field] for key, field in facts.conditions.items()}
    assert got == {"weather": 3, "track_temp_c": -2, "air_temp_c": 17}
    assert facts.weather[3] == "light rain"  # f1.md: weather 3


def test_acc_lap_facts_fields_are_the_focused_cars_flag_and_the_weather() -> None:
    from tests.decoders import acc_messages as m
    from wrtfd.decoders.acc import AccDecoder

    facts = all_protocols()["acc"].lap_facts
    assert facts is not None and facts.invalid is not None
    dec = AccDecoder()
    rt = dec.decode(m.realtime(focused=7))  # ambient 21, track -3, clouds 4, rain 2, wet 7 (tenths)
    assert rt is not None
    got = {key: rt.values[field] for key, field in facts.conditions.items()}
    assert got == {"air_temp_c": 21, "track_temp_c": -3, "clouds": 0.4, "rain": 0.2, "wetness": 0.7}
    other = dec.decode(m.car_update(3, current=m.lap(60_000, 3, invalid=1)))
    mine = dec.decode(m.car_update(7, current=m.lap(60_000, 7, invalid=1)))
    assert mine is not None and mine.values[facts.invalid] == 1
    assert other is None or other.values.get(facts.invalid, 0) == 0
    clean = dec.decode(m.car_update(7, current=m.lap(60_000, 7, invalid=0)))
    assert clean is not None and clean.values[facts.invalid] == 0
