"""Per-second rates from monotonically growing counters (pure: the caller gives the time)."""

from __future__ import annotations

__all__ = ["RateMeter"]


class RateMeter:
    """Rate of a counter over the last update interval, smoothed a little against jitter.

    ``alpha`` weighs the newest interval; 1.0 means no smoothing.
    """

    __slots__ = ("_alpha", "_last_count", "_last_s", "rate")

    def __init__(self, alpha: float = 0.5) -> None:
        self._alpha = alpha
        self._last_count: int | None = None
        self._last_s = 0.0
        self.rate = 0.0

    def update(self, count: int, now_s: float) -> float:
        if self._last_count is None or count < self._last_count:
            self._last_count, self._last_s = count, now_s
            return self.rate
        dt = now_s - self._last_s
        if dt <= 0:
            return self.rate
        instant = (count - self._last_count) / dt
        self.rate = instant if self.rate == 0.0 else self._alpha * instant + (1 - self._alpha) * self.rate
        self._last_count, self._last_s = count, now_s
        return self.rate
