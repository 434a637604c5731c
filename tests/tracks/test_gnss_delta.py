"""The predictive delta of GNSS laps, on the recorder's own frame: a simulated u-blox receiver
(wrtfd.simulate.gnss, 25 Hz NAV-PVT with 1 m of white position noise) drives 5 laps of road.trk, its
frames go through the real UBX decoder into the composed frame of a ``gps`` source plus the GNSS
lap plug-in, one frame every 20 ms (50 Hz: each fix on two frames).

At each line crossing the recorded ``laps.last_delta`` is the lap-time difference to the
session's best lap before it, and ``laps.delta`` on the lap's last frame is within one tick of
it; NaN before there is a reference."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from wrtfd.decoders.ubx import UbxDecoder, ubx_definition
from wrtfd.format import Schema
from wrtfd.recorder.compose import compose_definition
from wrtfd.simulate.gnss import Drive, GnssErrors, epochs, nav_pvt_frame
from wrtfd.tracks import load_track
from wrtfd.tracks.circuit import circuit_from_track
from wrtfd.tracks.geodesy import track_plane
from wrtfd.tracks.geometry import LanePath
from wrtfd.tracks.gnsslaps import VELOCITY_DROPPED, GnssLapChannels, gnss_session_laps
from wrtfd.tracks.laps import Lap, timing_sectors

ROAD = Path(__file__).resolve().parents[2] / "config" / "tracks" / "road.trk"
FRAME_HZ = 50
FIX_HZ = 25
UTC0_NS = 1_780_000_000 * 10**9
#: The seeds of the accuracy tests (seed 10: a 10 Hz lap shown at the line 10.3 ms off).
SEEDS = (0, 1, 2, 3, 10)


@cache
def _drive(seed: int) -> Drive:
    """The car's 5 laps of road.trk on the map (simulated once per seed: a drive is only read)."""
    track = load_track(ROAD)
    path = LanePath(track)
    plane = track_plane(track.extensions)
    assert plane is not None
    return Drive(path, plane, laps=5, seed=seed, sectors_m=timing_sectors(track, path))


