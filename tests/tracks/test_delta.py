"""The predictive delta (:mod:`wrtfd.tracks.delta`) against laps whose time at every distance is
known in closed form: the car's progress is a piecewise-linear function of time built here, the
real lap detector times it from tick samples, and the delta is checked against the lap times
the test itself computed (not the detector's)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wrtfd.errors import FormatError, TrackError
from wrtfd.tracks import LanePath, load_track
from wrtfd.tracks.delta import PredictiveDelta, Reference, parse_reference
from wrtfd.tracks.laps import LapDetector

OVAL = Path(__file__).resolve().parents[2] / "config" / "tracks" / "oval.trk"


@dataclass
class Drive:
    """A car's progress (metres from the line, unwrapped) as knots of (time, progress)."""

    length_m: float
    t: list[float] = field(default_factory=lambda: [0.0])
    p: list[float] = field(default_factory=lambda: [0.0])
    lap_times: list[float] = field(default_factory=list)  # of the laps after the first crossing

    def run_up(self, distance_m: float, speed: float) -> None:
        """Start ``distance_m`` before the line (progress negative), arriving at 0."""
        self.t = [0.0, distance_m / speed]
        self.p = [-distance_m, 0.0]

    def lap(self, speeds: list[float]) -> None:
        """One lap in ``len(speeds)`` equal parts, each at its constant speed (m/s)."""
        part = self.length_m / len(speeds)
        start_t = self.t[-1]
        for v in speeds:
            self.t.append(self.t[-1] + part / v)
            self.p.append(self.p[-1] + part)
        self.lap_times.append(self.t[-1] - start_t)

    def time_at(self, lap: int, distance_m: float) -> float:
        """Exact lap time of lap ``lap`` (1-based) at ``distance_m``."""
        base = np.interp((lap - 1) * self.length_m, self.p, self.t)
        return float(np.interp((lap - 1) * self.length_m + distance_m, self.p, self.t) - base)


@dataclass
class Tick:
    lap: int
    distance_m: float
    lap_time_s: float
    delta_s: float
    predicted_s: float
    last_delta_s: float
    completed: float | None  # the lap time the detector timed on this tick


def feed(drive: Drive, rate_hz: float, phase: float = 0.37, **kw: float) -> list[Tick]:
    """Tick samples of the drive through the real lap detector and a PredictiveDelta, wired as
    the lap channels do it."""
    length = drive.length_m
    path = LanePath(load_track(OVAL))
    det = LapDetector(path, max_speed_mps=1e6, min_jump_m=1e9)
    det.length_m = length  # the detector only uses the length for update_distance
    delta = PredictiveDelta(length_m=length, **kw)  # type: ignore[arg-type]
    out = []
    times = np.arange(phase / rate_hz, drive.t[-1], 1 / rate_hz)
    progress = np.interp(times, drive.t, drive.p)
    for t, p in zip(times, progress, strict=True):
        st_ = det.update_distance(float(t), float(p % length))
        if st_.completed is not None:
            delta.complete(st_.completed.number, st_.completed.time_s)
        delta.update(st_.lap, st_.lap_distance_m, st_.lap_time_s)
        done = st_.completed.time_s if st_.completed is not None else None
        out.append(
            Tick(
                st_.lap,
                st_.lap_distance_m,
                st_.lap_time_s,
                delta.delta_s,
                delta.predicted_s,
                delta.last_delta_s,
                done,
            )
        )
    return out


