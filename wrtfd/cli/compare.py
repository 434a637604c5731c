"""``wrtfd compare A.wrtf[:LAP] B.wrtf[:LAP] -o cmp.png``: one lap against another.

Speed, throttle/brake and gear against lap distance, the time delta along the lap (B minus A:
above zero where B is behind), and the two lines on the track map. LAP is a completed lap's
number; without it, each file's best lap. The laps come from the recorded lap channels, or from
--track (re-detected from positions, which also draws the track). Laps of the same track align
by lap distance, whichever game or file recorded them. A GNSS recording (latitude/longitude:
NMEA, u-blox, an imported VBO) is timed from its fixes against its circuit (--circuit, else the
one in its metadata, else the known circuit nearest its first fix; else its recorded lap channels), lap
distance is the distance travelled since the line, and the map is the fixes seen from above,
north up. An existing OUT is refused without --force (A or B itself always); the PNG is written
beside OUT and renamed into place. --width is 100 to 10000 pixels. Needs matplotlib: wrtfd[plot].
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wrtfd.cli.output_path import add_force_option, check_image_width, check_output, output_guard

__all__ = ["LapRef", "load_lap", "parse_lap_ref", "register"]


@dataclass(frozen=True, slots=True)
class LapRef:
    path: Path
    lap: int | None  # None: the best lap


def parse_lap_ref(text: str) -> LapRef:
    """``run.wrtf`` or ``run.wrtf:3`` (a trailing ``:N`` is a lap number unless the whole text
    names an existing file)."""
    head, sep, tail = text.rpartition(":")
    if sep and tail.isdigit() and head and not Path(text).exists():
        return LapRef(Path(head), int(tail))
    return LapRef(Path(text), None)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "compare",
        help="compare two laps (needs wrtfd[plot])",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("a", type=parse_lap_ref, metavar="A.wrtf[:LAP]", help="reference lap (default: best)")
    p.add_argument("b", type=parse_lap_ref, metavar="B.wrtf[:LAP]", help="lap to compare (default: best)")
    p.add_argument("-o", "--output", type=Path, required=True, help="PNG file to write")
    p.add_argument("--track", type=Path, help="track file: re-detect laps from positions and draw the map")
    p.add_argument(
        "--circuit", type=Path, help="circuit file: time GNSS recordings' laps against it (docs/circuits.md)"
    )
    p.add_argument("--source", help="source with the positions (default: the first with positions)")
    p.add_argument("--width", type=int, default=1600, help="image width in pixels, 100-10000 (default 1600)")
    add_force_option(p)
    p.set_defaults(func=_run)


def load_lap(
    ref: LapRef, track: Any, source: str | None, label: str, plane: Any = None, circuit: Any = None
) -> Any:
    """The trace of ``ref``'s lap: lap N of the first session that completed it, or the best
    lap of the whole file. ``plane``: where a GNSS recording is mapped (default: its circuit's,
    else its first fix's); ``circuit``: what its laps are timed against (default: its own).

    :raises TrackError: no such lap (or no lap at all) in the file.
    """
    import numpy as np

    from wrtfd.compare import lap_trace, pick_lap
    from wrtfd.errors import TrackError
    from wrtfd.format import Reader
    from wrtfd.format.export import export_frames
    from wrtfd.format.reader import ticks_to_time_us
    from wrtfd.tracks.analysis import session_laps

    found: list[Any] = []
    with Reader(ref.path) as r:
        for s in r.sessions:
            frames = export_frames(r, s.index)
            if len(frames) == 0:
                continue
            times = (ticks_to_time_us(frames["tick"], s.time_base_us, r.rate_hz) - s.time_base_us) / 1e6
            where = plane
            if track is None and _gnss_only(frames, source):
                from wrtfd.tracks.gnssanalysis import file_circuit, gnss_plane, gnss_session_analysis

                against = circuit or file_circuit(r.metadata, frames, source, str(ref.path), r)
                where = plane or gnss_plane(frames, source, against)
                if against is not None:
                    laps = gnss_session_analysis(frames, times, against, source=source)
                elif "laps" not in (frames.dtype.names or ()):
                    from wrtfd.plot import NO_GNSS_LAPS

                    raise TrackError(NO_GNSS_LAPS)
                else:
                    laps = session_laps(frames, times, None, source=source)
            else:
                laps = session_laps(frames, times, track, source=source)
            try:
                lap = pick_lap(laps, ref.lap)
            except TrackError:
                continue
            # a copy: the trace outlives the file's memory map
            found.append(
                lap_trace(np.array(frames), times, laps, lap, source=source, label=label, plane=where)
            )
            if ref.lap is not None:
                break
    if not found:
        what = f"lap {ref.lap}" if ref.lap is not None else "a completed lap"
        raise TrackError(f"{ref.path}: no session has {what}")
    return min(found, key=lambda trace: trace.lap.time_s)


def _gnss_only(frames: Any, source: str | None) -> bool:
    """Latitude/longitude and no game positions (whose laps and map come from the track)."""
    from wrtfd.errors import TrackError
    from wrtfd.tracks.analysis import find_position_fields
    from wrtfd.tracks.gnsslaps import has_gnss

    try:
        find_position_fields(frames.dtype, source)
    except TrackError:
        return has_gnss(frames, source)
    return False


def _plane_of(ref: LapRef, source: str | None, circuit: Any) -> Any:
    """The plane A's GNSS lap was mapped in (None for a game recording)."""
    from wrtfd.format import Reader

    with Reader(ref.path) as r:
        if not r.sessions:
            return None
        frames = r.frames(0)
        if not _gnss_only(frames, source):
            return None
        from wrtfd.tracks.gnssanalysis import file_circuit, gnss_plane

        return gnss_plane(
            frames, source, circuit or file_circuit(r.metadata, frames, source, str(ref.path), r)
        )


def _run(args: argparse.Namespace) -> int:
    from wrtfd.tracks.render import require_matplotlib

    check_image_width(args.width)
    inputs = [args.a.path, args.b.path]
    check_output(args.output, inputs, force=args.force)
    require_matplotlib()  # fail first, with the one-line hint, before reading anything
    from wrtfd.exporters.atomic import AtomicOutputs
    from wrtfd.plot import plot_comparison
    from wrtfd.tracks import load_track
    from wrtfd.tracks.circuit import load_circuit

    track = load_track(args.track) if args.track else None
    circuit = load_circuit(args.circuit) if args.circuit and track is None else None
    a = load_lap(args.a, track, args.source, f"A {args.a.path.name}", circuit=circuit)
    # B on A's map (two recordings of one circuit share its plane anyway)
    plane = _plane_of(args.a, args.source, circuit) if track is None else None
    b = load_lap(args.b, track, args.source, f"B {args.b.path.name}", plane=plane, circuit=circuit)
    title = f"lap {a.lap.number} vs lap {b.lap.number}" + (f" - {track.name}" if track else "")
    with AtomicOutputs(output_guard(inputs, force=args.force)) as outputs:
        plot_comparison(a, b, outputs.path(args.output), track=track, title=title, width_px=args.width)
    sys.stdout.write(f"wrote {args.output}\n")
    return 0
