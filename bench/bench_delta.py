"""Cost of the live predictive delta: microseconds per ``LapChannels.compute()`` with it and
without it, in the same run.

    python bench/bench_delta.py [--quick] [--repeats N]

Frames: Forza rows of a car that ``wrtfd.simulate`` drives round the road course at 60 Hz (five
laps), laid out as the recorder lays them out (source struct + ``laps`` struct). Cases, each
timed over the same rows, best of ``--repeats`` (interleaved, so machine load hits both alike):

- ``with delta``: the lap-channel plug-in as the recorder runs it;
- ``without``: the same plug-in with the delta replaced by a stand-in that does nothing (the
  three fields are still written, with NaN);
- ``before``: the plug-in's ``compute`` as it was before the delta (main at f9ab7ba: six
  fields, each written on its own), replicated here; it writes into rows of the new layout;
- ``delta alone``: ``PredictiveDelta.update`` (and ``complete`` at the crossings) fed the
  detector's states, no frames.

The cost per second of recording is the per-frame difference times the frame rate.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import numpy as np

from wrtfd.decoders.forza import ForzaDecoder
from wrtfd.format import Schema
from wrtfd.simulate import Simulation
from wrtfd.tracks import LanePath, load_track, timing_sectors
from wrtfd.tracks.delta import PredictiveDelta
from wrtfd.tracks.lapchannels import LAP_FIELDS, LapChannels, lap_channels_for

ROAD = Path(__file__).resolve().parents[1] / "config" / "tracks" / "road.trk"
RATE_HZ = 60.0


class _NoDelta:
    """The delta's interface doing nothing: the plug-in's cost without it."""

    delta_s = predicted_s = last_delta_s = math.nan

    def update(self, lap_number: int, lap_distance_m: float, lap_time_s: float) -> float:
        return math.nan

    def complete(self, lap_number: int, lap_time_s: float, length_m: float | None = None) -> float:
        return math.nan

    def reset(self) -> None:
        pass


class _Before(LapChannels):
    """``compute`` as it was before the delta (f9ab7ba), for the before/after figure."""

    def compute(self, row: np.void, time_s: float) -> None:
        pos = self._position(row)
        if pos is not None:
            x, z = pos
            if self._segment < 0:
                proj = self.path.project(x, z)
            else:
                proj = self.path.project_near(x, z, self._segment)
            self._segment = proj.segment
            self._last = self.detector.update_distance(time_s, proj.distance_m)
            self._offset = proj.offset_m
            hint = self._track_sector if self._track_sector >= 0 else None
            found = self.sectors.sector_at(x, z, hint=hint)
            self._track_sector = -1 if found is None else found
        out = row[self.name]
        st = self._last
        if st is None:
            out["lap_number"] = 0
            out["lap_distance"] = 0.0
            out["sector"] = 0
            out["lap_time"] = 0.0
        else:
            out["lap_number"] = min(st.lap, 65535)
            out["lap_distance"] = st.lap_distance_m
            out["sector"] = min(st.sector, 255)
            out["lap_time"] = st.lap_time_s
        out["track_sector"] = self._track_sector
        out["offset"] = self._offset


def rows(laps: int) -> tuple[np.ndarray, list[float]]:
    track = load_track(ROAD)
    path = LanePath(track)
    sim = Simulation(path, laps=laps, rate_hz=RATE_HZ, seed=3, sectors_m=timing_sectors(track, path))
    states = list(sim.states())
    forza = Schema.from_dict(ForzaDecoder().definition).frame_dtype
    source = np.dtype([(n, forza[n]) for n in forza.names or () if n != "tick"])
    lap_dt = np.dtype(
        [
            (f["name"], {"uint16": "<u2", "uint8": "u1", "float32": "<f4", "int16": "<i2"}[f["type"]])
            for f in LAP_FIELDS
        ]
    )
    out = np.zeros(len(states), np.dtype([("tick", "<u8"), ("forza", source), ("laps", lap_dt)]))
    car = out["forza"]
    for i, s in enumerate(states):
        car["is_race_on"][i] = s.racing
        car["position_x"][i] = s.x if s.racing else 0.0
        car["position_z"][i] = s.z if s.racing else 0.0
    return out, [i / RATE_HZ for i in range(len(states))]


def time_plugin(frames: np.ndarray, times: list[float], *, delta: bool, before: bool = False) -> float:
    plug = lap_channels_for(load_track(ROAD), source="forza", protocol="forza")
    if before:
        plug = _Before(plug.track, source=plug.source, position=plug.position)
    elif not delta:
        plug.delta = _NoDelta()  # type: ignore[assignment]
    plug.start_session()
    compute = plug.compute
    t0 = time.perf_counter()
    for i in range(len(frames)):
        compute(frames[i], times[i])
    return (time.perf_counter() - t0) / len(frames) * 1e6


def time_delta_alone(frames: np.ndarray, times: list[float]) -> float:
    plug = lap_channels_for(load_track(ROAD), source="forza", protocol="forza")
    plug.start_session()
    states = []
    for i in range(len(frames)):
        plug.compute(frames[i], times[i])
        states.append(plug._last)
    d = PredictiveDelta(length_m=plug.path.length_m)
    t0 = time.perf_counter()
    for st in states:
        if st is None:
            continue
        if st.completed is not None:
            d.complete(st.completed.number, st.completed.time_s)
        d.update(st.lap, st.lap_distance_m, st.lap_time_s)
    return (time.perf_counter() - t0) / len(states) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="two laps, three repeats")
    ap.add_argument("--repeats", type=int, help="timed repeats per case (best kept; default 7)")
    args = ap.parse_args()
    frames, times = rows(2 if args.quick else 5)
    repeats = args.repeats or (3 if args.quick else 7)
    with_d, without, old, alone = [], [], [], []
    for _ in range(repeats):
        with_d.append(time_plugin(frames.copy(), times, delta=True))
        without.append(time_plugin(frames.copy(), times, delta=False))
        old.append(time_plugin(frames.copy(), times, delta=False, before=True))
        alone.append(time_delta_alone(frames, times))
    a, b, c, o = min(with_d), min(without), min(alone), min(old)
    print(f"{len(frames)} frames at {RATE_HZ:.0f} Hz (road course), best of {repeats}")
    print(f"  LapChannels.compute with delta  {a:7.2f} us/frame")
    print(f"  LapChannels.compute without     {b:7.2f} us/frame")
    print(f"  ratio with/without              {a / b:7.3f}")
    print(f"  before the delta (f9ab7ba)      {o:7.2f} us/frame")
    print(f"  ratio with/before               {a / o:7.3f}")
    print(f"  PredictiveDelta alone           {c:7.2f} us/tick")
    for hz in (25, 60, 1000):
        print(f"  delta at {hz:4d} Hz: {(a - b) * hz / 1e4:.4f} % of one core")


if __name__ == "__main__":
    main()