def test_constant_speed_pair_exact_numbers() -> None:
    """1000 m laps: lap 1 at 40 m/s (25 s), lap 2 at 50 m/s (20 s), lap 3 at 40 m/s again."""
    drive = Drive(1000.0)
    drive.run_up(100.0, 40.0)
    for v in (40.0, 50.0, 40.0, 45.0):
        drive.lap([v])
    ticks = feed(drive, 60.0, phase=0.0)  # samples on the crossings: the detector times them exactly
    tick = 1 / 60
    # lap 1: no reference yet
    assert all(math.isnan(x.delta_s) for x in ticks if x.lap <= 1)
    # lap 2 against lap 1 (40 m/s): d = 50 t, t_ref = d/40: delta = -d/200 = -t/4 exactly (by
    # lap time: the sample on the line has distance 0 or 1000 as the rounding goes)
    lap2 = [x for x in ticks if x.lap == 2]
    for x in lap2:
        assert x.delta_s == pytest.approx(-x.lap_time_s / 4.0, abs=1e-9)
        assert x.predicted_s == pytest.approx(25.0 - x.lap_time_s / 4.0, abs=1e-9)
    # the crossing ending lap 2: last delta = 20 - 25 exactly (the detector interpolates a
    # constant speed exactly), and the last sample of the lap is within a tick of it
    end2 = next(i for i, x in enumerate(ticks) if x.completed is not None and x.lap == 3)
    assert ticks[end2].completed == pytest.approx(20.0, abs=1e-9)
    assert ticks[end2].last_delta_s == pytest.approx(-5.0, abs=1e-9)
    assert abs(ticks[end2 - 1].delta_s - (-5.0)) < tick
    # lap 3 against lap 2 (the best so far, 50 m/s): delta = d/40 - d/50 = +d/200, slower = positive
    lap3 = [x for x in ticks if x.lap == 3]
    assert all(x.delta_s > 0 for x in lap3 if x.distance_m > 1.0)
    for x in lap3:
        assert x.delta_s == pytest.approx(x.lap_time_s / 5.0, abs=1e-9)  # d = 40 t
    end3 = next(i for i, x in enumerate(ticks) if x.completed is not None and x.lap == 4)
    assert ticks[end3].last_delta_s == pytest.approx(25.0 - 20.0, abs=1e-9)
    assert abs(ticks[end3 - 1].delta_s - 5.0) < tick
    assert abs(ticks[end3 - 1].predicted_s - 25.0) < tick
    # lap 4 (45 m/s) still against lap 2: lap 3 was slower and did not replace it
    lap4 = [x for x in ticks if x.lap == 4]
    assert lap4[-1].delta_s == pytest.approx(lap4[-1].lap_time_s / 10.0, abs=1e-9)  # d = 45 t


def test_reference_trace_is_closed_at_the_line() -> None:
    """A reference whose last sample is well short of the line still ends at (length, lap time):
    the delta at the line is the lap-time difference, not the difference at the last sample."""
    ref = Reference.from_samples([10.0, 500.0, 950.0], [0.5, 25.0, 47.5], lap_time_s=50.0, length_m=1000.0)
    assert ref.time_at(0.0) == 0.0
    assert ref.time_at(1000.0) == 50.0
    assert ref.time_at(999.999) == pytest.approx(50.0 - 0.001 * 2.5 / 50.0, abs=1e-9)
    assert ref.time_at(975.0) == pytest.approx(48.75, abs=1e-12)
    assert ref.time_at(5.0) == pytest.approx(0.25, abs=1e-12)
    assert ref.time_at(1500.0) == 50.0  # past the line: the lap time
    assert len(ref.times_s) == 1001  # 0..999 m and the line


def test_grid_not_a_multiple_of_the_length() -> None:
    ref = Reference.from_samples([3.0, 7.0], [3.0, 7.0], lap_time_s=10.5, length_m=10.5, step_m=2.0)
    # grid points 0, 2, 4, 6, 8, 10 (below 10.5) and the line
    assert ref.times_s == pytest.approx([0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 10.5])
    for d in (0.0, 1.0, 5.5, 9.9, 10.2, 10.5):
        assert ref.time_at(d) == pytest.approx(d, abs=1e-12)


