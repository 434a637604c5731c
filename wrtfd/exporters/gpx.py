"""GPX 1.1 export (``wrtfd export run.wrtf -o run.gpx``) through gpxpy (the ``gnss`` extra), for
the video-overlay tools that lay a GPS track over camera footage (GoPro, Garmin VIRB, RaceRender,
DashWare...).

One track of the recording's GNSS source (the one with latitude and longitude); one track
segment per session, and a new one where ticks were dropped for more than a second, so an
overlay never draws a straight line across a gap. Each point has ``lat``, ``lon``, ``time``
(UTC) and ``ele`` where the source has a height: what every such tool reads (GPX 1.1 has no
speed element; the tools derive it from the points). Frames that fail the frame check and
frames without a fix (NaN position) are left out.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from wrtfd import __version__
from wrtfd.errors import ExportError
from wrtfd.exporters.dates import check_dated
from wrtfd.exporters.summary import ExportSummary, FramesProgress
from wrtfd.exporters.vbo import gnss_fields, gnss_source
from wrtfd.format.export import export_frames, select_sessions
from wrtfd.format.reader import Reader, ticks_to_time_us

__all__ = ["GAP_S", "export_gpx"]

#: A pause longer than this starts a new track segment.
GAP_S = 1.0


def export_gpx(
    reader: Reader,
    output: Path,
    *,
    sessions: Sequence[int] | None = None,
    progress: FramesProgress | None = None,
) -> ExportSummary:
    """Write the GNSS track of ``sessions`` (default all) of ``reader`` to ``output``.

    :raises ExportError: the recording has no GNSS position.
    :raises FormatError: a session the file does not have.
    """
    import gpxpy.gpx

    source, channels = gnss_source(reader, "a GPX track")
    fields = gnss_fields(channels, source)
    lat_c, lon_c = fields.get("lat"), fields.get("long")
    if lat_c is None or lon_c is None:  # gnss_source found both: never
        raise ExportError(f"{reader.path}: no GNSS position for a GPX track")
    ele_c = fields.get("height")
    gpx = gpxpy.gpx.GPX()
    gpx.creator = f"wrtfd {__version__}"
    track = gpxpy.gpx.GPXTrack(name=reader.metadata.get("Track") or reader.path.stem)
    gpx.tracks.append(track)
    points = 0
    for s in select_sessions(reader, sessions):
        frames = export_frames(reader, s.index)
        if len(frames) == 0:
            continue
        times_us = ticks_to_time_us(frames["tick"], s.time_base_us, reader.rate_hz)
        check_dated(reader.path, s.index, times_us)
        lat = np.asarray(lat_c.column(frames), dtype=np.float64)
        lon = np.asarray(lon_c.column(frames), dtype=np.float64)
        ele = np.asarray(ele_c.column(frames), dtype=np.float64) if ele_c is not None else None
        ok = np.isfinite(lat) & np.isfinite(lon) & (np.abs(lat) <= 90) & (np.abs(lon) <= 180)
        segment: gpxpy.gpx.GPXTrackSegment | None = None
        last_us: int | None = None
        for i in np.flatnonzero(ok).tolist():
            t_us = int(times_us[i])
            if segment is None or last_us is None or t_us - last_us > GAP_S * 1e6:
                segment = gpxpy.gpx.GPXTrackSegment()
                track.segments.append(segment)
            last_us = t_us
            e = float(ele[i]) if ele is not None and np.isfinite(ele[i]) else None
            when = dt.datetime.fromtimestamp(t_us / 1e6, tz=dt.UTC)
            segment.points.append(
                gpxpy.gpx.GPXTrackPoint(float(lat[i]), float(lon[i]), elevation=e, time=when)
            )
            points += 1
        if progress:
            progress(points, points)
    if points == 0:
        raise ExportError(f"{reader.path}: no GNSS fix to export")
    output.write_text(gpx.to_xml(version="1.1"), encoding="utf-8")
    return ExportSummary([output], points, f"{points} points in {len(track.segments)} segment(s)")
