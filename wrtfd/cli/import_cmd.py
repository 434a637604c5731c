"""``wrtfd import FILE -o OUT``: convert another recorder's file into WRTF.

Formats: pcap/pcapng captures of game UDP, candump -l logs and SavvyCAN/GVRET CSV of CAN buses
(with DBC files), NMEA logs of GPS receivers, iRacing .ibt telemetry, Racelogic .vbo logs, CARLA
recorder files and .zddsrec captures. The format is detected from the file's magic bytes or
structure, never by trying every parser (``--format`` overrides). Each importer module
(``wrtfd.importers.<name>``) provides ``run_import(args) -> int`` and replays the foreign file
through the same decoders, scheduler and recorder as live data, driven by the recorded
timestamps; files appear only when
complete. See docs/import.md.

``--config DAEMON.toml`` (pcap, CAN and NMEA logs): the daemon builds the plan of its sources and
groups (:mod:`wrtfd.daemon.import_plan`, imported here and only then: it needs the daemon extra)
and hands it to the importer as data (``args.plan``); the importers never import the daemon.
"""

from __future__ import annotations

import argparse
import importlib
import re
from pathlib import Path
from typing import Any

from wrtfd.errors import ImportFormatError

__all__ = ["DAEMON_CONFIG_FORMATS", "HEAD_BYTES", "IMPORTERS", "detect_format", "register"]

IMPORTERS: dict[str, str] = {
    "carla": "wrtfd.importers.carla",
    "zddsrec": "wrtfd.importers.zddsrec",
    "pcap": "wrtfd.importers.pcap",
    "candump": "wrtfd.importers.can_log",
    "savvycan": "wrtfd.importers.can_log",
    "nmea": "wrtfd.importers.nmea_log",
    "ibt": "wrtfd.importers.ibt",
    "vbo": "wrtfd.importers.vbo",
}

#: Formats whose ``--config`` is a daemon config (for .zddsrec it is a channel mapping).
DAEMON_CONFIG_FORMATS = frozenset({"pcap", "candump", "savvycan", "nmea"})

#: How much of a file detection looks at.
HEAD_BYTES = 4096

_CANDUMP_LINE = re.compile(rb"\(\d{1,12}\.\d{1,9}\)\s+\S{1,32}\s+[0-9A-Fa-f]{1,8}##?\S*")
_NMEA_SENTENCE = re.compile(rb"[$!]{1,2}[A-Z][A-Z0-9]{3,5},")


def _first_lines(head: bytes, n: int = 8) -> list[bytes]:
    """The first ``n`` lines that are neither blank nor ``#`` comments (the last may be cut)."""
    out = []
    for line in head.replace(b"\r", b"\n").split(b"\n"):
        line = line.strip()
        if line and not line.startswith(b"#"):
            out.append(line)
            if len(out) == n:
                break
    return out


