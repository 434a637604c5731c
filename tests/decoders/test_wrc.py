"""EA SPORTS WRC decoder: layouts compiled from structure files (the shipped one and custom ones),
every problem with a file a ConfigError naming it, stages as sessions, and hostile datagrams."""

from __future__ import annotations

import json
import random
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from wrtfd.decoders.wrc import SHIPPED_STRUCTURE, WrcDecoder
from wrtfd.errors import ConfigError, DecodeError
from wrtfd.format.schema import Schema

SCHEMAS = Path(__file__).resolve().parents[2] / "wrtfd" / "schemas"
#: The documented session_update channels after the header (packet_4cc, packet_uid), in order, with
#: their types: written here from the protocol notes, independently of the shipped JSON files.
DOCUMENTED = [
    tuple(item.split())
    for item in """
    shiftlights_fraction f, shiftlights_rpm_start f, shiftlights_rpm_end f,
    shiftlights_rpm_valid ?, vehicle_gear_index B, vehicle_gear_index_neutral B,
    vehicle_gear_index_reverse B, vehicle_gear_maximum B, vehicle_speed f,
    vehicle_transmission_speed f, vehicle_position_x f, vehicle_position_y f, vehicle_position_z f,
    vehicle_velocity_x f, vehicle_velocity_y f, vehicle_velocity_z f, vehicle_acceleration_x f,
    vehicle_acceleration_y f, vehicle_acceleration_z f, vehicle_left_direction_x f,
    vehicle_left_direction_y f, vehicle_left_direction_z f, vehicle_forward_direction_x f,
    vehicle_forward_direction_y f, vehicle_forward_direction_z f, vehicle_up_direction_x f,
    vehicle_up_direction_y f, vehicle_up_direction_z f, vehicle_hub_position_bl f,
    vehicle_hub_position_br f, vehicle_hub_position_fl f, vehicle_hub_position_fr f,
    vehicle_hub_velocity_bl f, vehicle_hub_velocity_br f, vehicle_hub_velocity_fl f,
    vehicle_hub_velocity_fr f, vehicle_cp_forward_speed_bl f, vehicle_cp_forward_speed_br f,
    vehicle_cp_forward_speed_fl f, vehicle_cp_forward_speed_fr f, vehicle_brake_temperature_bl f,
    vehicle_brake_temperature_br f, vehicle_brake_temperature_fl f, vehicle_brake_temperature_fr f,
    vehicle_engine_rpm_max f, vehicle_engine_rpm_idle f, vehicle_engine_rpm_current f,
    vehicle_throttle f, vehicle_brake f, vehicle_clutch f, vehicle_steering f, vehicle_handbrake f,
    game_total_time f, game_delta_time f, game_frame_count Q, stage_current_time f,
    stage_previous_split_time f, stage_result_time f, stage_result_time_penalty f,
    stage_result_status B, stage_current_distance d, stage_length d, stage_progress f,
    vehicle_tyre_state_bl B, vehicle_tyre_state_br B, vehicle_tyre_state_fl B,
    vehicle_tyre_state_fr B, stage_shakedown ?, game_mode B, vehicle_id H, vehicle_class_id H,
    vehicle_manufacturer_id H, location_id H, route_id H, vehicle_cluster_abs ?
""".replace("\n", " ").split(", ")
]
NAMES = [name for name, _code in DOCUMENTED]
PACK = struct.Struct("<4sQ" + "".join(code for _name, code in DOCUMENTED))


def datagram(**values: Any) -> bytes:
    """A session_update in the documented layout; unnamed channels 0."""
    defaults = {n: 0 for n in NAMES} | {"shiftlights_rpm_valid": False, "stage_shakedown": False}
    defaults["vehicle_cluster_abs"] = False
    defaults.update(values)
    header = (values.get("packet_4cc", b"SESU"), values.get("packet_uid", 1))
    return PACK.pack(*header, *(defaults[n] for n in NAMES))


