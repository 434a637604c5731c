"""The options every command that talks to the fleet's server takes (``--url``, ``--token``...).

Plain argparse, nothing else: an offline command (``wrtfd laps``) registers them without
importing the fleet or the daemon.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["connection_args"]


def connection_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("server")
    g.add_argument(
        "--url",
        help="the NATS server, nats://HOST:PORT; a cluster: its nodes, comma-separated"
        " (default: [fleet] url or servers of --config)",
    )
    g.add_argument("--config", type=Path, help="take url, credentials and TLS from this config's [fleet]")
    g.add_argument("--token", help="log in with this token")
    g.add_argument("--user", help="log in as this user (with --password)")
    g.add_argument("--password", help="the user's password")
    g.add_argument("--creds", type=Path, help="NATS credentials file")
    g.add_argument("--tls-ca", type=Path, help="CA file to check the server's certificate")
    g.add_argument("--tls-cert", type=Path, help="client certificate (with --tls-key)")
    g.add_argument("--tls-key", type=Path, help="client key")
