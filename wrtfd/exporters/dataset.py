"""A folder of recordings as a Hive-partitioned Parquet dataset (``wrtfd dataset``, docs/dataset.md).

Two kinds of table, each partitioned ``track=/car=/driver=``: ``laps/`` (one row per completed
lap, timed as ``wrtfd laps FILE`` times it) and ``frames/<source>/`` (one row per frame that
passes the frame check, one table per source of the frame, its channels as columns, with the
frame's lap and lap distance). Any Parquet reader (DuckDB, Polars, Spark) reads them without
wrtfd.

Partition values are the names made path-safe (:func:`partition_value`); the names themselves
are columns (``track_name``, ``car_name``, ``driver_name``), never the partition columns'
names, so that no reader sees a column twice. The dataset is built beside ``OUT`` and renamed
into place at the end: an error leaves no half dataset under its name.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from wrtfd import __version__
from wrtfd._optional import require
from wrtfd.errors import FormatError, TrackError, WrtfdError
from wrtfd.format.check import CHECK_FIELD
from wrtfd.format.columns import Dropped, export_leaves, iter_columns
from wrtfd.format.markers import MARKER_FIELD
from wrtfd.format.reader import Reader, describe_dropped
from wrtfd.format.schema import Leaf
from wrtfd.tracks.circuit import Circuit
from wrtfd.tracks.filelaps import FileTiming, file_timing, time_session
from wrtfd.tracks.model import Track

__all__ = [
    "MARKER_FILE",
    "PARTITIONS",
    "UNKNOWN",
    "DatasetReport",
    "build_dataset",
    "find_recordings",
    "partition_value",
]

#: The file that says a directory is a wrtfd dataset (``--overwrite`` replaces only such a one).
MARKER_FILE = "_wrtfd_dataset.json"
#: The partition columns, outermost first.
PARTITIONS = ("track", "car", "driver")
#: The partition value of a name the recording does not give.
UNKNOWN = "unknown"
#: Longest partition value (bytes of a path component stay far below the usual 255).
MAX_PARTITION = 100
#: Columns every frames table has before the channels.
FRAME_COLUMNS = ("rig", "file", "session", "tick", "time_us", "lap", "lap_distance_m", "stale")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
#: Errors of the disk the dataset is written to: they stop the run instead of skipping a file.
_OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})

Progress = Callable[[str], None]


def partition_value(name: str | None) -> str:
    """``name`` as a path component any engine reads back unchanged: runs of characters other
    than ASCII letters, digits, ``.``, ``_`` and ``-`` become one ``_``; empty or unknown is
    :data:`UNKNOWN`; a leading ``.`` or ``_`` (hidden to Spark and DuckDB) becomes ``x``."""
    if not name:
        return UNKNOWN
    text = _UNSAFE.sub("_", name).strip("_")[:MAX_PARTITION]
    if not text or set(text) <= {"."}:
        return UNKNOWN
    return "x" + text[1:] if text[0] in "._" else text


@dataclass(slots=True)
class DatasetReport:
    files: int = 0
    read: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    laps: int = 0
    frames: dict[str, int] = field(default_factory=dict)
    #: Frames left out because they fail the frame check (as ``wrtfd export`` leaves them out).
    dropped: int = 0
    #: Files read whose laps could not be timed (no lap channels, positions or fixes), and why.
    untimed: list[tuple[str, str]] = field(default_factory=list)


def find_recordings(root: Path) -> list[Path]:
    """Every ``*.wrtf`` below ``root``, in path order, leaving out hidden names (a collect's
    ``.part`` downloads, ``.fleet``)."""
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        out.extend(
            Path(dirpath) / f for f in sorted(filenames) if f.endswith(".wrtf") and not f.startswith(".")
        )
    return out


def _text(value: Any) -> str | None:
    """A header text field (NUL-padded UTF-8) or metadata value, None when empty."""
    if isinstance(value, str):
        return value.strip() or None
    try:
        raw = np.asarray(value, dtype=np.uint8).tobytes()
    except (TypeError, ValueError):
        return None
    text = raw.split(b"\0", 1)[0].decode("utf-8", "replace").strip()
    return text or None


def _header_text(header: np.void, name: str) -> str | None:
    names = header.dtype.names or ()
    return _text(header[name]) if name in names else None


def _groups(leaves: list[Leaf], frame_dtype: np.dtype[Any]) -> dict[str, list[tuple[int, Leaf]]]:
    """Leaves by table: a struct at the frame's top is a source (or a derived plug-in such as
    ``laps``); scalars at the top go to the table ``frame``. ``stale`` is not a table: each
    source's flag is its table's ``stale`` column."""
    out: dict[str, list[tuple[int, Leaf]]] = {}
    for k, lf in enumerate(leaves):
        top = str(lf.path[0])
        if top in ("tick", "stale", CHECK_FIELD, MARKER_FIELD):
            continue
        sub = frame_dtype.fields[top][0] if frame_dtype.fields and top in frame_dtype.fields else None
        table = top if sub is not None and sub.names is not None else "frame"
        out.setdefault(table, []).append((k, lf))
    return out


def _channel_names(table: str, members: list[tuple[int, Leaf]]) -> list[str]:
    """Column names of a table's channels: the path below the source joined with ``_``; a name
    taken by a fixed column, a partition or an earlier channel keeps its source prefix."""
    taken = set(FRAME_COLUMNS) | set(PARTITIONS) | {f"{p}_name" for p in PARTITIONS}
    out = []
    for _, lf in members:
        path = lf.path[1:] if table != "frame" else lf.path
        name = "_".join(str(p) for p in path) or str(lf.path[0])
        if name in taken:
            name = f"{table}_{name}"
        while name in taken:
            name += "_"
        taken.add(name)
        out.append(name)
    return out


class _Builder:
    def __init__(
        self,
        root: Path,
        out: Path,
        *,
        track: Track | None,
        circuit: Circuit | None,
        source: str | None,
        lane: int,
        progress: Progress,
    ) -> None:
        self.pa = require("pyarrow", extra="parquet", purpose="wrtfd dataset")
        self.pq = require("pyarrow.parquet", extra="parquet", purpose="wrtfd dataset")
        self.root = root
        self.out = out
        self.track = track
        self.circuit = circuit
        self.source = source
        self.lane = lane
        self.progress = progress
        self.report = DatasetReport()
        self.lap_rows: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        # the file being added: what it wrote, its laps, its frames failing the check, its rows
        self._written: list[Path] = []
        self._laps: list[tuple[tuple[str, ...], dict[str, Any]]] = []
        self._dropped: Dropped = []
        self._frames_of: dict[str, int] = {}

    def _rig(self, rel: Path) -> str:
        return rel.parts[0] if len(rel.parts) > 1 else self.root.resolve().name

    def add_file(self, path: Path, k: int, n: int) -> None:
        """Add one recording; a file that cannot be read leaves nothing in the dataset."""
        rel = path.relative_to(self.root)
        name = rel.as_posix()
        self._written, self._laps, self._dropped, self._frames_of = [], [], [], {}
        try:
            with Reader(path) as r:
                frames, laps = self._read(r, rel)
        except Exception as exc:
            if isinstance(exc, OSError) and exc.errno in _OUTPUT_ERRNOS:
                raise  # the dataset's disk, not the recording
            for p in self._written:
                p.unlink(missing_ok=True)
            self.report.untimed = [u for u in self.report.untimed if u[0] != name]
            if isinstance(exc, WrtfdError):
                reason = str(exc)
            elif isinstance(exc, OSError):
                reason = exc.strerror or str(exc)
            else:  # a file no check caught: say what broke, not where in wrtfd
                reason = f"{type(exc).__name__}: {exc}"
            self.report.skipped.append((name, reason))
            self.progress(f"[{k}/{n}] {name}: skipped: {reason}")
            return
        for part, row in self._laps:
            self.lap_rows.setdefault(part, []).append(row)
        self.report.read += 1
        for table, rows in self._frames_of.items():
            self.report.frames[table] = self.report.frames.get(table, 0) + rows
        note = f"; {describe_dropped(self._dropped)}" if self._dropped else ""
        self.report.dropped += sum(f.frames for _, f in self._dropped)
        self.progress(f"[{k}/{n}] {name}: {frames} frames, {laps} laps{note}")

    def _read(self, r: Reader, rel: Path) -> tuple[int, int]:
        rig = self._rig(rel)
        name = rel.as_posix()
        meta = r.metadata
        timing: FileTiming | None
        try:
            timing = file_timing(
                r, track=self.track, circuit=self.circuit, source=self.source, lane=self.lane
            )
        except TrackError as exc:
            timing = None
            self.report.untimed.append((name, str(exc)))
        leaves = export_leaves(r.schema)
        groups = _groups(leaves, r.schema.frame_dtype)
        stale_names = self._stale_sources(r.schema.frame_dtype)
        n_frames = n_laps = 0
        for i, sess in enumerate(r.sessions):
            hdr = sess.header
            timed_on = (timing.track.name if timing and timing.track else None) or (
                timing.circuit.name if timing and timing.circuit else None
            )
            names = {
                "track": timed_on or _text(meta.get("Track")) or _header_text(hdr, "track"),
                "car": _header_text(hdr, "car") or _text(meta.get("Car")),
                "driver": _text(meta.get("Driver")) or _header_text(hdr, "driver"),
            }
            part = tuple(partition_value(names[p]) for p in PARTITIONS)
            lap_no = lap_dist = None
            if timing is not None:
                try:
                    timed = time_session(r, i, timing, per_frame=True)
                except TrackError as exc:
                    if i == 0 or not any(u[0] == name for u in self.report.untimed):
                        self.report.untimed.append((name, str(exc)))
                    timed = None
                if timed is not None:
                    lap_no, lap_dist = timed.lap_number, timed.lap_distance_m
                    rate = r.rate_hz
                    for lap in timed.laps:
                        self._laps.append(
                            (
                                part,
                                {
                                    "rig": rig,
                                    "file": name,
                                    "session": i,
                                    "session_start_us": int(sess.time_base_us),
                                    "lap": int(lap.number),
                                    "time_s": round(float(lap.time_s), 6),
                                    "sectors_s": [round(float(s), 6) for s in lap.sector_times_s],
                                    "valid": getattr(lap, "valid", None),
                                    "pit": getattr(lap, "pit", None),
                                    "start_s": round(float(lap.start_s), 6),
                                    "end_s": round(float(lap.end_s), 6),
                                    "first_tick": math.ceil(lap.start_s * rate - 1e-6),
                                    "last_tick": math.ceil(lap.end_s * rate - 1e-6) - 1,
                                    "rate_hz": int(rate),
                                    "session_type": _header_text(hdr, "session_type"),
                                    "track_name": names["track"],
                                    "car_name": names["car"],
                                    "driver_name": names["driver"],
                                },
                            )
                        )
                        n_laps += 1
            n_frames += self._frames(r, i, rig, name, part, groups, stale_names, lap_no, lap_dist)
        return n_frames, n_laps

    @staticmethod
    def _stale_sources(frame_dtype: np.dtype[Any]) -> set[str]:
        fields: Mapping[str, Any] = frame_dtype.fields or {}
        stale = fields.get("stale")
        return set(stale[0].names or ()) if stale is not None else set()

    def _frames(
        self,
        r: Reader,
        i: int,
        rig: str,
        name: str,
        part: tuple[str, ...],
        groups: dict[str, list[tuple[int, Leaf]]],
        stale_names: set[str],
        lap_no: np.ndarray | None,
        lap_dist: np.ndarray | None,
    ) -> int:
        pa = self.pa
        all_ticks = r.ticks(i).astype(np.int64)
        where = "/".join(f"{p}={v}" for p, v in zip(PARTITIONS, part, strict=True))
        stem = partition_value(name.removesuffix(".wrtf").replace("/", "__")) + f"-s{i}.parquet"
        writers: dict[str, Any] = {}
        rows = 0
        stale_all = r.frames(i)["stale"] if stale_names else None
        try:
            for _, cols in iter_columns(r, session=i, dropped=self._dropped):
                ticks = np.asarray(cols[1], dtype=np.int64)
                n = len(ticks)
                if n == 0:
                    continue
                idx = np.searchsorted(all_ticks, ticks)
                ok = (idx < len(all_ticks)) & (all_ticks[np.minimum(idx, len(all_ticks) - 1)] == ticks)
                idx = np.minimum(idx, len(all_ticks) - 1)
                lap_col = (
                    pa.array(lap_no[idx].astype(np.int32), mask=~ok)
                    if lap_no is not None
                    else pa.nulls(n, pa.int32())
                )
                dist_col = (
                    pa.array(lap_dist[idx].astype(np.float64), mask=~ok | np.isnan(lap_dist[idx]))
                    if lap_dist is not None
                    else pa.nulls(n, pa.float64())
                )
                for table, members in groups.items():
                    arrays = [
                        pa.array(np.full(n, rig, dtype=object), pa.string()),
                        pa.array(np.full(n, name, dtype=object), pa.string()),
                        pa.array(np.full(n, i, dtype=np.int32)),
                        pa.array(ticks),
                        pa.array(np.asarray(cols[2], dtype=np.int64)),
                        lap_col,
                        dist_col,
                        (
                            pa.array(np.asarray(stale_all[table][idx], dtype=bool))
                            if stale_all is not None and table in stale_names
                            else pa.nulls(n, pa.bool_())
                        ),
                    ]
                    names = list(FRAME_COLUMNS)
                    for (k, lf), col_name in zip(members, _channel_names(table, members), strict=True):
                        col = cols[3 + k]
                        arrays.append(
                            pa.array(col, pa.string()) if lf.kind in ("text", "enum") else pa.array(col)
                        )
                        names.append(col_name)
                    chunk = pa.Table.from_arrays(arrays, names=names)
                    w = writers.get(table)
                    if w is None:
                        target = self.out / "frames" / partition_value(table) / where / stem
                        target.parent.mkdir(parents=True, exist_ok=True)
                        self._written.append(target)
                        w = writers[table] = self.pq.ParquetWriter(target, chunk.schema)
                    w.write_table(chunk)
                    self._frames_of[table] = self._frames_of.get(table, 0) + n
                rows += n
        finally:
            for w in writers.values():
                w.close()
        return rows

    def write_laps(self) -> None:
        pa = self.pa
        schema = pa.schema(
            [
                ("rig", pa.string()),
                ("file", pa.string()),
                ("session", pa.int32()),
                ("session_start_us", pa.int64()),
                ("lap", pa.int32()),
                ("time_s", pa.float64()),
                ("sectors_s", pa.list_(pa.float64())),
                ("valid", pa.bool_()),
                ("pit", pa.string()),
                ("start_s", pa.float64()),
                ("end_s", pa.float64()),
                ("first_tick", pa.int64()),
                ("last_tick", pa.int64()),
                ("rate_hz", pa.int32()),
                ("session_type", pa.string()),
                ("track_name", pa.string()),
                ("car_name", pa.string()),
                ("driver_name", pa.string()),
            ]
        )
        laps = self.out / "laps"
        laps.mkdir(parents=True, exist_ok=True)
        for part, rows in sorted(self.lap_rows.items()):
            where = laps.joinpath(*(f"{p}={v}" for p, v in zip(PARTITIONS, part, strict=True)))
            where.mkdir(parents=True, exist_ok=True)
            self.pq.write_table(pa.Table.from_pylist(rows, schema=schema), where / "laps.parquet")
            self.report.laps += len(rows)


def build_dataset(
    root: Path,
    out: Path,
    *,
    track: Track | None = None,
    circuit: Circuit | None = None,
    source: str | None = None,
    lane: int = 0,
    overwrite: bool = False,
    progress: Progress | None = None,
    files: Sequence[Path] | None = None,
) -> DatasetReport:
    """Build the dataset of every recording below ``root`` into ``out`` (see the module docstring).

    A file that cannot be read is skipped and reported (:attr:`DatasetReport.skipped`).

    :raises FormatError: ``out`` exists (and is not a dataset to ``overwrite``), ``root`` holds no
        recording, or none of them could be read (nothing is written then).
    :raises MissingDependencyError: pyarrow is not installed.
    """
    require("pyarrow", extra="parquet", purpose="wrtfd dataset")
    paths = list(files) if files is not None else find_recordings(root)
    if out.exists() or out.is_symlink():
        if not overwrite:
            raise FormatError(f"{out} exists: give --overwrite to replace it, or another -o")
        if not (out / MARKER_FILE).is_file():
            raise FormatError(f"{out} exists and is not a wrtfd dataset ({MARKER_FILE}): not replacing it")
    if not paths:
        raise FormatError(f"{root}: no WRTF recordings (*.wrtf) found")
    work = out.with_name(f".{out.name}.partial")
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    try:
        b = _Builder(
            root,
            work,
            track=track,
            circuit=circuit,
            source=source,
            lane=lane,
            progress=progress or (lambda _: None),
        )
        b.report.files = len(paths)
        for k, path in enumerate(paths, 1):
            b.add_file(path, k, len(paths))
        if b.report.read == 0:
            raise FormatError(f"{root}: none of the {len(paths)} recording(s) could be read")
        b.write_laps()
        doc = {
            "wrtfd": __version__,
            "partitions": list(PARTITIONS),
            "files": b.report.files,
            "read": b.report.read,
            "skipped": [{"file": f, "reason": why} for f, why in b.report.skipped],
            "laps": b.report.laps,
            "frames": b.report.frames,
            "frames_failing_the_check": b.report.dropped,
            "track_file": track.name if track else None,
        }
        (work / MARKER_FILE).write_text(json.dumps(doc, indent=2) + "\n")
        if out.exists():
            shutil.rmtree(out)
        os.replace(work, out)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return b.report
