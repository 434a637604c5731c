"""Protocol name -> decoder, looked up lazily so a missing optional piece breaks only itself.

Each decoder module named in :data:`PROTOCOL_MODULES` defines a module-level ``PROTOCOLS`` tuple of
:class:`ProtocolInfo`. Decoder classes take their options as keyword arguments and expose
``definition`` (the WRTF definition dict of their frame fields, usually loaded from
``wrtfd/schemas/<protocol>.wrtf.yaml``, which ``config/schemas`` points at).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wrtfd.errors import ConfigError

__all__ = [
    "CLIENT_PROTOCOLS",
    "PORT_PREFERENCE",
    "PROTOCOL_MODULES",
    "SCHEMA_DIR",
    "ProtocolInfo",
    "all_protocols",
    "decoder_class",
    "get",
    "make_decoder",
    "sniffers",
    "usual_udp_ports",
]

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"

#: Modules that define ``PROTOCOLS``; each may define several (e.g. OutGauge and OutSim).
PROTOCOL_MODULES: tuple[str, ...] = (
    "wrtfd.decoders.forza",
    "wrtfd.decoders.f1",
    "wrtfd.decoders.outgauge",
    "wrtfd.decoders.assetto_corsa",
    "wrtfd.decoders.codemasters",
    "wrtfd.decoders.struct_decoder",
    "wrtfd.decoders.nmea",
    "wrtfd.decoders.ubx",
    "wrtfd.decoders.slcan",
    "wrtfd.decoders.obd",
    # issue 14: ACC broadcasting, EA SPORTS WRC
    "wrtfd.decoders.acc",
    "wrtfd.decoders.wrc",
    # issue 14: GT7, Project CARS 1/2 + AMS2
    "wrtfd.decoders.gt7",
    "wrtfd.decoders.pcars",
)


@dataclass(frozen=True, slots=True)
class ProtocolInfo:
    """What the daemon needs to know to offer a protocol without reading its decoder."""

    name: str  # config name, e.g. "forza"
    title: str  # human name, e.g. "Forza Motorsport / Horizon Data Out"
    transport: str  # "udp" | "serial" | "tcp"
    decoder: str  # "module:Class"
    default_port: int | None = None  # usual UDP port, where the game has one
    nominal_rate_hz: float | None = None
    schema_file: str | None = None  # file name in SCHEMA_DIR, when the definition is fixed
    #: "module:function" telling one datagram of this protocol from others by its size, magic
    #: or header fields alone (``(bytes) -> bool``, pure and cheap, no decoding): how an
    #: import recognises a game on a port it does not know. None: not recognisable by content.
    sniff: str | None = None


#: Who wins a shared usual port, most popular first; protocols not listed follow in name order
#: (F1 and the Codemasters "extradata" format both use 20777).
PORT_PREFERENCE: tuple[str, ...] = (
    "forza",
    "f1",
    "outgauge",
    "outsim",
    "codemasters",
    "dirt",
    # Project CARS 2 / AMS2 ("Project CARS 2" protocol, their default) before PC1 on 5606
    "pcars2",
    "pcars",
)

#: UDP protocols where *we* contact the game (a handshake, a registration): they need the game's
#: address, so nothing listens for them on a usual port.
CLIENT_PROTOCOLS: frozenset[str] = frozenset({"assetto_corsa", "gt7", "acc"})


def usual_udp_ports(protocols: Mapping[str, Any]) -> list[tuple[str, int]]:
    """``(protocol, port)`` of every game listened for on its usual UDP port, one per port.

    ``protocols`` is ``{name: ProtocolInfo}`` (:func:`all_protocols`). This is the routing of
    the daemon's built-in default (:mod:`wrtfd.daemon.defaults`) and of ``wrtfd import`` without
    a config, so both read it from here.
    """
    rank = {name: i for i, name in enumerate(PORT_PREFERENCE)}
    out: list[tuple[str, int]] = []
    taken: set[int] = set()
    for name in sorted(protocols, key=lambda n: (rank.get(n, len(rank)), n)):
        info = protocols[name]
        port = getattr(info, "default_port", None)
        if getattr(info, "transport", None) != "udp" or port is None or name in CLIENT_PROTOCOLS:
            continue
        if port not in taken:
            taken.add(port)
            out.append((name, port))
    return out


def all_protocols() -> dict[str, ProtocolInfo]:
    """Every protocol whose module imports; a module that fails to import is left out."""
    found: dict[str, ProtocolInfo] = {}
    for module_name in PROTOCOL_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for info in getattr(module, "PROTOCOLS", ()):
            found[info.name] = info
    return found


def get(name: str) -> ProtocolInfo:
    protocols = all_protocols()
    try:
        return protocols[name]
    except KeyError:
        raise ConfigError(f"unknown protocol {name!r}; known: {', '.join(sorted(protocols))}") from None


def sniffers(transport: str = "udp") -> dict[str, Callable[[bytes], bool]]:
    """Protocol name -> its content test (:attr:`ProtocolInfo.sniff`), for protocols that have one."""
    out: dict[str, Callable[[bytes], bool]] = {}
    for name, info in all_protocols().items():
        if info.sniff and info.transport == transport:
            module_name, _, func = info.sniff.partition(":")
            out[name] = getattr(importlib.import_module(module_name), func)
    return out


def decoder_class(name: str) -> type[Any]:
    """The decoder class of protocol ``name`` (its module imported now)."""
    info = get(name)
    module_name, _, class_name = info.decoder.partition(":")
    cls: type[Any] = getattr(importlib.import_module(module_name), class_name)
    return cls


def make_decoder(name: str, **options: Any) -> Any:
    """Build the decoder for ``name`` with its options (e.g. OutSim2 option flags, a DBC path)."""
    return decoder_class(name)(**options)
