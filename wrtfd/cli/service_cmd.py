"""``wrtfd service install|uninstall``: run wrtfd as a systemd service, in one command.

``install`` creates the ``wrtfd`` system user (member of ``dialout`` for serial adapters),
installs the config into /etc/wrtfd after checking it, writes the units with ExecStart= running
this wrtfd, and enables and starts the service. Run it again after an upgrade: it rewrites only
what changed and says what. ``uninstall`` stops and removes the service; recordings are kept.
``--dry-run`` prints every step without doing it; ``--root DIR`` installs into DIR (an image).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["register"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "service",
        help="install or remove the systemd service",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="service_command", metavar="ACTION", required=True)
    inst = sub.add_parser("install", help="install, enable and start the service (idempotent)")
    inst.add_argument("--config", type=Path, help="config to install as /etc/wrtfd/wrtfd.toml (or NAME.toml)")
    inst.add_argument("--force", action="store_true", help="replace a different installed config (backed up)")
    inst.set_defaults(func=_install)
    rm = sub.add_parser("uninstall", help="stop and remove the service; recordings are kept")
    rm.add_argument("--purge-config", action="store_true", help="also remove the installed config")
    rm.set_defaults(func=_uninstall)
    for action in (inst, rm):
        action.add_argument(
            "--instance", metavar="NAME", help="the instance unit wrtfd@NAME (config /etc/wrtfd/NAME.toml)"
        )
        action.add_argument("--dry-run", action="store_true", help="print every step; change nothing")
        action.add_argument(
            "--root",
            type=Path,
            default=Path("/"),
            metavar="DIR",
            help="install into DIR instead of this system",
        )


def _request(args: argparse.Namespace) -> Any:
    from wrtfd.service.install import ServiceRequest

    return ServiceRequest(
        root=args.root.resolve(),
        instance=args.instance,
        config=getattr(args, "config", None),
        dry_run=args.dry_run,
        force=getattr(args, "force", False),
        purge_config=getattr(args, "purge_config", False),
    )


def _print(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _install(args: argparse.Namespace) -> int:
    from wrtfd.service.install import install

    return install(_request(args), _print)


def _uninstall(args: argparse.Namespace) -> int:
    from wrtfd.service.install import uninstall

    return uninstall(_request(args), _print)
