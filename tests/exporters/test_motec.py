"""MoTeC .ld/.ldx export, read back by ``ld_reader`` (written from the layout document only)."""

from __future__ import annotations

import datetime as dt
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from tests.exporters.conftest import METADATA, ROAD
from tests.exporters.ld_reader import LdFile, read_ld
from tests.format.samples import write_car_file
from wrtfd.cli.main import main
from wrtfd.exporters.motec import choose_encoding, encode_values
from wrtfd.format import Reader
from wrtfd.format.export import export_leaves
from wrtfd.format.reader import ticks_to_time_us
from wrtfd.format.schema import leaf_column

WHEELS = ("FL", "FR", "RL", "RR")

#: The MoTeC names a Forza source with lap channels must get: name -> (path, factor).
FORZA_NAMES: dict[str, tuple[tuple[str | int, ...], float]] = {
    "Ground Speed": (("forza", "speed"), 1.0),
    "Engine RPM": (("forza", "engine_rpm"), 1.0),
    "Gear": (("forza", "gear"), 1.0),
    "Throttle Pos": (("forza", "accel"), 100 / 255),
    "Brake Pos": (("forza", "brake"), 100 / 255),
    "Clutch Pos": (("forza", "clutch"), 100 / 255),
    "Steering Pos": (("forza", "steer"), 100 / 127),
    "Turbo Boost Pressure": (("forza", "boost"), 1.0),
    "Lap Number": (("laps", "lap_number"), 1.0),
    "Lap Distance": (("laps", "lap_distance"), 1.0),
    "Lap Time": (("laps", "lap_time"), 1.0),
    **{f"Tyre Temp {w}": (("forza", "tire_temp", i), 1.0) for i, w in enumerate(WHEELS)},
    **{f"Susp Pos {w}": (("forza", "suspension_travel_m", i), 1.0) for i, w in enumerate(WHEELS)},
}


def held(values: np.ndarray) -> np.ndarray:
    """NaN/inf replaced by the last finite value before them, 0 before the first (docs/exports.md)."""
    out, last = [], 0.0
    for v in values.tolist():
        last = v if np.isfinite(v) else last
        out.append(last)
    return np.array(out, dtype=values.dtype)


def export(src: Path, out: Path, *args: str) -> None:
    assert main(["export", str(src), "-o", str(out), *args]) == 0


def load(path: Path) -> LdFile:
    return read_ld(path.read_bytes())


def assert_round_trip(got: np.ndarray, want: np.ndarray, precision: float, what: str) -> None:
    """Within the encoding's precision; float channels (precision 0) bit for bit as float32."""
    assert len(got) == len(want), what
    if precision == 0.0:
        assert np.array_equal(got.astype(np.float32), want.astype(np.float32)), what
    else:
        err = np.max(np.abs(got - want)) if len(got) else 0.0
        assert err <= precision * (1 + 1e-9) + 1e-12 * np.max(np.abs(want), initial=0.0), (
            what,
            err,
            precision,
        )


