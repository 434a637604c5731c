"""The built-in configuration: a sim rig that works out of the box.

One UDP listener per game protocol on that game's usual port (from the decoder registry), on all
interfaces because the game usually runs on another machine, each in a recording group of its
own (so a Forza session records a file of Forza channels only, named after Forza). Where two
games share a port (F1 and the Codemasters "extradata" format both use 20777) the one earlier in
:data:`PORT_PREFERENCE` gets it. Protocols where *we* must contact the game (Assetto Corsa's
handshake, Gran Turismo 7's heartbeat to the console, ACC's broadcasting registration) are not in
the default: they need the game's or the console's address (and ACC the password of its
``broadcasting.json``, whose listener is off until the user sets ``updListenerPort``).

Recordings go to ``$STATE_DIRECTORY`` under systemd, else ``./recordings``.

Data only: this module imports neither the config models nor the decoder registry;
:func:`wrtfd.daemon.config.default_config` validates what it builds.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["CLIENT_PROTOCOLS", "PORT_PREFERENCE", "default_config_data", "state_directory"]

#: Who wins a shared port, most popular first; protocols not listed follow in name order.
PORT_PREFERENCE: tuple[str, ...] = (
    "forza",
    "f1",
    "outgauge",
    "outsim",
    "codemasters",
    "dirt",
    # issue 14: Project CARS 2 / AMS2 ("Project CARS 2" protocol, their default) before PC1 on 5606
    "pcars2",
    "pcars",
)

#: UDP protocols that need us to initiate (a handshake to the game, a heartbeat to the GT7
#: console, ACC's registration): not listenable by default.
CLIENT_PROTOCOLS: frozenset[str] = frozenset({"assetto_corsa", "gt7", "acc"})


def state_directory(env: Mapping[str, str]) -> Path | None:
    """The first of systemd's ``$STATE_DIRECTORY`` entries, or None outside systemd."""
    value = env.get("STATE_DIRECTORY", "")
    first = value.split(":", 1)[0]
    return Path(first) if first else None


def _ordered(names: list[str]) -> list[str]:
    rank = {name: i for i, name in enumerate(PORT_PREFERENCE)}
    return sorted(names, key=lambda n: (rank.get(n, len(rank)), n))


def default_config_data(protocols: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """The default config as TOML-shaped data, from ``{name: ProtocolInfo}`` (pure: no registry)."""
    sources: list[dict[str, Any]] = []
    taken: set[int] = set()
    for name in _ordered(list(protocols)):
        info = protocols[name]
        port = getattr(info, "default_port", None)
        if getattr(info, "transport", None) != "udp" or port is None or name in CLIENT_PROTOCOLS:
            continue
        if port in taken:
            continue
        taken.add(port)
        sources.append(
            # One game plays at a time: each records its own files (its own recording group).
            {"kind": "udp", "name": name, "protocol": name, "host": "0.0.0.0", "port": port, "group": name}
        )
    state = state_directory(env)
    output_dir = str(state) if state is not None else "recordings"
    return {"sources": sources, "recorder": {"output_dir": output_dir}}
