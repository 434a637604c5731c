"""``wrtfd repair FILE [-o OUT] [--schema DEF]``: finalize an incomplete WRTF file (N11).

Keeps every complete frame, drops a torn last record, writes the missing session footer(s) and
the document footer. In a file with the frame check it keeps frames up to the first one that
fails the check and nothing after it. In place by default; ``-o OUT`` leaves FILE untouched (an
existing OUT is refused without ``--force``, and OUT being FILE always; OUT is written beside
itself and renamed into place). ``--schema`` is for a file without an embedded definition (or
one that cannot be read): one that does not match the file's own is refused, since repair would
cut every frame that definition cannot read. Reports what it did and what it dropped, then
validates its output.

Exit 0: the output is valid (repaired, or nothing to do); 1: the output was written but does
not validate (the findings are listed: things repair does not fix, such as non-zero padding or
a missing 'wrtf.schema'); 2: FILE is unreadable (empty, not WRTF, header or metadata cut) or
bad usage, and nothing was written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from wrtfd.cli.info import add_schema_option, load_schema
from wrtfd.cli.output_path import add_force_option, check_output

__all__ = ["register"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "repair",
        help="finalize a WRTF file a crash left incomplete",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", type=Path, help="WRTF file")
    p.add_argument("-o", "--output", type=Path, metavar="OUT", help="write the repaired file here instead")
    add_force_option(p)
    add_schema_option(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from wrtfd.format import repair_file

    if args.output is not None:
        check_output(args.output, [args.file], force=args.force)
    report = repair_file(args.file, args.output, load_schema(args))
    for line in report.lines():
        sys.stdout.write(line + "\n")
    return 0 if report.valid else 1
