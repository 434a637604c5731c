"""GNSS laps refined live reach the recorder's lap hand-over (lap records, the journal) once each,
with their refined times, the ones still waiting at the session's end included (the plug-in's
``end_session``), and the file's footer has the refined best lap.

The simulated u-blox receiver's NAV-PVT (wrtfd.simulate.gnss, 25 Hz, 1 m of white noise) through
the real decoder, recorded by the real recorder (``Replayer``) with the real plug-in; the oracle
is the simulator's own lap times and the footer read back from the file."""

from __future__ import annotations

from pathlib import Path

from wrtfd.decoders.base import Sample
from wrtfd.decoders.ubx import UbxDecoder, ubx_definition
from wrtfd.format import Reader
from wrtfd.recorder import RecorderPolicy, SourceSpec
from wrtfd.recorder.recorder import Replayer
from wrtfd.simulate.gnss import Drive, GnssErrors, epochs, nav_pvt_frame
from wrtfd.tracks import load_track
from wrtfd.tracks.circuit import circuit_from_track
from wrtfd.tracks.geodesy import track_plane
from wrtfd.tracks.geometry import LanePath
from wrtfd.tracks.gnsslaps import REFINE_LAG_S, GnssLapChannels
from wrtfd.tracks.laps import timing_sectors

ROAD = Path(__file__).resolve().parents[2] / "config" / "tracks" / "road.trk"
UTC0_NS = 1_780_000_000 * 10**9


def test_refined_laps_are_handed_over_once_each_and_the_last_ones_at_the_sessions_end(
    tmp_path: Path,
) -> None:
    track = load_track(ROAD)
    path = LanePath(track)
    plane = track_plane(track.extensions)
    assert plane is not None
    drive = Drive(path, plane, laps=3, seed=2, sectors_m=timing_sectors(track, path))
    errors = GnssErrors(seed=2, noise_m=1.0, tau_s=1e-3)
    decoder = UbxDecoder()
    plug = GnssLapChannels(circuit_from_track(track), source="gps")
    replayer = Replayer(
        [SourceSpec("gps", ubx_definition())],
        RecorderPolicy(output_dir=tmp_path, rate_hz=50),
        start_timestamp_us=1_780_000_000_000_000,
        derived=[plug],
    )
    replayer.recorder.collect_laps = True
    for i, fix in enumerate(epochs(drive, errors, rate_hz=25, utc_start_ns=UTC0_NS)):
        decoded = decoder.decode(nav_pvt_frame(fix))
        assert decoded is not None
        replayer.push(Sample.from_decoded("gps", 1_000_000_000 + i * 40_000_000, decoded))
    # while driving only lap 1 ended a lag before the input's end
    assert drive.laps[1].end_s + REFINE_LAG_S > drive.end_s > drive.laps[0].end_s + REFINE_LAG_S
    (file,) = replayer.finish()
    taken = replayer.recorder.take_laps()
    assert [lap.number for lap, _ in taken] == [1, 2, 3]
    assert all(p is plug for _, p in taken)
    assert [lap for lap, _ in taken] == plug.final_laps == plug.laps
    for (lap, _), shown, want in zip(taken, plug.provisional, drive.laps, strict=True):
        assert lap.time_s != shown.time_s  # refined, not as shown at the line
        assert abs(lap.time_s - want.time_s) < 0.005, (lap, want)
        assert len(lap.sector_times_s) == 3
        for got, true in zip(lap.sector_times_s, want.sector_times_s, strict=True):
            assert abs(got - true) < 0.005, (lap, want)
    with Reader(file) as r:
        (session,) = r.sessions
        assert session.footer is not None
        footer = session.footer["laps"]
    best = min((lap for lap, _ in taken), key=lambda lap: lap.time_s)
    assert int(footer["lap_count"]) == 3 and int(footer["best_lap_number"]) == best.number
    assert int(footer["best_lap_ms"]) == round(best.time_s * 1000)
