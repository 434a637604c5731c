"""In-laps and out-laps from a circuit's pit-lane lines (pure: no I/O, no clock).

As lap timers do: crossing the pit-entry line makes the lap in progress an in-lap; crossing the
pit-exit line, or beginning a lap in the pit lane (between an entry and an exit crossing), makes
it an out-lap. Where the pit lane leaves the track before the start/finish line and joins it
after (the line spans the pit lane), the lap that ends in the pit lane is ``"in"`` and the next,
which begins there, ``"out"``; where the pit exit is before the line, one lap holds the whole
stop and is ``"in-out"`` (so is a lap that leaves the pits and comes straight back in). A
drive-through is flagged as a stop is: the lines tell, not the speed. docs/circuits.md, "Pit lane".

:class:`PitLane` is fed the same smoothed steps as :class:`~wrtfd.tracks.gnsslaps.GnssLapTimer`
and keeps its state apart from the timer's, which only asks it for events and a lap's flag.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from wrtfd.tracks.gnsslaps import PlaneLine

__all__ = ["PIT_ENTRY", "PIT_EXIT", "PIT_FLAGS", "PitLane", "racing_laps"]

#: Event indices of the two lines among the timer's line events (the timer's own are >= 0).
PIT_ENTRY = -1
PIT_EXIT = -2
#: The values of ``Lap.pit`` (None: a lap on the track).
PIT_FLAGS = ("in", "out", "in-out")

L = TypeVar("L")


class PitLane:
    """Pit-entry and pit-exit lines (either may be missing) and where the car is with them."""

    def __init__(self, entry: PlaneLine | None, exit_: PlaneLine | None) -> None:
        self.lines = {k: line for k, line in ((PIT_ENTRY, entry), (PIT_EXIT, exit_)) if line is not None}
        self.reset()

    def reset(self) -> None:
        """A new session: the car is on the track."""
        self._signs = {k: line.sign for k, line in self.lines.items()}
        self.in_pit = False
        self._entered = False
        self._exited = False
        self._began_in_pit = False

    def events(self, x0: float, y0: float, x1: float, y1: float) -> list[tuple[float, int, int]]:
        """The pit lines the step crosses the way the car drives: ``(fraction, PIT_ENTRY or
        PIT_EXIT, direction)`` (an ``"either"`` line learns its way at its first crossing)."""
        out = []
        for k, line in self.lines.items():
            hit = line.crossing(x0, y0, x1, y1)
            if hit is None:
                continue
            if self._signs[k] == 0:
                self._signs[k] = hit[1]
            if hit[1] == self._signs[k]:
                out.append((hit[0], k, hit[1]))
        return out

    def cross(self, which: int) -> None:
        """The car crossed ``PIT_ENTRY`` or ``PIT_EXIT`` (in the driving direction)."""
        if which == PIT_ENTRY:
            self.in_pit = self._entered = True
        elif which == PIT_EXIT:
            self.in_pit = False
            self._exited = True

    def lap_flag(self) -> str | None:
        """The lap in progress: ``"in"``, ``"out"``, ``"in-out"`` or None (on the track)."""
        out = self._began_in_pit or self._exited
        if self._entered:
            return "in-out" if out else "in"
        return "out" if out else None

    def new_lap(self) -> None:
        """The start/finish line was crossed: a lap begins (in the pit lane or not)."""
        self._entered = self._exited = False
        self._began_in_pit = self.in_pit


def racing_laps(laps: Sequence[L]) -> list[L]:
    """The laps that may be a best or a reference: those not flagged as pit laps."""
    return [lap for lap in laps if getattr(lap, "pit", None) is None]
