"""Turning a sample's times into a *virtual time* on the scheduler's clock (pure, no clock read).

Every sample has ``rx_ns`` (when it was received, on the driving clock) and maybe
``source_time_ns`` (the protocol's own clock). :class:`SourceClockMap` maps a source clock onto
the driving clock; :class:`ArrivalClock` places an arrival-stamped source's samples on its own
cadence. How each works, and why, is in ``docs/timing.md`` ("Where a sample goes").

Both answer :meth:`estimate` for a sample pushed earlier in the same epoch with the *current*
state, so a tick is decided with up to one jitter window of look-ahead.
"""

from __future__ import annotations

import math
from collections import deque

from wrtfd.defaults import CLOCK_DRIFT_WINDOW_S, CLOCK_OFFSET_STEP_S

__all__ = ["ArrivalClock", "SourceClockMap"]


class SourceClockMap:
    """Maps a source's own timestamps onto the driving clock (see module docstring).

    The offset follows the least delay seen, but moves only in steps larger than ``hyst_ns``:
    down at once when a datagram is that much less delayed, up when the least delay of the last
    ``window_ns`` .. ``2 * window_ns`` is that much above it (clock drift). Between steps it is
    constant, so samples that sit exactly on a tick boundary (a millisecond game clock at 60 Hz)
    never flip between ticks with the jitter.
    """

    __slots__ = (
        "_last_src",
        "_min_cur",
        "_min_prev",
        "_win_end",
        "epoch",
        "hyst_ns",
        "jitter_ns",
        "offset_ns",
        "reanchors",
        "window_ns",
    )

    def __init__(
        self,
        *,
        jitter_ns: int,
        hyst_ns: int = round(CLOCK_OFFSET_STEP_S * 1e9),
        window_ns: int = round(CLOCK_DRIFT_WINDOW_S * 1e9),
    ) -> None:
        self.jitter_ns = jitter_ns
        self.hyst_ns = min(hyst_ns, jitter_ns)
        self.window_ns = window_ns
        self.offset_ns: int | None = None
        self.epoch = 0
        self.reanchors = 0
        self._last_src = 0
        self._min_cur: int | None = None
        self._min_prev: int | None = None
        self._win_end = 0

    def _anchor(self, d: int, rx_ns: int) -> None:
        self.offset_ns = d
        self.epoch += 1
        self._min_cur = d
        self._min_prev = None
        self._win_end = rx_ns + self.window_ns

    def observe(self, rx_ns: int, src_ns: int, open_from_ns: int | None = None) -> tuple[int, int]:
        """Take one sample; return ``(epoch, v_ns)``.

        ``open_from_ns``: the start of the earliest tick still open (None: none closed yet). A
        sample more delayed than the jitter whose own time is still there is kept on the
        mapping: the receiver held it up (a stalled daemon reading a serial port), the source
        clock did not stop; placing it by arrival would pile a stall's fixes into one tick."""
        d = rx_ns - src_ns
        off = self.offset_ns
        j = self.jitter_ns
        if off is None:
            self._anchor(d, rx_ns)
        elif (
            src_ns < self._last_src - j
            or d < off - j
            or (d - off > j and (open_from_ns is None or src_ns + off < open_from_ns))
        ):
            # Clock reset, jump, or a delay no jitter explains: start a new mapping.
            self._anchor(d, rx_ns)
            self.reanchors += 1
        else:
            cur = self._min_cur
            if rx_ns >= self._win_end:
                self._min_prev = cur
                cur = None
                self._win_end = rx_ns + self.window_ns
            if cur is None or d < cur:
                cur = d
            self._min_cur = cur
            if d < off - self.hyst_ns:
                self.offset_ns = off = d
            else:
                prev = self._min_prev
                if prev is not None:
                    least = prev if prev < cur else cur
                    if least > off + self.hyst_ns:
                        self.offset_ns = off = least
            self._last_src = src_ns
            return self.epoch, src_ns + off
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
    tick before its first sample). The sequencer learns the source's usual spacing in ticks
    (the mean of recent inter-arrival times, pauses and bursts left out), rounded to a whole
    ``step`` (a 60 Hz game at 60 Hz: 1; a 10 Hz GPS at 60 Hz: 6):

    * the next sample of a *run* goes ``step`` ticks after the previous one, as long as that
      stays within ``back`` ticks before and ``ahead`` ticks after the tick of its arrival time.
      So bunched or briefly delayed datagrams (Windows' 15.6 ms timer, a 31 ms stall followed by
      a burst) fill consecutive ticks and never open a gap;
    * a sample arriving more than ``back`` ticks after the run's next tick ends the run: the
      source really paused. A new run starts at the tick of its arrival corrected by the usual
      arrival lag, refined over the first ``refine`` samples of the run (they are still pending
      in the jitter window), so a 2 s pause gives exactly the ticks it lasted;
    * a source faster than its step runs ahead of its arrival times; at ``ahead`` ticks it is
      held back, and its extra samples share a tick (the merge policy decides).

    The step is the usual spacing rounded to whole ticks (with hysteresis). A source whose rate
    is not a divisor of the tick rate (45 Hz into 60 Hz) runs behind its arrivals and resyncs
    at each pause rule: its samples may sit up to ``back`` ticks early. Choose the tick rate
    to match the driving source.
    """

    __slots__ = (
        "_after_pause",
        "_ahead",
        "_back",
        "_deltas",
        "_frozen",
        "_lag",
        "_last_x",
        "_nd",
        "_origin",
        "_period",
        "_rate_ticks",
        "_refine",
        "_refining",
        "_run_hi",
        "_run_lag",
        "_run_lo",
        "_run_n",
        "_run_start",
        "_run_step",
        "_run_sum",
        "_spacing",
        "_sum",
        "epoch",
        "reanchors",
    )

    def __init__(self, *, period_ns: float, back_ticks: int, ahead_ticks: int = 1, refine: int = 8) -> None:
        self._period = float(period_ns)
        self._rate_ticks = 1e9 / self._period  # ticks per second
        self._back = max(1, back_ticks)
        self._ahead = max(0, ahead_ticks)
        self._refine = max(1, refine)
        self._origin: int | None = None
        self._lag = 0.5  # usual position of an arrival inside its tick (in ticks)
        self._spacing = 1.0  # usual inter-arrival time, in ticks
        self._nd = 0  # inter-arrival times learnt
        # Prior: a driving source usually runs at the tick rate (one sample per tick).
        self._deltas: deque[float] = deque([1.0] * 4, maxlen=32)
        self._sum = 4.0
        self._after_pause = False
        self._last_x = 0.0
        self._run_start = 0  # tick of the run's first sample (provisional while refining)
        self._run_step = 1
        self._run_n = 0  # samples in the run
        self._run_sum = 0.0  # sum of (x_i - i * step) over the first samples of the run
        self._run_lo = 0
        self._run_hi = 0
        self._run_lag = 0.5
        self._refining = False
        self._frozen: dict[int, tuple[int, int]] = {}  # recent runs: epoch -> (start, step)
        self.epoch = 0
        self.reanchors = 0  # runs started after a pause

    def _refined(self) -> int:
        k = min(self._run_n, self._refine)
        start = math.floor(self._run_sum / k - self._run_lag + 0.5)
        return min(max(start, self._run_lo), self._run_hi)

    def _start(self) -> int:
        return self._refined() if self._refining else self._run_start

    def _new_run(self, t: int, x: float, step: int, lo: int, hi: int, *, refining: bool) -> None:
        if self.epoch:
            self._frozen[self.epoch] = (self._start(), self._run_step)
            if len(self._frozen) > 8:
                del self._frozen[min(self._frozen)]
        self.epoch += 1
        self._run_start = t
        self._run_step = step
        self._run_n = 1
        self._run_sum = x
        self._run_lo = lo
        self._run_hi = hi
        self._run_lag = self._lag
        self._refining = refining and lo < hi

    def _v(self, t: int) -> int:
        return (self._origin or 0) + round((t + 0.5) * self._period)

    def _learn(self, x: float) -> None:
        """Track the mean of recent inter-arrival times. Bunches (a 0 after a doubled delta)
        average out; pauses, and the burst of queued datagrams that may follow one, are left out."""
        d = x - self._last_x
        self._last_x = x
        limit = self._rate_ticks if self._nd < 8 else 3.0 * self._spacing + self._back
        if d > limit or d < 0.0:
            self._after_pause = True
            return
        if self._after_pause:
            if d < 0.5 * self._spacing:
                return  # part of a burst of backlog
            self._after_pause = False
        deltas = self._deltas
        if len(deltas) == deltas.maxlen:
            self._sum -= deltas[0]
        deltas.append(d)
        self._sum += d
        self._nd += 1
        self._spacing = max(self._sum / len(deltas), 0.05)

    def observe(self, rx_ns: int) -> tuple[int, int, int]:
        """Take one sample; return ``(epoch, index in run, v_ns)``."""
        if self._origin is None:
            self._origin = rx_ns - round(self._period / 2)
            self._last_x = 0.5
            self._new_run(0, 0.5, 1, 0, 0, refining=False)
            return self.epoch, 0, self._v(0)
        x = (rx_ns - self._origin) / self._period
        self._learn(x)
        c = math.floor(x)
        step = self._run_step
        if abs(self._spacing - step) > 0.6:  # hysteresis: a noisy estimate must not flap
            step = max(1, round(self._spacing))
        start = self._start()
        last = start + (self._run_n - 1) * self._run_step
        nxt = last + step
        if step != self._run_step or nxt < c - self._back:
            # A real pause (or a new cadence): a new run where this arrival usually sits.
            lo = max(last + 1, c - self._back)
            hi = max(lo, c + self._ahead)
            t = min(max(math.floor(x - self._lag + 0.5), lo), hi)
            self.reanchors += step == self._run_step
            self._new_run(t, x, step, lo, hi, refining=True)
            index = 0
        elif nxt > c + self._ahead and not self._refining:
            # Faster than its cadence: hold it back (it may share the previous tick).
            t = max(last, c + self._ahead)
            self._new_run(t, x, step, t, t, refining=False)
            index = 0
        else:
            index = self._run_n
            self._run_n += 1
            if self._refining:
                if index < self._refine:
                    self._run_sum += x - index * step
                if self._run_n >= self._refine:
                    self._run_start = self._refined()
                    self._refining = False
            t = self._start() + index * step
        self._lag += 0.02 * ((x - t) - self._lag)
        return self.epoch, index, self._v(t)

    def estimate(self, epoch: int, index: int) -> int | None:
        """Tick centre of sample ``index`` of a recent run (the current one refined)."""
        if epoch == self.epoch:
            return self._v(self._start() + index * self._run_step)
        frozen = self._frozen.get(epoch)
        return None if frozen is None else self._v(frozen[0] + index * frozen[1])
