"""SLCAN line parsing, encoding and timestamp unwrapping (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wrtfd.decoders.can_dbc import CanFrame
from wrtfd.decoders.registry import all_protocols
from wrtfd.decoders.slcan import SlcanDecoder, encode_slcan, parse_slcan
from wrtfd.errors import ConfigError, DecodeError
from wrtfd.protocols import Absent
from wrtfd.sources.slcan import slcan_open_commands

DBC = """VERSION ""
BS_:
BU_: ECU
BO_ 256 ENGINE: 3 ECU
 SG_ RPM : 0|16@1+ (1,0) [0|16000] "rpm" ECU
 SG_ TPS : 16|8@1+ (0.5,0) [0|100] "%" ECU
BO_ 2566834709 EXT: 2 ECU
 SG_ OIL_T : 0|8@1+ (1,-40) [-40|215] "degC" ECU
 SG_ RPM : 8|8@1+ (50,0) [0|12750] "rpm" ECU
CM_ SG_ 256 RPM "Engine speed";
"""


@pytest.fixture
def dbc(tmp_path: Path) -> Path:
    path = tmp_path / "car.dbc"
    path.write_text(DBC)
    return path


def test_registered() -> None:
    info = all_protocols()["slcan"]
    assert info.transport == "serial" and isinstance(info.schema_file, Absent)


@pytest.mark.parametrize(
    ("line", "frame"),
    [
        (b"t1230", CanFrame(0x123, b"")),
        (b"t7FF8DEADBEEF00112233", CanFrame(0x7FF, bytes.fromhex("DEADBEEF00112233"))),
        (b"t10021122EA60", CanFrame(0x100, b"\x11\x22", timestamp_ns=60000 * 1_000_000)),
        (b"T1ABCDEF02BEEF", CanFrame(0x1ABCDEF0, b"\xbe\xef", is_extended=True)),
        (b"r1238", CanFrame(0x123, b"", is_remote=True)),
        (b"R000000013FFFF", CanFrame(1, b"", True, True, 0xFFFF * 1_000_000)),
    ],
)
def test_parse_frames(line: bytes, frame: CanFrame) -> None:
    assert parse_slcan(line) == frame


@pytest.mark.parametrize("line", [b"z", b"Z", b"V1013", b"N0001", b"F00", b""])
def test_adapter_replies_are_not_frames(line: bytes) -> None:
    assert parse_slcan(line) is None


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"\x07", "adapter_error"),
        (b"\x07t1230", "adapter_error"),
        (b"t12", "malformed"),
        (b"t1239" + b"00" * 9, "bad_dlc"),
        (b"t1232001", "malformed"),
        (b"t123200112", "malformed"),
        (b"t800100", "bad_id"),
        (b"T2000000010", "bad_id"),
        (b"t12X100", "unknown_command"),
        (b"x123", "unknown_command"),
        (b"t+12100", "unknown_command"),
    ],
)
def test_rejections(line: bytes, reason: str) -> None:
    with pytest.raises(DecodeError) as err:
        parse_slcan(line)
    assert err.value.reason == reason


frames = st.builds(
    lambda ext, ident, data, remote: CanFrame(
        ident & (0x1FFFFFFF if ext else 0x7FF), b"" if remote else data, ext, remote
    ),
    st.booleans(),
    st.integers(min_value=0, max_value=0x1FFFFFFF),
    st.binary(max_size=8),
    st.booleans(),
)


@given(frames, st.one_of(st.none(), st.integers(min_value=0, max_value=59_999)))
def test_encode_parse_round_trip(frame: CanFrame, stamp_ms: int | None) -> None:
    line = encode_slcan(frame, timestamp_ms=stamp_ms)
    assert line.endswith(b"\r")
    parsed = parse_slcan(line[:-1])
    expected_ns = None if stamp_ms is None else stamp_ms * 1_000_000
    assert parsed == CanFrame(
        frame.arbitration_id, frame.data, frame.is_extended, frame.is_remote, expected_ns
    )


@given(st.binary(max_size=40))
def test_arbitrary_bytes_only_raise_decode_error(data: bytes) -> None:
    try:
        result = parse_slcan(data)
    except DecodeError as exc:
        # Sources count drops by this key; it must name a reason, never be empty.
        assert exc.reason and exc.reason.isidentifier()
    else:
        assert result is None or (isinstance(result, CanFrame) and len(result.data) <= 8)


def test_decoder_maps_signals_and_counts_the_rest(dbc: Path) -> None:
    d = SlcanDecoder(dbc=dbc, mapping={"engine_rpm": "ENGINE.RPM", "oil_temp_c": "OIL_T"})
    out = d.decode(b"t1003D007C8")
    assert out is not None and out.values == {"engine_rpm": 2000}
    out = d.decode(b"T18FECA1523C50")  # DBC id 2566834709 = 0x80000000 (extended flag) | 0x18FECA15
    assert out is not None and out.values == {"oil_temp_c": 20}
    for line, reason in [(b"t2001AA", "unmapped_id"), (b"t1001AA", "wrong_size"), (b"r1003", "remote_frame")]:
        with pytest.raises(DecodeError) as err:
            d.decode(line)
        assert err.value.reason == reason
    assert d.decode(b"z") is None
    fields = {f["name"]: f for f in d.definition["frame"]["fields"]}
    assert fields["engine_rpm"]["unit"] == "rpm" and fields["engine_rpm"]["description"] == "Engine speed"
    assert fields["oil_temp_c"]["unit"] == "degC"


def test_default_mapping_disambiguates_duplicate_signal_names(dbc: Path) -> None:
    d = SlcanDecoder(dbc=dbc)
    assert d.can.mapping == {
        "engine_rpm": "ENGINE.RPM",
        "tps": "ENGINE.TPS",
        "oil_t": "EXT.OIL_T",
        "ext_rpm": "EXT.RPM",
    }


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ({"x": "NOPE.RPM"}, "no message"),
        ({"x": "ENGINE.NOPE"}, "has no signal"),
        ({"x": "NOPE"}, "no signal"),
        ({"x": "RPM"}, "ambiguous"),
        ({"not a name": "TPS"}, "not an identifier"),
    ],
)
def test_bad_mapping_is_a_config_error(dbc: Path, mapping: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        SlcanDecoder(dbc=dbc, mapping=mapping)


def test_missing_dbc_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot load DBC"):
        SlcanDecoder(dbc=tmp_path / "missing.dbc")


@pytest.mark.parametrize(
    ("name", "data"), [("notes.txt", b""), ("empty.dbc", b""), ("noise.dbc", bytes(range(256)))]
)
def test_a_file_that_is_no_dbc_is_a_config_error(tmp_path: Path, name: str, data: bytes) -> None:
    """cantools answers a name of another format with ValueError (it was a traceback)."""
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(ConfigError, match=f"{name}: cannot load DBC"):
        SlcanDecoder(dbc=path)


def test_timestamps_unwrap_each_minute(dbc: Path) -> None:
    d = SlcanDecoder(dbc=dbc, mapping={"rpm": "ENGINE.RPM"})
    times = []
    for stamp in (59_000, 59_999, 5, 30_000, 10):
        out = d.decode(b"t1003D007C8%04X" % stamp)
        assert out is not None
        times.append(out.source_time_ns // 1_000_000)  # type: ignore[operator]
    assert times == [59_000, 59_999, 60_005, 90_000, 120_010]
    d.reset()
    out = d.decode(b"t1003D007C80001")
    assert out is not None and out.source_time_ns == 1_000_000


def test_open_sequence() -> None:
    assert slcan_open_commands(500_000) == [b"\r\r\r", b"C\r", b"S6\r", b"O\r"]
    assert slcan_open_commands(1_000_000, listen_only=True, timestamps=True) == [
        b"\r\r\r",
        b"C\r",
        b"S8\r",
        b"Z1\r",
        b"L\r",
    ]
    with pytest.raises(ConfigError, match="bitrate"):
        slcan_open_commands(333_333)


def test_generated_definition_is_a_valid_wrtf_schema(dbc: Path) -> None:
    from wrtfd.format import Schema

    d = SlcanDecoder(dbc=dbc, mapping={"engine_rpm": "ENGINE.RPM", "oil_temp_c": "OIL_T"})
    schema = Schema.from_dict(d.definition)
    assert schema.frame_dtype.names == ("tick", "engine_rpm", "oil_temp_c")
    assert all(f.get("description") for f in d.definition["frame"]["fields"])
