"""The built-in configuration: a sim rig that works out of the box.

One UDP listener per game protocol on that game's usual port (from the decoder registry), on all
interfaces because the game usually runs on another machine, each in a recording group of its
own (so a Forza session records a file of Forza channels only, named after Forza). Which game
gets which port is :func:`wrtfd.protocols.usual_udp_ports` (where two games share a port, the
one with the lower ``port_rank`` in its descriptor gets it), the routing ``wrtfd import`` uses without a
config too. Protocols where *we* must contact the game (Assetto Corsa's handshake, Gran Turismo 7's
heartbeat to the console, ACC's broadcasting registration) are not in the default: they need the
game's or the console's address (and ACC the
password of its ``broadcasting.json``, whose listener is off until the user sets
``updListenerPort``).

Recordings go to ``$STATE_DIRECTORY`` under systemd, else ``./recordings``.

Data only: this module imports neither the config models nor the decoders (only their
descriptors);
:func:`wrtfd.daemon.config.default_config` validates what it builds.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from wrtfd.decoders.registry import CLIENT_PROTOCOLS, PORT_PREFERENCE
from wrtfd.protocols import usual_udp_ports

__all__ = ["CLIENT_PROTOCOLS", "PORT_PREFERENCE", "default_config_data", "state_directory"]


def state_directory(env: Mapping[str, str]) -> Path | None:
    """The first of systemd's ``$STATE_DIRECTORY`` entries, or None outside systemd."""
    value = env.get("STATE_DIRECTORY", "")
    first = value.split(":", 1)[0]
    return Path(first) if first else None


def default_config_data(protocols: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """The default config as TOML-shaped data, from ``{name: ProtocolInfo}`` (pure: no registry)."""
    sources: list[dict[str, Any]] = [
        # One game plays at a time: each records its own files (its own recording group).
        {"kind": "udp", "name": name, "protocol": name, "host": "0.0.0.0", "port": port, "group": name}
        for name, port in usual_udp_ports(protocols)
    ]
    state = state_directory(env)
    output_dir = str(state) if state is not None else "recordings"
    return {"sources": sources, "recorder": {"output_dir": output_dir}}
