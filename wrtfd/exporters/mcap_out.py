"""MCAP files for Foxglove, through the ``mcap`` library (the ``mcap`` extra).

Two encodings of the frames (``encoding``):

- ``cdr`` (the default): one ``/frames`` topic, a ROS 2 message per frame (``ros2msg`` schema,
  CDR, :mod:`wrtfd.exporters.cdr`) with a nested message per source, encoded a batch at a time;
- ``json``: :class:`~wrtfd.exporters.foxglove.FoxgloveEncoder`'s JSON-schema'd topic per source,
  as the live Foxglove server sends them (about 10x slower to write, larger).

Either way GPS sources also get ``foxglove.LocationFix`` topics (JSON), and sessions, laps and
markers are ``foxglove.Log`` messages on ``/wrtfd/log``. Log and publish times are the frames'
times (N9). The file's metadata record ``wrtfd`` carries the recording's metadata (definition
excluded).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from wrtfd import __version__
from wrtfd.errors import ExportError, TrackError
from wrtfd.exporters.cdr import cdr_layout
from wrtfd.exporters.dates import check_dated
from wrtfd.exporters.foxglove import (
    LOG_SCHEMA_BYTES,
    LOG_TOPIC,
    FoxgloveEncoder,
    LogLevel,
    log_message,
)
from wrtfd.exporters.summary import ExportSummary, FramesProgress
from wrtfd.format.export import export_frames, frame_chunks, select_sessions
from wrtfd.format.reader import Reader, ticks_to_time_us
from wrtfd.format.spec import SCHEMA_METADATA_KEY
from wrtfd.tracks.analysis import session_laps
from wrtfd.tracks.laps import format_lap_time
from wrtfd.tracks.model import Track

__all__ = ["ENCODINGS", "FRAMES_TOPIC", "export_mcap"]

_CHUNK = 4096
ENCODINGS = ("cdr", "json")
FRAMES_TOPIC = "/frames"


def export_mcap(
    reader: Reader,
    output: Path,
    *,
    sessions: Sequence[int] | None = None,
    track: Track | None = None,
    progress: FramesProgress | None = None,
    encoding: str = "cdr",
) -> ExportSummary:
    """Write ``sessions`` (default all) of ``reader`` to the MCAP file ``output``, the frames in
    ``encoding`` (``cdr`` or ``json``).

    :raises FormatError: a session the file does not have.
    :raises TrackError: ``track`` given but the recording has no positions.
    :raises ExportError: an unknown encoding.
    """
    from mcap.writer import CompressionType, Writer

    if encoding not in ENCODINGS:
        raise ExportError(f"MCAP encoding {encoding!r}: use {' or '.join(ENCODINGS)}")
    chosen = select_sessions(reader, sessions)
    total = sum(s.frame_count for s in chosen)
    encoder = FoxgloveEncoder(reader.schema)
    layout = cdr_layout(reader.schema) if encoding == "cdr" else None
    # with CDR, the JSON encoder writes only the GPS fixes (foxglove.LocationFix)
    json_topics = [t for t in encoder.topics if layout is None or t.gps is not None]
    done = messages = 0
    with open(output, "wb") as f:
        w = Writer(f, compression=CompressionType.ZSTD)
        w.start(profile="", library=f"wrtfd {__version__}")
        ids: dict[str, int] = {}
        for t in json_topics:
            sid = w.register_schema(t.schema_name, "jsonschema", t.schema_bytes)
            ids[t.topic] = w.register_channel(t.topic, "json", sid)
        frames_id = -1
        if layout is not None:
            sid = w.register_schema(layout.schema_name, "ros2msg", layout.schema_text)
            frames_id = w.register_channel(FRAMES_TOPIC, "cdr", sid)
        size = layout.dtype.itemsize if layout is not None else 0
        log_sid = w.register_schema("foxglove.Log", "jsonschema", LOG_SCHEMA_BYTES)
        log_id = w.register_channel(LOG_TOPIC, "json", log_sid)
        meta = {k: v for k, v in reader.metadata.items() if k != SCHEMA_METADATA_KEY}
        w.add_metadata("wrtfd", {"source_file": reader.path.name, "rate_hz": str(reader.rate_hz), **meta})
        for s in chosen:
            frames = export_frames(reader, s.index)
            if len(frames) == 0:
                continue
            times_us = ticks_to_time_us(frames["tick"], s.time_base_us, reader.rate_hz)
            check_dated(reader.path, s.index, times_us)
            logs = _session_logs(s.index, frames, times_us, track, reader.rate_hz)
            k = 0
            for chunk in frame_chunks(frames, _CHUNK):
                t_chunk = times_us[k : k + len(chunk)]
                k += len(chunk)
                end_ns = int(t_chunk[-1]) * 1000
                while logs and logs[0][0] <= end_ns:
                    t_ns, msg = logs.pop(0)
                    w.add_message(log_id, log_time=t_ns, data=msg, publish_time=t_ns)
                    messages += 1
                if layout is not None:
                    raw = layout.encode(chunk, s.index)
                    add = w.add_message
                    for i, t_ns in enumerate((t_chunk.astype(np.int64) * 1000).tolist()):
                        add(frames_id, log_time=t_ns, data=raw[i * size : (i + 1) * size], publish_time=t_ns)
                    messages += len(chunk)
                if json_topics:
                    for topic, t_ns, msg in encoder.encode(chunk, t_chunk, s.index, json_topics):
                        w.add_message(ids[topic.topic], log_time=t_ns, data=msg, publish_time=t_ns)
                        messages += 1
                done += len(chunk)
                if progress:
                    progress(done, total)
            for t_ns, msg in logs:
                w.add_message(log_id, log_time=t_ns, data=msg, publish_time=t_ns)
                messages += 1
        w.finish()
    topics = len(json_topics) + 1 + (layout is not None)
    return ExportSummary([output], done, f"{messages} messages on {topics} topics ({encoding})")


def _session_logs(
    index: int, frames: np.ndarray, times_us: np.ndarray, track: Track | None, rate_hz: int
) -> list[tuple[int, bytes]]:
    """Log messages of a session in time order: its start, each completed lap, each marker
    (a WARNING, so Foxglove's log panel makes them stand out), its end."""
    from wrtfd.format.markers import markers_in

    first_ns, last_ns = int(times_us[0]) * 1000, int(times_us[-1]) * 1000
    out = [(first_ns, log_message(first_ns, LogLevel.INFO, f"session {index} start ({len(frames)} frames)"))]
    try:
        laps = session_laps(frames, (times_us - times_us[0]) / 1e6, track)
    except TrackError:
        if track is not None:
            raise
        laps = None
    if laps is not None:
        best = laps.best
        for lap in laps.laps:
            t_ns = first_ns + round(lap.end_s * 1e9)
            mark = " (best)" if lap is best else ""
            text = f"session {index} lap {lap.number}: {format_lap_time(lap.time_s)}{mark}"
            out.append((t_ns, log_message(t_ns, LogLevel.INFO, text)))
    ticks = frames["tick"]
    for k, m in enumerate(markers_in(frames), start=1):
        t_ns = first_ns + round((m.tick - int(ticks[0])) * 1e9 / rate_hz)
        text = f"session {index} marker {k} at tick {m.tick}" + (f": {m.note}" if m.note else "")
        out.append((t_ns, log_message(t_ns, LogLevel.WARNING, text)))
    out.append((last_ns, log_message(last_ns, LogLevel.INFO, f"session {index} end")))
    out.sort(key=lambda item: item[0])
    return out
