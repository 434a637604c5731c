"""MoTeC names and conversions several games share."""

from __future__ import annotations

import math

from wrtfd.protocols._descriptor import MotecName

__all__ = ["DEG", "GEAR", "PCT_1", "PCT_255", "RPM", "SPEED", "pedal"]

SPEED = MotecName("Ground Speed", "Gnd Spd")
RPM = MotecName("Engine RPM", "RPM")
GEAR = MotecName("Gear", "Gear")
PCT_255 = 100.0 / 255.0  # a 0-255 pedal byte -> %
PCT_1 = 100.0  # a 0-1 fraction -> %
DEG = 180.0 / math.pi  # radians -> degrees

_PEDALS = {
    "throttle": ("Throttle Pos", "Thr Pos"),
    "brake": ("Brake Pos", "Brk Pos"),
    "clutch": ("Clutch Pos", "ClutchP"),
}


def pedal(kind: str, factor: float) -> MotecName:
    """``throttle``/``brake``/``clutch`` in %, from a value that is ``100/factor`` when pressed fully."""
    name, short = _PEDALS[kind]
    return MotecName(name, short, "%", factor)
