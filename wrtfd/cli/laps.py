"""``wrtfd laps FILE [--track T]``: a table of laps and sector times from a recording.

With ``--track`` the laps are re-detected from the recorded positions (any source with position
channels: Forza, F1, LFS OutSim, DiRT/Codemasters), which is how to fix a session recorded with
the wrong track or none. Without it, the lap channels the recorder added live (``laps.*``) are
read back. Only completed laps are listed; the out-lap and the unfinished last lap are not.
``--json`` prints ``{file, track, sessions: [{session, frames, laps: [{lap, time_s, start_s,
end_s, sectors_s}], best_lap, best_lap_s}]}`` (times in seconds from the session's start).

With ``--circuit`` (a circuit file or a track file laid on the globe) the laps are timed from the
recorded GNSS fixes (latitude and longitude channels, NMEA or u-blox); a recording made with a
circuit file keeps it in its metadata (``CircuitLines``), so the option is then not needed (a
start/finish line laid by ``wrtfd mark --start-finish`` while recording, kept in a marker, comes
first); else a
GNSS recording is timed against the circuit (of ``--circuits`` or shipped) nearest its first fix,
within 3 km, as the daemon picks one. GNSS laps
add each lap's delta to the best and the theoretical best (the best sector times added up):
``delta_s`` per lap, ``theoretical_best_s`` per session in the JSON. On a circuit with pit-lane
lines, a lap through the pit lane is listed with ``pit``: ``"in"``, ``"out"`` or ``"in-out"``
(``in-lap`` etc. in the table) and is never the best lap nor counted in the theoretical best
(docs/circuits.md, "Pit lane").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from wrtfd.tracks.laps import format_lap_time

__all__ = ["format_lap_time", "register", "theoretical_best"]


def theoretical_best(laps: list[dict[str, Any]]) -> float | None:
    """The best time of each sector added up, over the laps with all their sector times (pit
    laps left out)."""
    full = [lap["sectors_s"] for lap in laps if lap["sectors_s"] and lap.get("pit") is None]
    n = max((len(s) for s in full), default=0)
    full = [s for s in full if len(s) == n]
    if not full or n < 2:
        return None
    return round(sum(min(s[k] for s in full) for k in range(n)), 3)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "laps",
        help="lap and sector times of a recording",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", type=Path, nargs="?", help="WRTF recording")
    p.add_argument("--track", type=Path, help="track file: re-detect laps from the positions")
    p.add_argument("--circuit", type=Path, help="circuit file (.json) or geo-anchored track: time GNSS laps")
    p.add_argument(
        "--circuits", type=Path, help="a folder of circuit files to pick from (with the shipped ones)"
    )
    p.add_argument("--source", help="source whose positions to use (default: the first with positions)")
    p.add_argument("--lane", type=int, default=0, help="track lane to measure along (default 0)")
    p.add_argument("--session", type=int, help="only this session (default: all)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=_run)
    from wrtfd.cli.laps_fleet import add_fleet  # the one door into the fleet: --fleet

    add_fleet(p, _run)


def _run(args: argparse.Namespace) -> int:
    from wrtfd.cli.info import check_session
    from wrtfd.format import Reader
    from wrtfd.format.markers import session_marker_rows
    from wrtfd.tracks import load_track
    from wrtfd.tracks.circuit import load_circuit
    from wrtfd.tracks.filelaps import file_timing, time_session

    if args.circuits is not None and not args.circuits.is_dir():  # was ignored: the shipped ones only
        from wrtfd.errors import WrtfdError

        raise WrtfdError(f"--circuits {args.circuits}: not a folder")
    track = load_track(args.track) if args.track else None
    circuit = load_circuit(args.circuit) if args.circuit else None
    result: list[dict[str, Any]] = []
    with Reader(args.file) as r:
        check_session(r, args.session)
        timing = file_timing(
            r,
            track=track,
            circuit=circuit,
            source=args.source,
            lane=args.lane,
            circuit_dirs=[args.circuits] if args.circuits else [],
        )
        circuit = timing.circuit
        indices = range(len(r.sessions)) if args.session is None else [args.session]
        for i in indices:
            frames = r.frames(i)
            timed = time_session(r, i, timing)
            found_laps = timed.laps
            laps: list[dict[str, Any]] = [
                {
                    "lap": lap.number,
                    "time_s": lap.time_s,
                    "start_s": lap.start_s,
                    "end_s": lap.end_s,
                    "sectors_s": list(lap.sector_times_s),
                    **({"pit": lap.pit} if lap.pit is not None else {}),
                }
                for lap in found_laps
            ]
            racing = [lap for lap in laps if "pit" not in lap]
            best = min(racing, key=lambda lap: float(lap["time_s"])) if racing else None
            for lap in laps:
                lap["delta_s"] = round(float(lap["time_s"]) - float(best["time_s"]), 3) if best else None
            theoretical = theoretical_best(laps)
            markers = session_marker_rows(r, i)
            base_us = r.sessions[i].time_base_us
            for m in markers:  # in which lap, and how far into it
                t = (m["time_us"] - base_us) / 1e6
                lap_of = next((lp for lp in laps if lp["start_s"] <= t < lp["end_s"]), None)
                m["session_s"] = round(t, 3)
                m["lap"] = None if lap_of is None else lap_of["lap"]
                m["lap_s"] = None if lap_of is None else round(t - lap_of["start_s"], 3)
            result.append(
                {
                    "session": i,
                    "frames": len(frames),
                    "laps": laps,
                    "best_lap": best["lap"] if best else None,
                    "best_lap_s": best["time_s"] if best else None,
                    "markers": markers,
                    "theoretical_best_s": theoretical,
                    "velocity_ignored": timed.velocity_ignored,
                }
            )
    if args.json:
        sys.stdout.write(
            json.dumps(
                {
                    "file": str(args.file),
                    "track": track.name if track else None,
                    "circuit": circuit.name if circuit else None,
                    "sessions": result,
                },
                indent=2,
            )
            + "\n"
        )
        return 0
    out = sys.stdout
    for sess in result:
        laps = sess["laps"]
        out.write(f"session {sess['session']}: {len(laps)} complete lap(s)\n")
        if sess["velocity_ignored"]:
            out.write(
                "  the receiver's velocity disagreed with its fixes again and again: laps timed from"
                " the fixes alone, the lap in progress then not timed (docs/circuits.md)\n"
            )
        for m in sess["markers"]:
            where = (
                f"lap {m['lap']} +{format_lap_time(m['lap_s'])}" if m["lap"] is not None else "not in a lap"
            )
            note = f": {m['note']}" if m["note"] else ""
            out.write(f"  marker at {m['session_s']:.3f} s (tick {m['tick']}, {where}){note}\n")
        if not laps:
            continue
        nsec = max(len(lap["sectors_s"]) for lap in laps)
        head = "  lap      time     delta" + "".join(f"  {'S' + str(k + 1):>9}" for k in range(nsec))
        out.write(head + "\n")
        for lap in laps:
            mark = " *" if lap["lap"] == sess["best_lap"] else f"  {lap['pit']}-lap" if "pit" in lap else ""
            secs = "".join(f"  {format_lap_time(s):>9}" for s in lap["sectors_s"])
            delta = "" if lap["delta_s"] is None else f"{lap['delta_s']:+.3f}"
            out.write(f"  {lap['lap']:>3}  {format_lap_time(lap['time_s']):>8}  {delta:>8}{secs}{mark}\n")
        if sess["best_lap"] is not None:
            out.write(f"  best: lap {sess['best_lap']} {format_lap_time(sess['best_lap_s'])}\n")
        if sess["theoretical_best_s"] is not None:
            out.write(f"  theoretical best (best sectors): {format_lap_time(sess['theoretical_best_s'])}\n")
    return 0
