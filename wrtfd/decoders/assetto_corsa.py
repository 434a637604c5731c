"""Assetto Corsa (2014) remote telemetry: RTCarInfo and the handshake response.

Layouts: ``shared/spec/protocols/assetto_corsa.md`` (Kunos "AC Remote Telemetry" document).
Kind by length: 408 handshake response, 328 RTCarInfo, 212 RTLap. Strings are UTF-16LE, 50
code units, cut at the first NUL. The handshake itself (client -> AC on port 9996) is done by
:class:`wrtfd.sources.assetto_corsa.AssettoCorsaSource`; the decoder stays pure.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from wrtfd.decoders._common import TupleLayout, check_channels, load_definition, select_channels, utf16_str
from wrtfd.decoders.base import Decoded, DropCounter
from wrtfd.errors import DecodeError

__all__ = [
    "HANDSHAKE_RESPONSE_SIZE",
    "OP_DISMISS",
    "OP_HANDSHAKE",
    "OP_SUBSCRIBE_SPOT",
    "OP_SUBSCRIBE_UPDATE",
    "RTCARINFO_SIZE",
    "RTLAP_SIZE",
    "AssettoCorsaDecoder",
    "HandshakeResponse",
    "decode_handshake",
    "encode_request",
    "looks_like",
]

#: Client request: identifier (device type, unused), version (1), operationId.
REQUEST = struct.Struct("<iii")
OP_HANDSHAKE = 0
OP_SUBSCRIBE_UPDATE = 1
OP_SUBSCRIBE_SPOT = 2
OP_DISMISS = 3

#: Handshake response: carName, driverName (UTF-16 x50), identifier, version, trackName, trackConfig.
HANDSHAKE = struct.Struct("<100s100sii100s100s")
HANDSHAKE_RESPONSE_SIZE = HANDSHAKE.size  # 408
#: RTCarInfo: identifier(4) size(i) speeds(3f) six u8 flags, 2 pad, accG(3f) lap times + count(4i),
#: gas brake clutch rpm steer (5f), gear (i), cgHeight (f), 14 wheel quads (4f each),
#: carPositionNormalized, carSlope, carCoordinates (3f).
RTCARINFO = struct.Struct("<4si3f6B2x3f4i5fif" + "4f" * 14 + "ff3f")
RTCARINFO_SIZE = RTCARINFO.size  # 328
RTLAP_SIZE = 212

_SPEC: list[tuple[str | None, int]] = [
    (None, 1),  # identifier
    (None, 1),  # size
    ("speed_kmh", 1),
    ("speed_mph", 1),
    ("speed_ms", 1),
    ("is_abs_enabled", 1),
    ("is_abs_in_action", 1),
    ("is_tc_in_action", 1),
    ("is_tc_enabled", 1),
    ("is_in_pit", 1),
    ("is_engine_limiter_on", 1),
    ("acc_g_vertical", 1),
    ("acc_g_horizontal", 1),
    ("acc_g_frontal", 1),
    ("lap_time_ms", 1),
    ("last_lap_ms", 1),
    ("best_lap_ms", 1),
    ("lap_count", 1),
    ("gas", 1),
    ("brake", 1),
    ("clutch", 1),
    ("engine_rpm", 1),
    ("steer", 1),
    ("gear", 1),
    ("cg_height", 1),
    ("wheel_angular_speed", 4),
    ("slip_angle", 4),
    ("slip_angle_contact_patch", 4),
    ("slip_ratio", 4),
    ("tyre_slip", 4),
    ("nd_slip", 4),
    ("load", 4),
    ("dy", 4),
    ("mz", 4),
    ("tyre_dirty_level", 4),
    ("camber_rad", 4),
    ("tyre_radius", 4),
    ("tyre_loaded_radius", 4),
    ("suspension_height", 4),
    ("car_position_normalized", 1),
    ("car_slope", 1),
    ("car_x", 1),
    ("car_y", 1),
    ("car_z", 1),
]
_LAYOUT = TupleLayout(_SPEC)


def encode_request(operation: int, *, identifier: int = 1, version: int = 1) -> bytes:
    """The 12-byte client datagram (handshake, subscribe or dismiss)."""
    return REQUEST.pack(identifier, version, operation)


@dataclass(frozen=True, slots=True)
class HandshakeResponse:
    car_name: str
    driver_name: str
    identifier: int
    version: int
    track_name: str
    track_config: str

    def session_info(self) -> dict[str, str]:
        track = self.track_name if not self.track_config else f"{self.track_name} ({self.track_config})"
        return {"car": self.car_name, "track": track, "driver": self.driver_name}


def decode_handshake(data: bytes) -> HandshakeResponse:
    if len(data) != HANDSHAKE_RESPONSE_SIZE:
        raise DecodeError(
            f"assetto_corsa: handshake response is {len(data)} bytes; expected {HANDSHAKE_RESPONSE_SIZE}",
            reason="wrong_size",
        )
    car, driver, identifier, version, track, config = HANDSHAKE.unpack(data)
    return HandshakeResponse(utf16_str(car), utf16_str(driver), identifier, version, utf16_str(track),
                             utf16_str(config))  # fmt: skip


class AssettoCorsaDecoder:
    """Decodes RTCarInfo; a handshake response updates the session it reports.

    A 408-byte handshake response returns None and is remembered: the next RTCarInfo carries
    its car/track as session info, and a different car/track/driver than before starts a new
    session. RTLap (212 bytes) is counted in ``skipped``.
    """

    protocol = "assetto_corsa"

    def __init__(self, *, channels: Sequence[str] | None = None) -> None:
        definition = load_definition("assetto_corsa.wrtf.yaml")
        chosen = check_channels(definition, channels, "assetto_corsa.channels")
        self.definition: dict[str, Any] = select_channels(definition, chosen) if chosen else definition
        self._keep = frozenset(chosen) if chosen else None
        self.skipped = DropCounter()
        self.handshake: HandshakeResponse | None = None
        self._pending_info: dict[str, str] | None = None
        self._pending_new = False
        self._session_key: tuple[str, str, str, str] | None = None

    def set_handshake(self, response: HandshakeResponse) -> bool:
        """Remember a handshake response; True when it names another session than before."""
        key = (response.car_name, response.driver_name, response.track_name, response.track_config)
        changed = self._session_key is not None and key != self._session_key
        self.handshake = response
        self._session_key = key
        self._pending_info = response.session_info()
        self._pending_new = self._pending_new or changed
        return changed

    def decode(self, data: bytes) -> Decoded | None:
        size = len(data)
        if size == RTCARINFO_SIZE:
            t = RTCARINFO.unpack(data)
        elif size == HANDSHAKE_RESPONSE_SIZE:
            self.set_handshake(decode_handshake(data))
            return None
        elif size == RTLAP_SIZE:
            self.skipped.add("rtlap")
            return None
        else:
            raise DecodeError(
                f"assetto_corsa: {size}-byte datagram; expected 328 (or 408, 212)", reason="wrong_size"
            )
        if t[1] != RTCARINFO_SIZE:
            raise DecodeError(
                f"assetto_corsa: RTCarInfo size field says {t[1]}, not 328", reason="bad_header"
            )
        values: dict[str, Any] = {}
        _LAYOUT.into(values, t)
        if self._keep is not None:
            values = {k: v for k, v in values.items() if k in self._keep}
        info, self._pending_info = self._pending_info, None
        new, self._pending_new = self._pending_new, False
        return Decoded(values=values, session_key=self._session_key, new_session=new, session_info=info)


def looks_like(data: bytes) -> bool:
    """Assetto Corsa's stream: an RTCarInfo (328 bytes whose size field at 4 says 328), a
    handshake response (408) or an RTLap (212)."""
    size = len(data)
    if size == RTCARINFO_SIZE:
        return int.from_bytes(data[4:8], "little") == RTCARINFO_SIZE
    return size in (HANDSHAKE_RESPONSE_SIZE, RTLAP_SIZE)
