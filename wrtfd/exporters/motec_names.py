"""MoTeC-style names for the common channels of each game's definition (``wrtfd/schemas``).

i2's track maps, lap reports and default maths look channels up by MoTeC's usual names (``Ground
Speed``, ``Engine RPM``, ``Throttle Pos``...): a channel with one of those names works without
setting up Channel Mappings by hand. Every other channel keeps its flattened WRTF name
(``forza_tire_temp_0``).

The names are part of each protocol's descriptor (``motec`` in :mod:`wrtfd.protocols`); the
derived lap channels' are here. Which game a source speaks is recognised from its fields (a
source is named by the user, so its name proves nothing): the protocol whose *signature* fields
are all present wins (the largest signature, if several). Pedals become percent (``factor``),
wheel arrays get MoTeC's ``FL FR RL RR`` suffixes (every shipped definition stores wheels in that
order), steering angles become degrees, and OutGauge's gear (0 = R, 1 = N) is shifted so that -1
is reverse as in the other games.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from wrtfd.protocols import MotecChannels, MotecName, all_protocols

__all__ = ["PROTOCOL_SIGNATURES", "TABLE", "MotecName", "motec_name", "protocol_of"]

#: The derived lap channels (``wrtfd.tracks.lapchannels``), recognised before any game.
_LAPS = MotecChannels(
    frozenset({"lap_number", "lap_distance", "lap_time", "track_sector"}),
    {
        "lap_number": MotecName("Lap Number", "Lap"),
        "lap_distance": MotecName("Lap Distance", "LapDist"),
        "lap_time": MotecName("Lap Time", "LapTime"),
    },
)


def _channels() -> dict[str, MotecChannels]:
    games = {n: i.motec for n, i in all_protocols().items() if isinstance(i.motec, MotecChannels)}
    # the largest signature first: a definition with more of a game's fields is that game
    ordered = sorted(games, key=lambda n: (-len(games[n].signature), n))
    return {"laps": _LAPS, **{n: games[n] for n in ordered}}


_CHANNELS = _channels()

#: Fields that identify a protocol's channels; checked in this order, first match wins.
PROTOCOL_SIGNATURES: dict[str, frozenset[str]] = {n: c.signature for n, c in _CHANNELS.items()}

#: protocol -> local field name -> MoTeC name.
TABLE: dict[str, Mapping[str, MotecName]] = {n: c.names for n, c in _CHANNELS.items()}


def protocol_of(field_names: Iterable[str]) -> str | None:
    """The protocol whose signature fields a source struct has, if any: the most specific one
    when several match (a u-blox receiver's fields hold the NMEA signature and its own)."""
    names = frozenset(field_names)
    found = [(len(sig), p) for p, sig in PROTOCOL_SIGNATURES.items() if sig <= names]
    return max(found)[1] if found else None


def motec_name(
    protocols: Mapping[str | None, str | None], source: str | None, local: str
) -> MotecName | None:
    """The MoTeC name of field ``local`` of ``source``, given each source's protocol."""
    protocol = protocols.get(source)
    return TABLE.get(protocol, {}).get(local) if protocol is not None else None
