"""``wrtfd export FILE -o OUT.csv|OUT.parquet [--schema DEF]``: frames as a flat table.

Columns: ``session``, ``tick``, ``time_us``, then one per channel with flattened names
(``wheels_0_temperature``); the frame check's field only with ``--with-check``. Parquet needs
pyarrow (``pip install wrtfd[parquet]``).

Only frames that pass the frame check are exported. Exit 0: every frame exported; 1: frames that
fail the check were left out (one line on stderr says how many and why); 2: unreadable file,
bad usage or a failed write.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from wrtfd.cli.info import add_check_option, add_schema_option, load_schema, report_dropped

__all__ = ["register"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "export",
        help="export frames to CSV or Parquet",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", type=Path, help="WRTF file")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="OUT", help="OUT.csv or OUT.parquet")
    p.add_argument("--format", choices=["csv", "parquet"], help="output format (default: from OUT's suffix)")
    add_check_option(p)
    add_schema_option(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from wrtfd.format import Reader
    from wrtfd.format.export import export_file

    tty = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if tty and total:
            sys.stderr.write(f"\rexporting: {done}/{total} frames ({100 * done // total}%)")
            sys.stderr.flush()

    dropped: list[Any] = []
    with Reader(args.file, load_schema(args)) as r:
        rows = export_file(r, args.output, args.format, progress, with_check=args.with_check, dropped=dropped)
    if tty:
        sys.stderr.write("\n")
    sys.stderr.write(f"wrote {args.output}: {rows} rows\n")
    return report_dropped(args.file, dropped)
