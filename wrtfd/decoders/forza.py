"""Forza Motorsport / Horizon "Data Out" (FM7, FH4, FH5, FH6, FM2023).

Layouts: ``shared/spec/protocols/forza.md``. The packet kind is known only by its length:
232 Sled, 311 FM7 Dash, 324 Horizon (Sled + 12-byte Horizon block + Dash shifted by 12 +
1 pad byte), 331 FM2023 Dash (+ tyre wear and track ordinal). Little-endian, packed.

Session signals: ``IsRaceOn`` going 0 -> 1 and ``TimestampMS`` jumping back start a new
session; ``TimestampMS`` is the source clock.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from wrtfd.decoders._common import (
    TupleLayout,
    check_channels,
    item_offsets,
    load_definition,
    raw_fields,
    select_channels,
)
from wrtfd.decoders.base import Decoded, RawLayout, RawValues
from wrtfd.errors import DecodeError

__all__ = ["SIZES", "ForzaDecoder", "looks_like"]

# Sled (0..231): IsRaceOn, TimestampMS, 27 floats, 4 rumble ints, 20 floats, 5 ints.
_SLED = "iI27f4i20f5i"
# Dash (79 bytes): 17 floats, LapNumber u16, 6 u8 (position, pedals, gear), 3 s8 (steer, lines).
_DASH = "17fH6B3b"
# Horizon block (232..243): CarGroup u32, SmashableVelDiff f32, SmashableMass f32.
_HORIZON = "Iff"
# FM2023 tail (311..330): TireWear x4 f32, TrackOrdinal s32.
_FM2023 = "4fi"

_SLED_SPEC: list[tuple[str | None, int]] = [
    ("is_race_on", 1),
    ("timestamp_ms", 1),
    ("engine_max_rpm", 1),
    ("engine_idle_rpm", 1),
    ("engine_rpm", 1),
    ("accel_x", 1),
    ("accel_y", 1),
    ("accel_z", 1),
    ("velocity_x", 1),
    ("velocity_y", 1),
    ("velocity_z", 1),
    ("angular_velocity_x", 1),
    ("angular_velocity_y", 1),
    ("angular_velocity_z", 1),
    ("yaw", 1),
    ("pitch", 1),
    ("roll", 1),
    ("suspension_travel_norm", 4),
    ("tire_slip_ratio", 4),
    ("wheel_rotation_speed", 4),
    ("wheel_on_rumble_strip", 4),
    ("wheel_in_puddle_depth", 4),
    ("surface_rumble", 4),
    ("tire_slip_angle", 4),
    ("tire_combined_slip", 4),
    ("suspension_travel_m", 4),
    ("car_ordinal", 1),
    ("car_class", 1),
    ("car_performance_index", 1),
    ("drivetrain_type", 1),
    ("num_cylinders", 1),
]
_DASH_SPEC: list[tuple[str | None, int]] = [
    ("position_x", 1),
    ("position_y", 1),
    ("position_z", 1),
    ("speed", 1),
    ("power", 1),
    ("torque", 1),
    ("tire_temp", 4),
    ("boost", 1),
    ("fuel", 1),
    ("distance_traveled", 1),
    ("best_lap", 1),
    ("last_lap", 1),
    ("current_lap", 1),
    ("current_race_time", 1),
    ("lap_number", 1),
    ("race_position", 1),
    ("accel", 1),
    ("brake", 1),
    ("clutch", 1),
    ("handbrake", 1),
    ("gear", 1),
    ("steer", 1),
    ("normalized_driving_line", 1),
    ("normalized_ai_brake_difference", 1),
]
_HORIZON_SPEC: list[tuple[str | None, int]] = [
    ("car_group", 1),
    ("smashable_vel_diff", 1),
    ("smashable_mass", 1),
]
_FM2023_SPEC: list[tuple[str | None, int]] = [("tire_wear", 4), ("track_ordinal", 1)]

#: Datagram length -> (kind, struct, field spec). Index positions of the first items are fixed.
SIZES: dict[int, tuple[str, struct.Struct, TupleLayout]] = {
    232: ("sled", struct.Struct("<" + _SLED), TupleLayout(_SLED_SPEC)),
    311: ("fm7_dash", struct.Struct("<" + _SLED + _DASH), TupleLayout(_SLED_SPEC + _DASH_SPEC)),
    324: (
        "horizon",
        struct.Struct("<" + _SLED + _HORIZON + _DASH + "x"),
        TupleLayout(_SLED_SPEC + _HORIZON_SPEC + _DASH_SPEC),
    ),
    331: (
        "fm2023_dash",
        struct.Struct("<" + _SLED + _DASH + _FM2023),
        TupleLayout(_SLED_SPEC + _DASH_SPEC + _FM2023_SPEC),
    ),
}
_CAR_ORDINAL_POS = 2 + 27 + 4 + 20  # first of the five trailing sled ints
_TRACK_ORDINAL_POS = 2 + 27 + 4 + 20 + 5 + 17 + 1 + 6 + 3 + 4  # last item of the 331 tuple

_HEAD = struct.Struct("<iI")  # IsRaceOn, TimestampMS
_CAR_ORDINAL = struct.Struct("<i")


def _raw_layout(
    compiled: struct.Struct, layout: TupleLayout, spec: list[tuple[str | None, int]]
) -> RawLayout:
    """The raw path's layout of one size: every channel read from the packet but ``is_race_on``
    (a bool made from an int32), which the decoder hands over."""
    fields = raw_fields(compiled.format, spec, skip=("is_race_on",))
    assert fields is not None  # numbers only

    def build(data: bytes, extra: Mapping[str, Any]) -> dict[str, Any]:
        values = layout.build(compiled.unpack(data))
        values["is_race_on"] = extra["is_race_on"]
        return values

    return RawLayout(fields, ("is_race_on",), build)


_SPECS = {
    232: _SLED_SPEC,
    311: _SLED_SPEC + _DASH_SPEC,
    324: _SLED_SPEC + _HORIZON_SPEC + _DASH_SPEC,
    331: _SLED_SPEC + _DASH_SPEC + _FM2023_SPEC,
}
#: Datagram length -> (raw layout, offset of CarOrdinal, offset of TrackOrdinal or None).
_RAW: dict[int, tuple[RawLayout, int, int | None]] = {}
for _size, (_kind, _compiled, _layout) in SIZES.items():
    _items = item_offsets(_compiled.format)
    _RAW[_size] = (
        _raw_layout(_compiled, _layout, _SPECS[_size]),
        _items[_CAR_ORDINAL_POS][0],
        _items[_TRACK_ORDINAL_POS][0] if len(_items) > _TRACK_ORDINAL_POS else None,
    )

#: A TimestampMS this far behind the previous one is a reset (new session), not reordering.
TIMESTAMP_RESET_MS = 1000


class ForzaDecoder:
    """Decodes one Data Out datagram; keeps the little state the session signals need.

    ``game``: optional label ("fh5", "fm2023"...) put into the session info, since FH4, FH5
    and FH6 cannot be told apart from the packets. ``channels``: record only these.
    """

    protocol = "forza"
    #: Hand the recorder :class:`RawValues` (the packet's bytes) instead of a dict; False: the
    #: per-field path everywhere (what the byte-identity tests compare against).
    raw_values = True

    def __init__(self, *, game: str | None = None, channels: Sequence[str] | None = None) -> None:
        definition = load_definition("forza.wrtf.yaml")
        self._channels = check_channels(definition, channels, "forza.channels")
        self.definition: dict[str, Any] = (
            select_channels(definition, self._channels) if self._channels else definition
        )
        self._keep = frozenset(self._channels) if self._channels else None
        self._game = game
        self._prev_race_on: bool | None = None
        self._prev_ts: int | None = None
        self._generation = 0
        self._ids: tuple[int, int | None] | None = None

    def decode(self, data: bytes) -> Decoded:
        entry = SIZES.get(len(data))
        if entry is None:
            raise DecodeError(
                f"forza: {len(data)}-byte datagram; expected 232, 311, 324 or 331", reason="wrong_size"
            )
        values: Mapping[str, Any]
        if self.raw_values and self._keep is None:
            if type(data) is not bytes:  # the sample keeps the packet: never a buffer reused later
                data = bytes(data)
            raw, car_at, track_at = _RAW[len(data)]
            race_int, ts = _HEAD.unpack_from(data)
            race_on = race_int != 0
            values = RawValues(raw, data, {"is_race_on": race_on})
            car_ordinal = _CAR_ORDINAL.unpack_from(data, car_at)[0]
            track = None if track_at is None else _CAR_ORDINAL.unpack_from(data, track_at)[0]
        else:
            _kind, compiled, layout = entry
            t = compiled.unpack(data)
            values = layout.build(t)
            race_on = t[0] != 0
            values["is_race_on"] = race_on
            ts = t[1]
            car_ordinal = t[_CAR_ORDINAL_POS]
            track = t[_TRACK_ORDINAL_POS] if len(t) > _TRACK_ORDINAL_POS else None

        new_session = False
        prev_ts = self._prev_ts
        if (self._prev_race_on is not None and race_on and not self._prev_race_on) or (
            prev_ts is not None and ts + TIMESTAMP_RESET_MS < prev_ts
        ):
            new_session = True
        if new_session:
            self._generation += 1
        self._prev_race_on = race_on
        self._prev_ts = ts

        ids = (car_ordinal, track)
        info = None
        if new_session or ids != self._ids:
            self._ids = ids
            info = {
                "car": f"car ordinal {ids[0]}",
                "track": "" if track is None else f"track ordinal {track}",
            }
            if self._game:
                info["game"] = self._game
        if self._keep is not None:
            values = {k: v for k, v in values.items() if k in self._keep}
        return Decoded(
            values=values,
            source_time_ns=ts * 1_000_000,
            session_key=self._generation,
            new_session=new_session,
            session_info=info,
        )


def looks_like(data: bytes) -> bool:
    """A Data Out datagram: one of the four sizes, and IsRaceOn (s32 at 0) is 0 or 1."""
    return len(data) in SIZES and data[1:4] == b"\0\0\0" and data[0] in (0, 1)
