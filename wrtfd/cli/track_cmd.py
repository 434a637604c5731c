"""``wrtfd track check FILE`` and ``wrtfd track show FILE -o map.png``.

``check`` prints every finding of the validator, one per line with its JSON path, and exits 1 when
there is any (2 when the file cannot be parsed at all). ``show`` draws sectors, walls, lanes and
the start/finish line (an existing OUT is refused without ``--force``, FILE itself always; the PNG
is written beside OUT and renamed into place; ``--width`` is 100 to 10000 pixels).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from wrtfd.cli.output_path import add_force_option, check_image_width, check_output, output_guard

__all__ = ["register"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "track",
        help="check or draw a track file (format 2.0)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="track_command", metavar="ACTION", required=True)
    c = sub.add_parser("check", help="validate a track file")
    c.add_argument("file", type=Path)
    c.add_argument(
        "--tolerance", type=float, default=0.01, help="absolute length tolerance in metres (default 0.01)"
    )
    c.set_defaults(func=_check)
    s = sub.add_parser("show", help="draw a track map as PNG")
    s.add_argument("file", type=Path)
    s.add_argument("-o", "--output", type=Path, required=True, help="PNG file to write")
    s.add_argument("--width", type=int, default=1200, help="image width in pixels, 100-10000 (default 1200)")
    add_force_option(s)
    s.set_defaults(func=_show)


def _check(args: argparse.Namespace) -> int:
    from wrtfd.tracks import LanePath, load_track, validate_track

    track = load_track(args.file)
    findings = validate_track(track, abs_tol_m=args.tolerance)
    for f in findings:
        sys.stdout.write(f"{args.file}: {f}\n")
    if findings:
        sys.stderr.write(f"{args.file}: {len(findings)} problem(s)\n")
        return 1
    lengths = ", ".join(f"{LanePath(track, i).length_m:.2f} m" for i in range(len(track.lanes)))
    sys.stdout.write(
        f"{args.file}: ok: {track.name!r}, {len(track.vertices)} vertices, {len(track.sectors)} sectors,"
        f" {len(track.lanes)} lane(s) ({lengths})\n"
    )
    return 0


def _show(args: argparse.Namespace) -> int:
    from wrtfd.exporters.atomic import AtomicOutputs
    from wrtfd.tracks import load_track
    from wrtfd.tracks.render import render_track, require_matplotlib

    check_image_width(args.width)
    check_output(args.output, [args.file], force=args.force)
    require_matplotlib()
    track = load_track(args.file)
    with AtomicOutputs(output_guard([args.file], force=args.force)) as outputs:
        render_track(track, outputs.path(args.output), width_px=args.width)
    sys.stdout.write(f"wrote {args.output}\n")
    return 0
