"""Every protocol wrtfd speaks, one descriptor each, looked up by name and imported on use.

Each module of this package (``wrtfd/protocols/forza.py``...) holds the descriptors
(:class:`ProtocolInfo`) of one game or device: its decoder, definition file, usual port, content
test, position channels for laps, MoTeC names and simulator, as data and ``"module:attr"``
strings (python-can's backend table is the model). The registry of the decoders, the importers'
content detection, the lap channels, the exporters and the simulator all read them from here,
so a new game is one module here plus its decoder and test (CONTRIBUTING.md, "Adding a game").

This package imports no decoder, numpy or YAML: reading the table is cheap, and only the parts
a command uses are imported (:func:`load`), so a daemon with one Forza source loads Forza's
decoder only, and no CAN library.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from wrtfd.errors import ConfigError
from wrtfd.protocols._descriptor import (
    WHEELS,
    Absent,
    LapFacts,
    MotecChannels,
    MotecName,
    PositionFields,
    ProtocolInfo,
    Simulator,
    wheels,
)

__all__ = [
    "SCHEMA_DIR",
    "WHEELS",
    "Absent",
    "LapFacts",
    "MotecChannels",
    "MotecName",
    "PositionFields",
    "ProtocolInfo",
    "Simulator",
    "all_protocols",
    "decoder_class",
    "get",
    "load",
    "make_decoder",
    "sniffers",
    "usual_udp_ports",
    "wheels",
]

#: The shipped WRTF definitions (``config/schemas`` points here).
SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"

_TABLE: dict[str, ProtocolInfo] | None = None


def _discover() -> dict[str, ProtocolInfo]:
    found: dict[str, ProtocolInfo] = {}
    for module_info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if module_info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        for info in module.PROTOCOLS:
            if info.name in found:
                raise ConfigError(f"protocol {info.name!r} is described twice ({module.__name__})")
            found[info.name] = info
    return found


def all_protocols() -> dict[str, ProtocolInfo]:
    """Name -> descriptor of every protocol (a copy: callers may not change the table)."""
    global _TABLE
    if _TABLE is None:
        _TABLE = _discover()
    return dict(_TABLE)


def get(name: str) -> ProtocolInfo:
    """:raises ConfigError: an unknown name (the message lists the known ones)."""
    protocols = all_protocols()
    try:
        return protocols[name]
    except KeyError:
        raise ConfigError(f"unknown protocol {name!r}; known: {', '.join(sorted(protocols))}") from None


def load(ref: str) -> Any:
    """The object a ``"module:attr"`` string names, its module imported now."""
    module_name, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def sniffers(transport: str = "udp") -> dict[str, Callable[[bytes], bool]]:
    """Protocol name -> its content test, for the protocols of ``transport`` that have one."""
    return {
        name: load(info.sniff)
        for name, info in all_protocols().items()
        if isinstance(info.sniff, str) and info.transport == transport
    }


def decoder_class(name: str) -> type[Any]:
    """The decoder class of protocol ``name`` (its module imported now).

    :raises ConfigError: an unknown protocol.
    """
    cls: type[Any] = load(get(name).decoder)
    return cls


def make_decoder(name: str, **options: Any) -> Any:
    """Build the decoder for ``name`` with its options (e.g. OutSim2 option flags, a DBC path)."""
    return decoder_class(name)(**options)


def usual_udp_ports(protocols: Mapping[str, Any] | None = None) -> list[tuple[str, int]]:
    """``(protocol, port)`` of every game listened for on its usual UDP port, one per port.

    ``protocols``: ``{name: ProtocolInfo}`` (default: every one). Where two games share a port
    the lower ``port_rank`` gets it; games we must contact (``client``) are left out. This is
    the routing of the daemon's built-in default and of ``wrtfd import`` without a config.
    """
    protocols = all_protocols() if protocols is None else protocols
    out: list[tuple[str, int]] = []
    taken: set[int] = set()
    for name in sorted(protocols, key=lambda n: (getattr(protocols[n], "port_rank", 100), n)):
        info = protocols[name]
        port = getattr(info, "default_port", None)
        if getattr(info, "transport", None) != "udp" or port is None or getattr(info, "client", False):
            continue
        if port not in taken:
            taken.add(port)
            out.append((name, port))
    return out
