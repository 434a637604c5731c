"""``wrtfd write --schema DEF --rate HZ [--start-timestamp US] [--meta K=V]... [--check] -o OUT IN.jsonl``

The inverse of ``wrtfd dump``: ``wrtfd dump a.wrtf | wrtfd write --schema d.yaml --rate R
--start-timestamp S -o b.wrtf -`` gives a file whose frames, headers and footers equal a's.
IN is ``-`` for standard input.

``--check`` adds the frame check (the ``wrtfd_check`` field, with a new random salt); giving
a's ``wrtfd.check.salt`` with ``--meta`` turns it on with a's salt, so that the metadata equal
a's too (the check values themselves depend on how frames were grouped when written).

An existing OUT is refused without ``--force``, and OUT being IN always. OUT is written beside
itself and renamed into place at the end: an error (a torn last line, Ctrl-C) leaves an existing
OUT as it was and no new file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from wrtfd.cli.output_path import add_force_option, check_output, output_guard

__all__ = ["register"]


def _meta(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "write",
        help="write a WRTF file from JSON Lines (the inverse of dump)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("input", metavar="IN.jsonl", help="JSON Lines as printed by 'wrtfd dump' ('-' for stdin)")
    p.add_argument("--schema", type=Path, required=True, metavar="DEF", help="definition (YAML)")
    p.add_argument("--rate", type=int, required=True, metavar="HZ", help="frame rate in Hz")
    p.add_argument(
        "--start-timestamp",
        type=int,
        metavar="US",
        help="file start timestamp, microseconds since the epoch (default: now)",
    )
    p.add_argument(
        "--meta",
        type=_meta,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="metadata entry (repeatable)",
    )
    p.add_argument("-o", "--output", type=Path, required=True, metavar="OUT", help="WRTF file to write")
    p.add_argument(
        "--check", action="store_true", help="add the frame check (implied by --meta wrtfd.check.salt=...)"
    )
    add_force_option(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from wrtfd.errors import FormatError
    from wrtfd.exporters.atomic import AtomicOutputs
    from wrtfd.format import Schema, Writer
    from wrtfd.format.check import CHECK_KEYS
    from wrtfd.format.jsonio import write_jsonl

    schema = Schema.load(args.schema)
    meta: dict[str, str] = {}
    for k, v in args.meta:
        if k in meta:
            raise FormatError(f"--meta {k} given twice")
        meta[k] = v
    inputs = [] if args.input == "-" else [args.input]
    check_output(args.output, inputs, force=args.force)
    src = sys.stdin if args.input == "-" else open(args.input, encoding="utf-8")  # noqa: SIM115
    try:
        with (
            AtomicOutputs(output_guard(inputs, force=args.force)) as outputs,
            Writer(
                outputs.path(args.output),
                schema,
                rate_hz=args.rate,
                start_timestamp_us=args.start_timestamp,
                metadata=meta,
                exist_ok=True,
                check=args.check or any(k in meta for k in CHECK_KEYS),
            ) as w,
        ):
            sessions, frames = write_jsonl(src, w)
    except UnicodeDecodeError as exc:
        raise FormatError(f"{args.input}: not UTF-8 text ({exc.reason})") from exc
    finally:
        if src is not sys.stdin:
            src.close()
    sys.stderr.write(f"wrote {args.output}: {sessions} session(s), {frames} frame(s)\n")
    return 0
