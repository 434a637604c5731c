"""Turning a sample's times into a *virtual time* on the scheduler's clock (pure, no clock read).

Every sample has ``rx_ns`` (when it was received, on the driving clock) and maybe
``source_time_ns`` (the protocol's own clock). The scheduler places a sample in the tick that
contains its virtual time ``v``. Two estimators, one per kind of source:

* :class:`SourceClockMap` (the source has a clock): ``v = source_time + offset``. The offset is
  the *lower envelope* of ``rx - source_time`` (the least-delayed sample seen), rising slowly
  (``leak_ppm``) so that clock drift is followed. Network jitter and bunching only change the
  delay, never the source time, so they cannot move a sample to another tick. A sample whose
  delay exceeds the envelope by more than the jitter window, or a source clock that goes
  backwards or jumps ahead by more than the window, *re-anchors* the offset (a new epoch). A
  pause where the source clock kept running shows as exactly the source-time gap; a pause
  where it stopped shows as the arrival gap.
* :class:`ArrivalClock` (no source clock): an alpha-beta tracker of the arrival times against
  the sample count, i.e. a synthetic source clock ``v_n = v_0 + n * period`` that follows the
  mean arrival phase and the source's real period. It starts with a least-squares fit (the
  first samples weigh equally) and settles to a slow filter, so one delayed or bunched
  datagram moves ``v`` by a small fraction of its delay. A residual above the jitter window is
  a pause: the tracker snaps forward by a whole number of periods (phase kept, so the dropped
  ticks of a 2 s pause are exact); a residual below minus the window (a burst, a faster
  source) or a pause longer than ``max_snap_ns`` re-anchors on the arrival time.

Both estimators answer :meth:`estimate` for a sample pushed earlier in the same epoch with the
*current* state, so a tick is decided with up to one jitter window of look-ahead (samples are
only placed when their tick closes, see :mod:`wrtfd.scheduler.core`).
"""

from __future__ import annotations

import math

__all__ = ["ArrivalClock", "SourceClockMap"]


