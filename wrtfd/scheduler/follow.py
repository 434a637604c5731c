"""A recording timeline that follows a source's own clock (``recorder.clock = "source"``).

Live, the scheduler runs on the receive clock: a sample's time is when it arrived, and the
source's clock only de-jitters it (:mod:`wrtfd.scheduler.timing`). A feed that does not arrive
in real time (a simulator run ten times faster, a logger dumping its memory, a capture replayed
at full speed) is then recorded as fast as it arrived. :class:`SourceTimeline` gives the
scheduler another clock instead:

* while the *clock source* (the first driving source whose samples carry a source time) delivers,
  a sample's time is its source time plus a fixed offset, and "now" is the newest such time: the
  scheduler closes a tick once the source's clock is a jitter window past it, however fast that
  clock runs against the wall;
* when it stops delivering, the timeline holds for ``hold_ns`` (the jitter window: a feed that
  stutters is not a silence) and then runs on with the monotonic clock, so that the last ticks
  close, an idle session ends after ``session_idle_s`` of real silence, and a stop finds
  everything placed;
* a sample that would land behind what was already closed (the source clock went back: a new
  game session; or data resumes after a silence the timeline ran through) re-anchors the offset
  at the present (or one of the source's steps after its last sample, if that is later), as
  does a source clock that leaps forward by more than ``max_leap_ns``;
* samples of other sources, and samples without a source time, are placed at the timeline's
  present when they arrived.

Pure (no clock read): the caller gives every monotonic time.
"""

from __future__ import annotations

from dataclasses import replace

from wrtfd.decoders.base import Sample

__all__ = ["SourceTimeline"]


class SourceTimeline:
    """Maps samples onto a timeline driven by one source's clock (see module docstring).

    ``drivers`` names the sources allowed to drive it (the recording's frame-driving sources).
    """

    __slots__ = (
        "_drivers",
        "_hold_ns",
        "_max_leap_ns",
        "_mono_last",
        "_now",
        "_offset",
        "_src_last",
        "_step_ns",
        "_v_last",
        "clock_source",
        "reanchors",
    )

    def __init__(self, drivers: frozenset[str], *, hold_ns: int, max_leap_ns: int = 60_000_000_000) -> None:
        self._drivers = drivers
        self._hold_ns = max(0, hold_ns)
        self._max_leap_ns = max_leap_ns
        #: The source whose clock drives the timeline (None until one delivers a source time).
        self.clock_source: str | None = None
        self._offset = 0  # timeline time minus source time
        self._v_last: int | None = None  # timeline time of the newest clock sample
        self._mono_last = 0  # its monotonic receive time
        self._src_last = 0
        self._step_ns = 0  # the clock source's usual step (its last one within the hold)
        self._now: int | None = None  # the latest "now" given out: never goes back
        self.reanchors = 0

    def now(self, mono_ns: int) -> int:
        """The timeline's present at monotonic time ``mono_ns`` (non-decreasing)."""
        if self._v_last is None:
            t = mono_ns
        else:
            t = self._v_last + max(0, mono_ns - self._mono_last - self._hold_ns)
        if self._now is None or t > self._now:
            self._now = t
        return self._now

    def place(self, sample: Sample) -> Sample:
        """``sample`` with ``rx_ns`` moved onto the timeline (``rx_ns`` in: its monotonic receive time)."""
        mono = sample.rx_ns
        src = sample.source_time_ns
        if src is None or (self.clock_source != sample.source and not self._claim(sample.source)):
            return replace(sample, rx_ns=self.now(mono))
        present = self.now(mono)
        v = src + self._offset
        if self._v_last is None or v < present - self._hold_ns or src - self._src_last > self._max_leap_ns:
            start = present
            if self._v_last is not None:
                self.reanchors += 1
                # one of the source's own steps after its last sample, unless the present is later
                start = max(present, self._v_last + self._step_ns)
            self._offset = start - src
            v = start
        elif 0 < src - self._src_last <= self._hold_ns:
            self._step_ns = src - self._src_last
        self._src_last = src
        self._mono_last = mono
        if self._v_last is None or v > self._v_last:
            self._v_last = v
        if v > present:
            self._now = v
        return replace(sample, rx_ns=v)

    def _claim(self, source: str) -> bool:
        if self.clock_source is None and source in self._drivers:
            self.clock_source = source
            return True
        return False
