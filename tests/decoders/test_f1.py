"""F1 decoder against real captures of every supported packet format (2018-2025).

Every datagram of ``shared/data/udp/f1/<year>.jsonl`` must decode (or be a known, unmapped
packet id), and every channel we map must equal the public decoder's ``parsed`` value.

Supported: packet formats 2018, 2019, 2020, 2021, 2022, 2023, 2024, 2025 (every year with a
capture). Not supported by this decoder: F1 2017 and older; their 1289-byte "legacy" packet is
read by the ``codemasters`` decoder (its first 66 floats). Unmapped packet ids (participants,
setups, damage, history, tyre sets, final classification, lobby, time trial, lap positions)
decode to None and are counted in ``F1Decoder.skipped``.
"""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.decoders.f1_capture import (
    CAR_PACKETS,
    MOTION_TOP,
    SESSION,
    TELEMETRY_2018,
    YEARS,
    expected,
    records,
    wheels,
)
from wrtfd.decoders.f1 import F1Decoder, supported_formats
from wrtfd.errors import ConfigError, DecodeError

MAPPED = {"motion", "carTelemetry", "lapData", "carStatus", "session", "event", "motionEx"}


def _same(actual: Any, want: Any, where: str) -> None:
    if isinstance(want, list):
        assert len(actual) == len(want), where
        for i, (a, w) in enumerate(zip(actual, want, strict=True)):
            _same(a, w, f"{where}[{i}]")
    elif isinstance(want, float) or isinstance(actual, float):
        assert math.isclose(actual, want, rel_tol=1e-6, abs_tol=1e-9), f"{where}: {actual} != {want}"
    else:
        assert actual == want, f"{where}: {actual!r} != {want!r}"


def _check_map(values: dict[str, Any], source: dict[str, Any], mapping: dict[str, Any], where: str) -> int:
    checked = 0
    for channel, rule in mapping.items():
        found, want = expected(source, rule)
        if not found:
            continue
        assert channel in values, f"{where}: {channel} missing"
        if isinstance(want, list) and len(want) == 4:
            want = wheels(want)
        _same(values[channel], want, f"{where}.{channel}")
        checked += 1
    return checked


def _player(parsed: dict[str, Any], spectator: int | None, year: int) -> int | None:
    idx = parsed["m_header"]["m_playerCarIndex"]
    if idx < (20 if year < 2020 else 22):
        return int(idx)
    return spectator


def test_supported_formats_are_2018_to_2025() -> None:
    assert supported_formats() == YEARS


@pytest.mark.parametrize("year", YEARS)
def test_capture_values_match_parsed(shared_data: Path, year: int) -> None:
    dec = F1Decoder()
    names = {f["name"] for f in dec.definition["frame"]["fields"]}
    spectator: int | None = None
    checked = decoded = 0
    for name, raw, parsed in records(shared_data, year):
        out = dec.decode(raw)
        header = parsed["m_header"]
        if name not in MAPPED:
            assert out is None, f"{year} {name}: unmapped packets decode to None"
            continue
        assert out is not None
        decoded += 1
        values = dict(out.values)
        where = f"{year}/{name}"
        assert set(values) <= names, f"{where}: keys outside the schema {set(values) - names}"
        assert out.session_key == int(header["m_sessionUID"])
        assert out.source_time_ns == int(header["m_sessionTime"] * 1e9)
        assert values["frame_identifier"] == header["m_frameIdentifier"]
        player = _player(parsed, spectator, year)
        if name in CAR_PACKETS:
            array_key, mapping, all_cars = CAR_PACKETS[name]
            cars = parsed[array_key]
            if name == "carTelemetry" and year == 2018:
                mapping = TELEMETRY_2018
            assert values["num_cars"] == len(cars)
            for channel, key in all_cars.items():
                if key in cars[0]:
                    want = [c[key] for c in cars] + [0] * (22 - len(cars))
                    _same(list(values[channel]), want, f"{where}.{channel}")
                    checked += 1
            if player is not None:
                checked += _check_map(values, cars[player], mapping, where)
                if name == "lapData":
                    checked += _check_sectors(values, cars[player], where)
            else:
                assert "speed" not in values and "world_position_x" not in values
            if name == "motion":
                checked += _check_map(values, parsed, MOTION_TOP, where)
            if name == "carTelemetry" and "m_buttonStatus" in parsed:
                assert values["button_status"] == parsed["m_buttonStatus"]
            if "m_suggestedGear" in parsed:
                assert values["suggested_gear"] == parsed["m_suggestedGear"]
        elif name == "motionEx":
            checked += _check_map(values, parsed, MOTION_TOP, where)
        elif name == "session":
            checked += _check_map(values, parsed, SESSION, where)
            assert out.session_info is not None and out.session_info["track"]
            if parsed["m_isSpectating"]:
                spectator = parsed["m_spectatorCarIndex"]
        elif name == "event":
            assert values["event_code"] == parsed["m_eventStringCode"]
            details = parsed.get("m_eventDetails") or {}
            want = details.get(
                "vehicleIdx", details.get("overtakingVehicleIdx", details.get("vehicle1Idx", 255))
            )
            assert values["event_vehicle_index"] == want, where
            if "buttonStatus" in details:
                assert values["button_status"] == details["buttonStatus"]
            checked += 2
    assert decoded >= 6
    assert checked > 100, f"{year}: only {checked} values compared"


