"""NMEA decoder: envelope checks, sentence semantics, time, and hostile input (pure, no I/O)."""

from __future__ import annotations

import datetime as dt
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wrtfd.decoders.base import Decoded
from wrtfd.decoders.nmea import KNOTS_TO_MPS, NmeaDecoder, nmea_checksum
from wrtfd.decoders.registry import all_protocols
from wrtfd.errors import DecodeError
from wrtfd.protocols import get as protocol_info


def nmea(body: str, *, prefix: str = "$") -> bytes:
    return f"{prefix}{body}*{nmea_checksum(body.encode()):02X}\r\n".encode()


def epoch_ns(y: int, mo: int, d: int, h: int, mi: int, s: int, us: int = 0) -> int:
    t = dt.datetime(y, mo, d, h, mi, s, us, tzinfo=dt.UTC)
    return int(t.timestamp()) * 1_000_000_000 + us * 1000


RMC = "GPRMC,123519.50,A,4807.038,N,01131.000,E,022.4,084.4,230394,003.1,W"
GGA = "GPGGA,123519.50,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,"


def test_registered_as_serial_protocol() -> None:
    assert protocol_info("nmea").transport == "serial"
    assert all_protocols()["nmea"].decoder == "wrtfd.decoders.nmea:NmeaDecoder"


def test_rmc_gives_position_speed_course_and_epoch_time() -> None:
    d = NmeaDecoder()
    out = d.decode(nmea(RMC))
    assert out is not None
    v = out.values
    assert v["lat_deg"] == pytest.approx(48 + 7.038 / 60, abs=1e-9)
    assert v["lon_deg"] == pytest.approx(11 + 31.0 / 60, abs=1e-9)
    assert v["speed_mps"] == pytest.approx(22.4 * 1852 / 3600)
    assert v["course_deg"] == 84.4
    assert v["fix_mode"] == 2
    assert out.source_time_ns == epoch_ns(1994, 3, 23, 12, 35, 19, 500_000)
    assert v["fix_time_utc_us"] == out.source_time_ns // 1000


def test_gga_before_any_date_has_no_source_time_then_3d_fix() -> None:
    d = NmeaDecoder()
    out = d.decode(nmea(GGA))
    assert out is not None and out.source_time_ns is None
    assert out.values["fix_time_utc_us"] == 0
    assert out.values["alt_msl_m"] == 545.4 and out.values["geoid_sep_m"] == 46.9
    assert out.values["fix_mode"] == 3 and out.values["fix_quality"] == 1
    assert out.values["satellites_used"] == 8 and out.values["hdop"] == 0.9


def test_any_talker_and_double_dollar_prefix() -> None:
    reference = NmeaDecoder().decode(nmea(RMC))
    assert reference is not None
    for talker in ("GN", "GL", "GA", "BD", "GB"):
        out = NmeaDecoder().decode(nmea(talker + RMC[2:], prefix="$$"))
        assert out is not None and out.values == reference.values


def test_midnight_crossing_gga_takes_next_day() -> None:
    d = NmeaDecoder()
    d.decode(nmea("GPRMC,235959.00,A,4807.038,N,01131.000,E,0.0,0.0,311299,,"))
    out = d.decode(nmea("GPGGA,000000.00,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,"))
    assert out is not None and out.source_time_ns == epoch_ns(2000, 1, 1, 0, 0, 0)


def test_zda_sets_date() -> None:
    d = NmeaDecoder()
    out = d.decode(nmea("GNZDA,055303.800,05,08,2026,00,00"))
    assert out is not None and out.source_time_ns == epoch_ns(2026, 8, 5, 5, 53, 3, 800_000)
    with pytest.raises(DecodeError) as err:
        d.decode(nmea("GNZDA,055303.800,31,02,2026,00,00"))
    assert err.value.reason == "malformed"


def test_no_fix_clears_position_instead_of_holding_it() -> None:
    d = NmeaDecoder()
    d.decode(nmea(RMC))
    out = d.decode(nmea("GPRMC,123520.50,V,,,,,,,230394,,,N"))
    assert out is not None
    assert math.isnan(out.values["lat_deg"]) and math.isnan(out.values["lon_deg"])
    assert out.values["fix_mode"] == 1
    out = d.decode(nmea("GPGGA,123521.50,,,,,0,00,99.99,,,,,,"))
    assert out is not None and out.values["fix_mode"] == 1 and out.values["fix_quality"] == 0


