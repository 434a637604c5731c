"""NMEA logs imported: every gpsd log's fixes equal gpsd's golden output (as the live serial test
checks them), mixed line endings and hostile lines counted, time going back dropped."""

from __future__ import annotations

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
