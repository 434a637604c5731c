"""``wrtfd dump FILE [--session N] [--schema DEF] [--with-check]``: a WRTF file as JSON Lines.

Per session a line ``{"kind":"session","session":i,"header":{...},"footer":{...},"frames":n,
"last_tick":t}``, then one line per frame ``{"kind":"frame","session":i,"tick":k,"time_us":t,
"data":{...}}``. ``wrtfd write`` reads this back into an equal file.

In a file with the frame check, only frames that pass it are dumped (``frames`` and
``last_tick`` count those), and the check field is not in ``data`` unless ``--with-check``.
Exit 0: every frame dumped; 1: frames that fail the check were left out (one line on stderr
says how many and why); 2: unreadable file or bad usage.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from wrtfd.cli.info import add_check_option, add_schema_option, check_session, load_schema, report_dropped

__all__ = ["register"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "dump",
        help="print sessions and frames as JSON Lines",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", type=Path, help="WRTF file")
    p.add_argument("--session", type=int, metavar="N", help="only session N (0-based)")
    add_check_option(p)
    add_schema_option(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from wrtfd.format import Reader
    from wrtfd.format.jsonio import iter_dump_lines

    out = sys.stdout
    dropped: list[Any] = []
    with Reader(args.file, load_schema(args)) as r:
        check_session(r, args.session)
        buf: list[str] = []
        for line in iter_dump_lines(r, args.session, with_check=args.with_check, dropped=dropped):
            buf.append(line)
            if len(buf) >= 1024:
                out.write("\n".join(buf) + "\n")
                buf.clear()
        if buf:
            out.write("\n".join(buf) + "\n")
    out.flush()
    return report_dropped(args.file, dropped)
