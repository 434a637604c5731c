"""Track files (format 2.0): loading, validation, lane geometry and lap detection.

Pure code (no I/O beyond reading the track file, no clocks): the recorder's lap-channel plug-in,
``wrtfd laps``, ``wrtfd plot`` and the simulator all build on these pieces.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wrtfd._lazy import lazy_attributes

if TYPE_CHECKING:
    from wrtfd.tracks.geometry import LanePath as LanePath
    from wrtfd.tracks.geometry import Projection as Projection
    from wrtfd.tracks.geometry import SectorMap as SectorMap
    from wrtfd.tracks.lapchannels import LapChannels as LapChannels
    from wrtfd.tracks.lapchannels import lap_channels_for as lap_channels_for
    from wrtfd.tracks.laps import Lap as Lap
    from wrtfd.tracks.laps import LapDetector as LapDetector
    from wrtfd.tracks.laps import LapState as LapState
    from wrtfd.tracks.laps import detect_laps as detect_laps
    from wrtfd.tracks.laps import timing_sectors as timing_sectors
    from wrtfd.tracks.model import Edge as Edge
    from wrtfd.tracks.model import Lane as Lane
    from wrtfd.tracks.model import Sector as Sector
    from wrtfd.tracks.model import Segment as Segment
    from wrtfd.tracks.model import Track as Track
    from wrtfd.tracks.model import load_track as load_track
    from wrtfd.tracks.model import parse_track as parse_track
    from wrtfd.tracks.validate import RULES as RULES
    from wrtfd.tracks.validate import TrackFinding as TrackFinding
    from wrtfd.tracks.validate import validate_track as validate_track

#: Name -> the module defining it, imported when the name is first used: a daemon whose sources
#: have no track loads none of the geometry, lap channels or validation.
_LAZY = {
    "LanePath": "geometry",
    "Projection": "geometry",
    "SectorMap": "geometry",
    "LapChannels": "lapchannels",
    "lap_channels_for": "lapchannels",
    "Lap": "laps",
    "LapDetector": "laps",
    "LapState": "laps",
    "detect_laps": "laps",
    "timing_sectors": "laps",
    "Edge": "model",
    "Lane": "model",
    "Sector": "model",
    "Segment": "model",
    "Track": "model",
    "load_track": "model",
    "parse_track": "model",
    "RULES": "validate",
    "TrackFinding": "validate",
    "validate_track": "validate",
}


__getattr__ = lazy_attributes(__name__, _LAZY)


__all__ = [
    "RULES",
    "Edge",
    "Lane",
    "LanePath",
    "Lap",
    "LapChannels",
    "LapDetector",
    "LapState",
    "Projection",
    "Sector",
    "SectorMap",
    "Segment",
    "Track",
    "TrackFinding",
    "detect_laps",
    "lap_channels_for",
    "load_track",
    "parse_track",
    "timing_sectors",
    "validate_track",
]
