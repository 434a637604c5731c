"""Protocol name -> decoder: the decoders' view of :mod:`wrtfd.protocols`, where every protocol's
descriptor lives (this module keeps the older import path working).

Decoder classes take their options as keyword arguments and expose ``definition`` (the WRTF
definition dict of their frame fields, usually loaded from ``wrtfd/schemas/<protocol>.wrtf.yaml``,
which ``config/schemas`` points at).
"""

from __future__ import annotations

from wrtfd.protocols import (
    SCHEMA_DIR,
    ProtocolInfo,
    all_protocols,
    decoder_class,
    get,
    make_decoder,
    sniffers,
    usual_udp_ports,
)

__all__ = [
    "CLIENT_PROTOCOLS",
    "PORT_PREFERENCE",
    "SCHEMA_DIR",
    "ProtocolInfo",
    "all_protocols",
    "decoder_class",
    "get",
    "make_decoder",
    "sniffers",
    "usual_udp_ports",
]

#: UDP protocols where *we* contact the game (a handshake, a registration).
CLIENT_PROTOCOLS: frozenset[str] = frozenset(n for n, i in all_protocols().items() if i.client)
#: Who wins a shared usual port, first first (the descriptors' ``port_rank``).
PORT_PREFERENCE: tuple[str, ...] = tuple(
    sorted(
        (n for n, i in all_protocols().items() if i.port_rank < 100),
        key=lambda n: all_protocols()[n].port_rank,
    )
)