class SourceClockMap:
    """Maps a source's own timestamps onto the driving clock (see module docstring)."""

    __slots__ = ("_last_rx", "_last_src", "_leak_div", "epoch", "jitter_ns", "offset_ns", "reanchors")

    def __init__(self, *, jitter_ns: int, leak_ppm: int = 500) -> None:
        self.jitter_ns = jitter_ns
        self._leak_div = max(1, 1_000_000 // max(1, leak_ppm))
        self.offset_ns: int | None = None
        self.epoch = 0
        self.reanchors = 0
        self._last_rx = 0
        self._last_src = 0

    def observe(self, rx_ns: int, src_ns: int) -> tuple[int, int]:
        """Take one sample; return ``(epoch, v_ns)``."""
        d = rx_ns - src_ns
        off = self.offset_ns
        if off is None:
            self.offset_ns = d
            self.epoch += 1
        else:
            if rx_ns > self._last_rx:
                off += (rx_ns - self._last_rx) // self._leak_div
            j = self.jitter_ns
            if src_ns < self._last_src - j or d < off - j or d - off > j:
                # Clock reset, jump, or a delay no jitter explains: start a new mapping.
                self.offset_ns = d
                self.epoch += 1
                self.reanchors += 1
            else:
                self.offset_ns = d if d < off else off
        self._last_rx = rx_ns
        self._last_src = src_ns
        return self.epoch, src_ns + (self.offset_ns or 0)

    def estimate(self, epoch: int, src_ns: int) -> int | None:
        """Virtual time of a sample of the current epoch with today's offset (None otherwise)."""
        if epoch != self.epoch or self.offset_ns is None:
            return None
        return src_ns + self.offset_ns


class ArrivalClock:
    """Sequential placement of an arrival-stamped source on its own tick grid.

    Work happens in ticks of the scheduler's rate on a grid local to the source (origin: half a
    tick before its first sample), so the sequencer never needs to know the source's own rate:

    * the next sample of a run goes to the tick after the previous one, as long as that stays
      within ``back`` ticks before and ``ahead`` ticks after the tick of its arrival time. So
      bunched or briefly delayed datagrams (Windows' 15.6 ms timer, a 31 ms stall followed by a
      burst) fill consecutive ticks and never open a gap;
    * a sample arriving more than ``back`` ticks after the run's next tick ends the run: the
      source really paused. A new run starts at the tick of its arrival corrected by the run's
      usual arrival lag, refined over the first ``refine`` samples of the run (they are still
      pending in the jitter window), so a 2 s pause gives exactly the ticks it lasted;
    * a source faster than the tick rate runs ahead of its arrival times; at ``ahead`` ticks it
      is held back, and its extra samples share a tick (the merge policy decides).
    """

    __slots__ = (
        "_ahead",
        "_back",
        "_frozen",
        "_lag",
        "_origin",
        "_period",
        "_refine",
        "_refining",
        "_run_hi",
        "_run_lag",
        "_run_lo",
        "_run_n",
        "_run_start",
        "_run_sum",
        "epoch",
        "reanchors",
    )

    def __init__(self, *, period_ns: float, back_ticks: int, ahead_ticks: int = 1, refine: int = 8) -> None:
        self._period = float(period_ns)
        self._back = max(1, back_ticks)
        self._ahead = max(0, ahead_ticks)
        self._refine = max(1, refine)
        self._origin: int | None = None
        self._lag = 0.5  # usual position of an arrival inside its tick (in ticks)
        self._run_start = 0  # tick of the run's first sample (provisional while refining)
        self._run_n = 0  # samples in the run
        self._run_sum = 0.0  # sum of (x_i - i) over the first samples of the run
        self._run_lo = 0
        self._run_hi = 0
        self._run_lag = 0.5
        self._refining = False
        self._frozen: dict[int, int] = {}  # recent runs: epoch -> final start tick
        self.epoch = 0
        self.reanchors = 0  # runs started after a pause

    def _refined(self) -> int:
        k = min(self._run_n, self._refine)
        start = math.floor(self._run_sum / k - self._run_lag + 0.5)
        return min(max(start, self._run_lo), self._run_hi)

    def _start(self) -> int:
        return self._refined() if self._refining else self._run_start

    def _new_run(self, t: int, x: float, lo: int, hi: int, *, refining: bool) -> None:
        if self.epoch:
            self._frozen[self.epoch] = self._start()
            if len(self._frozen) > 8:
                del self._frozen[min(self._frozen)]
        self.epoch += 1
        self._run_start = t
        self._run_n = 1
        self._run_sum = x
        self._run_lo = lo
        self._run_hi = hi
        self._run_lag = self._lag
        self._refining = refining and lo < hi

    def _v(self, t: int) -> int:
        return (self._origin or 0) + round((t + 0.5) * self._period)

    def observe(self, rx_ns: int) -> tuple[int, int, int]:
        """Take one sample; return ``(epoch, index in run, v_ns)``."""
        if self._origin is None:
            self._origin = rx_ns - round(self._period / 2)
            self._new_run(0, 0.5, 0, 0, refining=False)
            return self.epoch, 0, self._v(0)
        x = (rx_ns - self._origin) / self._period
        c = math.floor(x)
        start = self._start()
        nxt = start + self._run_n
        if nxt < c - self._back:
            # A real pause: a new run where this arrival usually sits in its tick.
            lo = max(nxt, c - self._back)
            hi = max(lo, c + self._ahead)
            t = min(max(math.floor(x - self._lag + 0.5), lo), hi)
            self.reanchors += 1
            self._new_run(t, x, lo, hi, refining=True)
            index = 0
        elif nxt > c + self._ahead:
            # Faster than the tick rate: hold it back (it shares the tick of the previous one).
            t = max(nxt - 1, c + self._ahead)
            self._new_run(t, x, t, t, refining=False)
            index = 0
        else:
            index = self._run_n
            self._run_n += 1
            if self._refining:
                if index < self._refine:
                    self._run_sum += x - index
                if self._run_n >= self._refine:
                    self._run_start = self._refined()
                    self._refining = False
            t = self._start() + index
        self._lag += 0.02 * ((x - t) - self._lag)
        return self.epoch, index, self._v(t)

    def estimate(self, epoch: int, index: int) -> int | None:
        """Tick centre of sample ``index`` of a recent run (the current one refined)."""
        if epoch == self.epoch:
            return self._v(self._start() + index)
        start = self._frozen.get(epoch)
        return None if start is None else self._v(start + index)
