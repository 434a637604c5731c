"""Frame times (N9): exact while the numbers are sane, saturated (never an exception) when a
corrupt file gives absurd ticks, time bases or rates (the header's rate is a uint64)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from wrtfd.format.times import ticks_to_time_us

U64 = st.integers(0, 2**64 - 1)


@given(st.lists(U64, max_size=8), U64, st.integers(1, 2**64 - 1))
def test_any_uint64_header_values_give_int64_times(ticks: list[int], base: int, rate: int) -> None:
    us = ticks_to_time_us(np.array(ticks, dtype=np.uint64), base, rate)
    assert us.dtype == np.int64 and len(us) == len(ticks)


@given(st.lists(st.integers(0, 10**9), max_size=8), st.integers(0, 2**62), st.integers(1, 100_000))
def test_sane_values_are_exact(ticks: list[int], base: int, rate: int) -> None:
    us = ticks_to_time_us(np.array(ticks, dtype=np.uint64), base, rate)
    assert us.tolist() == [base + (t * 1_000_000 + rate // 2) // rate for t in ticks]


def test_a_rate_beyond_int64_saturates_instead_of_overflowing() -> None:
    """Found by the random-corruption test: one byte of the header made the rate 2**63 + 100."""
    us = ticks_to_time_us(np.array([0, 5], dtype=np.uint64), 1_000, 2**63 + 100)
    assert us.tolist() == [1_000, 1_000]
