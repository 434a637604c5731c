"""``wrtfd info FILE [--json] [--schema DEF]``: what is in a WRTF file.

Header, metadata, and per session: offset, frames, first/last tick, dropped ticks (N10),
duration, and the session footer order found (N2); whether the file is complete (N11).
This module also holds the small helpers the other file commands share.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

__all__ = [
    "add_check_option",
    "add_schema_option",
    "check_session",
    "info_dict",
    "load_schema",
    "marker_line",
    "register",
    "report_dropped",
]


def add_schema_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--schema",
        type=Path,
        metavar="DEF",
        help="definition (YAML) for files without an embedded 'wrtf.schema' (overrides it when given)",
    )


def add_check_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--with-check",
        action="store_true",
        help="include the frame check field (wrtfd_check) as a channel",
    )


def report_dropped(path: Path, dropped: list[Any]) -> int:
    """The exit code of a command that left out frames failing the frame check (one line if so)."""
    if not dropped:
        return 0
    from wrtfd.format.reader import describe_dropped

    sys.stderr.write(f"wrtfd: {path}: {describe_dropped(dropped)}\n")
    return 1


def check_session(reader: Any, session: int | None) -> None:
    """Refuse a ``--session`` the file does not have, a negative one included (not a Python
    index from the end), the way export and plot do.

    :raises FormatError: one line naming the file and its session count.
    """
    from wrtfd.errors import FormatError

    if session is not None and not 0 <= session < len(reader.sessions):
        raise FormatError(f"{reader.path}: no session {session} (the file has {len(reader.sessions)})")


def load_schema(args: argparse.Namespace) -> Any:
    from wrtfd.format import Schema

    return Schema.load(args.schema) if getattr(args, "schema", None) else None


def _iso(us: int) -> str:
    try:
        return dt.datetime.fromtimestamp(us / 1e6, tz=dt.UTC).isoformat(timespec="milliseconds")
    except (OverflowError, OSError, ValueError):
        return "out of range"


def info_dict(reader: Any) -> dict[str, Any]:
    from wrtfd.format.jsonio import JsonCodec
    from wrtfd.format.markers import session_marker_rows

    codec = JsonCodec(reader.schema)
    sessions = []
    for s in reader.sessions:
        sessions.append(
            {
                "index": s.index,
                "offset": s.offset,
                "footer_offset": s.footer_offset,
                "frames": s.frame_count,
                "first_tick": s.first_tick,
                "last_tick": s.last_tick,
                "dropped_ticks": s.dropped_ticks,
                "duration_s": s.duration_us(reader.rate_hz) / 1e6,
                "start_time_us": s.time_base_us,
                "footer_order": s.footer_order,
                "complete": s.complete,
                "torn_bytes": s.torn_bytes,
                "header": codec.header_to_json(s.header.item()),
                "footer": None
                if s.footer is None or codec.footer_to_json is None
                else codec.footer_to_json(s.footer.item()),
                "markers": session_marker_rows(reader, s.index),
            }
        )
    meta = {
        k: (v if k != "wrtf.schema" else f"<definition, {len(v.encode())} bytes>")
        for k, v in reader.metadata.items()
    }
    return {
        "file": str(reader.path),
        "size": reader.size,
        "complete": reader.complete,
        "problem": None if reader.footer_error is None else str(reader.footer_error),
        "check": reader.metadata.get("wrtfd.check"),
        "check_note": reader.check_note,
        "not_read": [] if reader.scan is None else [list(x) for x in reader.scan.skipped],
        "version": reader.header.version,
        "rate_hz": reader.rate_hz,
        "start_timestamp_us": reader.start_timestamp_us,
        "start_time": _iso(reader.start_timestamp_us),
        "definition": reader.schema_source,
        "definition_mismatch": _definition_mismatch(reader),
        "frame_size": reader.schema.frame_size,
        "header_size": reader.schema.header_size,
        "footer_size": reader.schema.footer_size,
        "metadata": meta,
        "frames": reader.total_frames,
        "sessions": sessions,
    }


def _definition_mismatch(reader: Any) -> str | None:
    """How a definition given with --schema differs from the one the file embeds (None: it
    does not, or none was given)."""
    if reader.schema_source != "external":
        return None
    from wrtfd.format.repair import schema_mismatch

    return schema_mismatch(reader.metadata, reader.schema)


def _text(d: dict[str, Any]) -> str:
    if d["complete"]:
        state = "complete"
    elif d["definition_mismatch"]:
        # read with the wrong layout: repairing with it would cut every frame
        state = (
            "INCOMPLETE as read with --schema, which does not match the file's own definition "
            f"({d['definition_mismatch']}); read it without --schema"
        )
    else:
        state = "INCOMPLETE (no valid document footer; readable, run 'wrtfd repair')"
    lines = [
        f"file:       {d['file']} ({d['size']} bytes), {state}",
        f"rate:       {d['rate_hz']} Hz",
        f"start:      {d['start_time']} ({d['start_timestamp_us']} us)",
        f"layout:     frame {d['frame_size']} B, session header {d['header_size']} B, "
        f"footer {d['footer_size']} B ({d['definition']} definition)",
        f"frames:     {d['frames']} in {len(d['sessions'])} session(s)",
        f"check:      {d['check'] or 'none'}"
        + (" (frames verified by validate, dump, export; by the scan when incomplete)" if d["check"] else "")
        + (f"; {d['check_note']}" if d["check_note"] else ""),
    ]
    lines += [f"not read:   {n} bytes at offset {off}: {why}" for off, n, why in d["not_read"]]
    lines.append("metadata:")
    lines += [f"  {k}: {v}" for k, v in d["metadata"].items()] or ["  (none)"]
    for s in d["sessions"]:
        ticks = "-" if s["first_tick"] is None else f"{s['first_tick']}..{s['last_tick']}"
        footer = s["footer_order"] or ("none" if not s["complete"] else "mismatch")
        lines.append(
            f"session {s['index']}: offset {s['offset']}, {s['frames']} frames, ticks {ticks}, "
            f"dropped {s['dropped_ticks']}, duration {s['duration_s']:.3f} s, footer order {footer}"
            + (f", torn {s['torn_bytes']} bytes" if s["torn_bytes"] else "")
        )
        for m in s["markers"]:
            lines.append("  " + marker_line(m, s["start_time_us"]))
    return "\n".join(lines) + "\n"


def marker_line(m: dict[str, Any], session_start_us: int) -> str:
    """``marker at tick 600 (+10.000 s, 12:00:10.000 UTC): note`` (one line of info and laps)."""
    offset_s = (m["time_us"] - session_start_us) / 1e6
    clock = _iso(m["wall_us"])[11:23] if m["wall_us"] else "?"
    note = f": {m['note']}" if m["note"] else ""
    cut = "" if m["complete"] else " (note cut short)"
    return f"marker at tick {m['tick']} (+{offset_s:.3f} s, {clock} UTC){note}{cut}"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "info",
        help="show header, metadata and sessions of a WRTF file",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", type=Path, help="WRTF file")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    add_schema_option(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from wrtfd.format import Reader

    with Reader(args.file, load_schema(args)) as r:
        d = info_dict(r)
    if args.json:
        sys.stdout.write(json.dumps(d, ensure_ascii=False, indent=2, allow_nan=True) + "\n")
    else:
        sys.stdout.write(_text(d))
    return 0
