"""``wrtfd dataset DIR -o OUT``: a folder of recordings as a Parquet dataset (docs/dataset.md).

Every ``*.wrtf`` below DIR (``wrtfd collect``'s ``DIR/<rig>/<file>.wrtf``: the first folder is
the rig) becomes rows of two kinds of table, Hive-partitioned ``track=/car=/driver=``:

  OUT/laps/track=T/car=C/driver=D/laps.parquet            one row per completed lap
  OUT/frames/<source>/track=T/car=C/driver=D/<file>-s<session>.parquet
                                                          one row per frame, the source's channels

Laps are timed as ``wrtfd laps FILE`` times them: with --track re-detected from the positions,
else from the recorded lap channels (or GNSS fixes on a circuit). Progress goes to stderr, one
line a file. A file that cannot be read is skipped with one line saying why; frames that fail
the frame check are left out, as ``wrtfd export`` leaves them. Exit 0: every file and frame read;
1: the dataset was written without the files skipped or the frames left out; 2: nothing could be
read, OUT exists (without --overwrite), bad usage. OUT appears whole or not at all (built beside it, renamed).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["register"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "dataset",
        help="a folder of recordings as a Hive-partitioned Parquet dataset (laps, frames)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("dir", type=Path, help="folder of WRTF recordings (e.g. wrtfd collect's --into)")
    p.add_argument("-o", "--output", type=Path, required=True, help="the dataset's folder (must not exist)")
    p.add_argument(
        "--overwrite", action="store_true", help="replace OUT if it is a dataset wrtfd wrote before"
    )
    p.add_argument("--track", type=Path, help="track file: re-detect every file's laps from its positions")
    p.add_argument("--circuit", type=Path, help="circuit file: time GNSS laps on it")
    p.add_argument("--source", help="source whose positions to use (default: the first with positions)")
    p.add_argument("--lane", type=int, default=0, help="track lane to measure along (default 0)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from wrtfd.errors import FormatError
    from wrtfd.exporters.dataset import build_dataset
    from wrtfd.tracks import load_track
    from wrtfd.tracks.circuit import load_circuit

    if not args.dir.is_dir():
        raise FormatError(f"{args.dir}: not a folder")
    track = load_track(args.track) if args.track else None
    circuit = load_circuit(args.circuit) if args.circuit else None

    def progress(line: str) -> None:
        if not args.quiet or ": skipped: " in line:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    report = build_dataset(
        args.dir,
        args.output,
        track=track,
        circuit=circuit,
        source=args.source,
        lane=args.lane,
        overwrite=args.overwrite,
        progress=progress,
    )
    for name, why in report.untimed:
        sys.stderr.write(f"{name}: no laps: {why}\n")
    frames = ", ".join(f"{t} {n}" for t, n in sorted(report.frames.items())) or "none"
    done = f"{report.read} of {report.files} file(s), {report.laps} laps"
    sys.stderr.write(f"wrote {args.output}: {done}; frames: {frames}\n")
    if report.dropped:
        sys.stderr.write(f"{report.dropped} frame(s) that fail the frame check left out\n")
    if report.skipped:
        sys.stderr.write(f"{len(report.skipped)} file(s) skipped (unreadable): not in the dataset\n")
    return 1 if report.skipped or report.dropped else 0
