"""Codemasters legacy "extradata" UDP (DiRT Rally 1/2, DiRT 4, GRID, F1 2016/2017 legacy).

Layout: ``shared/spec/protocols/codemasters_legacy.md``. A headerless array of little-endian
float32: 66 of them (264 bytes) with ``extradata="3"``, the first 38 (152 bytes) with mode 1.
F1 2016/2017's 1289-byte legacy packet starts with the same 66 floats (only those are decoded;
use ``rpm_scale=1`` there). Every value is a float on the wire; counters (gear, laps, position)
are turned into ints.
DiRT Rally sends engine speeds divided by 10 (``rpm_scale=10``, the default).

Session signal: ``run_time`` going back starts a new session (a new stage or restart); it is
also the source clock.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

from wrtfd.decoders._common import check_channels, load_definition, select_channels
from wrtfd.decoders.base import Decoded
from wrtfd.errors import ConfigError, DecodeError

__all__ = ["F1_LEGACY_SIZE", "CodemastersDecoder", "looks_like"]

_FULL = struct.Struct("<66f")  # extradata=3
_SHORT = struct.Struct("<38f")  # extradata=1
#: F1 2016/2017 "legacy" UDPPacket: the same 66 floats first; the rest (per-car data) is not mapped.
F1_LEGACY_SIZE = 1289

#: Scalar channels by float index.
_SCALARS: tuple[tuple[int, str], ...] = (
    (0, "run_time"), (1, "lap_time"), (2, "lap_distance"), (3, "progress"), (4, "pos_x"), (5, "pos_y"),
    (6, "pos_z"), (7, "speed"), (8, "vel_x"), (9, "vel_y"), (10, "vel_z"), (11, "roll_vector_x"),
    (12, "roll_vector_y"), (13, "roll_vector_z"), (14, "pitch_vector_x"), (15, "pitch_vector_y"),
    (16, "pitch_vector_z"), (29, "throttle"), (30, "steering"), (31, "brake"), (32, "clutch"),
    (34, "g_force_lat"), (35, "g_force_lon"),
    (40, "kers_level"), (41, "kers_max_level"), (43, "traction_control"), (44, "anti_lock_brakes"),
    (45, "fuel_in_tank"), (46, "fuel_capacity"), (49, "sector1_time"), (50, "sector2_time"),
    (61, "track_length"), (62, "last_lap_time"),
)  # fmt: skip
#: Integer channels by float index, with the range of their channel type (values are clamped:
#: a float on the wire can hold anything, the recorded field cannot).
_INTS: tuple[tuple[int, str, int, int], ...] = (
    (33, "gear", -128, 127), (36, "current_lap", 0, 65535), (39, "car_position", 0, 255), (42, "drs", 0, 255),
    (47, "in_pits", 0, 255), (48, "sector", 0, 255), (59, "laps_completed", 0, 65535),
    (60, "total_laps", 0, 65535), (65, "max_gears", 0, 255),
)  # fmt: skip
#: Wheel arrays (RL, RR, FL, FR on the wire) by first index.
_WHEEL_ARRAYS: tuple[tuple[int, str], ...] = (
    (17, "suspension_position"), (21, "suspension_velocity"), (25, "wheel_speed"), (51, "brake_temperature"),
    (55, "tyre_pressure"),
)  # fmt: skip
_RPMS: tuple[tuple[int, str], ...] = ((37, "engine_rpm"), (63, "max_rpm"), (64, "idle_rpm"))
_SHORT_LAST = 37  # mode 1 carries floats 0..37


def _getter(pairs: tuple[tuple[int, str], ...]) -> tuple[tuple[str, ...], Callable[[tuple[float, ...]], Any]]:
    return tuple(name for _i, name in pairs), itemgetter(*(i for i, _name in pairs))


_FULL_SCALARS = _getter(_SCALARS)
_SHORT_SCALARS = _getter(tuple(p for p in _SCALARS if p[0] <= _SHORT_LAST))
_SHORT_INTS = tuple(p for p in _INTS if p[0] <= _SHORT_LAST)
_SHORT_WHEEL_ARRAYS = tuple(p for p in _WHEEL_ARRAYS if p[0] + 3 <= _SHORT_LAST)
_SHORT_RPMS = tuple(p for p in _RPMS if p[0] <= _SHORT_LAST)

#: run_time this far behind the previous one is a new run, not jitter.
RUN_TIME_RESET_S = 0.5


def _int(v: float) -> int:
    return int(v) if math.isfinite(v) else 0


class CodemastersDecoder:
    """Decodes the 66-float (or 38-float) legacy packet.

    ``rpm_scale``: factor for the engine speed fields (10 for DiRT Rally 1/2, 1 for F1 legacy).
    ``channels``: record only these.
    """

    protocol = "codemasters"

    def __init__(self, *, rpm_scale: float = 10.0, channels: Sequence[str] | None = None) -> None:
        if not (math.isfinite(rpm_scale) and rpm_scale > 0):
            raise ConfigError(f"codemasters.rpm_scale: {rpm_scale} must be a positive number")
        self.rpm_scale = float(rpm_scale)
        definition = load_definition("codemasters.wrtf.yaml")
        chosen = check_channels(definition, channels, "codemasters.channels")
        self.definition: dict[str, Any] = select_channels(definition, chosen) if chosen else definition
        self._keep = frozenset(chosen) if chosen else None
        self._prev_run_time: float | None = None
        self._generation = 0
        self._ids: tuple[float, float, float, float] | None = None

    def decode(self, data: bytes) -> Decoded:
        size = len(data)
        if size == 264 or size == F1_LEGACY_SIZE:
            t = _FULL.unpack_from(data)
        elif size == 152:
            t = _SHORT.unpack(data)
        else:
            raise DecodeError(
                f"codemasters: {size}-byte datagram; expected 264, 152 or {F1_LEGACY_SIZE}",
                reason="wrong_size",
            )
        n = len(t)
        full = n == 66
        names, getter = _FULL_SCALARS if full else _SHORT_SCALARS
        values: dict[str, Any] = dict(zip(names, getter(t), strict=True))
        for i, name, lo, hi in _INTS if full else _SHORT_INTS:
            v = t[i]
            values[name] = min(hi, max(lo, int(v))) if -1e9 < v < 1e9 else 0  # NaN, inf fail both
        for i, name in _WHEEL_ARRAYS if full else _SHORT_WHEEL_ARRAYS:
            values[name] = (t[i + 2], t[i + 3], t[i], t[i + 1])
        scale = self.rpm_scale
        for i, name in _RPMS if full else _SHORT_RPMS:
            values[name] = t[i] * scale

        run_time = t[0]
        new_session = False
        prev = self._prev_run_time
        if prev is not None and run_time + RUN_TIME_RESET_S < prev:
            new_session = True
            self._generation += 1
        if math.isfinite(run_time):
            self._prev_run_time = run_time
        info = None
        if n == 66:
            ids = (t[61], t[63], t[64], t[65])
            if new_session or ids != self._ids:
                self._ids = ids
                info = {
                    "track": f"track length {t[61]:.1f} m",
                    "car": f"max rpm {t[63] * scale:.0f}, idle rpm {t[64] * scale:.0f}, {_int(t[65])} gears",
                }
        if self._keep is not None:
            values = {k: v for k, v in values.items() if k in self._keep}
        source_time = int(run_time * 1e9) if math.isfinite(run_time) and abs(run_time) < 1e9 else None
        return Decoded(
            values=values,
            source_time_ns=source_time,
            session_key=self._generation,
            new_session=new_session,
            session_info=info,
        )


def looks_like(data: bytes) -> bool:
    """An "extradata" datagram: 264, 152 or 1289 bytes of float32 (the F1 formats start with
    a u16 packetFormat 2018-2025 instead, which no run_time float begins with)."""
    return len(data) in (264, 152, F1_LEGACY_SIZE) and not 2018 <= int.from_bytes(data[:2], "little") <= 2030
