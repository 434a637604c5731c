"""The recorder's lap-channel plug-in (see :mod:`wrtfd.recorder.derived`).

Given a track and the source whose frame fields hold the car's position, it adds to every frame

=================  =========  ===============================================================
laps.lap_number    uint16     0 before the first crossing of the start line, then 1, 2, ...
laps.lap_distance  float32 m  distance along the lane from the start line
laps.sector        uint8      timing sector (0-based) of the lap distance
laps.lap_time      float32 s  time on the current lap (since the session start on lap 0)
laps.track_sector  int16      index of the track-file sector polygon the car is in, -1 if none
laps.offset        float32 m  lateral offset from the lane, positive to the right
=================  =========  ===============================================================

and to the session footer ``laps.lap_count``, ``laps.best_lap_ms`` (0 when no lap completed)
and ``laps.best_lap_number``.

Game coordinates: Forza, F1, GT7 and Project CARS report world X, Y (up), Z, which are the
track's x, y, z. LFS OutSim reports X right, Y forward, Z up, so the track's z is ``-pos_y``
(``z_sign=-1``). ACC broadcasting gives the focused car's ground-plane X and Y (the track's x and
z); EA SPORTS WRC the car's X, Y (up), Z. Frames without a position are held (the previous values
are written again): NaN (a stale source), exactly (0, 0) (games zero positions in menus), or a
false ``active_field`` (Forza ``is_race_on``, GT7 ``on_track``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from wrtfd.errors import ConfigError
from wrtfd.tracks.geometry import LanePath, SectorMap
from wrtfd.tracks.laps import Lap, LapDetector, LapState, timing_sectors
from wrtfd.tracks.model import Track

__all__ = ["POSITION_FIELDS", "LapChannels", "PositionFields", "lap_channels_for"]


@dataclass(frozen=True, slots=True)
class PositionFields:
    """Where a protocol's frame keeps the ground position (track x and z)."""

    x: str
    z: str
    z_sign: float = 1.0
    active: str | None = None  # a field that is false while the car is not being driven


#: Defaults per protocol (names of the protocols' frame fields in ``wrtfd/schemas``).
POSITION_FIELDS: dict[str, PositionFields] = {
    "forza": PositionFields("position_x", "position_z", 1.0, "is_race_on"),
    "f1": PositionFields("world_position_x", "world_position_z"),
    "outsim": PositionFields("pos_x", "pos_y", -1.0),
    "outsim2": PositionFields("pos_x", "pos_y", -1.0),
    "codemasters": PositionFields("pos_x", "pos_z"),
    # issue 14: ACC broadcasting's focused car (world X/Y are the ground plane); EA SPORTS WRC,
    # Y up as in the earlier Codemasters games (no capture to confirm either: track_z_sign = -1
    # if a real session's map comes out mirrored)
    "acc": PositionFields("world_x", "world_y"),
    "wrc": PositionFields("vehicle_position_x", "vehicle_position_z"),
    # issue 14: GT7 (Y up; not on track in menus), Project CARS 2 / AMS2 (patch 5 full position),
    # Project CARS 1 (the viewed car's participant entry, whole metres)
    "gt7": PositionFields("position_x", "position_z", 1.0, "on_track"),
    "pcars2": PositionFields("full_position_x", "full_position_z"),
    "pcars": PositionFields("world_position_x", "world_position_z"),
}

LAP_FIELDS: list[dict[str, Any]] = [
    {
        "name": "lap_number",
        "type": "uint16",
        "description": "lap number: 0 before the first crossing of the line",
    },
    {
        "name": "lap_distance",
        "type": "float32",
        "unit": "m",
        "description": "distance along the lane from the line",
    },
    {"name": "sector", "type": "uint8", "description": "timing sector, 0-based"},
    {"name": "lap_time", "type": "float32", "unit": "s", "description": "time on the current lap"},
    {"name": "track_sector", "type": "int16", "description": "track-file sector polygon, -1 off the track"},
    {
        "name": "offset",
        "type": "float32",
        "unit": "m",
        "description": "lateral offset from the lane, + = right",
    },
]