def write(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return path


def test_shipped_structure_is_the_documented_layout() -> None:
    dec = WrcDecoder()
    assert dec.size == PACK.size == 275
    assert [c.id for c in dec.layout] == ["packet_4cc", "packet_uid", *NAMES]
    d = dec.decode(
        datagram(
            vehicle_speed=27.5, vehicle_gear_index=3, stage_current_time=42.25, stage_progress=0.5,
            stage_current_distance=1234.5, stage_length=2469.0, game_total_time=1000.5,
            location_id=5, route_id=12, vehicle_id=42, vehicle_cluster_abs=True, packet_uid=77,
        )
    )  # fmt: skip
    assert d is not None
    v = d.values
    assert v["packet_4cc"] == "SESU" and v["packet_uid"] == 77
    assert v["vehicle_speed"] == 27.5 and v["vehicle_gear_index"] == 3 and v["vehicle_cluster_abs"] is True
    assert v["stage_current_distance"] == 1234.5 and v["stage_progress"] == 0.5
    assert d.source_time_ns == 1_000_500_000_000
    assert d.session_info == {"track": "location 5 route 12", "car": "vehicle 42"}


def test_shipped_definition_file_matches_the_generated_one() -> None:
    """wrtfd/schemas/wrc.wrtf.yaml is WrcDecoder().definition (regenerate it when the JSON changes)."""
    shipped = yaml.safe_load((SCHEMAS / "wrc.wrtf.yaml").read_text())
    assert shipped == WrcDecoder().definition
    schema = Schema.from_dict(shipped)
    units = {f["name"]: f.get("unit") for f in shipped["frame"]["fields"]}
    assert units["vehicle_speed"] == "m/s" and units["stage_current_distance"] == "m"
    assert units["stage_current_time"] == "s" and units["vehicle_brake_temperature_fl"] == "degC"
    assert schema.frame_dtype["packet_4cc"].shape == (4,)
    assert all(f["description"] for f in shipped["frame"]["fields"])


def test_issue_example_options_mean_the_shipped_structure(tmp_path: Path) -> None:
    for name in ("wrc.json", str(tmp_path / "wrc.json"), "wrc"):
        assert WrcDecoder(structure=name, packet="session_update").structure.path == SHIPPED_STRUCTURE
    with pytest.raises(ConfigError, match="no such file"):
        WrcDecoder(structure=str(tmp_path / "mine.json"))


def test_stages_splits_and_sessions() -> None:
    dec = WrcDecoder()
    first = dec.decode(datagram(stage_current_time=0.0, location_id=5, route_id=1))
    assert first is not None and not first.new_session and first.values["stage_split_count"] == 0
    seq = [(10.0, 0.0), (20.0, 15.2), (30.0, 15.2), (40.0, 33.9), (50.0, 33.9)]
    counts = [dec.decode(datagram(stage_current_time=t, stage_previous_split_time=s, location_id=5,
                                  route_id=1)).values["stage_split_count"] for t, s in seq]  # type: ignore[union-attr]  # fmt: skip
    assert counts == [0, 1, 1, 2, 2]
    restart = dec.decode(datagram(stage_current_time=0.5, location_id=5, route_id=1))
    assert restart is not None and restart.new_session and restart.values["stage_split_count"] == 0
    nxt = dec.decode(datagram(stage_current_time=0.6, location_id=5, route_id=1))
    assert nxt is not None and not nxt.new_session
    other = dec.decode(datagram(stage_current_time=0.7, location_id=5, route_id=2))
    assert other is not None and other.new_session and other.session_info == {
        "track": "location 5 route 2", "car": "vehicle 0",
    }  # fmt: skip


def test_other_packets_of_the_structure_are_skipped() -> None:
    dec = WrcDecoder()
    assert dec.decode(b"SESS" + bytes(8)) is None  # header only: session_start/end/pause/resume
    assert dec.skipped.as_dict() == {"other_packet": 1}
    for size in (0, 11, 13, 274, 276, 1000):
        with pytest.raises(DecodeError) as e:
            dec.decode(bytes(size))
        assert e.value.reason == "wrong_size"


def test_custom_structure_with_the_games_channel_catalogue(tmp_path: Path) -> None:
    catalogue = write(
        tmp_path / "channels.json",
        {"versions": {"schema": 1, "data": 3}, "channels": [
            {"id": "my_counter", "type": "int32", "units": "", "description": "a counter"},
            {"id": "vehicle_speed", "type": "float32", "units": "metres per second", "description": "speed"},
        ]},
    )  # fmt: skip
    structure = write(
        tmp_path / "laptimer.json",
        {"versions": {"schema": 1, "data": 3}, "id": "laptimer", "header": {"channels": ["packet_uid"]},
         "packets": [{"id": "session_start", "channels": ["location_id", "route_id"]},
                     {"id": "session_update", "channels": ["vehicle_speed", "my_counter", "packet_4cc"]}]},
    )  # fmt: skip
    dec = WrcDecoder(structure=str(structure), channels_file=str(catalogue))
    assert dec.size == 8 + 4 + 4 + 4
    d = dec.decode(struct.pack("<Qfi4s", 9, 12.5, -3, b"\x00ab\xff"))
    assert d is not None and d.values == {"packet_uid": 9, "vehicle_speed": 12.5, "my_counter": -3,
                                          "packet_4cc": "?ab?"}  # fmt: skip
    assert d.source_time_ns is None  # no game_total_time in this packet: arrival time
    fields = {f["name"]: f for f in dec.definition["frame"]["fields"]}
    assert fields["vehicle_speed"]["unit"] == "metres per second"  # the game's own catalogue wins
    assert "stage_split_count" not in fields
    assert dec.decode(struct.pack("<QHH", 1, 5, 12)) is None and dec.skipped.as_dict() == {
        "packet_session_start": 1
    }
    start = WrcDecoder(structure=str(structure), packet="session_start", channels_file=str(catalogue))
    d2 = start.decode(struct.pack("<QHH", 1, 5, 12))
    assert d2 is not None and d2.session_info == {"track": "location 5 route 12"}


def test_utf16_files_are_read(tmp_path: Path) -> None:
    doc = {"id": "u16", "packets": [{"id": "session_update", "channels": ["vehicle_speed"]}]}
    path = tmp_path / "u16.json"
    path.write_bytes(json.dumps(doc).encode("utf-16"))
    assert WrcDecoder(structure=str(path)).size == 4


BAD: list[tuple[str, Any, str]] = [
    ("notjson.json", "{ not json", "not valid JSON"),
    ("list.json", [1, 2], "not a WRC structure file"),
    ("version.json", {"versions": {"schema": 2}, "packets": []}, "schema version 2 is not supported"),
    ("empty.json", {"packets": []}, "has no packets"),
    ("unknown.json", {"packets": [{"id": "session_update", "channels": ["warp_drive"]}]},
     "unknown channel 'warp_drive'"),
    ("twice.json", {"header": {"channels": ["packet_uid"]},
                    "packets": [{"id": "session_update", "channels": ["packet_uid"]}]}, "appears twice"),
    ("nopacket.json", {"packets": [{"id": "session_start", "channels": ["packet_uid"]}]},
     "no packet 'session_update' in structure (packets: session_start)"),
    ("noid.json", {"packets": [{"channels": []}]}, "expected an object with an `id`"),
    ("dup.json", {"packets": [{"id": "a", "channels": []}, {"id": "a", "channels": []}]}, "listed twice"),
    ("chans.json", {"packets": [{"id": "session_update", "channels": "vehicle_speed"}]},
     "expected a list of channel ids"),
    ("huge.json", {"packets": [{"id": "session_update", "channels": ["stage_length"] * 1025}]},
     "at most 1024"),
    ("nochannels.json", {"packets": [{"id": "session_update", "channels": []}]}, "has no channels"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "doc", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_structure_files_name_the_file_and_the_problem(
    tmp_path: Path, name: str, doc: Any, message: str
) -> None:
    path = write(tmp_path / name, doc)
    with pytest.raises(ConfigError) as e:
        WrcDecoder(structure=str(path))
    assert str(path) in str(e.value) and message in str(e.value)


def test_bad_catalogues_and_limits(tmp_path: Path) -> None:
    structure = write(tmp_path / "s.json", {"packets": [{"id": "session_update", "channels": ["x"]}]})
    for doc, message in [
        ({"channels": [{"id": "x", "type": "complex128"}]}, "is not one of"),
        ({"channels": [{"id": "X Y", "type": "uint8"}]}, "is not a channel id"),
        ({"channels": [{"id": "x", "type": "uint8"}, {"id": "x", "type": "uint8"}]}, "listed twice"),
        ({"chans": []}, "not a channel catalogue"),
    ]:
        path = write(tmp_path / "c.json", doc)
        with pytest.raises(ConfigError) as e:
            WrcDecoder(structure=str(structure), channels_file=str(path))
        assert str(path) in str(e.value) and message in str(e.value)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (1 << 20) + b"{}")
    with pytest.raises(ConfigError, match="larger than"):
        WrcDecoder(structure=str(big))
    many = write(tmp_path / "c2.json", {"channels": [{"id": f"c{i}", "type": "uint8"} for i in range(4097)]})
    with pytest.raises(ConfigError, match="at most 4096"):
        WrcDecoder(channels_file=str(many))
    with pytest.raises(ConfigError):
        WrcDecoder(channels=["nope"])


def test_mutations_only_raise_decode_error_and_values_fit() -> None:
    dec = WrcDecoder()
    dtype = Schema.from_dict(dec.definition).frame_dtype
    rng = random.Random(7)
    good = datagram(stage_current_time=5.0, stage_previous_split_time=2.0, location_id=5)
    poison = [good[:k] + b"\x00\x00\xc0\x7f" + good[k + 4 :] for k in range(0, len(good) - 4, 3)]
    flips = []
    for _ in range(300):
        b = bytearray(good)
        for _ in range(rng.randint(1, 8)):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        flips.append(bytes(b))
    for data in [*poison, *flips, *(good[:k] for k in range(len(good)))]:
        try:
            d = dec.decode(data)
        except DecodeError as e:
            assert e.reason == "wrong_size"
            continue
        if d is None:
            continue
        for key, value in d.values.items():
            if isinstance(value, str):
                assert len(value.encode()) <= 4
            else:
                np.array(value, dtype=dtype[key].base)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=600))
def test_random_datagrams(data: bytes) -> None:
    try:
        WrcDecoder().decode(data)
    except DecodeError as e:
        assert e.reason == "wrong_size"