def test_reversing_keeps_the_first_time_at_each_distance() -> None:
    ref = Reference.from_samples([10.0, 5.0, 12.0, 20.0], [1.0, 2.0, 3.0, 4.0], lap_time_s=5.0, length_m=25.0)
    assert ref.time_at(10.0) == pytest.approx(1.0)
    assert ref.time_at(11.0) == pytest.approx(2.0)  # between (10, 1.0) and (12, 3.0)


def test_abandoned_lap_has_no_delta_and_is_never_a_reference() -> None:
    d = PredictiveDelta(length_m=100.0)
    d.update(1, 0.5, 0.01)
    for i in range(1, 100):
        d.update(1, i, i * 0.1)
    d.complete(1, 10.0)
    assert d.reference is not None and d.reference.lap_time_s == 10.0
    d.update(2, 0.5, 0.05)
    d.update(2, 30.0, 3.0)
    assert d.delta_s == pytest.approx(0.0, abs=1e-12)
    d.update(2, 60.0, 0.5)  # the timer restarted the lap time: a reset abandoned the lap
    assert math.isnan(d.delta_s) and math.isnan(d.predicted_s)
    d.complete(2, 4.0)  # (a timer would not time it; if told, it is still no reference)
    assert d.reference.lap_time_s == 10.0
    # a lap first seen mid-way (its start not traced) is no reference either
    late = PredictiveDelta(length_m=100.0)
    late.update(3, 50.0, 5.0)
    late.update(3, 99.0, 9.9)
    late.complete(3, 10.0)
    assert late.reference is None and math.isnan(late.last_delta_s)


def test_file_reference_is_fixed_and_reset_keeps_it() -> None:
    ref = Reference.from_samples([50.0], [5.0], lap_time_s=10.0, length_m=100.0, number=7, origin="f")
    d = PredictiveDelta(length_m=100.0, reference=ref)
    d.update(0, 10.0, 30.0)
    assert math.isnan(d.delta_s)  # lap 0: not timing
    d.update(1, 0.1, 0.001)
    d.update(1, 50.0, 4.0)
    assert d.delta_s == pytest.approx(-1.0) and d.predicted_s == pytest.approx(9.0)
    assert d.complete(1, 8.0) == pytest.approx(-2.0)
    assert d.reference is ref  # faster, but the file's lap stays the reference
    d.reset()
    assert d.reference is ref and math.isnan(d.last_delta_s)


@st.composite
def lap_shapes(draw: st.DrawFn) -> tuple[float, list[list[float]], float, float]:
    length = draw(st.floats(200.0, 6000.0))
    parts = draw(st.integers(1, 12))
    base = draw(st.lists(st.floats(8.0, 90.0), min_size=parts, max_size=parts))
    laps = draw(st.integers(2, 4))
    scale = [draw(st.floats(0.8, 1.25)) for _ in range(laps)]
    rate = draw(st.sampled_from([10.0, 20.0, 25.0, 60.0]))
    phase = draw(st.floats(0.0, 0.999))
    return length, [[v * k for v in base] for k in scale], rate, phase


