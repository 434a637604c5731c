"""Speed, pedals and gear of a source in common units, whatever game recorded them.

Which fields are used depends on the source (the names of its frame fields):

==========  ==================  ==========================  ==================
source      speed               throttle / brake            gear
==========  ==================  ==========================  ==================
forza       speed (m/s)         accel, brake (0..255)       gear
f1          speed (km/h)        throttle, brake (0..1)      gear (-1 R, 0 N)
outgauge    speed (m/s)         throttle, brake (0..1)      gear - 1 (0 = R)
codemaster  speed (m/s)         throttle, brake (0..1)      gear
GNSS        speed_mps (m/s)     (none: 0)                   (none: 0)
==========  ==================  ==========================  ==================
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from wrtfd.errors import TrackError

__all__ = ["DriverChannels", "driver_channels"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class DriverChannels:
    speed_kmh: FloatArray
    throttle: FloatArray  # 0..1
    brake: FloatArray  # 0..1
    gear: FloatArray


def _f(sub: Any, name: str) -> FloatArray:
    return np.asarray(sub[name], dtype=np.float64)


def driver_channels(frames: np.ndarray, source: str | None) -> DriverChannels:
    """Speed, pedals and gear of ``source`` in common units.

    :raises TrackError: when the source lacks a speed channel.
    """
    sub = frames if source is None else frames[source]
    names = set(sub.dtype.names or ())
    if {"accel", "brake", "speed", "position_x"} <= names:  # forza
        return DriverChannels(
            _f(sub, "speed") * 3.6, _f(sub, "accel") / 255.0, _f(sub, "brake") / 255.0, _f(sub, "gear")
        )
    if "world_position_x" in names and "speed" in names:  # f1: km/h already
        return DriverChannels(_f(sub, "speed"), _f(sub, "throttle"), _f(sub, "brake"), _f(sub, "gear"))
    if {"speed", "rpm", "display1"} <= names:  # outgauge
        return DriverChannels(
            _f(sub, "speed") * 3.6, _f(sub, "throttle"), _f(sub, "brake"), _f(sub, "gear") - 1
        )
    if "speed" in names:
        n = len(sub)
        zero = np.zeros(n)
        return DriverChannels(
            _f(sub, "speed") * 3.6,
            _f(sub, "throttle") if "throttle" in names else zero,
            _f(sub, "brake") if "brake" in names else zero,
            _f(sub, "gear") if "gear" in names else zero,
        )
    if "speed_mps" in names:  # a GNSS receiver (nmea, ubx, an imported VBO): speed only
        zero = np.zeros(len(sub))
        return DriverChannels(_f(sub, "speed_mps") * 3.6, zero, zero, zero)
    raise TrackError(f"source {source!r} has no speed channel to plot")