def test_every_forza_channel_round_trips_with_motec_names(forza_road: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.ld"
    export(forza_road, out)
    with Reader(forza_road) as r:
        leaves = [lf for lf in export_leaves(r.schema) if lf.kind != "text"]
        for s in r.sessions:
            ld = load(tmp_path / f"run-s{s.index}.ld")
            frames = r.frames(s.index)
            assert s.dropped_ticks == 0
            by_path = {lf.path: lf for lf in leaves}
            expected: dict[str, tuple[np.ndarray, float]] = {}
            for name, (path, factor) in FORZA_NAMES.items():
                expected[name] = (leaf_column(frames, path).astype(np.float64) * factor, factor)
                by_path.pop(path)
            for path, lf in by_path.items():
                expected[lf.column[:31]] = (
                    leaf_column(frames, path).astype(np.float64),
                    1.0,
                )  # 32-byte field
            assert sorted(c.name for c in ld.channels) == sorted(expected)
            for c in ld.channels:
                want, factor = expected[c.name]
                assert c.count == len(frames) and c.freq_hz == 60
                want = held(want)  # NaN: fields the FM2023 packet lacks
                if factor != 1.0 and c.type_class == 0x07:
                    want = want.astype(np.float32)  # converted floats: float32 of the product
                assert_round_trip(c.physical(), want, c.precision, c.name)
            assert ld.channel("Throttle Pos").unit == "%" and ld.channel("Tyre Temp FL").unit == "F"
            assert ld.channel("Ground Speed").unit == "m/s" and ld.channel("Engine RPM").unit == "rpm"


def test_header_event_venue_vehicle_and_device_fields(forza_road: Path, tmp_path: Path) -> None:
    out = tmp_path / "lap.ld"
    export(forza_road, out, "--session", "1")
    ld = load(out)
    with Reader(forza_road) as r:
        s = r.sessions[1]
        first_us = int(ticks_to_time_us(r.frames(1)["tick"][:1], s.time_base_us, r.rate_hz)[0])
        car = r.metadata["Car"]
        track = r.metadata["Track"]
    start = dt.datetime.fromtimestamp(first_us / 1e6)
    assert (ld.date, ld.time) == (start.strftime("%d/%m/%Y"), start.strftime("%H:%M:%S"))
    assert ld.driver == METADATA["Driver"] and ld.short_comment == METADATA["Comment"]
    assert ld.vehicle == ld.vehicle_id == car and ld.venue == ld.venue_name == track == "Hillside road course"
    assert ld.event_name == METADATA["Event"] and ld.session == METADATA["Session"]
    assert forza_road.name in ld.long_comment
    # what i2 looks for (motec-ld.md): marker, device block, pro-logging word, the event block
    assert ld.marker == 0x40 and ld.device_type == "ADL" and ld.device_version == 420
    assert ld.device_words == (1, 0x4240, 0xF) and ld.pro_logging == 0xC81A4
    assert ld.event_ptr >= 1762 and ld.num_channels == len(ld.channels) > 90
    counters = [c.counter for c in ld.channels]
    assert counters == list(range(counters[0], counters[0] + len(counters)))  # the linked list, in order


def test_gaps_nan_enums_and_text(tmp_path: Path) -> None:
    """Dropped ticks repeat the previous frame; NaN/inf hold the last finite value; enums are
    their numbers; text is not a channel; non-ASCII metadata becomes '?'."""
    src = tmp_path / "car.wrtf"
    write_car_file(src)
    export(src, tmp_path / "car.ld")
    ld0, ld1 = load(tmp_path / "car-s0.ld"), load(tmp_path / "car-s1.ld")
    assert "driver" not in {c.name for c in ld0.channels}
    # session 0: frames at ticks 0, 2, 4, 6, 8 with speeds 0.1, nan, inf, -0.0, 3.4028235e38
    f32 = np.float32
    speed = [f32(0.1)] * 6 + [f32(-0.0)] * 2 + [f32(3.4028235e38)]
    assert np.array_equal(ld0.channel("speed").raw, np.array(speed, dtype=f32))
    assert ld0.channel("speed").count == 9 and ld0.channel("speed").freq_hz == 50
    assert list(ld0.channel("gear").physical()) == [-1, -1, 0, 0, 1, 1, 2, 2, 3]
    assert list(ld0.channel("state").physical()) == [0, 0, 1, 1, 7, 7, 0, 0, 1]
    assert list(ld0.channel("on_track").physical()) == [1, 1, 0, 0, 1, 1, 0, 0, 1]
    assert ld0.channel("gear").size == 2 and ld0.channel("gear").type_class == 0x03
    assert ld0.channel("wheels_3_temperature").physical()[0] == 83.25
    # session 1: no gaps
    assert ld1.channel("speed").count == 5 and ld0.venue == "iracing:track/??"
    assert ld1.venue == "iracing:track/??"


def test_real_gps_positions_and_big_integers(gps_drive: Path, tmp_path: Path) -> None:
    """A real NMEA receiver: float64 degrees as int32 with 7 decimals (about 1 cm), uint64
    microsecond fix times as int32 with negative decimals, 5 Hz samples on a 10 Hz grid."""
    out = tmp_path / "gps.ld"
    export(gps_drive, out)
    ld = load(out)
    with Reader(gps_drive) as r:
        f = r.frames(0)
        ticks = f["tick"].astype(np.int64)
        grid = np.searchsorted(ticks, np.arange(ticks[0], ticks[-1] + 1), side="right") - 1
        assert len(grid) > len(f)  # the capture has holes on this grid
        gps = f["gps"][grid]
    lat, lon = ld.channel("GPS Latitude"), ld.channel("GPS Longitude")
    assert lat.type_class == 0x03 and lat.size == 4 and lat.dec == 7 and lat.precision == 5e-8
    assert_round_trip(lat.physical(), gps["lat_deg"], lat.precision, "lat")
    assert_round_trip(lon.physical(), gps["lon_deg"], lon.precision, "lon")
    fix = ld.channel("gps_fix_time_utc_us")
    assert fix.dec < 0 and fix.size == 4
    assert_round_trip(fix.physical(), gps["fix_time_utc_us"].astype(np.float64), fix.precision, "fix time")
    assert ld.driver == "GPS walker" and ld.channel("GPS Altitude").unit == "m"


def test_ldx_beacons_are_the_lap_crossings(forza_road: Path, tmp_path: Path) -> None:
    out = tmp_path / "lap.ld"
    export(forza_road, out, "--session", "1")
    doc = ET.parse(tmp_path / "lap.ldx").getroot()
    assert doc.tag == "LDXFile" and doc.get("Version") == "1.6"
    (group,) = [g for g in doc.iter("MarkerGroup") if g.get("Name") == "Beacons"]
    beacons = [float(m.get("Time", "nan")) / 1e6 for m in group.iter("Marker")]
    assert all(m.get("ClassName") == "BCN" for m in group.iter("Marker"))
    with Reader(forza_road) as r:
        s = r.sessions[1]
        f = r.frames(1)
        t = (ticks_to_time_us(f["tick"], s.time_base_us, r.rate_hz) - s.time_base_us) / 1e6
        t0 = t[0]
        lap_no = f["laps"]["lap_number"]
        starts = np.flatnonzero(np.diff(lap_no.astype(int)) > 0) + 1
        crossings = t[starts] - f["laps"]["lap_time"][starts] - t0
    assert len(beacons) == len(crossings) == 3  # start of laps 1 and 2, end of lap 2
    assert beacons == pytest.approx(list(crossings), abs=1e-6)
    details = {e.get("Id"): e.get("Value") for e in doc.iter("String")}
    lap_times = np.diff(crossings)
    best = int(np.argmin(lap_times))
    assert details["Total Laps"] == "4"
    assert details["Fastest Lap"] == str(best + 2)  # i2's lap 1 is the out-lap before the first beacon
    minutes, rest = divmod(float(lap_times[best]), 60)
    assert details["Fastest Time"] == f"{int(minutes)}:{rest:06.3f}"


def test_track_redetects_the_same_beacons(forza_road: Path, tmp_path: Path) -> None:
    export(forza_road, tmp_path / "a.ld", "--session", "1")
    export(forza_road, tmp_path / "b.ld", "--session", "1", "--track", str(ROAD))

    def beacons(p: Path) -> list[float]:
        return [float(m.get("Time", "nan")) / 1e6 for m in ET.parse(p).getroot().iter("Marker")]

    a, b = beacons(tmp_path / "a.ldx"), beacons(tmp_path / "b.ldx")
    assert len(a) == len(b) == 3 and b == pytest.approx(a, abs=1 / 60)


def test_laps_json_and_ldx_agree(
    forza_road: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["laps", str(forza_road), "--session", "1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    laps = doc["sessions"][0]["laps"]
    assert [lap["lap"] for lap in laps] == [1, 2]
    assert all(lap["end_s"] - lap["start_s"] == pytest.approx(lap["time_s"]) for lap in laps)
    export(forza_road, tmp_path / "lap.ld", "--session", "1")
    details = {e.get("Id"): e.get("Value") for e in ET.parse(tmp_path / "lap.ldx").getroot().iter("String")}
    best = min(laps, key=lambda lap: lap["time_s"])
    minutes, rest = divmod(best["time_s"], 60)
    assert details["Fastest Time"] == f"{int(minutes)}:{rest:06.3f}"


def test_session_option_and_file_names(
    forza_road: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    export(forza_road, tmp_path / "all.ld")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "all-s0.ld",
        "all-s0.ldx",
        "all-s1.ld",
        "all-s1.ldx",
    ]
    assert main(["export", str(forza_road), "-o", str(tmp_path / "x.ld"), "--session", "5"]) == 2
    assert "no session 5" in capsys.readouterr().err
    assert not (tmp_path / "x.ld").exists()


@settings(max_examples=60, deadline=None)
@given(
    values=arrays(
        np.float64,
        st.integers(1, 50),
        elements=st.floats(-1e300, 1e300, allow_nan=False, allow_infinity=False),
    )
)
def test_float64_encoding_keeps_its_stated_precision(values: np.ndarray) -> None:
    enc = choose_encoding(values, integer=False, exact_float32=False)
    raw = encode_values(values, enc)
    back = raw.astype(np.float64) * 10.0**-enc.dec
    amax = float(np.max(np.abs(values)))
    assert enc.precision <= max(amax * 2.0**-24, 2.0**-150)  # never worse than float32
    assert np.max(np.abs(back - values)) <= enc.precision * (1 + 1e-9) + amax * 1e-15


@settings(max_examples=60, deadline=None)
@given(values=arrays(np.int64, st.integers(1, 50), elements=st.integers(-(2**62), 2**62)))
def test_integer_encoding_is_exact_when_it_fits_and_bounded_when_not(values: np.ndarray) -> None:
    enc = choose_encoding(values, integer=True, exact_float32=False)
    raw = encode_values(values, enc)
    back = raw.astype(np.float64) * 10.0**-enc.dec
    if values.min() >= -(2**31) and values.max() < 2**31:
        assert enc.dec == 0 and np.array_equal(raw.astype(np.int64), values)
    else:
        assert enc.dec < 0 and np.max(np.abs(back - values.astype(np.float64))) <= enc.precision * (1 + 1e-9)


def test_real_forza_capture_with_holes(shared_data: Path, tmp_path: Path) -> None:
    """The real FM2023 capture (it has holes at 60 Hz): every tick of the session is in the .ld,
    a dropped tick repeating the frame before it."""
    import yaml

    from tests.recorder.conftest import START_US
    from tests.recorder.test_forza_capture import SCHEMA, _samples
    from wrtfd.recorder import RecorderPolicy, SourceSpec, replay

    spec = SourceSpec("forza", yaml.safe_load(SCHEMA.read_text()))
    (src,) = replay(
        _samples(shared_data, 0), [spec], RecorderPolicy(output_dir=tmp_path), start_timestamp_us=START_US
    )
    out = tmp_path / "real.ld"
    export(src, out)
    ld = load(out)
    with Reader(src) as r:
        s = r.sessions[0]
        assert s.dropped_ticks > 0
        f = r.frames(0)
        ticks = f["tick"].astype(np.int64)
        grid = np.searchsorted(ticks, np.arange(ticks[0], ticks[-1] + 1), side="right") - 1
        speed = held(f["forza"]["speed"][grid])
        rpm = held(f["forza"]["engine_rpm"][grid])
        stamp = f["forza"]["timestamp_ms"][grid].astype(np.float64)
    assert ld.channel("Ground Speed").count == s.frame_count + s.dropped_ticks
    assert_round_trip(ld.channel("Ground Speed").physical(), speed, 0.0, "speed")
    assert_round_trip(ld.channel("Engine RPM").physical(), rpm, 0.0, "rpm")
    assert_round_trip(ld.channel("forza_timestamp_ms").physical(), stamp, 0.0, "game clock")
