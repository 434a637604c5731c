"""``wrtfd circuit check FILE``, ``wrtfd circuit list`` and ``wrtfd circuit from-recording FILE``.

``from-recording`` writes a circuit file (docs/circuits.md) whose start/finish line is laid
across the car's path, ``--width`` metres wide (30), where a recorded lap began: the crossing the
recorder's lap channels (``laps.*``) say lap ``--lap`` (default: the first complete one) started
at, placed between the two fixes either side of it. A recording without lap channels gets the
line at its first fix, across the way the car went from there (to the first fix 5 m away). The
driving direction is the recorded one (``"direction": "right"``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["register"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "circuit",
        help="check, list or make circuit files (GNSS lap timing)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="circuit_command", metavar="ACTION", required=True)
    c = sub.add_parser("check", help="load a circuit file (or a geo-anchored track) and describe it")
    c.add_argument("file", type=Path)
    c.set_defaults(func=_check)
    ls = sub.add_parser("list", help="the shipped circuits (and a folder's)")
    ls.add_argument("--circuits", type=Path, help="a folder of your circuit files too")
    ls.set_defaults(func=_list)
    f = sub.add_parser("from-recording", help="a circuit file from a recorded lap's line crossing")
    f.add_argument("file", type=Path, help="WRTF recording with GNSS fixes")
    f.add_argument("-o", "--output", type=Path, required=True, help="circuit file (.json) to write")
    f.add_argument("--lap", type=int, help="lay the line where this lap began (default: the first)")
    f.add_argument("--session", type=int, default=0, help="session of the recording (default 0)")
    f.add_argument("--source", help="GNSS source (default: the first with latitude/longitude)")
    f.add_argument("--name", help="circuit name (default: the file's name)")
    f.add_argument("--width", type=float, default=30.0, help="line width in metres (default 30)")
    f.add_argument("--force", action="store_true", help="overwrite the output file")
    f.set_defaults(func=_from_recording)


def _describe(c: Any) -> str:
    lat, lon = c.centre
    return (
        f"{c.name!r}: start/finish at {lat:.6f}, {lon:.6f}, {len(c.sectors)} sector line(s),"
        f" direction {c.direction}{', pit lines' if c.pit_entry or c.pit_exit else ''}"
    )


def _check(args: argparse.Namespace) -> int:
    from wrtfd.tracks.circuit import load_circuit

    circuit = load_circuit(args.file)
    sys.stdout.write(f"{args.file}: ok: {_describe(circuit)}\n")
    return 0


def _list(args: argparse.Namespace) -> int:
    from wrtfd.tracks.circuit import circuits_in

    found, problems = circuits_in([args.circuits] if args.circuits else [])
    for c in found:
        sys.stdout.write(f"{c.source}: {_describe(c)}\n")
    for p in problems:
        sys.stderr.write(f"wrtfd: skipped {p}\n")
    return 0


def _from_recording(args: argparse.Namespace) -> int:
    from wrtfd.errors import TrackError
    from wrtfd.format import Reader
    from wrtfd.tracks.circuit import Circuit, circuit_to_dict, line_across
    from wrtfd.tracks.geodesy import LocalPlane
    from wrtfd.tracks.gnsslaps import find_gnss_source

    if args.output.exists() and not args.force:
        raise TrackError(f"{args.output}: exists (--force to overwrite)")
    if not 1.0 <= args.width <= 500.0:
        raise TrackError("--width: 1 to 500 metres")
    with Reader(args.file) as r:
        if not 0 <= args.session < len(r.sessions):
            raise TrackError(f"{args.file}: no session {args.session} ({len(r.sessions)} session(s))")
        frames = r.frames(args.session)
        times = (r.frame_times_us(args.session) - r.sessions[args.session].time_base_us) / 1e6
        source, fields = find_gnss_source(frames, args.source)
        gps = frames[source]
        lat = np.asarray(gps[fields.lat], dtype=np.float64)
        lon = np.asarray(gps[fields.lon], dtype=np.float64)
        ok = np.isfinite(lat) & np.isfinite(lon) & ~((lat == 0.0) & (lon == 0.0))
        # one entry per fix: the first frame that shows it
        new = ok.copy()
        new[1:] &= (lat[1:] != lat[:-1]) | (lon[1:] != lon[:-1])
        idx = np.flatnonzero(new)
        if len(idx) < 2:
            raise TrackError(f"{args.file}: fewer than two GNSS fixes in session {args.session}")
        where = "the first fix"
        cross_t = float(times[idx[0]])
        names = frames.dtype.names or ()
        if "laps" in names:
            lap_no = np.asarray(frames["laps"]["lap_number"], dtype=np.int64)
            lap_t = np.asarray(frames["laps"]["lap_time"], dtype=np.float64)
            starts = np.flatnonzero(np.diff(lap_no) > 0) + 1
            wanted = [i for i in starts if args.lap is None or lap_no[i] == args.lap]
            if args.lap is not None and not wanted:
                have = ", ".join(str(int(lap_no[i])) for i in starts) or "none"
                raise TrackError(
                    f"{args.file}: lap {args.lap} does not begin in session {args.session} (laps: {have})"
                )
            if wanted:
                i = int(wanted[0])
                cross_t = float(times[i] - lap_t[i])
                where = f"the start of lap {int(lap_no[i])}"
        elif args.lap is not None:
            raise TrackError(f"{args.file}: no lap channels; without --lap the line goes at the first fix")
    t_fix = times[idx]
    k = int(np.clip(np.searchsorted(t_fix, cross_t, side="right") - 1, 0, len(idx) - 2))
    plane = LocalPlane(float(lat[idx[k]]), float(lon[idx[k]]))
    xs, ys = plane.to_xy(lat[idx], lon[idx])
    # heading: to the next fix at least 5 m on (the way the car went)
    j = k + 1
    while j < len(idx) - 1 and math.hypot(xs[j] - xs[k], ys[j] - ys[k]) < 5.0:
        j += 1
    hx, hy = float(xs[j] - xs[k]), float(ys[j] - ys[k])
    if math.hypot(hx, hy) < 1.0:
        raise TrackError(f"{args.file}: the car hardly moved after {where}; no heading to lay a line across")
    span = float(t_fix[k + 1] - t_fix[k])
    f = 0.0 if span <= 0 else float(np.clip((cross_t - t_fix[k]) / span, 0.0, 1.0))
    x = float(xs[k] + f * (xs[k + 1] - xs[k]))
    y = float(ys[k] + f * (ys[k + 1] - ys[k]))
    name = args.name or args.file.stem
    circuit = Circuit(name, line_across(plane, x, y, hx, hy, args.width), direction="right")
    data = circuit_to_dict(circuit)
    data["source"] = f"wrtfd circuit from-recording {args.file.name}: at {where}"
    args.output.write_text(json.dumps(data, indent=2) + "\n")
    mid = circuit.centre
    sys.stdout.write(f"wrote {args.output}: {name!r}, line at {where} ({mid[0]:.6f}, {mid[1]:.6f})\n")
    return 0