def detect_format(path: Path) -> str:
    """Name the importer for ``path`` from its first bytes (never by trying every parser).

    :raises ImportFormatError: no known format matches (the message lists them).
    """
    # The light modules that hold the tests, never the importers (which may need an extra)
    from wrtfd.decoders.savvycan import is_savvycan_header
    from wrtfd.ibt.reader import looks_like_ibt
    from wrtfd.pcap.reader import GZIP_MAGIC, capture_kind, gunzip_head
    from wrtfd.vbo.reader import looks_like_vbo

    with path.open("rb") as f:
        head = f.read(HEAD_BYTES)
        size = f.seek(0, 2)
    if not head:
        raise ImportFormatError(f"{path}: empty file")
    if head[:4] == b"ZDDS":
        return "zddsrec"
    # CARLA: u16 version, then u16 length 14 and "CARLA_RECORDER".
    if len(head) >= 18 and head[2:4] == b"\x0e\x00" and head[4:18] == b"CARLA_RECORDER":
        return "carla"
    if capture_kind(head) is not None:
        return "pcap"
    if head[:2] == GZIP_MAGIC and capture_kind(gunzip_head(head)) is not None:
        return "pcap"  # a .pcap.gz / .pcapng.gz: the reader decompresses it
    if looks_like_ibt(head, size):
        return "ibt"
    if looks_like_vbo(head):
        return "vbo"
    lines = _first_lines(head)
    if lines and is_savvycan_header(lines[0]):
        return "savvycan"
    complete = lines[:-1] if len(head) == HEAD_BYTES else lines  # the last line may be cut
    if complete and all(_CANDUMP_LINE.fullmatch(line) for line in complete):
        return "candump"
    if complete and sum(1 for line in complete if _NMEA_SENTENCE.search(line)) * 2 > len(complete):
        return "nmea"
    raise ImportFormatError(
        f"{path}: not a known recording format (pcap/pcapng, gzip'd or not, candump -l, SavvyCAN CSV,"
        " NMEA log, iRacing .ibt, Racelogic .vbo, CARLA recorder, .zddsrec); use --format"
    )


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "import",
        help="convert captures and logs (pcap, candump, SavvyCAN, NMEA, .ibt, .vbo, CARLA, .zddsrec)"
        " into WRTF",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", type=Path, help="the recording to import")
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        required=True,
        help="OUT.wrtf, or a directory (files named like the daemon's) for imports of several recordings",
    )
    p.add_argument("--format", choices=sorted(IMPORTERS), help="input format (default: detected)")
    p.add_argument(
        "--config",
        type=Path,
        help="daemon config (pcap, CAN and NMEA logs: its sources, decoders and recorder policy);"
        " for .zddsrec: the channel mapping",
    )
    p.add_argument(
        "--protocol",
        action="append",
        default=[],
        metavar="NAME|PORT=NAME",
        help="pcap: every datagram is this game, or the game on one UDP port (repeatable)",
    )
    p.add_argument(
        "--dbc",
        action="append",
        default=[],
        metavar="[BUS=]FILE",
        help="CAN logs: the DBC of one bus (can0=pt.dbc, bus1=body.dbc), or of every bus (repeatable)",
    )
    p.add_argument("--actor", default="hero", help="CARLA: hero | ACTOR_ID | all-vehicles (default: hero)")
    p.add_argument("--max-vehicles", type=int, default=64, help="CARLA all-vehicles: array slots")
    p.add_argument("--rate", type=int, help="frame rate in Hz (default: the format's own)")
    p.add_argument("--track", type=Path, help="track file: adds lap channels (CARLA)")
    p.add_argument(
        "--start-timestamp",
        type=_start_us,
        help="file start timestamp, microseconds since the epoch (before 2200)",
    )
    p.add_argument("--force", action="store_true", help="overwrite output files that exist")
    p.set_defaults(func=_run)


def _start_us(text: str) -> int:
    from wrtfd.defaults import SANE_TIME_US

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of microseconds: {text!r}") from None
    high = SANE_TIME_US[1]
    if not 0 < value < high:  # spec 9: a start after the epoch; before 2200, as a capture's packets
        raise argparse.ArgumentTypeError(f"{value} is not a time after 1970 (0) and before 2200 ({high})")
    return value


def _run(args: argparse.Namespace) -> int:
    fmt = args.format or detect_format(args.file)
    args.format = fmt
    args.plan = None
    if args.config is not None and fmt in DAEMON_CONFIG_FORMATS:
        args.plan = _daemon_plan(args.config)
    module = importlib.import_module(IMPORTERS[fmt])
    return int(module.run_import(args))


def _daemon_plan(config: Path) -> Any:
    """The daemon config's :class:`~wrtfd.importers.plan.ImportPlan` (the daemon builds it).

    :raises MissingDependencyError: the daemon extra (pydantic) is not installed.
    :raises ConfigError: the config is invalid.
    """
    from wrtfd._optional import require_all

    require_all(["pydantic"], extra="daemon", purpose="wrtfd import --config")
    from wrtfd.daemon.import_plan import build_import_plan

    return build_import_plan(config)