def test_vtg_gsa_gsv_gll_gst() -> None:
    d = NmeaDecoder()
    out = d.decode(nmea("GNVTG,120.9,T,,M,,N,36.0,K,A"))  # knots missing: km/h used
    assert out is not None and out.values["speed_mps"] == pytest.approx(10.0)
    assert out.values["course_deg"] == 120.9
    out = d.decode(nmea("GNVTG,10.0,T,,M,1.0,N,1.9,K,A"))
    assert out is not None and out.values["speed_mps"] == pytest.approx(KNOTS_TO_MPS)
    out = d.decode(nmea("GNGSA,A,3,27,08,07,,,,,,,,,,2.5,1.7,1.8,1"))
    assert out is not None
    assert (out.values["fix_mode"], out.values["pdop"], out.values["hdop"], out.values["vdop"]) == (
        3,
        2.5,
        1.7,
        1.8,
    )
    d.decode(nmea("GPGSV,3,1,09,16,71,196,27,27,64,299,35,23,44,092,23,26,44,172,26,1"))
    out = d.decode(nmea("GLGSV,1,1,04,66,37,078,27,67,62,349,26,68,20,296,25,75,04,018,"))
    assert out is not None and out.values["satellites_in_view"] == 13
    out = d.decode(nmea("GNGLL,4404.14066,N,12118.85481,W,171925.00,A,A"))
    assert out is not None and out.values["lon_deg"] == pytest.approx(-(121 + 18.85481 / 60), abs=1e-9)
    out = d.decode(nmea("GNGST,135806.000,6.1,4.0,4.0,61.0,4.6,4.4,4.8"))
    assert out is not None
    assert (out.values["lat_err_m"], out.values["lon_err_m"], out.values["alt_err_m"]) == (4.6, 4.4, 4.8)


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"garbage\r\n", "not_nmea"),
        (nmea(RMC).replace(b"*", b"0*"), "bad_checksum"),
        (nmea(RMC)[:-4] + b"ZZ\r\n", "bad_checksum"),
        (b"$" + RMC.encode() + b"\r\n", "no_checksum"),
        (nmea("GPTXT,01,01,02,ANTENNA OK"), "unknown_sentence"),
        (nmea("PSTMVER,GNSSLIB_9749c549631df_ARM"), "unknown_sentence"),
        (nmea("GPGGA,12xx47.00,3715.6,N,12157.6,W,1,1x,0.8,86.0,M,-30.1,M,,"), "malformed"),
        (nmea("GPRMC,123519,A,9907.038,N,01131.000,E,022.4,084.4,230394,003.1,W"), "out_of_range"),
        (b"$GP\xc3\xa9MC*00\r\n", "bad_checksum"),
        (b"$" + b"A" * 300 + b"*00", "too_long"),
    ],
)
def test_rejections_have_reasons(line: bytes, reason: str) -> None:
    with pytest.raises(DecodeError) as err:
        NmeaDecoder().decode(line)
    assert err.value.reason == reason


def test_non_ascii_with_valid_checksum_is_garbage() -> None:
    body = "GPRMC,\u00e9".encode()
    line = b"$" + body + b"*%02X" % nmea_checksum(body)
    with pytest.raises(DecodeError) as err:
        NmeaDecoder().decode(line)
    assert err.value.reason == "garbage"


def test_missing_checksum_accepted_when_allowed() -> None:
    out = NmeaDecoder(require_checksum=False).decode(b"$" + RMC.encode())
    assert out is not None and out.values["course_deg"] == 84.4


def test_reset_forgets_fix_and_date() -> None:
    d = NmeaDecoder()
    d.decode(nmea(RMC))
    d.reset()
    out = d.decode(nmea(GGA))
    assert out is not None and out.source_time_ns is None


@given(st.binary(max_size=120))
def test_arbitrary_bytes_only_raise_decode_error(data: bytes) -> None:
    d = NmeaDecoder()
    try:
        result = d.decode(data)
    except DecodeError as exc:
        # Sources count drops by this key; it must name a reason, never be empty.
        assert exc.reason and exc.reason.isidentifier()
    else:
        assert result is None or isinstance(result, Decoded)


SENTENCE_IDS = st.sampled_from(["RMC", "GGA", "VTG", "GSA", "GSV", "GLL", "ZDA", "GST"])
FIELD = st.text(alphabet="0123456789.,-+NSEWAVMTK ", max_size=12)


@given(SENTENCE_IDS, st.lists(FIELD, max_size=20))
def test_checksummed_random_fields_only_raise_decode_error(sentence: str, fields: list[str]) -> None:
    """Valid envelopes around nonsense: the third-party parser must not let anything else out."""
    d = NmeaDecoder()
    try:
        out = d.decode(nmea(",".join(["GP" + sentence, *fields])))
    except DecodeError:
        return
    assert out is not None and set(out.values) == {f["name"] for f in d.definition["frame"]["fields"]}


@given(
    st.floats(min_value=-89.999, max_value=89.999),
    st.floats(min_value=-179.999, max_value=179.999),
    st.floats(min_value=0, max_value=999.9),
)
def test_position_round_trip(lat: float, lon: float, speed_kn: float) -> None:
    def ddmm(value: float, width: int) -> str:
        deg = int(abs(value))
        return f"{deg:0{width}d}{(abs(value) - deg) * 60:09.6f}"

    body = (
        f"GNRMC,101010.00,A,{ddmm(lat, 2)},{'N' if lat >= 0 else 'S'},{ddmm(lon, 3)},"
        f"{'E' if lon >= 0 else 'W'},{speed_kn:.3f},12.5,010124,,,A"
    )
    out = NmeaDecoder().decode(nmea(body))
    assert out is not None
    assert out.values["lat_deg"] == pytest.approx(lat, abs=1e-7)
    assert out.values["lon_deg"] == pytest.approx(lon, abs=1e-7)
    assert out.values["speed_mps"] == pytest.approx(round(speed_kn, 3) * KNOTS_TO_MPS, abs=1e-9)


def test_values_keys_are_the_definition_fields() -> None:
    d = NmeaDecoder()
    out = d.decode(nmea(RMC))
    assert out is not None
    assert list(out.values) == [f["name"] for f in d.definition["frame"]["fields"]]


def test_definition_is_a_valid_wrtf_schema() -> None:
    from wrtfd.format import Schema

    d = NmeaDecoder()
    schema = Schema.from_dict(d.definition)
    assert schema.frame_dtype.names is not None and schema.frame_dtype.names[0] == "tick"
    assert set(schema.frame_dtype.names[1:]) == set(d.state)
    assert all(f.get("description") for f in d.definition["frame"]["fields"])
