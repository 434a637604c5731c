"""Protocol name -> decoder, looked up lazily so a missing optional piece breaks only itself.

Each decoder module named in :data:`PROTOCOL_MODULES` defines a module-level ``PROTOCOLS`` tuple of
:class:`ProtocolInfo`. Decoder classes take their options as keyword arguments and expose
``definition`` (the WRTF definition dict of their frame fields, usually loaded from
``wrtfd/schemas/<protocol>.wrtf.yaml``, which ``config/schemas`` points at).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wrtfd.errors import ConfigError

__all__ = ["PROTOCOL_MODULES", "SCHEMA_DIR", "ProtocolInfo", "all_protocols", "get", "make_decoder"]

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
    "wrtfd.decoders.slcan",
    "wrtfd.decoders.obd",
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


def make_decoder(name: str, **options: Any) -> Any:
    """Build the decoder for ``name`` with its options (e.g. OutSim2 option flags, a DBC path)."""
    info = get(name)
    module_name, _, class_name = info.decoder.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls(**options)
