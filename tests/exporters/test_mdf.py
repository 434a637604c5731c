"""ASAM MDF 4 export, read back with asammdf: names, units, values, times."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.format.samples import write_car_file
from wrtfd.cli.main import main
from wrtfd.format import Reader
from wrtfd.format.export import export_leaves
from wrtfd.format.reader import ticks_to_time_us
from wrtfd.format.schema import leaf_column

asammdf = pytest.importorskip("asammdf")


def test_every_channel_with_unit_values_and_time(forza_road: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.mf4"
    assert main(["export", str(forza_road), "-o", str(out)]) == 0
    mdf = asammdf.MDF(out)
    try:
        with Reader(forza_road) as r:
            leaves = [lf for lf in export_leaves(r.schema) if lf.kind != "text"]
            t0_us = int(ticks_to_time_us(r.frames(0)["tick"][:1], r.sessions[0].time_base_us, r.rate_hz)[0])
            assert mdf.header.start_time.timestamp() == pytest.approx(t0_us / 1e6, abs=1e-6)
            assert mdf.header.author == "Ayrton Test" and forza_road.name in mdf.header.comment
            assert len(mdf.groups) == len(r.sessions) == 2
            for s in r.sessions:
                f = r.frames(s.index)
                want_t = (ticks_to_time_us(f["tick"], s.time_base_us, r.rate_hz) - t0_us) / 1e6
                for lf in leaves:
                    sig = mdf.get(lf.column, group=s.index)
                    assert sig.unit == (lf.unit or ""), lf.column
                    want = leaf_column(f, lf.path)
                    got = sig.samples
                    assert len(got) == len(want) and np.array_equal(
                        got, want.astype(got.dtype), equal_nan=got.dtype.kind == "f"
                    ), lf.column
                    if want.dtype != np.bool_:
                        assert got.dtype == want.dtype, lf.column
                    assert np.array_equal(sig.timestamps, want_t), lf.column
            speed = mdf.get("forza_speed", group=1)
            assert speed.unit == "m/s" and "m/s" not in speed.comment
    finally:
        mdf.close()


def test_gaps_stay_gaps_nan_stays_nan(tmp_path: Path) -> None:
    src = tmp_path / "car.wrtf"
    write_car_file(src)
    out = tmp_path / "car.mf4"
    assert main(["export", str(src), "-o", str(out)]) == 0
    mdf = asammdf.MDF(out)
    try:
        speed = mdf.get("speed", group=0)
        assert speed.timestamps.tolist() == [0.0, 0.04, 0.08, 0.12, 0.16]  # ticks 0, 2, 4, 6, 8 at 50 Hz
        assert (
            speed.samples[0] == np.float32(0.1) and np.isnan(speed.samples[1]) and np.isinf(speed.samples[2])
        )
        state = mdf.get("state", group=0)
        assert state.samples.tolist() == [0, 1, 7, 0, 1] and "pits" in state.comment
        assert "driver" not in mdf.channels_db
        later = mdf.get("speed", group=1)
        assert later.timestamps[0] == pytest.approx(1.0)  # session 1 starts 1 s after session 0
    finally:
        mdf.close()