@settings(max_examples=60, deadline=None)
@given(lap_shapes())
def test_delta_at_every_crossing_is_the_lap_time_difference(
    shape: tuple[float, list[list[float]], float, float],
) -> None:
    """Random lap shapes (speed by part of the lap, each lap scaled): at each line crossing the
    delta of the lap just timed equals its time minus the best earlier lap's, exactly in
    ``last_delta`` and within one tick on the lap's last sample; the sign says gaining or losing."""
    length, laps, rate, phase = shape
    drive = Drive(length)
    drive.run_up(length / 10, laps[0][0])
    for speeds in laps:
        drive.lap(speeds)
    ticks = feed(drive, rate, phase)
    tick = 1 / rate
    ends = [i for i, x in enumerate(ticks) if x.completed is not None]
    # every lap is timed (the last one may end after the last tick)
    assert len(ends) >= len(laps) - 1
    timed = [ticks[i].completed for i in ends]
    for n, i in enumerate(ends, start=1):
        lap_time = timed[n - 1]
        assert lap_time is not None
        # the detector's own crossing interpolation: within a tick of the drive's lap time
        assert abs(lap_time - drive.lap_times[n - 1]) < tick
        if n == 1:
            assert math.isnan(ticks[i].last_delta_s) and math.isnan(ticks[i - 1].delta_s)
            continue
        best = min(t for t in timed[: n - 1] if t is not None)
        assert ticks[i].last_delta_s == pytest.approx(lap_time - best, abs=1e-9)
        # the lap's last sample: less than a tick before the line; speeds differ at most 1.25/0.8
        assert abs(ticks[i - 1].delta_s - (lap_time - best)) <= tick
        assert abs(ticks[i - 1].predicted_s - lap_time) <= tick
        # gaining (faster than the reference) shows negative, losing positive
        on_lap = [x for x in ticks[:i] if x.lap == n]
        ref_lap = 1 + timed.index(best)
        for x in on_lap[len(on_lap) // 4 :: max(1, len(on_lap) // 8)]:
            exact = x.lap_time_s - drive.time_at(ref_lap, x.distance_m)
            assert abs(x.delta_s - exact) <= 2 * tick + 1.0 / min(min(s) for s in laps)


def test_parse_reference() -> None:
    assert parse_reference("best.wrtf") == ("best.wrtf", None, None)
    assert parse_reference("/data/best.wrtf:3") == ("/data/best.wrtf", None, 3)
    assert parse_reference("a:b.wrtf:2.5") == ("a:b.wrtf", 2, 5)
    with pytest.raises(ValueError, match="FILE"):
        parse_reference("")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list, float, Path]:
    from wrtfd.simulate import Simulation, TrackInfo, make_encoder
    from wrtfd.simulate.record import record_simulation
    from wrtfd.tracks import timing_sectors
    from wrtfd.tracks.lapchannels import lap_channels_for

    track = load_track(OVAL)
    path = LanePath(track)
    sectors = timing_sectors(track, path)
    info = TrackInfo(track.name, path.length_m, sectors, 3)
    out = tmp_path_factory.mktemp("delta")
    sim = Simulation(path, laps=3, rate_hz=60.0, seed=4, sectors_m=sectors)
    files = record_simulation(
        sim,
        make_encoder("f1", info, seed=4),
        out / "f1",
        protocol="f1",
        derived=[lap_channels_for(track, source="f1", protocol="f1")],
    )
    plain = record_simulation(
        Simulation(path, laps=1, rate_hz=60.0, seed=5, sectors_m=sectors),
        make_encoder("forza", info),
        out / "forza",
        protocol="forza",
    )
    return files[0], list(sim.laps), path.length_m, plain[0]


def test_reference_from_a_recording(recorded: tuple[Path, list, float, Path]) -> None:
    from wrtfd.format import Reader

    file, laps, length, _ = recorded
    best = min(laps, key=lambda lap: lap.time_s)
    ref = Reference.from_file(file)
    assert ref.number == best.number
    assert ref.lap_time_s == pytest.approx(best.time_s, abs=1e-3)
    # the line from the samples either side of it: the track's lane length
    assert ref.length_m == pytest.approx(length, abs=0.05)
    two = Reference.from_file(file, 2, length_m=length)
    assert two.number == 2 and two.length_m == length
    assert two.lap_time_s == pytest.approx(laps[1].time_s, abs=1e-3)
    assert two.time_at(length) == two.lap_time_s
    # the trace goes through the file's own samples of lap 2 (plain numpy decode of the frames)
    with Reader(file) as r:
        (si,) = [i for i in range(len(r.sessions)) if (r.frames(i)["laps"]["lap_number"] == 2).any()]
        lp = r.frames(si)["laps"]
    on = lp[lp["lap_number"] == 2]
    for d, t in zip(on["lap_distance"][::37], on["lap_time"][::37], strict=True):
        assert two.time_at(float(d)) == pytest.approx(float(t), abs=2e-3)
    assert Reference.from_file(file, 2, session=si).number == 2


