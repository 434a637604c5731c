"""``wrtfd plot FILE [--track T] -o out.png``: lap plots of a recording.

Speed, throttle/brake and gear against lap distance, one line per complete lap, and a track map
coloured by speed. Laps come from ``--track`` (re-detected from positions) or from the lap
channels recorded live. A GNSS recording (latitude/longitude) is timed from its fixes against its
circuit (``--circuit``, else its metadata's, else the known one nearest its first fix; without
one, its recorded lap channels) and mapped from the fixes, north up. An existing OUT is refused
without ``--force`` (FILE itself always); the PNG is written beside OUT and renamed into place.
``--width`` is 100 to 10000 pixels. Needs matplotlib: ``pip install wrtfd[plot]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from wrtfd.cli.output_path import add_force_option, check_image_width, check_output, output_guard
from wrtfd.errors import FormatError

__all__ = ["register"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "plot",
        help="plot laps of a recording (needs wrtfd[plot])",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", type=Path, help="WRTF recording")
    p.add_argument("--track", type=Path, help="track file: detect laps from positions and draw the map")
    p.add_argument(
        "--circuit",
        type=Path,
        help="circuit file: time a GNSS recording's laps against it (docs/circuits.md)",
    )
    p.add_argument("--source", help="source to plot (default: the first with positions)")
    p.add_argument("--session", type=int, help="session index (default: the session with the most frames)")
    p.add_argument("-o", "--output", type=Path, required=True, help="PNG file to write")
    p.add_argument("--width", type=int, default=1600, help="image width in pixels, 100-10000 (default 1600)")
    add_force_option(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from wrtfd.tracks.render import require_matplotlib

    check_image_width(args.width)
    check_output(args.output, [args.file], force=args.force)
    require_matplotlib()  # fail first, with the one-line hint, before reading anything
    from wrtfd.exporters.atomic import AtomicOutputs
    from wrtfd.format import Reader
    from wrtfd.plot import plot_session
    from wrtfd.tracks import load_track

    track = load_track(args.track) if args.track else None
    with Reader(args.file) as r:
        if not r.sessions:
            raise FormatError(f"{args.file}: no session to plot")
        if args.session is None:
            # A game's menus often make a short session before the driving one: plot the drive.
            session = max(range(len(r.sessions)), key=lambda i: r.sessions[i].frame_count)
        elif 0 <= args.session < len(r.sessions):
            session = args.session
        else:
            raise FormatError(f"{args.file}: no session {args.session} (it has {len(r.sessions)})")
        frames = r.frames(session)
        times = (r.frame_times_us(session) - r.sessions[session].time_base_us) / 1e6
        circuit = None
        if track is None:
            from wrtfd.cli.compare import _gnss_only
            from wrtfd.tracks.circuit import load_circuit
            from wrtfd.tracks.gnssanalysis import file_circuit

            if _gnss_only(frames, args.source):
                circuit = (
                    load_circuit(args.circuit)
                    if args.circuit
                    else file_circuit(r.metadata, frames, args.source, str(args.file), r)
                )
        name = track.name if track else (circuit.name if circuit else "")
        title = f"{args.file.name} session {session}" + (f" - {name}" if name else "")
        with AtomicOutputs(output_guard([args.file], force=args.force)) as outputs:
            plot_session(
                frames,
                times,
                outputs.path(args.output),
                track=track,
                source=args.source,
                title=title,
                width_px=args.width,
                circuit=circuit,
            )
    sys.stdout.write(f"wrote {args.output}\n")
    return 0
