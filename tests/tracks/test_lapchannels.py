"""The recorder plug-in on frame rows laid out like the recorder's (source struct + plug-in struct)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from wrtfd.errors import ConfigError
from wrtfd.simulate import Simulation
from wrtfd.tracks import LanePath, load_track, timing_sectors
from wrtfd.tracks.lapchannels import INVALID_GRACE_S, LAP_FIELDS, POSITION_FIELDS, lap_channels_for

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "tracks"
_NP = {"uint16": "<u2", "uint8": "u1", "float32": "<f4", "int16": "<i2"}


def frame_dtype(source: str, fields: list[tuple[str, str]]) -> np.dtype:
    laps = [(f["name"], _NP[f["type"]]) for f in LAP_FIELDS]
    return np.dtype([("tick", "<u8"), (source, fields), ("laps", laps)])


def test_forza_rows_give_the_simulators_laps() -> None:
    track = load_track(SHIPPED / "oval.trk")
    path = LanePath(track)
    sim = Simulation(path, laps=3, rate_hz=60.0, seed=2, sectors_m=timing_sectors(track, path))
    states = list(sim.states())
    dt = frame_dtype("car", [("is_race_on", "?"), ("position_x", "<f4"), ("position_z", "<f4")])
    rows = np.zeros(len(states), dt)
    for i, s in enumerate(states):
        rows[i]["tick"] = i
        rows[i]["car"] = (s.racing, s.x, s.z) if s.racing else (False, 0.0, 0.0)
    plug = lap_channels_for(track, source="car", protocol="forza")
    assert plug.name == "laps" and [f["name"] for f in plug.definition["fields"]][:4] == [
        "lap_number",
        "lap_distance",
        "sector",
        "lap_time",
    ]
    plug.start_session()
    for i in range(len(rows)):
        plug.compute(rows[i], i / 60.0)
    laps = rows["laps"]
    assert laps["lap_number"][0] == 0 and laps["lap_number"].max() == 4
    assert set(np.unique(laps["sector"])) == {0, 1, 2}
    assert (laps["track_sector"][[s.racing for s in states]] >= 0).all()  # always on the track while driving
    summary = plug.summary()
    assert summary["lap_count"] == 3
    best = min(sim.laps, key=lambda lap: lap.time_s)
    assert summary["best_lap_ms"] == pytest.approx(best.time_s * 1000, abs=1.0)
    assert summary["best_lap_number"] == best.number
    # positions at tick times: lap distances match the simulator's
    racing = [i for i, s in enumerate(states) if s.racing and s.progress_m > 0]
    for i in racing[::50]:
        assert float(laps["lap_distance"][i]) == pytest.approx(states[i].progress_m % path.length_m, abs=1e-2)
    # a new session forgets the laps
    plug.start_session()
    assert plug.summary()["lap_count"] == 0


def test_outsim_axes_and_stale_rows_are_held() -> None:
    track = load_track(SHIPPED / "kart.trk")
    path = LanePath(track)
    dt = frame_dtype("lfs", [("pos_x", "<f8"), ("pos_y", "<f8")])
    rows = np.zeros(4, dt)
    x, _, z = path.point_at(30.0)
    rows[0]["lfs"] = (x, -z)  # LFS Y is forward = -track z
    rows[1]["lfs"] = (np.nan, np.nan)  # stale source
    x2, _, z2 = path.point_at(35.0)
    rows[2]["lfs"] = (x2, -z2)
    plug = lap_channels_for(track, source="lfs", protocol="outsim")
    for i in range(3):
        plug.compute(rows[i], i * 0.1)
    assert rows["laps"]["lap_distance"].tolist()[:3] == pytest.approx([30.0, 30.0, 35.0], abs=1e-3)
    assert rows["laps"]["track_sector"][0] >= 0


def test_unknown_protocol_needs_fields() -> None:
    track = load_track(SHIPPED / "kart.trk")
    with pytest.raises(ConfigError, match="no known position fields"):
        lap_channels_for(track, source="gps", protocol="nmea")
    plug = lap_channels_for(track, source="gps", protocol="nmea", x_field="east_m", z_field="south_m")
    assert plug.position.x == "east_m" and plug.position.active is None
    assert set(POSITION_FIELDS) >= {"forza", "f1", "outsim"}


def test_delta_channels_on_simulated_laps() -> None:
    """The delta fields beside the others, written in one go: NaN until a lap is timed; at each
    crossing ``last_delta`` is the lap's time minus the best earlier lap's (the simulator's own
    lap times, within a tick); the lap's last frame has ``delta`` within a tick of it."""
    track = load_track(SHIPPED / "oval.trk")
    path = LanePath(track)
    sim = Simulation(path, laps=4, rate_hz=60.0, seed=9, sectors_m=timing_sectors(track, path))
    states = list(sim.states())
    dt = frame_dtype("car", [("is_race_on", "?"), ("position_x", "<f4"), ("position_z", "<f4")])
    rows = np.zeros(len(states), dt)
    for i, s in enumerate(states):
        rows[i]["car"] = (s.racing, s.x, s.z) if s.racing else (False, 0.0, 0.0)
    plug = lap_channels_for(track, source="car", protocol="forza")
    plug.start_session()
    for i in range(len(rows)):
        plug.compute(rows[i], i / 60.0)
    laps = rows["laps"]
    number = laps["lap_number"].astype(int)
    assert np.isnan(laps["delta"][number <= 1]).all() and np.isnan(laps["predicted"][number <= 1]).all()
    assert np.isfinite(laps["delta"][number >= 2]).all()
    sim_times = [lap.time_s for lap in sim.laps]
    ends = [int(i) for i in np.flatnonzero(np.diff(number) == 1) + 1 if number[i - 1] >= 1]
    assert len(ends) == 4
    assert np.isnan(laps["last_delta"][ends[0]])
    for n, i in enumerate(ends[1:], start=2):
        want = sim_times[n - 1] - min(sim_times[: n - 1])
        assert float(laps["last_delta"][i]) == pytest.approx(want, abs=1 / 60)
        assert float(laps["delta"][i - 1]) == pytest.approx(want, abs=1 / 60)
        assert float(laps["predicted"][i - 1]) == pytest.approx(sim_times[n - 1], abs=1 / 60)
    # the struct write kept every other field where it belongs
    assert float(laps["lap_time"][ends[1] - 1]) == pytest.approx(sim_times[1], abs=1 / 60)
    assert set(np.unique(laps["sector"])) == {0, 1, 2}
    live = plug.live()
    best = min(sim.laps, key=lambda lap: lap.time_s)
    assert live["reference"]["number"] == best.number and live["reference"]["origin"] == "session"


