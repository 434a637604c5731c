"""The recorder's lap-channel plug-in (see :mod:`wrtfd.recorder.derived`).

Given a track and the source whose frame fields hold the car's position, it adds to every frame

=================  =========  ===============================================================
laps.lap_number    uint16     0 before the first crossing of the start line, then 1, 2, ...
laps.lap_distance  float32 m  distance along the lane from the start line
laps.sector        uint8      timing sector (0-based) of the lap distance
laps.lap_time      float32 s  time on the current lap (since the session start on lap 0)
laps.track_sector  int16      index of the track-file sector polygon the car is in, -1 if none
laps.offset        float32 m  lateral offset from the lane, positive to the right
laps.delta         float32 s  time behind the reference lap at this lap distance (NaN: none)
laps.predicted     float32 s  predicted lap time: reference lap time + delta (NaN: none)
laps.last_delta    float32 s  the last timed lap's time minus its reference's (NaN: none yet)
=================  =========  ===============================================================

and to the session footer ``laps.lap_count``, ``laps.best_lap_ms`` (0 when no lap completed)
and ``laps.best_lap_number``; to the file's metadata ``laps.timing_sectors_m`` and
``laps.lap_length_m`` (JSON numbers, as computed), from which ``wrtfd laps`` reads back the
sector times the live page showed. Where the protocol's frame says it (its descriptor's
``lap_facts``), each completed lap also gets the game's validity and the conditions
(:attr:`LapChannels.lap_facts`, read by the lap records; the rules in docs/lap-records.md).
The delta (:mod:`wrtfd.tracks.delta`) is to the session's best lap so far, or to a recorded lap
given as ``reference``; docs/laps.md says how it is measured.

Game coordinates: Forza, F1, GT7 and Project CARS report world X, Y (up), Z, which are the
track's x, y, z. LFS OutSim reports X right, Y forward, Z up, so the track's z is ``-pos_y``
(``z_sign=-1``). ACC broadcasting gives the focused car's ground-plane X and Y (the track's x and
z); EA SPORTS WRC the car's X, Y (up), Z. Frames without a position are held (the previous values
are written again): NaN (a stale source), exactly (0, 0) (games zero positions in menus), or a
false ``active_field`` (Forza ``is_race_on``, GT7 ``on_track``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from wrtfd.errors import ConfigError
from wrtfd.protocols import LapFacts, PositionFields, all_protocols
from wrtfd.tracks.delta import PredictiveDelta, Reference
from wrtfd.tracks.geometry import LanePath, SectorMap
from wrtfd.tracks.laps import Lap, LapDetector, LapState, timing_sectors
from wrtfd.tracks.model import Track

__all__ = [
    "CONDITIONS_EVERY_S",
    "INVALID_GRACE_S",
    "POSITION_FIELDS",
    "LapChannels",
    "LapFacts",
    "PositionFields",
    "lap_channels_for",
]

#: The game's "current lap invalid" flag is not read this long after the line: the game may still
#: show the lap before's flag for a moment (its line and its packets are not ours). Games hold
#: the flag until their lap ends, so a lap invalidated in that moment still shows it later.
INVALID_GRACE_S = 1.0
#: Conditions (temperatures, weather) are sampled this often over a lap, not every frame.
CONDITIONS_EVERY_S = 0.5


#: Defaults per protocol: each protocol descriptor's ``position`` (:mod:`wrtfd.protocols`), for
#: the protocols whose frames hold one (names of their frame fields in ``wrtfd/schemas``), in
#: port-preference order (Forza, F1, OutSim, Codemasters... first): the order in which
#: :func:`wrtfd.tracks.analysis.find_position_fields` tries them on a file.
POSITION_FIELDS: dict[str, PositionFields] = {
    name: info.position
    for name, info in sorted(all_protocols().items(), key=lambda item: (item[1].port_rank, item[0]))
    if isinstance(info.position, PositionFields)
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
    {
        "name": "delta",
        "type": "float32",
        "unit": "s",
        "description": "time behind the reference lap at this lap distance, NaN without one",
    },
    {
        "name": "predicted",
        "type": "float32",
        "unit": "s",
        "description": "predicted lap time: reference lap time + delta, NaN without one",
    },
    {
        "name": "last_delta",
        "type": "float32",
        "unit": "s",
        "description": "last timed lap's time minus its reference lap's, NaN before",
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
        reference: Reference | None = None,
        facts: LapFacts | None = None,
    ) -> None:
        self.name = name
        self.facts = facts
        self._f_flag = None if facts is None else facts.invalid
        self.source = source
        self.position = position
        self.track = track
        self.path = LanePath(track, lane)
        self.sectors = SectorMap(track)
        self.sectors_m = timing_sectors(track, self.path)
        self.detector = LapDetector(self.path, sectors_m=self.sectors_m, max_speed_mps=max_speed_mps)
        self.delta = PredictiveDelta(length_m=self.path.length_m, reference=reference)
        self.definition: Mapping[str, Any] = {"fields": [dict(f) for f in LAP_FIELDS]}
        self.footer_fields: Mapping[str, Any] = {
            "lap_count": "uint16",
            "best_lap_ms": "uint32",
            "best_lap_number": "uint16",
        }
        #: File metadata (the recorder adds it): what sector times are read back with.
        self.metadata: dict[str, str] = {
            f"{name}.timing_sectors_m": json.dumps(list(self.sectors_m)),
            f"{name}.lap_length_m": json.dumps(self.path.length_m),
        }
        self.start_session()

    def start_session(self) -> None:
        self.detector.reset()
        self.delta.reset()
        self._last: LapState | None = None
        self._track_sector = -1
        self._offset = 0.0
        self._segment = -1  # lane segment of the previous position (-1: search them all)
        #: Per completed lap number: (valid, conditions) as the source said them (None: it did not).
        self.lap_facts: dict[int, tuple[bool | None, dict[str, Any] | None]] = {}
        self._begin_lap(0, 0.0)

    def _begin_lap(self, lap: int, start_s: float) -> None:
        self._f_lap = lap
        self._f_invalid_from = start_s + INVALID_GRACE_S
        self._f_invalid = False
        self._f_flag_seen = False
        self._f_next_cond = start_s
        self._f_samples: dict[str, list[float]] = {}

    def _sample_facts(self, src: Any, time_s: float) -> None:
        """The flag (until it is seen up) and, every :data:`CONDITIONS_EVERY_S`, the conditions,
        at one frame with a position; a frame costs one field read at most."""
        facts = self.facts
        if facts is None:
            return
        if self._f_flag is not None and not self._f_invalid and time_s >= self._f_invalid_from:
            self._f_flag_seen = True
            if src[self._f_flag]:
                self._f_invalid = True
        if time_s >= self._f_next_cond and facts.conditions:
            self._f_next_cond = time_s + CONDITIONS_EVERY_S
            for key, fld in facts.conditions.items():
                v = float(src[fld])
                if math.isfinite(v):
                    self._f_samples.setdefault(key, []).append(v)

    def _end_lap(self, number: int) -> None:
        """What the lap just completed (``number``) saw: invalid if the flag was up at any frame."""
        facts = self.facts
        if facts is None:
            return
        valid = None if facts.invalid is None or not self._f_flag_seen else not self._f_invalid
        conditions: dict[str, Any] = {}
        for key, values in self._f_samples.items():
            if key == "weather" and facts.weather:
                code = max(set(values), key=values.count)  # the weather the lap saw most
                i = int(code)
                conditions[key] = facts.weather[i] if 0 <= i < len(facts.weather) else f"code {i}"
            else:
                conditions[key] = round(sum(values) / len(values), 1)
        self.lap_facts[number] = (valid, conditions or None)

    def _position(self, src: Any) -> tuple[float, float] | None:
        p = self.position
        if p.active is not None and not bool(src[p.active]):
            return None
        x = float(src[p.x])
        z = float(src[p.z]) * p.z_sign
        if not (math.isfinite(x) and math.isfinite(z)) or (x == 0.0 and z == 0.0):
            return None
        return x, z

    def compute(self, row: np.void, time_s: float) -> None:
        src = row[self.source]
        pos = self._position(src)
        if pos is not None:
            x, z = pos
            if self._segment < 0:
                proj = self.path.project(x, z)
            else:
                proj = self.path.project_near(x, z, self._segment)
            self._segment = proj.segment
            now = self._last = self.detector.update_distance(time_s, proj.distance_m)
            delta = self.delta
            if now.lap != self._f_lap:
                if now.completed is not None and now.completed.number == self._f_lap:
                    self._end_lap(now.completed.number)
                self._begin_lap(now.lap, time_s if now.completed is None else now.completed.end_s)
            if self.facts is not None:
                self._sample_facts(src, time_s)
            if now.completed is not None:
                delta.complete(now.completed.number, now.completed.time_s)
            delta.update(now.lap, now.lap_distance_m, now.lap_time_s)
            self._offset = proj.offset_m
            hint = self._track_sector if self._track_sector >= 0 else None
            found = self.sectors.sector_at(x, z, hint=hint)
            self._track_sector = -1 if found is None else found
        st = self._last
        d = self.delta
        # one assignment of the whole struct, in LAP_FIELDS order: a third of the cost of nine
        # field writes (each a numpy item lookup)
        row[self.name] = (
            0 if st is None else min(st.lap, 65535),
            0.0 if st is None else st.lap_distance_m,
            0 if st is None else min(st.sector, 255),
            0.0 if st is None else st.lap_time_s,
            self._track_sector,
            self._offset,
            d.delta_s,
            d.predicted_s,
            d.last_delta_s,
        )

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
        ref = self.delta.reference
        return {
            "lap_count": len(laps),
            "last": lap(laps[-1] if laps else None),
            "best": lap(self.detector.best_lap),
            "reference": None
            if ref is None
            else {"number": ref.number, "time_s": round(ref.lap_time_s, 3), "origin": ref.origin},
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
    reference: Reference | None = None,
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
    info = all_protocols().get(protocol)
    facts = None if info is None else info.lap_facts
    return LapChannels(track, source=source, position=pos, lane=lane, reference=reference, facts=facts)