def test_reference_file_errors(recorded: tuple[Path, list, float, Path], tmp_path: Path) -> None:
    file, _, _, plain = recorded
    with pytest.raises(TrackError, match=r"no complete lap 9 \(complete laps: 1, 2"):
        Reference.from_file(file, 9)
    with pytest.raises(TrackError, match="no lap channels"):
        Reference.from_file(plain)
    with pytest.raises(TrackError, match="no session 40"):
        Reference.from_file(file, 1, session=40)
    bad = tmp_path / "bad.wrtf"
    bad.write_bytes(b"not a wrtf file at all" * 10)
    with pytest.raises(FormatError):
        Reference.from_file(bad)


def test_reference_from_a_recording_made_before_the_delta(tmp_path: Path) -> None:
    """Files recorded before the delta fields existed (the laps struct of six fields) still read
    and still give a reference lap."""
    from wrtfd.format import Reader
    from wrtfd.simulate import Simulation, TrackInfo, make_encoder
    from wrtfd.simulate.record import record_simulation
    from wrtfd.tracks import timing_sectors
    from wrtfd.tracks.lapchannels import LAP_FIELDS, lap_channels_for

    track = load_track(OVAL)
    path = LanePath(track)
    sectors = timing_sectors(track, path)
    old_fields = [f for f in LAP_FIELDS if f["name"] not in ("delta", "predicted", "last_delta")]
    assert [f["name"] for f in old_fields] == [
        *("lap_number", "lap_distance", "sector", "lap_time", "track_sector", "offset")
    ]
    plug = lap_channels_for(track, source="f1", protocol="f1")
    plug.definition = {"fields": old_fields}

    def old_compute(row: np.void, time_s: float) -> None:  # the struct as it was: six fields
        full = np.zeros(
            1, np.dtype([("f1", row.dtype["f1"]), ("laps", [(f["name"], "<f8") for f in LAP_FIELDS])])
        )
        full["f1"][0] = row["f1"]
        plug.__class__.compute(plug, full[0], time_s)
        for f in old_fields:
            row["laps"][f["name"]] = full["laps"][f["name"]][0]

    plug.compute = old_compute  # type: ignore[method-assign]
    sim = Simulation(path, laps=2, rate_hz=60.0, seed=6, sectors_m=sectors)
    (file,) = record_simulation(
        sim,
        make_encoder("f1", TrackInfo(track.name, path.length_m, sectors, 2), seed=6),
        tmp_path,
        protocol="f1",
        derived=[plug],
    )
    with Reader(file) as r:
        assert r.schema.frame_dtype["laps"].names == tuple(f["name"] for f in old_fields)
    ref = Reference.from_file(file, 1, length_m=path.length_m)
    assert ref.lap_time_s == pytest.approx(sim.laps[0].time_s, abs=1 / 60)
    assert ref.time_at(path.length_m) == ref.lap_time_s


def test_memory_is_bounded() -> None:
    """A lap needing more grid points than ``max_points`` is never kept (nor traced past them)."""

    def one_lap(max_points: int) -> PredictiveDelta:
        d = PredictiveDelta(length_m=1000.0, max_points=max_points)
        for i in range(0, 1001, 10):
            d.update(1, float(i), i / 50.0)
            assert d._trace is None or len(d._trace.times) <= max_points
        d.complete(1, 20.0)
        return d

    assert one_lap(500).reference is None
    kept = one_lap(1001).reference
    assert kept is not None and len(kept.times_s) == 1001 and kept.time_at(500.0) == pytest.approx(10.0)
    with pytest.raises(TrackError, match="cannot be kept"):
        Reference.from_samples([10.0], [1.0], lap_time_s=20.0, length_m=1000.0, max_points=999)