def _f1_laps(flag_at: Callable[[int, float, float], bool]) -> tuple[Any, list[Any], Any]:
    """Three simulated laps as F1 rows (position, currentLapInvalid, Session weather/temps); the
    flag where ``flag_at(sim lap, lap distance m, seconds since the lap began)`` says."""
    track = load_track(SHIPPED / "oval.trk")
    path = LanePath(track)
    sim = Simulation(path, laps=3, rate_hz=60.0, seed=2, sectors_m=timing_sectors(track, path))
    states = list(sim.states())
    fields = [
        ("world_position_x", "<f4"),
        ("world_position_z", "<f4"),
        ("current_lap_invalid", "u1"),
        ("weather", "u1"),
        ("track_temperature", "i1"),
        ("air_temperature", "i1"),
    ]
    rows = np.zeros(len(states), frame_dtype("f1", fields))
    for i, s in enumerate(states):
        rows[i]["tick"] = i
        flag = s.racing and flag_at(s.lap, s.lap_distance_m, s.lap_time_s)
        weather = 3 if s.lap == 3 and s.lap_distance_m > path.length_m / 2 else 1
        rows[i]["f1"] = (s.x, s.z, flag, weather, 30 + s.lap, 20)
    plug = lap_channels_for(track, source="f1", protocol="f1")
    for i in range(len(rows)):
        plug.compute(rows[i], i / 60.0)
    return plug, sim.laps, rows


def test_a_lap_is_invalid_when_the_game_flag_was_up_at_any_frame() -> None:
    # lap 2 flagged for a short moment mid-lap; the game's flag of lap 2 still up for 0.3 s of lap 3
    def flag(lap: int, dist: float, t: float) -> bool:
        return (lap == 2 and 100.0 < dist < 104.0) or (lap == 3 and t < 0.3)

    plug, _, _ = _f1_laps(flag)
    assert [lap.number for lap in plug.laps] == [1, 2, 3]
    assert {n: v for n, (v, _) in plug.lap_facts.items()} == {1: True, 2: False, 3: True}
    # conditions: the means of the samples, the weather seen most over the lap, by name
    _, c1 = plug.lap_facts[1]
    assert c1 == {"air_temp_c": 20.0, "track_temp_c": 31.0, "weather": "light cloud"}
    _, c3 = plug.lap_facts[3]
    assert c3 is not None and c3["track_temp_c"] == pytest.approx(33.0, abs=0.1)
    assert c3["weather"] in ("light cloud", "light rain")


def test_a_flag_only_in_the_grace_after_the_line_does_not_count() -> None:
    # the flag up late in lap 1 (before the line) and left over into lap 2's first second
    def flag(lap: int, dist: float, t: float) -> bool:
        return (lap == 1 and dist > 200.0) or (lap == 2 and t < 0.8)

    assert INVALID_GRACE_S > 0.8
    plug, _, _ = _f1_laps(flag)
    assert {n: v for n, (v, _) in plug.lap_facts.items()} == {1: False, 2: True, 3: True}


def test_a_protocol_without_lap_facts_says_nothing() -> None:
    plug, _, _ = _f1_laps(lambda lap, dist, t: True)
    assert plug.facts is not None
    track = load_track(SHIPPED / "oval.trk")
    forza = lap_channels_for(track, source="car", protocol="forza")
    assert forza.facts is None and forza.lap_facts == {}
