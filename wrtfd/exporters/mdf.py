"""ASAM MDF 4 files through asammdf (the ``mdf`` extra): for CANape, asammdf's GUI, MATLAB.

One channel group per session, with its time master channel (seconds from the file's start
time, which is the first exported frame's time, N9) and every numeric channel under its
flattened name with its unit and description. Values keep their recorded types; NaN stays NaN
(MDF floats hold it); enums are their numbers (names in the channel comment); text fields are
not exported. Dropped ticks stay gaps: MDF carries a time per sample, so nothing is filled.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wrtfd import __version__
from wrtfd.exporters.channels import Channel, numeric_channels
from wrtfd.exporters.dates import session_start
from wrtfd.exporters.summary import ExportSummary, FramesProgress
from wrtfd.format.export import export_frames, frame_chunks, select_sessions
from wrtfd.format.reader import Reader, ticks_to_time_us

__all__ = ["export_mdf"]

_CHUNK = 1 << 16


def _samples(c: Channel, frames: np.ndarray) -> np.ndarray:
    col = np.ascontiguousarray(c.column(frames))
    return col.astype(np.uint8) if col.dtype == np.bool_ else col


def _comment(c: Channel) -> str:
    text = c.description
    if c.leaf.enum is not None:
        names = ", ".join(f"{v}={n}" for n, v in c.leaf.enum.values)
        text = f"{text} [{names}]" if text else f"[{names}]"
    return text


def export_mdf(
    reader: Reader,
    output: Path,
    *,
    sessions: Sequence[int] | None = None,
    progress: FramesProgress | None = None,
) -> ExportSummary:
    """Write ``sessions`` (default all) of ``reader`` to the MDF 4 file ``output``.

    :raises FormatError: a session the file does not have.
    """
    from asammdf import MDF, Signal

    chosen = [s for s in select_sessions(reader, sessions) if s.frame_count > 0]
    channels = numeric_channels(reader.schema)
    total = sum(s.frame_count for s in chosen)
    mdf: Any = MDF(version="4.10")
    start_us: int | None = None
    done = 0
    groups = 0
    for s in chosen:
        frames = export_frames(reader, s.index)
        if len(frames) == 0:  # every frame fails the frame check: skipped like an empty session
            continue
        times_us = ticks_to_time_us(frames["tick"], s.time_base_us, reader.rate_hz)
        if start_us is None:
            start_us = int(times_us[0])
            mdf.header.start_time = session_start(reader.path, s.index, start_us, tz=dt.UTC)
        group: int | None = None
        k = 0
        for chunk in frame_chunks(frames, _CHUNK):
            t_s = (times_us[k : k + len(chunk)] - start_us) / 1e6
            k += len(chunk)
            if group is None:
                signals = [
                    Signal(_samples(c, chunk), t_s, unit=c.unit, name=c.name, comment=_comment(c))
                    for c in channels
                ]
                group = mdf.append(signals, acq_name=f"session {s.index}", comment=f"session {s.index}")
                if group is None:  # older asammdf returns nothing: the group is the last one
                    group = len(mdf.groups) - 1
            else:
                mdf.extend(group, [(t_s, None), *((_samples(c, chunk), None) for c in channels)])
            done += len(chunk)
            if progress:
                progress(done, total)
        groups += 1
    meta = reader.metadata
    # the comment first: setting it re-parses the header's properties
    mdf.header.comment = f"Exported by wrtfd {__version__} from {reader.path.name}" + (
        f"; track {meta['Track']}" if "Track" in meta else ""
    )
    mdf.header.author = meta.get("Driver", "")
    mdf.header.project = meta.get("Event", "")
    mdf.header.subject = meta.get("Car", "")
    mdf.save(output, overwrite=True)
    mdf.close()
    return ExportSummary([output], done, f"{len(channels)} channels in {groups} group(s)")
