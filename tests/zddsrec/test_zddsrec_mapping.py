"""Mapping config (TOML) validation and the frame -> channel mapper."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from wrtfd.errors import ConfigError, DecodeError
from wrtfd.zddsrec.format import Frame, Header, ParticipantEntry, SampleKind, TopicEntry
from wrtfd.zddsrec.mapper import FrameMapper
from wrtfd.zddsrec.mapping import load_mapping, mapping_from_dict

IDL = """
module veh {
  struct Odom { @key long id; double x; double y; float wheel[4]; sequence<float, 3> temps; string<6> gear; };
};
"""

TOML = """
[rate]
hz = 50

[source]
name = "robot"
stale_after_s = 0.5

[types.Imu]
members = [{ name = "ax", type = "float" }, { name = "gyro", type = "double[3]" }]

[[topics]]
topic = "rt/odom"
idl = "veh.idl"
type = "Odom"
instance = { id = 1 }
[topics.channels]
"x" = { channel = "car1_x", unit = "m", description = "car 1 x" }
"wheel" = "car1_wheel"
"temps" = "car1_temps"
"gear" = "car1_gear"

[[topics]]
topic = "rt/odom"
idl = "veh.idl"
type = "veh::Odom"
instance = { id = 2 }
[topics.channels]
"x" = "car2_x"

