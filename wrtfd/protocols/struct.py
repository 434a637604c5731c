"""The generic ``struct`` decoder: a datagram layout described in the configuration."""

from __future__ import annotations

from wrtfd.protocols._descriptor import Absent, ProtocolInfo

__all__ = ["PROTOCOLS"]

_USERS = "the layout is the user's (the source's options)"

PROTOCOLS = (
    ProtocolInfo(
        name="struct",
        title="Generic struct: a datagram layout described in the configuration",
        transport="udp",
        decoder="wrtfd.decoders.struct_decoder:StructDecoder",
        schema_file=Absent("generated from the layout in the source's options"),
        sniff=Absent(f"{_USERS}: give the import a --config"),
        position=Absent(f"{_USERS}: give track_position"),
        motec=Absent(f"{_USERS}: its channels keep their names"),
        simulator=Absent(_USERS),
    ),
)
