"""``wrtfd validate FILE [--schema DEF]``: check a WRTF file (spec section 9, docs/wrtf-notes.md).

Prints one finding per line (with its byte offset). In a file with the frame check every commit
group is verified; each stretch of failing frames is one line with the offset of its first frame
(the others follow every frame size). Exit 0: valid; 1: findings; 2: unreadable (empty, not
WRTF, header or metadata cut, no usable definition) or bad usage.
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
        "validate",
        help="check a WRTF file; exit 1 with one line per finding",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", type=Path, help="WRTF file")
    add_schema_option(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from wrtfd.cli.main import error_line
    from wrtfd.format.validate import unreadable, validate_file

    findings = validate_file(args.file, load_schema(args))
    for f in findings:
        sys.stdout.write(f"{args.file}: {f}\n")
    if not findings:
        sys.stdout.write(f"{args.file}: valid\n")
    fatal = unreadable(findings)
    if fatal is not None:
        sys.stdout.flush()
        error_line(f"{args.file}: unreadable: {fatal.message}")
        return 2
    return 1 if findings else 0
