"""The notebook API at the top of the package: ``wrtfd.open``, frames by time, DataFrames."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import wrtfd
from tests.format.conftest import START_US
from tests.format.samples import write_car_file


@pytest.fixture
def run_file(tmp_path: Path) -> Path:
    path = tmp_path / "run.wrtf"
    write_car_file(path, sessions=2, frames=5)  # 50 Hz; session 0 ticks 0, 2, ..., 8
    return path


def test_open_returns_a_reader(run_file: Path) -> None:
    with wrtfd.open(run_file) as r:
        assert isinstance(r, wrtfd.Reader)
        assert len(r.sessions) == 2
        assert r.frames(0)["tick"].tolist() == [0, 2, 4, 6, 8]


def test_frames_between_selects_by_time(run_file: Path) -> None:
    with wrtfd.open(run_file) as r:
        base = r.sessions[0].time_base_us
        assert base == START_US
        # ticks at 50 Hz are 20 ms apart: [40 ms, 120 ms) holds ticks 2, 4 (40, 80 ms), not 6 (120 ms)
        picked = r.frames_between(0, base + 40_000, base + 120_000)
        assert picked["tick"].tolist() == [2, 4]
        assert np.shares_memory(picked, r.frames(0))  # a view, no copy
        assert r.frames_between(0, base + 41_000, base + 41_500).size == 0
        assert r.frames_between(0, base + 200_000, base).size == 0  # reversed range: empty
        assert r.frames_between(0, 0, 2**62)["tick"].tolist() == [0, 2, 4, 6, 8]
        with pytest.raises(wrtfd.FormatError, match="no session 5"):
            r.frames_between(5, 0, 1)


def test_to_dataframe_matches_the_export_columns(run_file: Path) -> None:
    pytest.importorskip("pandas")
    with wrtfd.open(run_file) as r:
        df = r.to_dataframe()
        names, first = next(wrtfd.iter_columns(r))
        assert list(df.columns) == names
        assert len(df) == r.total_frames == 10
        assert df["session"].tolist() == [0] * 5 + [1] * 5
        assert df["tick"].tolist()[:5] == first[1].tolist()
        assert df["state"].tolist()[:3] == ["pits", "racing", "7"]  # enum names; unnamed as numbers
        assert df["driver"].iloc[0] == "Ayrton"
        one = r.to_dataframe(1)
        assert one["session"].unique().tolist() == [1]
        assert one["time_us"].tolist() == r.frame_times_us(1).tolist()


def test_to_dataframe_without_pandas_names_the_extra(run_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` now raises ImportError
    with wrtfd.open(run_file) as r, pytest.raises(wrtfd.MissingDependencyError) as info:
        r.to_dataframe()
    assert str(info.value) == "Reader.to_dataframe needs pandas: install wrtfd[pandas]"
    assert info.value.extra == "pandas"
    assert isinstance(info.value, ImportError)  # "skip what is not installed" code keeps working


def test_top_level_names_resolve_to_the_library_objects() -> None:
    from wrtfd.format.columns import iter_columns
    from wrtfd.format.reader import Reader

    assert wrtfd.Reader is Reader
    assert wrtfd.iter_columns is iter_columns
    assert set(wrtfd.__all__) <= set(dir(wrtfd))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = wrtfd.nope
