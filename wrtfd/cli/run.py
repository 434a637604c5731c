"""``wrtfd run [--config FILE]``: record live telemetry until stopped.

Without ``--config`` the config is ``$CONFIGURATION_DIRECTORY/wrtfd.toml`` (under systemd) when
present, else the built-in default: a sim rig listening on every supported game's usual UDP
port, recording into ``./recordings`` (``$STATE_DIRECTORY`` under systemd).

Signals: SIGTERM/SIGINT stop (every file finalized), SIGHUP starts new sessions (mark a stint),
a second SIGINT exits at once. Exit codes: 0 stopped cleanly, 1 failed while running, 2 bad
config (nothing was created), 3 stopped but a recording failed on the way (a write error such
as a full disk; the journal names the file).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

__all__ = ["register"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "run",
        help="run the recording daemon",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", type=Path, help="TOML config file (see `wrtfd config show`)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from wrtfd.daemon.app import run_daemon

    return run_daemon(args.config)
