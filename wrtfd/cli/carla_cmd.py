"""``wrtfd carla info FILE``: what a CARLA recorder file holds (map, date, frames, actors, collisions).

Truncated or corrupt files are summarised up to their last complete frame; the problems found are
listed with their byte offsets.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["register"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "carla",
        help="inspect CARLA simulator recorder files",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="carla_command", metavar="ACTION", required=True)
    info = sub.add_parser("info", help="summary of a recorder file, like CARLA's show_recorder_file_info")
    info.add_argument("file", type=Path, help="CARLA recorder file (.log)")
    info.add_argument("--events", action="store_true", help="also list every event frame by frame")
    info.set_defaults(func=_info)


def _info(args: argparse.Namespace) -> int:
    from wrtfd.carla.info import format_summary, summarize
    from wrtfd.carla.reader import open_recording

    with open_recording(args.file) as stream:
        summary = summarize(stream.header, stream)
        summary.unknown_packets = dict(sorted(stream.unknown_packets.items()))
        summary.problems = list(stream.problems)
        summary.problem_counts = dict(stream.problem_counts)
    out = sys.stdout
    out.write(f"File: {args.file} ({stream.file_size} bytes)\n")
    for line in format_summary(summary, events=args.events):
        out.write(line + "\n")
    return 0