class LapChannels:
    """Derived lap channels for one source. Implements ``wrtfd.recorder.derived.DerivedChannels``."""

    def __init__(
        self,
        track: Track,
        *,
        source: str,
        position: PositionFields,
        lane: int = 0,
        name: str = "laps",
        max_speed_mps: float = 150.0,
    ) -> None:
        self.name = name
        self.source = source
        self.position = position
        self.track = track
        self.path = LanePath(track, lane)
        self.sectors = SectorMap(track)
        self.sectors_m = timing_sectors(track, self.path)
        self.detector = LapDetector(self.path, sectors_m=self.sectors_m, max_speed_mps=max_speed_mps)
        self.definition: Mapping[str, Any] = {"fields": [dict(f) for f in LAP_FIELDS]}
        self.footer_fields: Mapping[str, Any] = {
            "lap_count": "uint16",
            "best_lap_ms": "uint32",
            "best_lap_number": "uint16",
        }
        self.start_session()

    def start_session(self) -> None:
        self.detector.reset()
        self._last: LapState | None = None
        self._track_sector = -1
        self._offset = 0.0
        self._segment = -1  # lane segment of the previous position (-1: search them all)

    def _position(self, row: Any) -> tuple[float, float] | None:
        src = row[self.source]
        p = self.position
        if p.active is not None and not bool(src[p.active]):
            return None
        x = float(src[p.x])
        z = float(src[p.z]) * p.z_sign
        if not (math.isfinite(x) and math.isfinite(z)) or (x == 0.0 and z == 0.0):
            return None
        return x, z

    def compute(self, row: np.void, time_s: float) -> None:
        pos = self._position(row)
        if pos is not None:
            x, z = pos
            if self._segment < 0:
                proj = self.path.project(x, z)
            else:
                proj = self.path.project_near(x, z, self._segment)
            self._segment = proj.segment
            self._last = self.detector.update_distance(time_s, proj.distance_m)
            self._offset = proj.offset_m
            hint = self._track_sector if self._track_sector >= 0 else None
            found = self.sectors.sector_at(x, z, hint=hint)
            self._track_sector = -1 if found is None else found
        out = row[self.name]
        st = self._last
        if st is None:
            out["lap_number"] = 0
            out["lap_distance"] = 0.0
            out["sector"] = 0
            out["lap_time"] = 0.0
        else:
            out["lap_number"] = min(st.lap, 65535)
            out["lap_distance"] = st.lap_distance_m
            out["sector"] = min(st.sector, 255)
            out["lap_time"] = st.lap_time_s
        out["track_sector"] = self._track_sector
        out["offset"] = self._offset

    @property
    def laps(self) -> list[Lap]:
        """The laps completed in this session so far, in order (lap records read the new ones)."""
        return self.detector.laps

    def live(self) -> dict[str, Any]:
        """The last and the best completed lap with sector times (for the live page)."""

        def lap(one: Any) -> dict[str, Any] | None:
            if one is None:
                return None
            return {
                "number": one.number,
                "time_s": round(one.time_s, 3),
                "sectors_s": [round(s, 3) for s in one.sector_times_s],
            }

        laps = self.detector.laps
        return {
            "lap_count": len(laps),
            "last": lap(laps[-1] if laps else None),
            "best": lap(self.detector.best_lap),
        }

    def summary(self) -> Mapping[str, Any]:
        best = self.detector.best_lap
        return {
            "lap_count": min(len(self.detector.laps), 65535),
            "best_lap_ms": round(best.time_s * 1000) if best is not None else 0,
            "best_lap_number": best.number if best is not None else 0,
        }


def lap_channels_for(
    track: Track,
    *,
    source: str,
    protocol: str,
    x_field: str | None = None,
    z_field: str | None = None,
    z_sign: float | None = None,
    active_field: str | None = None,
    lane: int = 0,
) -> LapChannels:
    """The plug-in for ``source`` speaking ``protocol``, with the protocol's position fields
    unless overridden.

    :raises ConfigError: when the protocol has no known position fields and none are given.
    """
    base = POSITION_FIELDS.get(protocol)
    if base is None and (x_field is None or z_field is None):
        raise ConfigError(
            f"track: protocol {protocol!r} has no known position fields; set x_field and z_field"
            f" (known: {', '.join(sorted(POSITION_FIELDS))})"
        )
    pos = PositionFields(
        x_field or (base.x if base else ""),
        z_field or (base.z if base else ""),
        z_sign if z_sign is not None else (base.z_sign if base else 1.0),
        active_field if active_field is not None else (base.active if base else None),
    )
    return LapChannels(track, source=source, position=pos, lane=lane)
