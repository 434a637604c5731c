"""The untrusted-input readers answer every bad document with ValueError or None, nothing else."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wrtfd.fleet.untrusted import loads, number


def test_deep_nesting_is_a_value_error() -> None:
    with pytest.raises(RecursionError):
        json.loads("[" * 100_000)  # what the plain reader does
    with pytest.raises(ValueError, match="nested too deep"):
        loads("[" * 100_000)
    with pytest.raises(ValueError):
        loads(b"\xff{")  # not UTF-8
    assert loads(b'{"a": [1, 2.5]}') == {"a": [1, 2.5]}


def test_non_finite_numbers_read_as_none() -> None:
    doc = loads('{"a": NaN, "b": [Infinity, -Infinity], "c": 1e400, "d": -1e400, "e": 1e308}')
    assert doc == {"a": None, "b": [None, None], "c": None, "d": None, "e": 1e308}
    json.dumps(doc, allow_nan=False)  # strict JSON again


@pytest.mark.parametrize(
    ("value", "want"),
    [
        (10**400, None),  # math.isfinite(10**400) raises OverflowError
        (-(10**400), None),
        (True, None),
        ("1", None),
        (None, None),
        ([1], None),
        (math.nan, None),
        (math.inf, None),
        (1e308, 1e308),
        (3, 3.0),
        (-2.5, -2.5),
    ],
)
def test_number(value: object, want: float | None) -> None:
    assert number(value) == want


def test_number_bounds() -> None:
    assert number(0, 0, 10) == 0.0
    assert number(10, 0, 10) == 10.0
    assert number(10.5, 0, 10) is None
    assert number(-1, 0) is None


@given(
    st.binary(max_size=64)
    | st.text(max_size=64)
    | st.tuples(st.integers(1, 100_000), st.sampled_from(["[", '{"a":', '[{"b": '])).map(
        lambda d: d[1] * d[0]
    )
)
def test_loads_raises_only_value_error(data: bytes | str) -> None:
    """Any other exception (RecursionError, OverflowError) fails the test."""
    try:
        loads(data)
    except ValueError:
        pass
