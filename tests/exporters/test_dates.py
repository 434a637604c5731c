"""Dates a session's header can claim, against what the dated exports hold."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pytest

from wrtfd.errors import ExportError
from wrtfd.exporters.dates import MAX_DATED_US, check_dated, session_start


def test_the_bounds_are_1970_and_the_last_int64_nanosecond() -> None:
    assert session_start(Path("f"), 0, 0, tz=dt.UTC) == dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    last = session_start(Path("f"), 0, MAX_DATED_US, tz=dt.UTC)
    assert last.year == 2262 and (MAX_DATED_US + 1) * 1000 > 2**63 - 1  # one more us: past int64 ns
    for bad in (-1, MAX_DATED_US + 1, 2**64 - 1):
        with pytest.raises(ExportError, match=r"f: session 3 runs from .* damaged session header"):
            session_start(Path("f"), 3, bad)


def test_a_session_is_refused_by_its_first_or_last_time() -> None:
    check_dated(Path("f"), 0, np.array([], dtype=np.int64))
    check_dated(Path("f"), 0, np.array([0, MAX_DATED_US], dtype=np.int64))
    with pytest.raises(ExportError):
        check_dated(Path("f"), 0, np.array([-5, 10], dtype=np.int64))
    with pytest.raises(ExportError):
        check_dated(Path("f"), 0, np.array([10, 2**63 - 1], dtype=np.int64))


@pytest.fixture(scope="module")
def misdated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three seconds of 10 Hz NAV-PVT fixes recorded, then the session header's start on disk
    set to the year 148108 (as random bytes over a header left one)."""
    from wrtfd.decoders.base import Sample
    from wrtfd.decoders.ubx import UbxDecoder, ubx_definition
    from wrtfd.format import Reader
    from wrtfd.recorder import RecorderPolicy, SourceSpec
    from wrtfd.recorder.recorder import replay
    from wrtfd.simulate.gnss import Drive, GnssErrors, epochs, nav_pvt_frame
    from wrtfd.tracks import LanePath, load_track
    from wrtfd.tracks.geodesy import track_plane

    track = load_track(Path(__file__).parents[2] / "config" / "tracks" / "road.trk")
    plane = track_plane(track.extensions)
    assert plane is not None
    drive = Drive(LanePath(track), plane, laps=1)
    decoder = UbxDecoder()
    samples = []
    for i, fix in enumerate(epochs(drive, GnssErrors(seed=1), rate_hz=10, utc_start_ns=1 << 60)):
        if i == 30:
            break
        decoded = decoder.decode(nav_pvt_frame(fix))
        assert decoded is not None
        samples.append(Sample.from_decoded("gps", 1_000_000_000 + i * 100_000_000, decoded))
    out = tmp_path_factory.mktemp("misdated")
    (file,) = replay(
        samples,
        [SourceSpec("gps", ubx_definition())],
        RecorderPolicy(output_dir=out, rate_hz=10),
        start_timestamp_us=1_780_000_000_000_000,
    )
    bad_us = 4_611_686_018_427_387_904  # 2**62 us: year 148108
    with Reader(file) as r:
        fields = r.sessions[0].header.dtype.fields
        assert fields is not None
        at = r.sessions[0].offset + 8 + fields["start_timestamp"][1]
    data = bytearray(file.read_bytes())
    data[at : at + 8] = bad_us.to_bytes(8, "little")
    file.write_bytes(bytes(data))
    with Reader(file) as r:  # the byte placement, checked by the reader
        assert int(r.sessions[0].header["start_timestamp"]) == bad_us
        assert r.frames(0).size == 30
    return file


@pytest.mark.parametrize("suffix", [".ld", ".mf4", ".mcap", ".vbo", ".gpx"])
def test_an_export_that_dates_frames_refuses_a_misdated_session(
    misdated: Path, tmp_path: Path, suffix: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """One line, exit 2, nothing written (it was a traceback: year out of range, struct.error)."""
    from wrtfd.cli.main import main

    assert main(["export", str(misdated), "-o", str(tmp_path / f"out{suffix}")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not dates an export can hold" in err, err
    assert list(tmp_path.iterdir()) == []


def test_csv_writes_a_misdated_session_as_it_is(misdated: Path, tmp_path: Path) -> None:
    from wrtfd.cli.main import main

    assert main(["export", str(misdated), "-o", str(tmp_path / "out.csv")]) == 0
    assert len((tmp_path / "out.csv").read_text().splitlines()) == 31  # the header and every frame
