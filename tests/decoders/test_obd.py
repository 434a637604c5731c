"""ELM327 responses and SAE J1979 mode-01 scaling (pure)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wrtfd.decoders.base import Decoded
from wrtfd.decoders.obd import PIDS, ObdDecoder, parse_response
from wrtfd.decoders.registry import all_protocols
from wrtfd.errors import ConfigError, DecodeError


def test_registered() -> None:
    assert all_protocols()["obd"].transport == "serial"


@pytest.mark.parametrize(
    ("response", "channel", "value"),
    [
        (b"410C1AF8", "engine_rpm", 1726.0),  # (0x1A*256 + 0xF8) / 4
        (b"41 0D 3C \r", "vehicle_speed_kmh", 60.0),
        (b"41057B", "coolant_temp_c", 83.0),  # 0x7B - 40
        (b"410F00", "intake_temp_c", -40.0),
        (b"41110000", "throttle_pct", 0.0),
        (b"4111FF", "throttle_pct", 100.0),
        (b"41100190", "maf_g_per_s", 4.0),  # 0x0190 / 100
        (b"410E80", "timing_advance_deg", 0.0),  # 128/2 - 64
        (b"410680", "short_fuel_trim_b1_pct", 0.0),
        (b"410700", "long_fuel_trim_b1_pct", -100.0),
        (b"41422EE0", "module_voltage_v", 12.0),
        (b"415E0064", "fuel_rate_l_per_h", 5.0),
        (b"410A10", "fuel_pressure_kpa", 48.0),
        (b"411F0E10", "run_time_s", 3600.0),
    ],
)
def test_j1979_formulas(response: bytes, channel: str, value: float) -> None:
    out = ObdDecoder().decode(response)
    assert out is not None and out.values == {channel: pytest.approx(value)}


def test_progress_lines_echo_and_several_ecus() -> None:
    answer = parse_response(b"010C\rSEARCHING...\r410C0FA0\r410C0FA1\r\r")
    assert (answer.pid, answer.data) == (0x0C, b"\x0f\xa0")
    answer = parse_response(b"BUS INIT: ...OK\r41 0D 10\r")
    assert answer.pid == 0x0D


@pytest.mark.parametrize(
    ("response", "reason"),
    [
        (b"NO DATA\r\r", "no_data"),
        (b"SEARCHING...\rNO DATA\r", "no_data"),
        (b"?\r", "unknown_command"),
        (b"SEARCHING...\rUNABLE TO CONNECT\r", "unable_to_connect"),
        (b"CAN ERROR\r", "bus_error"),
        (b"BUFFER FULL\r", "bus_error"),
        (b"STOPPED\r", "stopped"),
        (b"7F 01 12\r", "negative_response"),
        (b"\r\r", "empty"),
        (b"410C1AF\r", "malformed"),
        (b"hello\r", "malformed"),
        (b"410C1A\r", "wrong_size"),
        (b"410300\r", "unexpected_pid"),
    ],
)
def test_failures_have_reasons(response: bytes, reason: str) -> None:
    with pytest.raises(DecodeError) as err:
        ObdDecoder().decode(response)
    assert err.value.reason == reason


def test_only_polled_pids_accepted() -> None:
    d = ObdDecoder(pids=["engine_rpm", 0x0D, "11"])
    assert d.pids == (0x0C, 0x0D, 0x11)
    with pytest.raises(DecodeError) as err:
        d.decode(b"41057B")
    assert err.value.reason == "unexpected_pid"
    with pytest.raises(ConfigError, match="unknown OBD PID"):
        ObdDecoder(pids=["warp_drive"])
    with pytest.raises(ConfigError, match="not supported"):
        ObdDecoder(pids=[0x99])


def test_definition_lists_every_pid_channel() -> None:
    fields = [f["name"] for f in ObdDecoder().definition["frame"]["fields"]]
    assert fields == [spec.channel for spec in PIDS.values()]


@given(st.sampled_from(sorted(PIDS)), st.binary(min_size=4, max_size=4))
def test_every_pid_decodes_any_data_bytes(pid: int, data: bytes) -> None:
    out = ObdDecoder().decode(b"41%02X%s\r" % (pid, data.hex().encode()))
    assert out is not None
    (value,) = out.values.values()
    assert isinstance(value, float)


@given(st.binary(max_size=100))
def test_arbitrary_bytes_only_raise_decode_error(data: bytes) -> None:
    try:
        result = ObdDecoder().decode(data)
    except DecodeError as exc:
        # Sources count drops by this key; it must name a reason, never be empty.
        assert exc.reason and exc.reason.isidentifier()
    else:
        assert result is None or isinstance(result, Decoded)


def test_definition_is_a_valid_wrtf_schema() -> None:
    from wrtfd.format import Schema

    schema = Schema.from_dict(ObdDecoder().definition)
    assert schema.frame_dtype.names is not None
    assert list(schema.frame_dtype.names[1:]) == [spec.channel for spec in PIDS.values()]
