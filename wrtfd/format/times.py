"""Frame times (N9, docs/wrtf-notes.md): session time base + tick / rate, in whole microseconds."""

from __future__ import annotations

import numpy as np

__all__ = ["ticks_to_time_us"]


def ticks_to_time_us(ticks: np.ndarray, base_us: int, rate_hz: int) -> np.ndarray:
    """``base + round(tick * 1e6 / rate)`` as int64, exact integer math while it cannot overflow."""
    t = np.asarray(ticks, dtype=np.uint64)
    if len(t) == 0:
        return np.empty(0, dtype=np.int64)
    if int(t.max()) < (1 << 62) // 1_000_000 and 0 < rate_hz < (1 << 62):
        us = (t.astype(np.int64) * 1_000_000 + rate_hz // 2) // rate_hz
    else:
        # Absurd ticks or rate (a corrupt file): saturate instead of overflowing.
        us = np.minimum(np.round(t.astype(np.float64) * (1e6 / rate_hz)), 2.0**62).astype(np.int64)
    return us + np.int64(min(base_us, 1 << 62))
