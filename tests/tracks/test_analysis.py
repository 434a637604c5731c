"""Finding position channels in a recording's frame layout, and after-the-fact lap detection."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from wrtfd.errors import TrackError
from wrtfd.tracks import LanePath, load_track
from wrtfd.tracks.analysis import analyse_frames, find_position_fields

DATA = Path(__file__).resolve().parent / "data"


def test_find_position_fields_per_protocol() -> None:
    dt = np.dtype(
        [
            ("tick", "<u8"),
            ("gps", [("lat", "<f8")]),
            ("f1", [("world_position_x", "<f4"), ("world_position_z", "<f4")]),
            ("forza", [("is_race_on", "?"), ("position_x", "<f4"), ("position_z", "<f4")]),
        ]
    )
    src, pos = find_position_fields(dt)
    assert src == "f1" and (pos.x, pos.z, pos.active) == ("world_position_x", "world_position_z", None)
    src, pos = find_position_fields(dt, "forza")
    assert src == "forza" and pos.active == "is_race_on"
    flat = np.dtype([("tick", "<u8"), ("pos_x", "<f8"), ("pos_y", "<f8")])
    src, pos = find_position_fields(flat)
    assert src is None and pos.z_sign == -1.0
    with pytest.raises(TrackError, match="no position channels in source 'gps'"):
        find_position_fields(dt, "gps")


def test_analyse_frames_holds_missing_positions() -> None:
    track = load_track(DATA / "mini.trk")
    path = LanePath(track)
    L = path.length_m
    dists = [L - 6, L - 3, None, 2.0, 5.0, None, 10.0]  # None: menus (0, 0) and a NaN
    dt = np.dtype([("tick", "<u8"), ("car", [("world_position_x", "<f4"), ("world_position_z", "<f4")])])
    frames = np.zeros(len(dists), dt)
    for i, d in enumerate(dists):
        if d is None:
            frames[i]["car"] = (0.0, 0.0) if i == 2 else (np.nan, np.nan)
        else:
            x, _, z = path.point_at(d)
            frames[i]["car"] = (x, z)
    res = analyse_frames(frames, np.arange(len(dists)) * 1.0, track)
    assert res.valid.tolist() == [True, True, False, True, True, False, True]
    assert res.lap_number.tolist() == [0, 0, 0, 1, 1, 1, 1]
    assert res.lap_distance_m[2] == pytest.approx(L - 3, abs=1e-4)  # held
    assert res.laps == []
    with pytest.raises(TrackError, match="7 frames but 3 times"):
        analyse_frames(frames, [0.0, 1.0, 2.0], track)


def test_recorded_laps_without_a_sector_channel() -> None:
    """Another logger's laps imported as ``laps.lap_number/lap_distance/lap_time`` and no
    ``sector`` (an iRacing .ibt): laps timed from the lap channels, without sector times (it
    raised ``no field of name sector``, and laps, compare and .ld/.mcap export with it)."""
    from wrtfd.tracks.analysis import recorded_session_laps

    laps_dt = np.dtype([("lap_number", "<u2"), ("lap_distance", "<f4"), ("lap_time", "<f4")])
    frames = np.zeros(300, dtype=[("tick", "<u8"), ("laps", laps_dt)])
    t = np.arange(300) / 10.0  # 10 Hz; laps of 10.0 s crossed at 5.05, 15.05, 25.05 s
    start = 5.05
    frames["laps"]["lap_number"] = np.floor((t - start) / 10.0).astype(int) + 2
    frames["laps"]["lap_time"] = (t - start) % 10.0
    frames["laps"]["lap_distance"] = frames["laps"]["lap_time"] * 40.0
    got = recorded_session_laps(frames, t)
    assert [(lap.number, round(lap.time_s, 4), lap.sector_times_s) for lap in got.laps] == [
        (2, 10.0, ()),
        (3, 10.0, ()),
    ]
