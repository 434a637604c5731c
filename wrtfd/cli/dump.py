"""``wrtfd dump FILE [--session N] [--schema DEF]``: a WRTF file as JSON Lines.

Per session a line ``{"kind":"session","session":i,"header":{...},"footer":{...},"frames":n,
"last_tick":t}``, then one line per frame ``{"kind":"frame","session":i,"tick":k,"time_us":t,
"data":{...}}``. ``wrtfd write`` reads this back into an equal file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from wrtfd.cli.info import add_schema_option, load_schema

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
    add_schema_option(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from wrtfd.format import Reader
    from wrtfd.format.jsonio import iter_dump_lines

    out = sys.stdout
    with Reader(args.file, load_schema(args)) as r:
        buf: list[str] = []
        for line in iter_dump_lines(r, args.session):
            buf.append(line)
            if len(buf) >= 1024:
                out.write("\n".join(buf) + "\n")
                buf.clear()
        if buf:
            out.write("\n".join(buf) + "\n")
    out.flush()
    return 0
