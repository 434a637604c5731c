"""``wrtfd export FILE -o OUT``: a recording in the format other tools open, chosen by OUT's suffix.

=========  =====================================================  ==========================
OUT        what                                                   needs
=========  =====================================================  ==========================
.csv       flat table: session, tick, time_us, one column a leaf   (pyarrow when installed)
.parquet   the same table                                          wrtfd[parquet]
.ld        MoTeC i2: one .ld + .ldx per session (-s0, -s1 ...)     nothing
.mcap      Foxglove: ROS 2 (CDR) frames, GPS as LocationFix        wrtfd[mcap]
.mf4       ASAM MDF 4 (asammdf, CANape, MATLAB)                    wrtfd[mdf]
.vbo       Racelogic VBO (Circuit Tools), from the GNSS source     nothing
.gpx       GPX 1.1 track of the GNSS source (video overlays)       wrtfd[gnss]
=========  =====================================================  ==========================

Only frames that pass the frame check are exported; its field is a column only with
``--with-check`` (CSV, Parquet). Exit 0: every frame exported; 1: frames that fail the check were
left out (one line on stderr says how many and why); 2: unreadable file, bad usage or a failed
write. Files appear complete or not at all (written beside the target, renamed at the end; an
error or Ctrl-C leaves nothing). An existing OUT is refused without --force, and OUT being FILE
always. Lap beacons (.ld) and lap messages (.mcap) come from the recorded lap
channels, or from --track (re-detected from positions). docs/exports.md has the details.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from wrtfd.cli.info import add_check_option, add_schema_option, load_schema, report_dropped
from wrtfd.cli.output_path import add_force_option, check_output, output_guard

__all__ = ["register"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "export",
        help="export a recording to CSV, Parquet, MoTeC .ld, MCAP, MDF4, VBO or GPX",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", type=Path, help="WRTF file")
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        required=True,
        metavar="OUT",
        help="OUT.csv|.parquet|.ld|.mcap|.mf4|.vbo|.gpx",
    )
    p.add_argument(
        "--format",
        choices=["csv", "parquet", "ld", "mcap", "mf4", "vbo", "gpx"],
        help="output format (default: OUT's suffix)",
    )
    p.add_argument("--session", type=int, help="only this session (default: all)")
    p.add_argument(
        "--track", type=Path, help="track file: re-detect laps from positions (.ld beacons, .mcap laps)"
    )
    p.add_argument(
        "--mcap-encoding",
        choices=["cdr", "json"],
        default="cdr",
        help=".mcap: frames as ROS 2 CDR messages, one topic (default), or JSON, a topic per source",
    )
    p.add_argument(
        "--raw-names", action="store_true", help=".ld: keep every channel's own name (no MoTeC names)"
    )
    add_force_option(p)
    add_check_option(p)
    add_schema_option(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from wrtfd.errors import ExportError
    from wrtfd.exporters import export_recording, format_of, require_extra
    from wrtfd.format import Reader
    from wrtfd.format.columns import dropped_frames
    from wrtfd.tracks import load_track

    require_extra(format_of(args.output, args.format))  # before reading anything
    check_output(args.output, [args.file], force=args.force)
    tty = sys.stderr.isatty()
    shown = [-1]

    def progress(done: int, total: int) -> None:
        pct = 100 * done // total if total else 100
        if tty and pct != shown[0]:
            shown[0] = pct
            sys.stderr.write(f"\rexporting: {done}/{total} frames ({pct}%)")
            sys.stderr.flush()

    track = load_track(args.track) if args.track else None
    sessions = None if args.session is None else [args.session]
    try:
        with Reader(args.file, load_schema(args)) as r:
            summary = export_recording(
                r,
                args.output,
                fmt=args.format,
                sessions=sessions,
                track=track,
                motec_names=not args.raw_names,
                progress=progress,
                with_check=args.with_check,
                mcap_encoding=args.mcap_encoding,
                guard=output_guard([args.file], force=args.force),
            )
            dropped = dropped_frames(r, sessions)
    except UnicodeEncodeError as exc:
        if _is_utf8(str(args.output.parent)):
            raise
        # the writer opens a file of a UTF-8-only name in OUT's folder
        raise ExportError(f"{args.output}: this format's writer needs a folder of a UTF-8 name") from exc
    finally:
        if tty and shown[0] >= 0:
            sys.stderr.write("\n")
    names = ", ".join(str(p) for p in summary.paths)
    sys.stderr.write(f"wrote {names}: {summary.frames} frames, {summary.detail}\n")
    return report_dropped(args.file, dropped)


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
