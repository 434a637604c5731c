"""CAN bus through an SLCAN (Lawicel) adapter: send the open sequence, then read frames.

Open sequence, after every (re)open: a few bare ``\\r`` to flush a half-typed command, ``C``
(close the channel if a previous run left it open), ``S<n>`` for the bitrate, optionally ``Z1``
(timestamps), then ``O`` (normal) or ``L`` (listen-only: the logger never acknowledges frames,
the safe choice on a car's bus). ``C`` is sent again on a deliberate stop.
"""

from __future__ import annotations

from wrtfd.decoders.slcan import SLCAN_BITRATES, SlcanDecoder
from wrtfd.errors import ConfigError
from wrtfd.sources.serial import SerialLineSource, SerialSettings

__all__ = ["SLCAN_MAX_LINE_BYTES", "SlcanSource", "slcan_open_commands"]

#: Longest SLCAN line: T + 8 id + dlc + 16 data + 4 timestamp = 30 bytes; leave room for noise.
SLCAN_MAX_LINE_BYTES = 64


def slcan_open_commands(bitrate: int, *, listen_only: bool = False, timestamps: bool = False) -> list[bytes]:
    """:raises ConfigError: a bitrate the Lawicel protocol has no ``S`` code for."""
    try:
        speed = SLCAN_BITRATES[bitrate]
    except KeyError:
        raise ConfigError(f"SLCAN bitrate {bitrate} not one of {sorted(SLCAN_BITRATES)}") from None
    commands = [b"\r\r\r", b"C\r", speed + b"\r"]
    if timestamps:
        commands.append(b"Z1\r")
    commands.append(b"L\r" if listen_only else b"O\r")
    return commands


class SlcanSource(SerialLineSource):
    protocol_name = "slcan"

    def __init__(
        self,
        name: str,
        settings: SerialSettings,
        decoder: SlcanDecoder,
        *,
        bitrate: int = 500_000,
        listen_only: bool = False,
        timestamps: bool = False,
        command_gap_s: float = 0.05,
    ) -> None:
        super().__init__(
            name,
            settings,
            decoder,
            delimiters=b"\r",
            open_commands=slcan_open_commands(bitrate, listen_only=listen_only, timestamps=timestamps),
            close_commands=[b"C\r"],
            command_gap_s=command_gap_s,
            max_line_bytes=min(settings.max_line_bytes, SLCAN_MAX_LINE_BYTES),
        )
