"""``wrtfd status``: what a running daemon is doing, in the terminal, like ``systemctl status``.

Reads the daemon's ``/status`` and shows its recording groups (file, session, frames, laps),
sources (state, rate, drops, last sample), free disk and problems. Exit code: 0 healthy,
1 unhealthy (what ``/healthz`` answers 503 for), 2 unreachable or not a wrtfd, so it works in
scripts and monitoring. ``--json`` prints the document as received. ``--watch`` refreshes it
until Ctrl-C. Colour only on a terminal, and never with ``NO_COLOR`` set.

Which daemon: ``--url``; else the ``[status]`` of ``--config FILE``, of ``--instance NAME``
(/etc/wrtfd/NAME.toml) or of /etc/wrtfd/wrtfd.toml when installed; else http://127.0.0.1:8787.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from wrtfd.cli.arg_types import SECONDS

__all__ = ["EXIT_HEALTHY", "EXIT_UNHEALTHY", "EXIT_UNREACHABLE", "daemon_url", "print_trimmed", "register"]

EXIT_HEALTHY = 0
EXIT_UNHEALTHY = 1
EXIT_UNREACHABLE = 2
INSTALLED_CONFIG_DIR = Path("/etc/wrtfd")
#: Longest line when not on a terminal: wide enough that no table row wraps in a log or a
#: pipe. Lines are never padded to it (trailing blanks are dropped).
PIPE_WIDTH = 200


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "status",
        help="show a running daemon's status (exit 0 healthy, 1 unhealthy, 2 unreachable)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--url", help="the daemon's status URL (default: from the config, else :8787)")
    where.add_argument("--config", type=Path, help="read the status address from this config")
    where.add_argument("--instance", metavar="NAME", help="the daemon of /etc/wrtfd/NAME.toml")
    p.add_argument(
        "--watch",
        nargs="?",
        const=2.0,
        type=SECONDS,
        metavar="SECONDS",
        help="refresh every SECONDS (default 2) until Ctrl-C",
    )
    p.add_argument("--json", action="store_true", help="print the status JSON as received")
    p.add_argument("--timeout", type=SECONDS, default=5.0, metavar="S", help="give up after S seconds (5)")
    p.set_defaults(func=_status)


def daemon_url(args: argparse.Namespace) -> str:
    from wrtfd.daemon.status_client import DEFAULT_URL, url_for
    from wrtfd.errors import StatusError

    if args.url:
        return str(args.url)
    path: Path | None = args.config
    if args.instance:
        path = INSTALLED_CONFIG_DIR / f"{args.instance}.toml"
    elif path is None and (INSTALLED_CONFIG_DIR / "wrtfd.toml").is_file():
        path = INSTALLED_CONFIG_DIR / "wrtfd.toml"
    if path is None:
        return DEFAULT_URL
    from wrtfd.daemon.config import load_config

    status = load_config(path).config.status
    if not status.enabled:
        raise StatusError(f"{path}: the status endpoint is disabled ([status] enabled = false)")
    return url_for(status.host, status.port)


def _status(args: argparse.Namespace) -> int:
    from wrtfd.daemon.status_client import fetch_status

    url = daemon_url(args)
    if args.watch is None:
        answer = fetch_status(url, timeout_s=args.timeout)
        if args.json:
            sys.stdout.buffer.write(answer.body)
            sys.stdout.flush()
        else:
            console = _console()
            print_trimmed(console, _view(answer.snapshot, answer.url, console))
        return EXIT_HEALTHY if answer.healthy else EXIT_UNHEALTHY
    return _watch(url, args)


def _console() -> Any:
    """The terminal's width on a terminal; in a pipe :data:`PIPE_WIDTH` (``$COLUMNS`` only when
    wider: GNU readline exports ``COLUMNS=80`` to the children of any process that loaded it)."""
    from rich.console import Console

    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=max(PIPE_WIDTH, console.width))
    return console


def print_trimmed(console: Any, renderable: Any) -> None:
    """Print ``renderable`` fitted to the console's width without the blanks rich pads table
    cells and lines with: a line ends with its last visible character."""
    from rich.segment import Segment, Segments

    out: list[Segment] = []
    for line in console.render_lines(renderable, console.options, pad=False):
        segments = list(line)
        while segments and not segments[-1].control and not segments[-1].text.strip():
            segments.pop()
        if segments and not segments[-1].control:
            last = segments[-1]
            segments[-1] = Segment(last.text.rstrip(), last.style)
        out += segments
        out.append(Segment.line())
    console.print(Segments(out), soft_wrap=True)


def _view(snapshot: dict[str, Any], url: str, console: Any) -> Any:
    from wrtfd.daemon.status_view import render_status

    return render_status(snapshot, url=url, unicode=console.encoding.lower().startswith("utf"))


def _watch(url: str, args: argparse.Namespace) -> int:
    """Refresh until Ctrl-C; the exit code is the last refresh's."""
    from rich.live import Live
    from rich.text import Text

    from wrtfd.daemon.status_client import fetch_status
    from wrtfd.errors import StatusError

    console = _console()
    code = EXIT_UNREACHABLE
    live = Live(console=console, auto_refresh=False) if console.is_terminal and not args.json else None
    try:
        if live is not None:
            live.start()
        while True:
            stamp = time.strftime("%H:%M:%S")
            try:
                answer = fetch_status(url, timeout_s=args.timeout)
            except StatusError as exc:
                code = EXIT_UNREACHABLE
                view: Any = Text(f"{stamp} unreachable: {exc}", style="red")
                line = json.dumps({"time": stamp, "error": str(exc)})
            else:
                code = EXIT_HEALTHY if answer.healthy else EXIT_UNHEALTHY
                view = _view(answer.snapshot, answer.url, console)
                line = json.dumps(answer.snapshot, separators=(",", ":"))
            if args.json:
                sys.stdout.write(line + "\n")
                sys.stdout.flush()
            elif live is not None:
                live.update(view, refresh=True)
            else:
                console.print(Text(f"--- {stamp}", style="dim"))
                print_trimmed(console, view)
                console.file.flush()
            time.sleep(args.watch)
    except KeyboardInterrupt:
        return code
    finally:
        if live is not None:
            live.stop()
