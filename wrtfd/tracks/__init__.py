"""Track files (format 2.0): loading, validation, lane geometry and lap detection.

Pure code (no I/O beyond reading the track file, no clocks): the recorder's lap-channel plug-in,
``wrtfd laps``, ``wrtfd plot`` and the simulator all build on these pieces.
"""

from __future__ import annotations

from wrtfd.tracks.geometry import LanePath, Projection, SectorMap
from wrtfd.tracks.lapchannels import LapChannels, lap_channels_for
from wrtfd.tracks.laps import Lap, LapDetector, LapState, detect_laps, timing_sectors
from wrtfd.tracks.model import Edge, Lane, Sector, Segment, Track, load_track, parse_track
from wrtfd.tracks.validate import RULES, TrackFinding, validate_track

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
