"""CAN frames -> channel values through a DBC file (cantools), with a channel mapping.

The mapping says which DBC signals become which channels: ``{"rpm": "ID_140.RPM", "speed":
"SPEED"}`` (``MESSAGE.SIGNAL``, or a bare signal name when it is unique in the DBC). Without a
mapping every signal of every message becomes a channel named after the signal in lower case
(``message_signal`` when two messages share a signal name).

Everything is resolved when the decoder is built (unknown message or signal -> ConfigError), so
the per-frame path is one dict lookup and one cantools ``Message.decode``. Frames whose id has no
mapped signal are counted by the caller as ``unmapped_id``. A frame carries only the channels of
its own message: samples hold a subset of the definition's fields and the recorder keeps the
last value of the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wrtfd._optional import require
from wrtfd.decoders.base import Decoded, generated_definition
from wrtfd.errors import ConfigError, DecodeError

__all__ = [
    "CanFrame",
    "DbcChannelDecoder",
    "check_id",
]

_MAX_STD_ID = 0x7FF
_MAX_EXT_ID = 0x1FFFFFFF


@dataclass(frozen=True, slots=True)
class CanFrame:
    """One classic CAN frame as read from an adapter or a log.

    ``timestamp_ns`` is the adapter's or log's own time (arbitrary epoch), None when absent.
    """

    arbitration_id: int
    data: bytes
    is_extended: bool = False
    is_remote: bool = False
    timestamp_ns: int | None = None


@dataclass(frozen=True, slots=True)
class _Route:
    decode: Any  # bound cantools Message.decode
    signals: tuple[tuple[str, str], ...]  # (signal name, channel name)
    message_name: str


class DbcChannelDecoder:
    """Decode CAN frames with a DBC; ``decode_frame`` returns only the mapped channels.

    :raises ConfigError: the DBC cannot be loaded, or the mapping names an unknown message or
        signal, or maps one channel twice.
    """

    def __init__(self, *, dbc: str | Path, mapping: Mapping[str, str] | None = None) -> None:
        # DBC decoding is optional (the daemon extra brings cantools, and so does `wrtfd[can]` for
        # the offline tools that read CAN logs); imported here, when a DBC is used, so that
        # importing this module for CanFrame (or a config without CAN) never loads cantools,
        # which brings python-can and through it asammdf, pandas and pyarrow.
        cantools = require("cantools", extra="can", purpose="CAN decoding with a DBC file")
        self._cantools_decode_error: type[Exception] = cantools.database.DecodeError
        self.dbc_path = Path(dbc)
        try:
            db = cantools.database.load_file(str(self.dbc_path))
        except (OSError, ValueError, cantools.database.UnsupportedDatabaseFormatError) as exc:
            # ValueError: a name cantools takes for another format ("expected database format
            # ... got 'txt'"), or bytes that are not text
            raise ConfigError(f"{self.dbc_path}: cannot load DBC: {exc}") from exc
        if not isinstance(db, cantools.database.can.Database):  # e.g. a .cdd diagnostics file
            raise ConfigError(f"{self.dbc_path}: not a CAN database")
        self.db: Any = db  # cantools.database.can.Database
        self.mapping = dict(mapping) if mapping is not None else _default_mapping(self.db)
        self._routes, self._channel_signals = self._build_routes()
        self.definition = self._build_definition()

    @property
    def channels(self) -> list[str]:
        return list(self._channel_signals)

    def _lookup(self, channel: str, ref: str) -> tuple[Any, Any]:
        msg_name, dot, sig_name = ref.rpartition(".")
        if dot:
            try:
                message = self.db.get_message_by_name(msg_name)
            except KeyError:
                raise ConfigError(
                    f"mapping {channel!r}: no message {msg_name!r} in {self.dbc_path}"
                ) from None
            for signal in message.signals:
                if signal.name == sig_name:
                    return message, signal
            raise ConfigError(f"mapping {channel!r}: message {msg_name!r} has no signal {sig_name!r}")
        found = [(m, s) for m in self.db.messages for s in m.signals if s.name == sig_name]
        if not found:
            raise ConfigError(f"mapping {channel!r}: no signal {sig_name!r} in {self.dbc_path}")
        if len(found) > 1:
            names = ", ".join(f"{m.name}.{s.name}" for m, s in found)
            raise ConfigError(f"mapping {channel!r}: signal {sig_name!r} is ambiguous ({names})")
        return found[0]

    def _build_routes(self) -> tuple[dict[tuple[int, bool], _Route], dict[str, tuple[Any, Any]]]:
        per_message: dict[tuple[int, bool], list[tuple[str, str]]] = {}
        messages: dict[tuple[int, bool], Any] = {}
        channel_signals: dict[str, tuple[Any, Any]] = {}
        for channel, ref in self.mapping.items():
            if not channel.isidentifier():
                raise ConfigError(f"mapping: channel name {channel!r} is not an identifier")
            message, signal = self._lookup(channel, ref)
            key = (message.frame_id, bool(message.is_extended_frame))
            messages[key] = message
            per_message.setdefault(key, []).append((signal.name, channel))
            channel_signals[channel] = (message, signal)
        routes = {
            key: _Route(
                decode=messages[key].decode,
                signals=tuple(pairs),
                message_name=messages[key].name,
            )
            for key, pairs in per_message.items()
        }
        return routes, channel_signals

    def _build_definition(self) -> dict[str, Any]:
        fields = []
        for channel, (message, signal) in self._channel_signals.items():
            field: dict[str, Any] = {
                "name": channel,
                "type": "float32",
                "description": (
                    signal.comment or f"{message.name}.{signal.name} (CAN id 0x{message.frame_id:X})"
                ),
            }
            if signal.unit:
                field["unit"] = signal.unit
            field["tags"] = ["can", message.name]
            fields.append(field)
        return generated_definition(
            title=f"CAN signals from {self.dbc_path.name}",
            description="CAN signals decoded with a DBC file (scaled physical values)",
            session_description="One recording session of a CAN bus",
            frame_description="Latest value of each mapped DBC signal",
            fields=fields,
        )

    def is_mapped(self, arbitration_id: int, is_extended: bool = False) -> bool:
        return (arbitration_id, is_extended) in self._routes

    def decode_values(self, frame: CanFrame) -> dict[str, object]:
        """The mapped channel values carried by one frame.

        :raises DecodeError: ``remote_frame``, ``unmapped_id`` or ``wrong_size`` (cantools refused
            the data length).
        """
        return self.decode_data(frame.arbitration_id, frame.is_extended, frame.is_remote, frame.data)

    def decode_data(
        self, arbitration_id: int, is_extended: bool, is_remote: bool, data: bytes
    ) -> dict[str, object]:
        """:meth:`decode_values` on the frame's parts (no CanFrame needed on the hot path)."""
        if is_remote:
            raise DecodeError(f"remote frame 0x{arbitration_id:X} carries no data", reason="remote_frame")
        route = self._routes.get((arbitration_id, is_extended))
        if route is None:
            raise DecodeError(f"no mapped signal in CAN id 0x{arbitration_id:X}", reason="unmapped_id")
        try:
            decoded = route.decode(data, decode_choices=False)
        except self._cantools_decode_error as exc:
            raise DecodeError(
                f"{route.message_name} (0x{arbitration_id:X}): {exc}", reason="wrong_size"
            ) from exc
        return {channel: decoded[signal] for signal, channel in route.signals}

    def decode_frame(self, frame: CanFrame) -> Decoded:
        return Decoded(values=self.decode_values(frame), source_time_ns=frame.timestamp_ns)


def _default_mapping(db: Any) -> dict[str, str]:
    counts: dict[str, int] = {}
    for message in db.messages:
        for signal in message.signals:
            counts[signal.name.lower()] = counts.get(signal.name.lower(), 0) + 1
    mapping: dict[str, str] = {}
    for message in db.messages:
        for signal in message.signals:
            name = signal.name.lower()
            if counts[name] > 1:
                name = f"{message.name}_{signal.name}".lower()
            mapping[name] = f"{message.name}.{signal.name}"
    return mapping


def check_id(arbitration_id: int, is_extended: bool) -> None:
    """:raises DecodeError: ``bad_id`` when the id does not fit its format."""
    if arbitration_id > (_MAX_EXT_ID if is_extended else _MAX_STD_ID):
        raise DecodeError(f"CAN id 0x{arbitration_id:X} out of range", reason="bad_id")