[[topics]]
topic = "rt/imu"
type = "Imu"
participant = "imu_node"
[topics.channels]
"ax" = "ax"
"gyro[2]" = "yaw_rate"
"""


@pytest.fixture
def mapping_file(tmp_path: Path) -> Path:
    (tmp_path / "veh.idl").write_text(IDL)
    (tmp_path / "map.toml").write_text(TOML)
    return tmp_path / "map.toml"


def odom(id_: int, x: float, temps: list[float], gear: str = "D") -> bytes:
    body = struct.pack("<i", id_) + bytes(4) + struct.pack("<dd", x, -x) + struct.pack("<4f", 1, 2, 3, 4)
    body += struct.pack("<I", len(temps)) + struct.pack(f"<{len(temps)}f", *temps)
    raw = gear.encode() + b"\x00"
    body += bytes((-len(body)) % 4) + struct.pack("<I", len(raw)) + raw
    return b"\x00\x01\x00\x00" + body


def imu(ax: float, yaw: float) -> bytes:
    return b"\x00\x01\x00\x00" + struct.pack("<f", ax) + bytes(4) + struct.pack("<3d", 0.0, 0.0, yaw)


HEADER = Header(
    1_000_000_000,
    (ParticipantEntry(bytes(16), "odom_node"), ParticipantEntry(b"\x01" * 16, "imu_node")),
    (TopicEntry("rt/imu", "Imu"), TopicEntry("rt/odom", "veh::Odom"), TopicEntry("rt/other", "X")),
)


def test_load_and_definition(mapping_file: Path) -> None:
    m = load_mapping(mapping_file)
    assert m.rate_hz == 50 and m.source_name == "robot" and m.stale_after_s == 0.5
    fields = {f["name"]: f for f in m.definition()["frame"]["fields"]}
    assert list(fields) == ["car1_x", "car1_wheel", "car1_temps", "car1_gear", "car2_x", "ax", "yaw_rate"]
    assert fields["car1_x"] == {
        "name": "car1_x",
        "type": "float64",
        "dimensions": 0,
        "description": "car 1 x",
        "unit": "m",
    }
    assert fields["car1_wheel"]["type"] == "float32" and fields["car1_wheel"]["dimensions"] == 4
    assert fields["car1_temps"]["dimensions"] == 3
    assert fields["car1_gear"] == {
        "name": "car1_gear",
        "type": "uint8",
        "dimensions": 6,
        "description": "rt/odom gear",
        "tags": ["text"],
    }
    assert fields["yaw_rate"]["type"] == "float64" and fields["yaw_rate"]["dimensions"] == 0


def test_mapper_values_filters_and_stale(mapping_file: Path) -> None:
    mapper = FrameMapper(load_mapping(mapping_file), HEADER)
    s = mapper.map(Frame(5, 0, 1, SampleKind.ALIVE, odom(1, 3.5, [7.0])))
    assert s is not None and s.time_ns == 1_000_000_005
    nan = s.values["car1_temps"][1]  # type: ignore[index]
    assert nan != nan  # missing sequence elements of float channels are NaN
    assert s.values["car1_x"] == 3.5 and s.values["car1_wheel"] == [1.0, 2.0, 3.0, 4.0]
    assert s.values["car1_gear"] == [ord("D"), 0, 0, 0, 0, 0]
    assert "car2_x" not in s.values
    s2 = mapper.map(Frame(6, 0, 1, SampleKind.ALIVE, odom(2, -1.0, [])))
    assert s2 is not None and dict(s2.values) == {"car2_x": -1.0}
    assert mapper.map(Frame(6, 0, 1, SampleKind.ALIVE, odom(3, 0.0, []))) is None  # instance 3: nobody's
    assert mapper.not_selected == 1
    # imu only from imu_node
    assert mapper.map(Frame(7, 0, 0, SampleKind.ALIVE, imu(1.0, 2.0))) is None
    s3 = mapper.map(Frame(7, 1, 0, SampleKind.ALIVE, imu(1.5, 0.25)))
    assert s3 is not None and dict(s3.values) == {"ax": 1.5, "yaw_rate": 0.25}
    # unmapped topics are counted by name
    assert mapper.map(Frame(8, 0, 2, SampleKind.ALIVE, b"")) is None
    assert mapper.map(Frame(9, 0, 2, SampleKind.ALIVE, b"")) is None
    assert dict(mapper.unmapped) == {"rt/other": 2}


def test_dispose_marks_the_instance_stale(mapping_file: Path) -> None:
    mapper = FrameMapper(load_mapping(mapping_file), HEADER)
    car1 = {"car1_x", "car1_wheel", "car1_temps", "car1_gear"}
    s = mapper.map(Frame(1, 0, 1, SampleKind.NOT_ALIVE_DISPOSED, odom(2, 0.0, [])))
    assert s is not None and s.stale == {"car2_x"} and not s.values
    key_only = b"\x00\x01\x00\x00" + struct.pack("<i", 1)  # a dispose carrying only the @key members
    s = mapper.map(Frame(2, 0, 1, SampleKind.NOT_ALIVE_UNREGISTERED, key_only))
    assert s is not None and s.stale == car1
    s = mapper.map(Frame(3, 0, 1, SampleKind.NOT_ALIVE_DISPOSED, b""))  # no payload: cannot tell which
    assert s is not None and s.stale == car1 | {"car2_x"}
    s = mapper.map(Frame(4, 1, 0, SampleKind.NOT_ALIVE_DISPOSED, b""))
    assert s is not None and s.stale == {"ax", "yaw_rate"}


def test_bad_payload_raises_decode_error(mapping_file: Path) -> None:
    mapper = FrameMapper(load_mapping(mapping_file), HEADER)
    with pytest.raises(DecodeError) as exc:
        mapper.map(Frame(1, 0, 1, SampleKind.ALIVE, b"\x00\x01\x00\x00\x01"))
    assert exc.value.reason == "cdr_truncated"


BASE = {
    "topics": [{"topic": "t", "type": {"members": [{"name": "v", "type": "double"}]}, "channels": {"v": "v"}}]
}


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"rate": {"hz": 0}}, r"rate.hz: must be an integer frame rate"),
        ({"rate": {"hz": 10, "hzz": 1}}, r"rate: unknown key\(s\) hzz"),
        ({"source": {"name": "a b"}}, r"source.name: must be a letter then"),
        ({"source": {"name": "stale"}}, r"source.name: 'stale' is reserved"),
        ({"limits": {"max_payload_bytes": -1}}, r"limits.max_payload_bytes"),
        ({"topics": []}, r"topics: must be a non-empty array"),
        (
            {"topics": [{"topic": "t", "type": "Nope", "channels": {"v": "v"}}]},
            r"topics\[0\].type: unknown struct 'Nope'",
        ),
        (
            {
                "topics": [
                    {
                        "topic": "t",
                        "type": {"members": [{"name": "v", "type": "double"}]},
                        "channels": {"w": "v"},
                    }
                ]
            },
            r'topics\[0\].channels."w": .*has no member \'w\'',
        ),
        (
            {
                "topics": [
                    {
                        "topic": "t",
                        "type": {"members": [{"name": "v", "type": "double"}]},
                        "channels": {"v": "1v"},
                    }
                ]
            },
            r'topics\[0\].channels."v": channel must be a letter then',
        ),
        (
            {
                "topics": [
                    {
                        "topic": "t",
                        "type": {"members": [{"name": "v", "type": "sequence<float>"}]},
                        "channels": {"v": "v"},
                    }
                ]
            },
            r"unbounded sequence: give size",
        ),
        (
            {
                "topics": [
                    {
                        "topic": "t",
                        "type": {"members": [{"name": "v", "type": "double[2]"}]},
                        "channels": {"v[2]": "v"},
                    }
                ]
            },
            r"index 2 outside the array of 2",
        ),
        (
            {"topics": BASE["topics"] * 2},
            r"topics\[1\].channels.\"v\": channel 'v' is already mapped by t v",
        ),
        ({"topics": [{**BASE["topics"][0], "instance": {"nope": 1}}]}, r"topics\[0\].instance.nope"),
    ],
)
def test_config_errors_name_the_key(patch: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        mapping_from_dict({**BASE, **patch}, where="m.toml")


def test_toml_syntax_and_missing_idl(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text("[rate\nhz=1")
    with pytest.raises(ConfigError, match=r"bad\.toml: TOML syntax error"):
        load_mapping(tmp_path / "bad.toml")
    (tmp_path / "m.toml").write_text('[[topics]]\ntopic="t"\ntype="A"\nidl="none.idl"\nchannels={v="v"}\n')
    with pytest.raises(ConfigError, match=r"topics\[0\].idl: cannot read"):
        load_mapping(tmp_path / "m.toml")
