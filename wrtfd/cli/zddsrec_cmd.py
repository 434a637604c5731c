"""``wrtfd zddsrec info FILE``: what a ``.zddsrec`` capture holds.

Participants, topics (with frames per topic and per sample kind), the time span, and whether the
file ends in a torn frame. ``--json`` prints the same as one JSON object.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["register", "summarize"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "zddsrec",
        help="inspect zerodds .zddsrec captures",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="zddsrec_command", metavar="SUBCOMMAND", required=True)
    info = sub.add_parser("info", help="participants, topics, frames per topic, time span")
    info.add_argument("file", type=Path, help="the .zddsrec file")
    info.add_argument("--json", action="store_true", help="print one JSON object")
    info.add_argument(
        "--max-payload-bytes", type=int, default=1 << 20, help="refuse larger payloads (default 1 MiB)"
    )
    info.set_defaults(func=_info)


def summarize(path: Path, *, max_payload_bytes: int = 1 << 20) -> dict[str, Any]:
    """Read the whole file once and count. :raises ImportFormatError: the file is malformed."""
    from wrtfd.zddsrec.format import Limits, SampleKind, ZddsrecReader

    with ZddsrecReader(path, limits=Limits(max_payload_bytes=max_payload_bytes)) as r:
        header = r.header
        per_topic = [
            dict.fromkeys(("frames", "alive", "disposed", "unregistered", "payload_bytes"), 0)
            for _ in header.topics
        ]
        per_participant = [0] * len(header.participants)
        kinds = {
            SampleKind.ALIVE: "alive",
            SampleKind.NOT_ALIVE_DISPOSED: "disposed",
            SampleKind.NOT_ALIVE_UNREGISTERED: "unregistered",
        }
        first: int | None = None
        last: int | None = None
        lo: int | None = None
        hi: int | None = None
        total = 0
        backwards = 0
        for f in r.frames():
            total += 1
            t = per_topic[f.topic_idx]
            t["frames"] += 1
            t[kinds[f.kind]] += 1
            t["payload_bytes"] += len(f.payload)
            per_participant[f.participant_idx] += 1
            d = f.timestamp_delta_ns
            if last is not None and d < last:
                backwards += 1
            if first is None:
                first = d
            last = d
            lo = d if lo is None else min(lo, d)
            hi = d if hi is None else max(hi, d)
        torn = r.torn_tail
    return {
        "file": str(path),
        "size_bytes": path.stat().st_size,
        "version": 1,
        "time_base_unix_ns": header.time_base_unix_ns,
        "participants": [
            {"index": i, "name": p.name, "guid": p.guid.hex(), "frames": per_participant[i]}
            for i, p in enumerate(header.participants)
        ],
        "topics": [
            {"index": i, "name": t.name, "type_name": t.type_name, **per_topic[i]}
            for i, t in enumerate(header.topics)
        ],
        "frames": total,
        "first_delta_ns": lo,
        "last_delta_ns": hi,
        "span_s": None if lo is None or hi is None else (hi - lo) / 1e9,
        "timestamps_going_back": backwards,
        "torn_tail": None if torn is None else {"offset": torn.offset, "size": torn.size},
    }


def _utc(ns: int) -> str:
    try:
        when = dt.datetime.fromtimestamp(ns // 1_000_000_000, tz=dt.UTC)
    except (OverflowError, OSError, ValueError):
        return "out of range"
    return when.strftime("%Y-%m-%dT%H:%M:%S") + f".{ns % 1_000_000_000:09d}Z"


def _info(args: argparse.Namespace) -> int:
    s = summarize(args.file, max_payload_bytes=args.max_payload_bytes)
    out = sys.stdout
    if args.json:
        out.write(json.dumps(s, indent=2) + "\n")
        return 0
    out.write(f"file:         {s['file']} ({s['size_bytes']} bytes)\n")
    out.write("format:       .zddsrec 1.0\n")
    out.write(f"time base:    {_utc(s['time_base_unix_ns'])} ({s['time_base_unix_ns']} ns)\n")
    if s["span_s"] is None:
        out.write("time span:    no frames\n")
    else:
        lo = s["time_base_unix_ns"] + s["first_delta_ns"]
        hi = s["time_base_unix_ns"] + s["last_delta_ns"]
        out.write(f"time span:    {s['span_s']:.3f} s ({_utc(lo)} .. {_utc(hi)})\n")
    if s["timestamps_going_back"]:
        out.write(f"note:         {s['timestamps_going_back']} frames are older than the frame before them\n")
    out.write(f"frames:       {s['frames']}\n")
    out.write(f"participants: {len(s['participants'])}\n")
    for p in s["participants"]:
        out.write(f"  [{p['index']}] {p['name'] or '(unnamed)'}  guid {p['guid']}  frames {p['frames']}\n")
    out.write(f"topics:       {len(s['topics'])}\n")
    for t in s["topics"]:
        kinds = f"alive {t['alive']}, disposed {t['disposed']}, unregistered {t['unregistered']}"
        out.write(f"  [{t['index']}] {t['name']}  ({t['type_name']})  frames {t['frames']}  [{kinds}]\n")
    if s["torn_tail"] is not None:
        tt = s["torn_tail"]
        out.write(
            f"torn tail:    {tt['size']} bytes at offset {tt['offset']} (an incomplete last frame; ignored)\n"
        )
    return 0
