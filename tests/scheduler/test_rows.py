"""SourceRow's whole-sample fast store agrees with storing channel by channel, and falls back cleanly."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from wrtfd.scheduler.rows import SourceRow

SRC = np.dtype(
    [
        ("speed", "<f4"),
        ("gear", "i1"),
        ("rpm", "<u2"),
        ("on", "?"),
        ("tyres", "<f4", (4,)),
        ("all_pos", "<u1", (3,)),
    ]
)
FRAME = np.dtype([("tick", "<u8"), ("g", SRC), ("other", "<f8")])


def _held() -> np.ndarray:
    return np.zeros(1, dtype=FRAME)


def _channel_by_channel(held: np.ndarray, values: dict[str, Any]) -> int:
    """The reference: each value stored alone, a value that does not fit skipped and counted."""
    bad = 0
    for name, value in values.items():
        try:
            held["g"][name][0] = value
        except (TypeError, ValueError, OverflowError):
            bad += 1
    return bad


def test_a_mixed_sample_is_stored_whole_and_matches_channel_by_channel() -> None:
    held, ref = _held(), _held()
    row = SourceRow(held, "g")
    values = {"gear": 3, "speed": 41.5, "tyres": (1.0, 2.0, 3.0, 4.0), "on": True, "all_pos": [1, 2, 3]}
    assert row.apply(values) == (0, 0)
    assert _channel_by_channel(ref, values) == 0
    assert held.tobytes() == ref.tobytes()
    assert int(held["g"]["rpm"][0]) == 0  # a channel the sample does not carry is left alone


def test_a_value_that_does_not_fit_is_counted_and_the_rest_is_stored() -> None:
    held = _held()
    row = SourceRow(held, "g")
    row.apply({"gear": 2, "speed": 10.0, "rpm": 5000})
    before_rpm = int(held["g"]["rpm"][0])
    # rpm overflows uint16 after gear and speed were converted: the half-done store is undone,
    # then the per-channel path keeps what fits and counts the rest
    assert row.apply({"gear": 4, "speed": 20.0, "rpm": 70_000}) == (0, 1)
    assert int(held["g"]["gear"][0]) == 4 and float(held["g"]["speed"][0]) == 20.0
    assert int(held["g"]["rpm"][0]) == before_rpm
    assert row.apply({"tyres": (1.0, 2.0)}) == (0, 1)  # wrong length: counted, row unchanged
    assert held["g"]["tyres"][0].tolist() == [0.0, 0.0, 0.0, 0.0]


def test_unknown_channels_still_take_the_counting_path() -> None:
    held = _held()
    row = SourceRow(held, "g")
    assert row.apply({"speed": 1.0, "nope": 2}) == (1, 0)
    assert float(held["g"]["speed"][0]) == 1.0


samples = st.fixed_dictionaries(
    {},
    optional={
        # float64 values overflow float32 (numpy: inf; struct refuses), ints go to float fields,
        # floats to int fields (numpy truncates; struct refuses), arrays come a size too short or
        # too long (one short and one long must not add up to a valid pack)
        "speed": st.one_of(st.floats(width=32), st.floats(), st.integers(-(2**40), 2**40)),
        "gear": st.one_of(st.integers(-200, 200), st.floats(-200, 200)),
        "rpm": st.integers(-10, 70_000),
        "on": st.one_of(st.booleans(), st.integers(0, 2)),
        "tyres": st.lists(st.floats(allow_nan=False, width=32), min_size=3, max_size=5).map(tuple),
        "all_pos": st.lists(st.integers(0, 300), min_size=2, max_size=4),
    },
)


@settings(max_examples=500, deadline=None)
@given(st.lists(samples, min_size=1, max_size=6))
def test_property_fast_store_equals_channel_by_channel(seq: list[dict[str, Any]]) -> None:
    """Both fast stores (struct pack, numpy view) give the bytes and counts of the reference."""
    held, ref = _held(), _held()
    held["other"] = ref["other"] = 7.0
    row = SourceRow(held, "g")
    for values in seq:
        with np.errstate(over="ignore", invalid="ignore"):  # as the scheduler stores (inf, quietly)
            _unknown, bad = row.apply(values)
            assert bad == _channel_by_channel(ref, values)
        assert held.tobytes() == ref.tobytes()


def test_a_well_typed_sample_takes_the_struct_store_and_a_loose_one_falls_back() -> None:
    """The property test above proves equal bytes; this one that the cheap store is really used."""
    held, ref = _held(), _held()
    row = SourceRow(held, "g")
    good = {"speed": 1.5, "gear": 2, "tyres": (1.0, 2.0, 3.0, 4.0), "all_pos": (5, 6, 7)}
    for _ in range(5):
        assert row.apply(good) == (0, 0)
    plan = row._plans[tuple(good)]
    assert plan[0] is not None and plan[2] == 0  # packed store built, never failed
    loose = {"speed": 1.5, "gear": 2.9, "tyres": (1.0, 2.0, 3.0, 4.0), "all_pos": (5, 6, 7)}
    assert row.apply(loose) == (0, 0)  # struct refuses a float for int8; numpy truncates it
    _channel_by_channel(ref, loose)
    assert held.tobytes() == ref.tobytes() and int(held["g"]["gear"][0]) == 2
    row.apply(loose)
    assert row.apply(good) == (0, 0)
    assert plan[0] is not None and plan[2] == 0  # odd values now and then keep the store
    for _ in range(3):
        row.apply(loose)
    assert plan[0] is None  # three failures in a row: no longer tried for this key set
    other = {**good, "gear": -7, "speed": 99.0}
    assert row.apply(other) == (0, 0)  # the numpy view stores it now, to the same bytes
    _channel_by_channel(ref, other)
    assert held.tobytes() == ref.tobytes()
