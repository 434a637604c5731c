"""NMEA logs imported: every gpsd log's fixes equal gpsd's golden output (as the live serial test
checks them), mixed line endings and hostile lines counted, time going back dropped."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.importers.frames import assert_same_frames
from tests.sources.gpsd_golden import check_against_gpsd, gpsd_expectations
from wrtfd.cli.main import main
from wrtfd.errors import ImportFormatError
from wrtfd.format import Reader
from wrtfd.importers.nmea_log import import_nmea_log, receiver_rate_hz

NMEA_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "nmea"
LOGS = sorted(p.name for p in NMEA_DIR.glob("*.log")) if NMEA_DIR.is_dir() else []


def fixes_by_time(path: Path) -> tuple[dict[int, dict[str, object]], frozenset[str]]:
    """Fix time (ns) -> the gps channels of the last frame with that time, over every session;
    and the channels the file stores as float32."""
    out: dict[int, dict[str, object]] = {}
    float32: set[str] = set()
    with Reader(path) as r:
        for i in range(len(r.sessions)):
            gps = np.array(r.frames(i)["gps"])
            float32 |= {n for n in gps.dtype.names or () if gps.dtype[n] == np.float32}
            for row in gps:
                values = {name: row[name].item() for name in gps.dtype.names or ()}
                out[int(row["fix_time_utc_us"]) * 1000] = values
    return out, frozenset(float32)


@pytest.mark.parametrize("log_name", LOGS)
def test_gpsd_log_import_matches_golden(shared_data: Path, tmp_path: Path, log_name: str) -> None:
    log = shared_data / "nmea" / log_name
    out = tmp_path / "gps.wrtf"
    assert main(["import", str(log), "-o", str(out)]) == 0
    by_time, float32 = fixes_by_time(out)
    assert "alt_msl_m" in float32
    # The import drops what is stamped before a time already recorded (a receiver stepping its
    # clock back: telit-he910 goes from 10:51:53.71 to 53.408); gpsd reports those epochs.
    reports, _echoed = gpsd_expectations(Path(f"{log}.chk"))
    went_back, newest = set(), 0
    for t, _tpv, _final in reports:
        if t < newest:
            went_back.add(t)
        newest = max(newest, t)
    assert bool(went_back) == (log_name == "telit-he910.log")
    check_against_gpsd(log_name, Path(f"{log}.chk"), by_time, float32, frozenset(went_back))


def test_mixed_endings_bad_checksums_and_time_going_back(shared_data: Path, tmp_path: Path) -> None:
    lines = [
        ln for ln in (shared_data / "nmea" / "bu353s4.log").read_bytes().splitlines() if ln.startswith(b"$")
    ]
    endings = [b"\n", b"\r\n", b"\r"]
    body = b"".join(ln + endings[i % 3] for i, ln in enumerate(lines))
    replayed = b"".join(ln + b"\n" for ln in lines[:20])  # an earlier stretch again: time goes back
    broken = lines[5][:-2] + b"00\n"  # a bad checksum
    log = tmp_path / "mixed.log"
    log.write_bytes(
        b"# a comment\n\n2021-01-01T00:00:00Z " + body + replayed + broken + b"$$" + lines[6][1:] + b"\n"
    )
    out = tmp_path / "m.wrtf"
    report = import_nmea_log(log, out)
    assert report.dropped["time_went_back"] > 0
    assert report.dropped["bad_checksum"] >= 1
    assert report.read == report.samples + sum(report.dropped.values())
    reference = tmp_path / "r.wrtf"
    import_nmea_log(shared_data / "nmea" / "bu353s4.log", reference)
    with Reader(out) as a, Reader(reference) as b:
        assert assert_same_frames(np.array(a.frames(0)), np.array(b.frames(0))) > 10


def test_receiver_rate() -> None:
    assert receiver_rate_hz([0, 200_000_000, 400_000_000, 600_000_000]) == 5
    assert receiver_rate_hz([0, 10**9, 2 * 10**9, 10 * 10**9]) == 1
    assert receiver_rate_hz([5]) == 1
    # 1 Hz with a 2 Hz stretch: the fastest sustained step decides, not the median
    assert (
        receiver_rate_hz([k * 10**9 for k in range(10)] + [int(9.5e9), 10**10, int(10.5e9), 11 * 10**9]) == 2
    )
    # one short step is a glitch, three of them a rate
    assert receiver_rate_hz([0, 10**9, int(1.1e9), int(2.1e9), int(3.1e9)]) == 1
    assert receiver_rate_hz([0, 50_000_000, 110_000_000, 160_000_000, 220_000_000, 270_000_000]) == 20


def test_no_dated_fix_is_an_error(tmp_path: Path) -> None:
    log = tmp_path / "undated.log"
    log.write_bytes(b"$GPGGA,123519,4807.038,N,01131.000,E,1,08,0.9,545.4,M,46.9,M,,*47\r\n" * 3)
    with pytest.raises(ImportFormatError, match="nothing to import"):
        import_nmea_log(log, tmp_path / "o.wrtf")
    assert not (tmp_path / "o.wrtf").exists()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.binary(max_size=90) | st.sampled_from([b"$GPRMC,", b"$$", b"!AIVDM,1", b"\r", b"#"]), max_size=30
    )
)
def test_fuzz_nmea_log(shared_data: Path, tmp_path: Path, junk: list[bytes]) -> None:
    """A real log with hostile lines in between: the import only raises ImportFormatError, and
    every line is either a sample or counted."""
    lines = (shared_data / "nmea" / "bu353s4.log").read_bytes().splitlines()[:60]
    mixed = [x for pair in zip(lines, [*junk, *[b""] * 60], strict=False) for x in pair]
    log = tmp_path / "f.log"
    log.write_bytes(b"\n".join(mixed) + b"\n")
    try:
        report = import_nmea_log(log, tmp_path / "f.wrtf", force=True)
    except ImportFormatError:
        return
    assert report.read == report.samples + sum(report.dropped.values())


def _nmea(body: str) -> bytes:
    """A sentence with its checksum: XOR of the bytes between ``$`` and ``*`` (NMEA 0183)."""
    checksum = 0
    for byte in body.encode():
        checksum ^= byte
    return f"${body}*{checksum:02X}\r\n".encode()


def _rmc(t_s: float, lat: float, lon: float, speed_kn: float) -> bytes:
    """An RMC of 2024-06-01 at ``t_s`` seconds of the day (hundredths), north/east degrees."""
    cs = round(t_s * 100)
    hh, mm, ss = cs // 360000, cs // 6000 % 60, cs % 6000
    lat_dm = f"{int(lat):02d}{(lat - int(lat)) * 60:08.5f}"
    lon_dm = f"{int(lon):03d}{(lon - int(lon)) * 60:08.5f}"
    hhmmss = f"{hh:02d}{mm:02d}{ss // 100:02d}.{ss % 100:02d}"
    return _nmea(f"GPRMC,{hhmmss},A,{lat_dm},N,{lon_dm},E,{speed_kn:.2f},90.00,010624,,,A")


def _switching_log() -> tuple[bytes, list[tuple[int, float, float, float]]]:
    """20 s at 1 Hz, 10 s at 2 Hz, 10 s at 1 Hz (the median step is 1 s); every epoch's expected
    (fix time us, lat, lon, speed m/s), computed here from what the sentence says."""
    times = (
        [43200 + i for i in range(20)] + [43220 + i / 2 for i in range(20)] + [43230 + i for i in range(10)]
    )
    log, epochs = b"", []
    for n, t in enumerate(times):
        lat = 48.1 + round(n * 0.0001, 5)
        lon = 11.5 + round(n * 0.0002, 5)
        speed_kn = 20.0 + n
        log += _rmc(t, lat, lon, speed_kn)
        day_us = 1717200000 * 1_000_000  # 2024-06-01 00:00 UTC
        epochs.append((day_us + round(t * 1e6), lat, lon, speed_kn * 1852 / 3600))
    return log, epochs


def _frames(path: Path) -> np.ndarray:
    with Reader(path) as r:
        return np.concatenate([np.array(r.frames(i)["gps"]) for i in range(len(r.sessions))])


def test_a_log_that_changes_rate_gives_every_epoch_its_own_tick(tmp_path: Path) -> None:
    log, epochs = _switching_log()
    (tmp_path / "switch.log").write_bytes(log)
    out = tmp_path / "switch.wrtf"
    report = import_nmea_log(tmp_path / "switch.log", out)
    with Reader(out) as r:
        assert r.rate_hz == 2
    gps = _frames(out)
    assert [int(v) for v in gps["fix_time_utc_us"]] == [e[0] for e in epochs]
    np.testing.assert_allclose(gps["lat_deg"], [e[1] for e in epochs], rtol=0, atol=1e-9)
    np.testing.assert_allclose(gps["lon_deg"], [e[2] for e in epochs], rtol=0, atol=1e-9)
    np.testing.assert_allclose(gps["speed_mps"], [e[3] for e in epochs], rtol=1e-6)
    assert not report.notes


def test_epochs_that_share_a_tick_are_counted(tmp_path: Path) -> None:
    """``--rate 1`` on the log above: the 2 Hz stretch's epochs pair up in ticks; the note
    counts the ones overwritten. Tick 0 is centred on the first fix (docs/timing.md)."""
    log, epochs = _switching_log()
    (tmp_path / "switch.log").write_bytes(log)
    out = tmp_path / "one.wrtf"
    report = import_nmea_log(tmp_path / "switch.log", out, rate_hz=1)
    first = epochs[0][0]
    ticks = [(t - first + 500_000) // 1_000_000 for t, *_ in epochs]
    merged = len(ticks) - len(set(ticks))
    assert merged == 10
    assert len(_frames(out)) == len(epochs) - merged
    assert [n for n in report.notes if f"{merged} fix epochs shared a tick" in n], report.notes


def test_irregular_kart_log_at_14_hz(shared_data: Path, tmp_path: Path) -> None:
    """DovesLapTimer's kart log: RMC only, ~14 Hz with 50-280 ms steps, each sentence a C
    string (``"$GPRMC,...*02",``). Every fix is a frame of its own, its position the sentence's
    own, read here with a plain regular expression."""
    src = shared_data / "trackday" / "nmea" / "DovesLapTimer__gps_race_data_praga_laps.h"
    text = src.read_text()
    fixes: dict[int, tuple[float, float]] = {}
    for m in re.finditer(
        r"\$GPRMC,(\d\d)(\d\d)(\d\d)\.(\d\d\d),A,(\d\d)([\d.]+),N,(\d\d\d)([\d.]+),W,", text
    ):
        hh, mm, ss, ms, la, lam, lo, lom = m.groups()
        t_us = 1685232000 * 1_000_000 + ((int(hh) * 60 + int(mm)) * 60 + int(ss)) * 1_000_000 + int(ms) * 1000
        fixes[t_us] = (int(la) + float(lam) / 60, -(int(lo) + float(lom) / 60))  # 2023-05-28
    assert len(fixes) == text.count("$GPRMC") == 1822
    out = tmp_path / "kart.wrtf"
    assert main(["import", str(src), "--format", "nmea", "-o", str(out)]) == 0
    with Reader(out) as r:
        assert r.rate_hz == 20  # the shortest step, 50 ms
    gps = _frames(out)
    assert [int(v) for v in gps["fix_time_utc_us"]] == sorted(fixes)
    expected = np.array([fixes[t] for t in sorted(fixes)])
    np.testing.assert_allclose(gps["lat_deg"], expected[:, 0], rtol=0, atol=1e-9)
    np.testing.assert_allclose(gps["lon_deg"], expected[:, 1], rtol=0, atol=1e-9)
