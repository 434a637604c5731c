"""Exports of WRTF recordings to the formats other tools open.

======== ============================== ========================= =====================
suffix   what                           needs (extra)             module
======== ============================== ========================= =====================
.csv     flat table                     (pyarrow if installed)    wrtfd.format.export
.parquet flat table                     pyarrow (``parquet``)     wrtfd.format.export
.ld      MoTeC i2 log + ``.ldx``        nothing                   wrtfd.exporters.motec
.mcap    Foxglove (ROS 2 CDR or JSON)   mcap (``mcap``)           wrtfd.exporters.mcap_out
.mf4     ASAM MDF 4                     asammdf (``mdf``)         wrtfd.exporters.mdf
.vbo     Racelogic VBO (Circuit Tools)  nothing                   wrtfd.exporters.vbo
.gpx     GPX 1.1 track (video overlays) gpxpy (``gnss``)          wrtfd.exporters.gpx
======== ============================== ========================= =====================

Every export goes through :func:`export_recording`: the format comes from the suffix, a missing
optional dependency is reported (one line naming the extra) before anything is read, and the
files are written atomically (:mod:`wrtfd.exporters.atomic`). Exporters are adapters at the
edge: they use the format library and the track analysis, never the daemon. Which channels and
which frames they write is decided in one place each (:func:`wrtfd.format.export.export_leaves`,
:func:`wrtfd.format.export.export_frames`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from wrtfd.errors import ExportError
from wrtfd.exporters.atomic import AtomicOutputs
from wrtfd.exporters.summary import ExportSummary, FramesProgress
from wrtfd.format.reader import Reader
from wrtfd.tracks.model import Track

__all__ = ["FORMATS", "ExportFormat", "ExportSummary", "export_recording", "format_of", "require_extra"]


@dataclass(frozen=True, slots=True)
class ExportFormat:
    name: str
    what: str
    module: str | None  # a module that must be importable, None: nothing beyond numpy
    extra: str | None  # the extra that installs it


FORMATS: dict[str, ExportFormat] = {
    "csv": ExportFormat("csv", "CSV", None, None),
    "parquet": ExportFormat("parquet", "Parquet", "pyarrow", "parquet"),
    "ld": ExportFormat("ld", "MoTeC .ld", None, None),
    "mcap": ExportFormat("mcap", "MCAP", "mcap", "mcap"),
    "mf4": ExportFormat("mf4", "MDF4", "asammdf", "mdf"),
    "vbo": ExportFormat("vbo", "VBO", None, None),
    "gpx": ExportFormat("gpx", "GPX", "gpxpy", "gnss"),
}


def require_extra(fmt: ExportFormat) -> None:
    """Fail early, with one line naming the extra, when the format's library is missing.

    :raises ExportError: the module cannot be imported.
    """
    if fmt.module is None:
        return
    try:
        importlib.import_module(fmt.module)
    except ImportError:
        raise ExportError(
            f"{fmt.what} export needs the {fmt.module} package: install wrtfd[{fmt.extra}]"
        ) from None


def format_of(output: Path, fmt: str | None = None) -> ExportFormat:
    """The export format named by ``fmt`` or by ``output``'s suffix.

    :raises ExportError: an unknown format.
    """
    name = (fmt or output.suffix.lstrip(".")).lower()
    if name == "mdf":
        name = "mf4"
    found = FORMATS.get(name)
    if found is None:
        known = ", ".join(f".{k}" for k in FORMATS)
        raise ExportError(f"{output}: unknown export format {name!r} (use {known})")
    return found


def export_recording(
    reader: Reader,
    output: Path,
    *,
    fmt: str | None = None,
    sessions: Sequence[int] | None = None,
    track: Track | None = None,
    motec_names: bool = True,
    progress: FramesProgress | None = None,
    with_check: bool = False,
    mcap_encoding: str = "cdr",
    guard: Callable[[Path], None] | None = None,
) -> ExportSummary:
    """Export ``sessions`` (default: all) of ``reader`` to ``output``; atomic.

    ``track`` re-detects laps from positions for the formats that carry laps (MoTeC beacons,
    MCAP log messages); without it the recorded lap channels are used, if any. ``guard`` sees
    each file to write (``output``, or a MoTeC export's per-session names) before it is written,
    and may refuse it by raising (:class:`~wrtfd.exporters.atomic.AtomicOutputs`).

    :raises ExportError: unknown format, missing extra, or a limit of the target format.
    :raises FormatError: a session the file does not have.
    """
    spec = format_of(output, fmt)
    require_extra(spec)
    with AtomicOutputs(guard) as outputs:
        if spec.name in ("csv", "parquet"):
            from wrtfd.format.export import export_file

            rows = export_file(
                reader, outputs.path(output), spec.name, progress, sessions, with_check=with_check
            )
            summary = ExportSummary([output], rows, f"{rows} rows")
        elif spec.name == "ld":
            from wrtfd.exporters.motec import export_ld

            summary = export_ld(
                reader,
                output,
                outputs,
                sessions=sessions,
                track=track,
                motec_names=motec_names,
                progress=progress,
            )
        elif spec.name == "mcap":
            from wrtfd.exporters.mcap_out import export_mcap

            summary = export_mcap(
                reader,
                outputs.path(output),
                sessions=sessions,
                track=track,
                progress=progress,
                encoding=mcap_encoding,
            )
            summary = ExportSummary([output], summary.frames, summary.detail)
        elif spec.name in ("vbo", "gpx"):
            from wrtfd.exporters.gpx import export_gpx
            from wrtfd.exporters.vbo import export_vbo

            export = export_vbo if spec.name == "vbo" else export_gpx
            summary = export(reader, outputs.path(output), sessions=sessions, progress=progress)
            summary = ExportSummary([output], summary.frames, summary.detail)
        else:
            from wrtfd.exporters.mdf import export_mdf

            summary = export_mdf(reader, outputs.path(output), sessions=sessions, progress=progress)
            summary = ExportSummary([output], summary.frames, summary.detail)
    return summary
