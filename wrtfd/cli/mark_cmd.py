"""``wrtfd mark [NOTE]``: put a marker in what a running daemon records, at this moment.

The same as the page's MARK button, ``POST /api/mark`` or ``kill -USR1 $(pidof wrtfd)``: every
recording group with a session in progress gets a marker at the current tick, with the note
(up to 64 bytes). ``wrtfd info``, ``laps``, ``dump``, ``plot`` and the exports show it.

Which daemon: ``--url``, else the ``[status]`` of ``--config FILE`` / ``--instance NAME`` /
/etc/wrtfd/wrtfd.toml, else http://127.0.0.1:8787. A daemon listening off loopback needs its
token: ``--token``, ``$WRTFD_TOKEN``, or the one kept beside the recordings (read with --config).
Exit code: 0 marked, 1 nothing is being recorded, 2 unreachable or refused.

``--start-finish`` (pressed while crossing the line) also lays the start/finish line where the
car is, across its heading, 30 m wide, for every GNSS source with lap timing (``circuit =
"auto"``): laps are timed against it from then on (docs/circuits.md). Exit 1 when no source
times GNSS laps.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from wrtfd.cli.arg_types import SECONDS

__all__ = ["register"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "mark",
        help="put a marker (with an optional note) in what a running daemon records",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("note", nargs="?", default="", help="a short note (up to 64 bytes)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--url", help="the daemon's address (default: from the config, else :8787)")
    where.add_argument("--config", type=Path, help="read the address (and token) from this config")
    where.add_argument("--instance", metavar="NAME", help="the daemon of /etc/wrtfd/NAME.toml")
    p.add_argument(
        "--start-finish", action="store_true", help="lay the start/finish line here, across the car's heading"
    )
    p.add_argument("--token", help="the web token (default: $WRTFD_TOKEN, or from --config)")
    p.add_argument("--timeout", type=SECONDS, default=5.0, metavar="S", help="give up after S seconds (5)")
    p.set_defaults(func=_mark)


def _token(args: argparse.Namespace) -> str | None:
    if args.token:
        return str(args.token)
    if os.environ.get("WRTFD_TOKEN"):
        return os.environ["WRTFD_TOKEN"]
    if args.config is None and not args.instance:
        return None
    from wrtfd.cli.status_cmd import INSTALLED_CONFIG_DIR
    from wrtfd.daemon.config import load_config
    from wrtfd.daemon.web.access import resolve_token

    path = args.config if args.config is not None else INSTALLED_CONFIG_DIR / f"{args.instance}.toml"
    loaded = load_config(path)
    cfg = loaded.config
    return resolve_token(cfg.web.token, cfg.status.host, loaded.output_dir(), create=False)


def _mark(args: argparse.Namespace) -> int:
    from wrtfd.cli.status_cmd import daemon_url
    from wrtfd.daemon.mark_client import NotRecording, post_mark

    url = daemon_url(args)
    try:
        answer = post_mark(
            url,
            args.note or ("start/finish" if args.start_finish else ""),
            token=_token(args),
            timeout_s=args.timeout,
            start_finish=args.start_finish,
        )
    except NotRecording as exc:
        sys.stderr.write(f"wrtfd: {exc}\n")
        return 1
    where = ", ".join(f"{group} at tick {tick}" for group, tick in sorted(answer.marked.items()))
    note = f" ({answer.note!r})" if answer.note else ""
    sys.stdout.write(f"marked {where}{note}\n")
    return 0