def _check_sectors(values: dict[str, Any], car: dict[str, Any], where: str) -> int:
    if "m_sector1TimeInMS" in car:
        want1 = car["m_sector1TimeInMS"] + 60000 * car.get("m_sector1TimeMinutes", 0)
        want2 = car["m_sector2TimeInMS"] + 60000 * car.get("m_sector2TimeMinutes", 0)
    else:
        want1 = round(car["m_sector1Time"] * 1000)
        want2 = round(car["m_sector2Time"] * 1000)
    assert (values["sector1_time_ms"], values["sector2_time_ms"]) == (want1, want2), where
    return 2


def test_session_gives_track_and_type(shared_data: Path) -> None:
    dec = F1Decoder()
    infos = [dec.decode(raw) for name, raw, _p in records(shared_data, 2024) if name == "session"]
    info = infos[0].session_info if infos[0] is not None else None
    # 2024 capture: trackId 16 (Brazil), sessionType 8 (short qualifying), formula 0
    assert info == {"track": "Brazil", "session_type": "short qualifying", "car": "F1 Modern"}


def test_spectated_car_replaces_missing_player(shared_data: Path) -> None:
    """2025 capture: playerCarIndex 255, spectating car 2 -> scalar channels are car 2's."""
    dec = F1Decoder()
    recs = list(records(shared_data, 2025))
    session = next(raw for name, raw, _p in recs if name == "session")
    tele_raw, tele = next((raw, p) for name, raw, p in recs if name == "carTelemetry")
    before = dec.decode(tele_raw)
    assert before is not None and "speed" not in before.values
    dec.decode(session)
    after = dec.decode(tele_raw)
    assert after is not None
    assert after.values["player_car_index"] == 2
    assert after.values["speed"] == tele["m_carTelemetryData"][2]["m_speed"]


def test_unknown_format_and_packet_id_are_drops(shared_data: Path) -> None:
    raw = next(raw for name, raw, _p in records(shared_data, 2024) if name == "carTelemetry")
    dec = F1Decoder()
    with pytest.raises(DecodeError) as err:
        dec.decode(struct.pack("<H", 2026) + raw[2:])
    assert err.value.reason == "unknown_format"
    with pytest.raises(DecodeError) as err:
        dec.decode(raw[:6] + bytes([16]) + raw[7:])
    assert err.value.reason == "unknown_packet_id"
    with pytest.raises(DecodeError) as err:
        dec.decode(raw[:-1])
    assert err.value.reason == "wrong_size"
    only_2025 = F1Decoder(formats=[2025])
    with pytest.raises(DecodeError) as err:
        only_2025.decode(raw)
    assert err.value.reason == "unknown_format"


def test_max_cars_sizes_the_arrays(shared_data: Path) -> None:
    raw = next(raw for name, raw, _p in records(shared_data, 2019) if name == "lapData")
    out = F1Decoder(max_cars=24).decode(raw)
    assert out is not None
    assert len(out.values["all_car_position"]) == 24  # 20 cars in 2019 + 4 empty slots
    assert out.values["all_car_position"][20:] == (0, 0, 0, 0)
    dec = F1Decoder(max_cars=24)
    dims = {f["name"]: f.get("dimensions", 0) for f in dec.definition["frame"]["fields"]}
    assert dims["all_speed"] == 24
    small = F1Decoder(max_cars=10).decode(raw)
    assert small is not None and len(small.values["all_lap_distance"]) == 10


def test_channel_selection(shared_data: Path) -> None:
    dec = F1Decoder(channels=["engine_rpm", "speed"])
    assert [f["name"] for f in dec.definition["frame"]["fields"]] == [
        "speed",
        "engine_rpm",
    ]  # definition order
    raw = next(raw for name, raw, _p in records(shared_data, 2023) if name == "carTelemetry")
    out = dec.decode(raw)
    assert out is not None and set(out.values) == {"speed", "engine_rpm"}
    with pytest.raises(ConfigError):
        F1Decoder(channels=["warp_speed"])
    with pytest.raises(ConfigError):
        F1Decoder(formats=[2030])


@settings(max_examples=300, deadline=None)
@given(fmt=st.sampled_from(YEARS), pid=st.integers(0, 20), body=st.binary(max_size=1500))
def test_random_packets_with_valid_headers_only_raise_decode_error(fmt: int, pid: int, body: bytes) -> None:
    # header-shaped prefix so the fuzzing reaches the per-packet code
    head = struct.pack("<H", fmt) + bytes([25, 1, 0, 1, pid]) + bytes(22)
    dec = F1Decoder()
    for data in (head + body, head[:7] + body, (head + body)[: len(body) // 2]):
        try:
            dec.decode(data)
        except DecodeError as e:
            assert e.reason in {"wrong_size", "unknown_format", "unknown_packet_id"}


@pytest.mark.parametrize("bad_time", [float("inf"), float("-inf"), float("nan")])
def test_non_finite_session_time_has_no_source_clock(shared_data: Path, bad_time: float) -> None:
    raw = bytearray(next(raw for name, raw, _p in records(shared_data, 2023) if name == "carTelemetry"))
    struct.pack_into("<f", raw, 15, bad_time)  # header sessionTime
    out = F1Decoder().decode(bytes(raw))
    assert out is not None and out.source_time_ns is None
