"""``wrtfd import FILE -o OUT.wrtf``: convert another recorder's file into WRTF.

The format is detected from the file's magic bytes (``--format`` overrides). Each importer module
(``wrtfd.importers.<format>``) provides ``run_import(args) -> int`` and replays the foreign file
through the same scheduler and recorder as live data, driven by the recorded timestamps.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from typing import Any

from wrtfd.errors import ImportFormatError

__all__ = ["IMPORTERS", "detect_format", "register"]

IMPORTERS: dict[str, str] = {
    "carla": "wrtfd.importers.carla",
    "zddsrec": "wrtfd.importers.zddsrec",
}


def detect_format(path: Path) -> str:
    """Name the importer for ``path`` from its first bytes (never by trying every parser)."""
    with path.open("rb") as f:
        head = f.read(18)
    if head[:4] == b"ZDDS":
        return "zddsrec"
    # CARLA: u16 version, then u16 length 14 and "CARLA_RECORDER".
    if len(head) >= 18 and head[2:4] == b"\x0e\x00" and head[4:18] == b"CARLA_RECORDER":
        return "carla"
    raise ImportFormatError(
        f"{path}: not a known recording format (expected .zddsrec or CARLA recorder); use --format"
    )


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "import",
        help="convert a CARLA recorder or .zddsrec file into WRTF",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", type=Path, help="the recording to import")
    p.add_argument("-o", "--output", type=Path, required=True, help="WRTF file to write")
    p.add_argument("--format", choices=sorted(IMPORTERS), help="input format (default: detected)")
    p.add_argument("--config", type=Path, help="channel mapping (TOML), for .zddsrec")
    p.add_argument("--actor", default="hero", help="CARLA: hero | ACTOR_ID | all-vehicles (default: hero)")
    p.add_argument("--max-vehicles", type=int, default=64, help="CARLA all-vehicles: array slots")
    p.add_argument("--rate", type=int, help="frame rate in Hz (default: the format's own)")
    p.add_argument("--track", type=Path, help="track file: adds lap channels")
    p.add_argument("--start-timestamp", type=int, help="file start timestamp, microseconds since the epoch")
    p.add_argument("--force", action="store_true", help="overwrite OUT if it exists")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    fmt = args.format or detect_format(args.file)
    module = importlib.import_module(IMPORTERS[fmt])
    return int(module.run_import(args))