def _recorded(plug: GnssLapChannels, seed: int = 3) -> tuple[np.ndarray, Drive]:
    """The frames the recorder would write: (tick, the gps struct, the laps struct)."""
    drive = _drive(seed)
    errors = GnssErrors(seed=seed, noise_m=1.0, tau_s=1e-3)  # white: independent per fix
    schema = Schema.from_dict(compose_definition([("gps", ubx_definition())], [plug]))
    decoder = UbxDecoder()
    fixes = list(epochs(drive, errors, rate_hz=FIX_HZ, utc_start_ns=UTC0_NS))
    frames = np.zeros(len(fixes) * FRAME_HZ // FIX_HZ, dtype=schema.frame_dtype)
    gps_names = frames.dtype["gps"].names or ()
    for i, fix in enumerate(fixes):
        values = decoder.decode(nav_pvt_frame(fix))
        assert values is not None
        for k in range(FRAME_HZ // FIX_HZ):
            j = i * FRAME_HZ // FIX_HZ + k
            row = frames[j]
            row["tick"] = j
            for name, value in values.values.items():
                if name in gps_names:
                    row["gps"][name] = value
            plug.compute(row, j / FRAME_HZ)
    return frames, drive


def test_last_delta_is_the_lap_time_difference_at_each_crossing() -> None:
    # laps final at the line: the reference's time is the time shown at the line
    plug = GnssLapChannels(circuit_from_track(load_track(ROAD)), source="gps", refine_lag_s=None)
    frames, drive = _recorded(plug)
    laps = frames["laps"]
    assert [lap.number for lap in plug.laps] == [lap.number for lap in drive.laps] == [1, 2, 3, 4, 5]
    number = laps["lap_number"].astype(np.int64)
    firsts = np.flatnonzero(np.diff(number) == 1) + 1  # the frame each lap completes on
    assert len(firsts) == 6  # the out-lap's end, then the 5 timed laps
    # nothing to compare with on lap 0 and lap 1 (the default reference is the session's best)
    before = firsts[1]
    assert np.all(np.isnan(laps["delta"][:before])) and np.all(np.isnan(laps["last_delta"][:before]))
    best = plug.laps[0].time_s
    tick_s = 1.0 / FRAME_HZ
    for lap, at in zip(plug.laps[1:], firsts[2:], strict=True):
        want = lap.time_s - best  # the lap driven against the best before it
        got = float(laps["last_delta"][at])
        assert got == pytest.approx(want, abs=1e-5), (lap.number, got, want)  # float32
        # the lap time at the crossing is measured from fixes; the delta on the lap's last frame
        # (held from the last fix before the line) is within one tick of the difference
        # (measured, seeds 0-3: 10 ms at most, from the gap between that fix and the line)
        last_frame = float(laps["delta"][at - 1])
        assert math.isfinite(last_frame)
        assert abs(last_frame - want) <= tick_s, (lap.number, last_frame, want)
        # predicted lap time on the last frame: the lap's own time, within one tick likewise
        assert abs(float(laps["predicted"][at - 1]) - lap.time_s) <= tick_s
        # held until the next crossing
        nxt = firsts[np.searchsorted(firsts, at, side="right")] if at != firsts[-1] else len(frames)
        assert np.all(laps["last_delta"][at:nxt] == laps["last_delta"][at])
        best = min(best, lap.time_s)
    ref = plug.live()["reference"]
    fastest = min(plug.laps, key=lambda lap: lap.time_s)
    assert ref is not None and ref["number"] == fastest.number and ref["origin"] == "session"
    assert ref["time_s"] == pytest.approx(fastest.time_s, abs=1e-3)


def test_the_session_reference_follows_the_refined_laps() -> None:
    """With the refinement (``refine_lag_s``, 60 s: laps 1-3 refined while driving, 4-5 at the
    session's end): the delta at each line is against the reference of the moment, and once the
    laps are refined the reference is the best refined lap, its time the refined time (not the
    time shown at the line) and its trace ending there."""
    plug = GnssLapChannels(circuit_from_track(load_track(ROAD)), source="gps")
    frames, _ = _recorded(plug)
    assert plug.timer is not None and len(plug.timer.refined) == 3  # by the lag alone
    plug.end_session()
    assert [lap.number for lap in plug.final_laps] == [1, 2, 3, 4, 5] and plug.laps == plug.final_laps
    best = min(plug.final_laps, key=lambda lap: lap.time_s)
    shown = next(lap for lap in plug.provisional if lap.number == best.number)
    assert shown.time_s != best.time_s
    ref = plug.delta.reference
    assert ref is not None and ref.number == best.number and ref.origin == "session"
    assert ref.lap_time_s == best.time_s  # the fix clock's lap time; the session's differs by float rounding
    assert ref.time_at(ref.length_m) == best.time_s
    assert ref.length_m == pytest.approx(plug.timer.refined_distances_m[best.number])
    # the trace: time against distance from the refined crossing, which moved along the path by
    # its few milliseconds and centimetres: inside the lap within those of the one timed from the
    # line (its start shift in time, here 2.6 ms, less the distance's at the local speed)
    kept = plug.timer.trace(best.number)
    assert kept is not None
    start_shift = abs(shown.start_s - best.start_s)
    assert 0.0 < start_shift < 0.005
    for d in np.linspace(100.0, ref.length_m - 100.0, 7):
        assert abs(ref.time_at(d) - float(np.interp(d, kept[0], kept[1]))) < start_shift, d
    live = plug.live()
    assert live["reference"]["time_s"] == round(best.time_s, 3) and live["best"]["final"]
    # the delta recorded at each line: the lap shown at the line against the reference then
    number = frames["laps"]["lap_number"].astype(np.int64)
    firsts = np.flatnonzero(np.diff(number) == 1) + 1
    for lap, at in zip(plug.provisional[1:], firsts[2:], strict=True):
        got = float(frames["laps"]["last_delta"][at])
        before = [x.time_s for x in plug.provisional[: lap.number - 1]]
        refined = [x.time_s for x in plug.final_laps[: lap.number - 1]]
        # the reference's time is one of the laps before, as shown or refined
        assert min(abs(lap.time_s - t - got) for t in before + refined) < 1e-5, (lap.number, got)


def test_a_new_session_and_a_new_line_forget_the_session_reference() -> None:
    plug = GnssLapChannels(circuit_from_track(load_track(ROAD)), source="gps")
    _recorded(plug)
    assert plug.delta.reference is not None
    plug.start_session()
    assert plug.delta.reference is None and math.isnan(plug.delta.last_delta_s)
    _recorded(plug)
    assert plug.circuit is not None and plug.delta.reference is not None
    plug.use(plug.circuit)  # a line laid by a mark: laps to another line
    assert plug.delta.reference is None


@cache
def _session(rate_hz: int, seed: int, noise_m: float = 1.0) -> tuple[np.ndarray, np.ndarray, Drive]:
    """5 laps of NAV-PVT at ``rate_hz`` with ``noise_m`` of white noise per fix (independent: the error's
    time constant a thousandth of a second) and the receiver's few cm/s on the velocity, decoded
    into the frames of a recording of one ``gps`` source, with their session times."""
    drive = _drive(seed)
    errors = GnssErrors(seed=seed, noise_m=noise_m, tau_s=1e-3)
    schema = Schema.from_dict(compose_definition([("gps", ubx_definition())]))
    decoder = UbxDecoder()
    fixes = list(epochs(drive, errors, rate_hz=rate_hz, utc_start_ns=UTC0_NS))
    frames = np.zeros(len(fixes), dtype=schema.frame_dtype)
    names = frames.dtype["gps"].names or ()
    columns: dict[str, list[object]] = {name: [] for name in names}
    for fix in fixes:
        decoded = decoder.decode(nav_pvt_frame(fix))
        assert decoded is not None
        assert set(decoded.values) >= set(names)  # every field of the struct, on every fix
        for name in names:
            columns[name].append(decoded.values[name])
    frames["tick"] = np.arange(len(fixes))
    for name, column in columns.items():
        frames["gps"][name] = column  # cast as a row's assignment casts
    times = np.array([(fix.utc_ns - UTC0_NS) / 1e9 for fix in fixes])
    return frames, times, drive


@cache
def _timed(rate_hz: int, seed: int, noise_m: float, smooth: bool) -> tuple[list[Lap], GnssLapChannels, Drive]:
    """The laps of :func:`_session` timed by the plug-in (once: the tests only read them)."""
    frames, times, drive = _session(rate_hz, seed, noise_m)
    laps, plug = gnss_session_laps(frames, times, circuit_from_track(load_track(ROAD)), smooth=smooth)
    return laps, plug, drive


def _errors_ms(
    rate_hz: int,
    *,
    smooth: bool,
    noise_m: float = 1.0,
    provisional: bool = False,
    seeds: Sequence[int] = SEEDS,
) -> tuple[list[float], list[float]]:
    """Lap and sector errors (ms) over ``seeds`` (5 laps, 15 sectors each), every lap counted once
    and every sector line crossed once a lap. Live (``smooth=False``): the laps refined
    ``refine_lag_s`` later, or with ``provisional`` as shown at the line."""
    laps_ms: list[float] = []
    sectors_ms: list[float] = []
    for seed in seeds:
        laps, plug, drive = _timed(rate_hz, seed, noise_m, smooth)
        if provisional:
            laps = plug.provisional
        assert [lap.number for lap in laps] == [lap.number for lap in drive.laps] == [1, 2, 3, 4, 5]
        for got, want in zip(laps, drive.laps, strict=True):
            laps_ms.append(abs(got.time_s - want.time_s) * 1000)
            assert len(got.sector_times_s) == len(want.sector_times_s) == 3
            sectors_ms += [
                abs(a - b) * 1000 for a, b in zip(got.sector_times_s, want.sector_times_s, strict=True)
            ]
    return laps_ms, sectors_ms


@pytest.mark.parametrize(("rate_hz", "bound_ms"), [(10, 10.0), (25, 5.0)])
def test_after_the_session_every_lap_and_sector_within_the_issue_bounds(
    rate_hz: int, bound_ms: float
) -> None:
    """``wrtfd laps`` (fixes smoothed both ways): every lap and every sector time the car's own
    within 10 ms at 10 Hz, 5 ms at 25 Hz (measured over seeds 0-11: see docs/circuits.md)."""
    laps_ms, sectors_ms = _errors_ms(rate_hz, smooth=True)
    assert max(laps_ms) < bound_ms, laps_ms
    assert max(sectors_ms) < bound_ms, sectors_ms


@pytest.mark.parametrize(("rate_hz", "bound_ms"), [(10, 10.0), (25, 5.0)])
def test_live_refined_every_lap_and_sector_within_the_issue_bounds(rate_hz: int, bound_ms: float) -> None:
    """Live, each lap refined ``refine_lag_s`` (60 s) of fixes after its lines: every lap and
    sector within the issue's bounds, where the laps as shown at the line are not (the seeds
    include one of those: seed 10 at 10 Hz, a lap 10.3 ms off; at 25 Hz laps 6.6 ms, sectors
    7.6 ms off). Seeds 0-11: docs/circuits.md."""
    laps_ms, sectors_ms = _errors_ms(rate_hz, smooth=False)
    assert max(laps_ms) < bound_ms, laps_ms
    assert max(sectors_ms) < bound_ms, sectors_ms
    at_line = _errors_ms(rate_hz, smooth=False, provisional=True)
    assert max(max(at_line[0]), max(at_line[1])) > bound_ms  # what the refinement mends


@pytest.mark.parametrize("rate_hz", [10, 25])
def test_refined_laps_add_up_to_the_session(rate_hz: int) -> None:
    """Each crossing is refined once: a refined lap starts where the one before ended, so the lap
    times add up to the time from the first crossing to the last; the sectors add up to the lap.
    The records (``final_laps``) are the page's laps, each once, in order."""
    for seed in SEEDS:
        laps, plug, _ = _timed(rate_hz, seed, 1.0, False)
        assert plug.final_laps == laps and [lap.number for lap in laps] == [1, 2, 3, 4, 5]
        assert laps != plug.provisional  # refined: every lap moved by some microseconds at least
        for before, after in pairwise(laps):
            assert after.start_s == before.end_s
        assert math.fsum(lap.time_s for lap in laps) == pytest.approx(
            laps[-1].end_s - laps[0].start_s, abs=1e-9
        )
        for lap in laps:
            assert math.fsum(lap.sector_times_s) == pytest.approx(lap.time_s, abs=1e-9)
        assert all(lap["final"] for lap in (plug.live()["last"], plug.live()["best"]))


@pytest.mark.parametrize(("rate_hz", "worst_ms"), [(10, 12.0), (25, 10.0)])
def test_live_lap_times_with_1m_noise(rate_hz: int, worst_ms: float) -> None:
    """Live, as shown at the line (the filter forward only): every lap counted once; the mean
    error within the issue's bound, the worst lap or sector not (measured in docs/circuits.md)."""
    laps_ms, sectors_ms = _errors_ms(rate_hz, smooth=False, provisional=True)
    bound = 10.0 if rate_hz == 10 else 5.0
    assert np.mean(laps_ms) < bound and np.mean(sectors_ms) < bound
    assert max(laps_ms) < worst_ms and max(sectors_ms) < worst_ms


@pytest.mark.parametrize("how", ["at the line", "refined", "smoothed"])
@pytest.mark.parametrize("rate_hz", [10, 25])
def test_3m_white_noise_counts_every_lap_and_sector_once(rate_hz: int, how: str) -> None:
    """3 m of white noise per fix, live (as shown at the line, and refined) and after the session:
    no lap counted twice or missed, every sector line crossed once a lap (the times: measured in
    docs/circuits.md)."""
    laps_ms, sectors_ms = _errors_ms(
        rate_hz, smooth=how == "smoothed", noise_m=3.0, provisional=how == "at the line", seeds=(0, 1, 2, 3)
    )
    assert max(laps_ms) < 50.0 and max(sectors_ms) < 50.0


def test_a_lost_fix_refines_the_crossings_before_it_and_memory_stays_bounded() -> None:
    """3 s without a fix 5 s after lap 2's line (the filter starts again): laps 1 and 2 are
    refined at the next fix, with the fixes there were, not 60 s later; lap 3 is abandoned, the
    laps after it are timed, and refined at the session's end with what there is. The filter
    states kept never exceed the lag's fixes (60 s at 25 Hz) and a few."""
    from wrtfd.tracks.gnsslaps import DOPPLER_VELOCITY_NOISE_MPS, REFINE_LAG_S, timer_for

    frames, _, drive = _session(25, 0)
    timer, plane = timer_for(
        circuit_from_track(load_track(ROAD)),
        velocity_noise_mps=DOPPLER_VELOCITY_NOISE_MPS,
        refine_lag_s=REFINE_LAG_S,  # the plug-in's default (the bare timer's is off)
    )
    gps = frames["gps"]
    t = gps["fix_time_utc_us"].astype(np.float64) / 1e6
    x, y = plane.to_xy(gps["lat_deg"].astype(np.float64), gps["lon_deg"].astype(np.float64))
    lap2_end = UTC0_NS / 1e9 + drive.laps[1].end_s  # the fix clock is the drive's from UTC0_NS
    gap = (t > lap2_end + 5.0) & (t < lap2_end + 8.0)
    refined_at: dict[int, float] = {}
    most = 0
    for k in np.flatnonzero(~gap):
        timer.update(
            float(t[k]), float(x[k]), float(y[k]), float(gps["vel_e_mps"][k]), float(gps["vel_n_mps"][k])
        )
        for lap in timer.refined:
            refined_at.setdefault(lap.number, float(t[k]))
        most = max(most, len(timer._buf))
    assert timer.resets == 1
    # lap 1's end crossing (its lag not yet over) and lap 2's: at the first fix after the gap
    restart = float(t[np.flatnonzero(t >= lap2_end + 8.0)[0]])
    assert refined_at[1] == refined_at[2] == restart < timer.laps[0].end_s + REFINE_LAG_S
    assert [lap.number for lap in timer.laps] == [1, 2, 4, 5]  # lap 3: abandoned at the gap
    assert list(refined_at) == [1, 2]  # 4 and 5 end less than the lag before the session
    timer.finish()
    assert [lap.number for lap in timer.refined] == [1, 2, 4, 5]
    assert most <= REFINE_LAG_S * 25 + 10, most


def _turned(frames: np.ndarray, scale: float, degrees: float) -> np.ndarray:
    """The session's frames with the receiver's velocity scaled and turned (a copy)."""
    out = frames.copy()
    gps = out["gps"]
    ve, vn = gps["vel_e_mps"].astype(np.float64), gps["vel_n_mps"].astype(np.float64)
    a = math.radians(degrees)
    gps["vel_e_mps"] = scale * (ve * math.cos(a) - vn * math.sin(a))
    gps["vel_n_mps"] = scale * (ve * math.sin(a) + vn * math.cos(a))
    return out


@pytest.mark.parametrize("smooth", [False, True])
@pytest.mark.parametrize(("scale", "degrees"), [(1.2, 0.0), (0.8, 0.0), (1.0, 10.0)])
def test_a_velocity_wrong_all_the_time_is_dropped_and_the_laps_timed_from_the_fixes(
    scale: float, degrees: float, smooth: bool
) -> None:
    """A receiver whose velocity is 20 % off, or turned 10 degrees, led the filter (which
    trusts NAV-PVT's velocity to 3 cm/s) far from the fixes: before, every lap was lost (or
    timed 1.2 s off). Now the filter's mean disagreement with the fixes restarts it, and after
    three restarts the velocity is ignored for the session: the lap in progress then is
    abandoned (it was timed from a filter led astray), the later ones are exactly the laps of the
    same fixes without any velocity, live and after the session alike."""
    frames, times, drive = _session(10, 0)
    circuit = circuit_from_track(load_track(ROAD))
    told: list[tuple[str, str]] = []  # what the daemon's journal is told (a source line)
    laps, plug = gnss_session_laps(
        _turned(frames, scale, degrees),
        times,
        circuit,
        smooth=smooth,
        on_pick=lambda c, how: told.append((c.name, how)),
    )
    assert plug.timer is not None and plug.timer.velocity_ignored
    assert told == [(circuit.name, VELOCITY_DROPPED)] and plug.live()["velocity_ignored"] is True
    no_velocity = frames.copy()
    no_velocity["gps"]["vel_e_mps"] = no_velocity["gps"]["vel_n_mps"] = np.nan
    reference, _ = gnss_session_laps(no_velocity, times, circuit, smooth=smooth)
    assert [lap.number for lap in laps] == [2, 3, 4, 5]
    assert [lap.time_s for lap in laps] == [lap.time_s for lap in reference[1:]]
    for lap in laps:  # the fixes alone at 10 Hz with 1 m of noise (docs/circuits.md)
        assert abs(lap.time_s - drive.laps[lap.number - 1].time_s) < 0.1


@pytest.mark.parametrize(("scale", "degrees"), [(1.05, 0.0), (1.1, 0.0), (1.0, 3.0)])
def test_a_velocity_a_little_off_is_kept(scale: float, degrees: float) -> None:
    """A few % or degrees off moves the filter along the track, where both lines of a lap move
    alike: the laps were timed before, and the velocity is kept (the same laps as before)."""
    frames, times, _ = _session(10, 0)
    circuit = circuit_from_track(load_track(ROAD))
    laps, plug = gnss_session_laps(_turned(frames, scale, degrees), times, circuit, smooth=False)
    assert plug.timer is not None and plug.live()["velocity_ignored"] is False
    assert (plug.timer.velocity_ignored, plug.timer.velocity_restarts, len(laps)) == (False, 0, 5)


@pytest.mark.parametrize("noise_m", [1.0, 3.0])
@pytest.mark.parametrize("rate_hz", [10, 25])
def test_a_right_velocity_is_never_taken_for_a_wrong_one(rate_hz: int, noise_m: float) -> None:
    """White noise of any size averages out of the filter's mean disagreement with the fixes:
    over 4 sessions of 5 laps the filter never restarted on the velocity."""
    circuit = circuit_from_track(load_track(ROAD))
    for seed in (0, 1, 2, 3):
        frames, times, _ = _session(rate_hz, seed, noise_m)
        laps, plug = gnss_session_laps(frames, times, circuit, smooth=False)
        assert plug.timer is not None
        assert (plug.timer.velocity_restarts, len(laps)) == (0, 5), seed
