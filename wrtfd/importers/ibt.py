"""``wrtfd import FILE.ibt -o OUT.wrtf``: an iRacing telemetry file -> one WRTF file.

Every variable becomes a channel of source ``iracing`` with its type, unit and description (an
array variable a channel with dimensions); the frame rate is the file's tick rate (``--rate``
overrides). Each row is one sample stamped with its ``SessionTime`` (the sim's clock), placed on
the wall clock by the disk header's session start date: the first row is at
``sessionStartDate``, the others follow by their SessionTime. A change of ``SessionNum``
(practice -> qualifying -> race) starts a new WRTF session.

Metadata: ``Track`` (TrackDisplayName), ``Car`` (the driver's CarScreenName), ``Driver``
(UserName) from the session-info YAML, and the whole YAML under ``wrtfd.ibt.session_info``.
Laps come from the file's own lap channels: a ``laps`` channel set (``lap_number`` from ``Lap``,
``lap_distance`` from ``LapDist``, ``lap_time`` from ``LapCurrentLapTime``) that
``wrtfd laps`` reads, with the lap count and best lap in the session footer.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from wrtfd.decoders.base import Sample, generated_definition
from wrtfd.errors import ImportFormatError
from wrtfd.ibt.reader import IbtFile, looks_like_ibt
from wrtfd.importers.output import check_output, replay_into_file
from wrtfd.importers.report import ImportReport, Progress, earliest_start_us, refuse_options

__all__ = ["SOURCE_NAME", "IbtLapChannels", "import_ibt", "looks_like_ibt", "run_import"]

SOURCE_NAME = "iracing"
#: The file's lap variables -> the ``laps`` channels ``wrtfd laps`` reads.
LAP_VARIABLES = {"lap_number": "Lap", "lap_distance": "LapDist", "lap_time": "LapCurrentLapTime"}


class IbtLapChannels:
    """The derived-channel plug-in copying the file's lap variables into ``laps.*`` (see the
    :class:`~wrtfd.recorder.derived.DerivedChannels` contract)."""

    name = "laps"

    def __init__(self, *, best_lap_time: str | None = None, best_lap: str | None = None) -> None:
        self.definition: Mapping[str, Any] = {
            "fields": [
                {"name": "lap_number", "type": "uint16", "description": "Lap number (the file's Lap)"},
                {"name": "lap_distance", "type": "float32", "unit": "m", "description": "LapDist"},
                {"name": "lap_time", "type": "float32", "unit": "s", "description": "LapCurrentLapTime"},
            ]
        }
        self.footer_fields: Mapping[str, Any] = {
            "lap_count": "uint16",
            "best_lap_ms": "uint32",
            "best_lap_number": "uint16",
        }
        self._best_time = best_lap_time
        self._best_lap = best_lap
        self.start_session()

    def start_session(self) -> None:
        self._laps: set[int] = set()
        self._best_s = 0.0
        self._best_number = 0

    def compute(self, row: np.void, time_s: float) -> None:
        src = row[SOURCE_NAME]
        out = row[self.name]
        lap = int(src[LAP_VARIABLES["lap_number"]])
        out["lap_number"] = min(max(lap, 0), 65535)
        out["lap_distance"] = src[LAP_VARIABLES["lap_distance"]]
        out["lap_time"] = src[LAP_VARIABLES["lap_time"]]
        if lap > 0:
            self._laps.add(lap)
        if self._best_time is not None:
            best = float(src[self._best_time])
            if math.isfinite(best) and best > 0:
                self._best_s = best
                if self._best_lap is not None:
                    self._best_number = int(src[self._best_lap])

    def summary(self) -> Mapping[str, Any]:
        return {
            "lap_count": min(len(self._laps), 65535),
            "best_lap_ms": min(round(self._best_s * 1000), 0xFFFFFFFF),
            "best_lap_number": min(max(self._best_number, 0), 65535),
        }


def _definition(ibt: IbtFile) -> dict[str, Any]:
    fields = []
    for v in ibt.vars:
        field: dict[str, Any] = {"name": v.name, "type": v.wrtf_type, "description": v.description or v.name}
        if v.count > 1:
            field["dimensions"] = v.count
        if v.unit:
            field["unit"] = v.unit
        fields.append(field)
    return generated_definition(
        title="iRacing telemetry (.ibt)",
        description=f"The variables of {ibt.path.name}, as iRacing wrote them",
        session_description="One iRacing session (SessionNum)",
        frame_description="One .ibt row per tick",
        fields=fields,
    )


def _session_metadata(text: str, notes: list[str]) -> dict[str, str]:
    """Track, Car and Driver from the session-info YAML (a hostile or odd YAML gives none)."""
    try:
        info = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError, ValueError) as exc:  # hostile nesting, odd scalars
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        notes.append(f"the session info is not valid YAML ({first}): no Track/Car/Driver")
        return {}
    if not isinstance(info, dict):
        return {}
    out: dict[str, str] = {}
    weekend = info.get("WeekendInfo")
    if isinstance(weekend, dict):
        track = weekend.get("TrackDisplayName") or weekend.get("TrackName")
        if track:
            out["Track"] = str(track)
    drivers_info = info.get("DriverInfo")
    if isinstance(drivers_info, dict):
        me = drivers_info.get("DriverCarIdx")
        for d in drivers_info.get("Drivers") or ():
            if isinstance(d, dict) and d.get("CarIdx") == me:
                if d.get("CarScreenName"):
                    out["Car"] = str(d["CarScreenName"])
                if d.get("UserName"):
                    out["Driver"] = str(d["UserName"])
                break
    return out


def _samples(ibt: IbtFile, report: ImportReport, start_ns: int) -> Iterator[Sample]:
    names = [v.name for v in ibt.vars]
    rate = ibt.header.tick_rate
    has_time = "SessionTime" in names
    has_num = "SessionNum" in names
    t0 = ibt.header.session_start_time_s
    info = None
    last_ns = -1
    last_num: object = None
    progress = Progress(ibt.path.name, ibt.size)
    index = 0
    for chunk in ibt.iter_rows():
        times = chunk["SessionTime"] if has_time else None
        nums = chunk["SessionNum"] if has_num else None
        for i, row in enumerate(chunk.tolist()):
            report.read += 1
            t_s = float(times[i]) if times is not None else index / rate
            index += 1
            if not math.isfinite(t_s) or abs(t_s - t0) > 1e9:
                report.drop("bad_session_time")
                continue
            ns = start_ns + round((t_s - t0) * 1e9)
            new_session = False
            if nums is not None:
                num = int(nums[i])
                new_session = last_num is not None and num != last_num
                last_num = num
            rx = max(ns, last_ns)
            last_ns = rx
            report.samples += 1
            yield Sample(SOURCE_NAME, rx, dict(zip(names, row, strict=True)), ns, new_session, info)
        progress.update(ibt.header.buf_offset + index * ibt.header.buf_len)
    progress.done()


def import_ibt(
    path: Path,
    output: Path,
    *,
    rate_hz: int | None = None,
    start_timestamp_us: int | None = None,
    force: bool = False,
) -> ImportReport:
    """Import an .ibt; see the module docstring.

    :raises ImportFormatError: not a disk .ibt, no rows, an output that exists, a bad option.
    :raises OSError: reading the input or writing the output.
    """
    from wrtfd.recorder import SourceSpec

    check_output(output, force=force)
    if rate_hz is not None and rate_hz <= 0:
        raise ImportFormatError(f"--rate must be a positive number of Hz, not {rate_hz}")
    report = ImportReport(path, "rows")
    with IbtFile(path) as ibt:
        report.notes.extend(ibt.notes)
        if ibt.row_count == 0:
            raise ImportFormatError(f"{path}: the .ibt holds no telemetry row")
        h = ibt.header
        rate = rate_hz or h.tick_rate
        text = ibt.session_info_text()
        metadata = _session_metadata(text, report.notes)
        metadata.update(
            {
                "wrtfd.ibt.file": path.name,
                "wrtfd.ibt.tick_rate": str(h.tick_rate),
                "wrtfd.ibt.variables": str(len(ibt.vars)),
                "wrtfd.ibt.session_start_date": str(h.session_start_date_s),
                "wrtfd.ibt.session_info": text,
            }
        )
        names = {v.name for v in ibt.vars}
        derived: list[Any] = []
        if set(LAP_VARIABLES.values()) <= names:
            derived.append(
                IbtLapChannels(
                    best_lap_time="LapBestLapTime" if "LapBestLapTime" in names else None,
                    best_lap="LapBestLap" if "LapBestLap" in names else None,
                )
            )
        start_ns = max(h.session_start_date_s, 0) * 1_000_000_000
        start_us = start_timestamp_us if start_timestamp_us is not None else start_ns // 1000
        replay_into_file(
            _samples(ibt, report, start_ns),
            output=output,
            source=SourceSpec(name=SOURCE_NAME, definition=_definition(ibt), drives_frames=True),
            rate_hz=rate,
            start_timestamp_us=max(start_us, earliest_start_us(rate)),
            metadata=metadata,
            derived=derived,
            policy_options={"session_idle_s": None},
        )
    report.outputs = [output]
    report.check_any()
    return report


def run_import(args: argparse.Namespace) -> int:
    """Entry point for ``wrtfd import FILE.ibt`` (see ``wrtfd.cli.import_cmd``)."""
    refuse_options(args, ".ibt", "config", "track")
    report = import_ibt(
        args.file, args.output, rate_hz=args.rate, start_timestamp_us=args.start_timestamp, force=args.force
    )
    report.write(sys.stderr)
    return 0
