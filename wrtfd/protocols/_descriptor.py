"""The parts of a protocol descriptor: plain data and "module:attr" strings, nothing imported."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "WHEELS",
    "Absent",
    "LapFacts",
    "MotecChannels",
    "MotecName",
    "PositionFields",
    "ProtocolInfo",
    "Simulator",
    "wheels",
]

#: MoTeC's wheel suffixes, in the order every shipped definition stores its wheel arrays.
WHEELS = ("FL", "FR", "RL", "RR")


@dataclass(frozen=True, slots=True)
class Absent:
    """A part a protocol does not have, and why (shown by ``wrtfd protocols`` and the docs)."""

    reason: str


@dataclass(frozen=True, slots=True)
class PositionFields:
    """Where a protocol's frame keeps the ground position (track x and z), for lap channels."""

    x: str
    z: str
    z_sign: float = 1.0
    active: str | None = None  # a field that is false while the car is not being driven


@dataclass(frozen=True, slots=True)
class LapFacts:
    """What a protocol's frame says of a lap beyond its time, for lap records
    (docs/lap-records.md): the game's "current lap invalid" flag and the conditions.

    ``conditions`` maps a record key (``air_temp_c``, ``track_temp_c``, ``weather``...) to a
    frame field; ``weather`` names the codes of the field behind the ``weather`` key."""

    invalid: str | None = None  # a field that is true while the game holds the current lap invalid
    conditions: Mapping[str, str] = field(default_factory=dict)
    weather: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MotecName:
    """A MoTeC channel name, short name and unit, and the conversion value * factor + offset."""

    name: str
    short: str
    unit: str | None = None  # None: keep the definition's unit
    factor: float = 1.0
    offset: float = 0.0

    @property
    def converts(self) -> bool:
        return self.factor != 1.0 or self.offset != 0.0


@dataclass(frozen=True, slots=True)
class MotecChannels:
    """MoTeC names of a definition's common channels; ``signature``: fields that tell this
    protocol's channels from every other's in a file (a source is named by the user)."""

    signature: frozenset[str]
    names: Mapping[str, MotecName]


@dataclass(frozen=True, slots=True)
class Simulator:
    """The game-feed simulator: ``factory`` is ``"module:function"``, called as
    ``function(track, options)`` (:class:`wrtfd.simulate.encoding.EncoderOptions`)."""

    factory: str
    note: str  # what it sends, for ``wrtfd simulate --help``


@dataclass(frozen=True, slots=True)
class ProtocolInfo:
    """Everything wrtfd knows about one protocol, without importing any of its code.

    Parts a protocol lacks are an :class:`Absent` with the reason, never left out: the
    descriptor test (``tests/test_protocols.py``) requires each part of every protocol.
    """

    name: str  # config name, e.g. "forza"
    title: str  # human name, e.g. "Forza Motorsport / Horizon Data Out"
    transport: str  # "udp" | "serial"
    decoder: str  # "module:Class"
    #: file name in ``wrtfd/schemas`` (the fixed WRTF definition), or why there is none
    schema_file: str | Absent
    #: "module:function" telling one datagram of this protocol from others by its size, magic or
    #: header fields alone (``(bytes) -> bool``, pure and cheap, no decoding): how an import
    #: recognises a game on a port it does not know.
    sniff: str | Absent
    position: PositionFields | Absent
    motec: MotecChannels | Absent
    simulator: Simulator | Absent
    default_port: int | None = None  # usual UDP port, where the game has one
    nominal_rate_hz: float | None = None
    #: who wins a shared usual port: lower first (F1 and Codemasters share 20777 in the games'
    #: own defaults, PC2 and PC1 share 5606)
    port_rank: int = 100
    #: we contact the game (a handshake, a registration): it needs the game's address, so
    #: nothing listens for it on a usual port
    client: bool = False
    #: lap validity and conditions in the frame (None: the frames say nothing of them)
    lap_facts: LapFacts | None = None


def wheels(prefix: str, name: str, short: str, unit: str | None = None) -> dict[str, MotecName]:
    """``prefix_0``..``prefix_3`` -> ``"{name} FL"``..``"{name} RR"``."""
    return {f"{prefix}_{i}": MotecName(f"{name} {w}", f"{short}{w}", unit) for i, w in enumerate(WHEELS)}
