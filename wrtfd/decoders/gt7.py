"""Gran Turismo 7 "Simulator Interface" packets (PS4/PS5), all four variants.

Layouts and crypto: ``shared/spec/protocols/gt7.md``. The console streams only to the address
that sends it a heartbeat (see :class:`wrtfd.sources.gt7.Gt7Source`); the heartbeat's letter
selects the variant, and the variant is told by the datagram's length:

=======  ======  ==========  ===================================================
letter   bytes   IV XOR      adds
=======  ======  ==========  ===================================================
``A``    296     0xDEADBEAF  the base packet
``B``    316     0xDEADBEEF  steering wheel angle, force feedback, sway/heave/surge
``~``    344     0x55FABB4F  raw throttle, brake output, four unverified floats
``C``    368     0xDEADBEEF  surface under each tyre, lap time, wheel steer angles, car category
=======  ======  ==========  ===================================================

Every datagram is Salsa20-encrypted as a whole (pycryptodome's cipher; key: the first 32 bytes
of ``Simulator Interface Packet GT7 ver 0.0``; nonce: ``iv1 ^ XOR`` then ``iv1``, both u32 LE,
with ``iv1`` the encrypted bytes 0x40..0x43). A packet whose first four plaintext bytes are not
the magic ``0S7G`` (a corrupted datagram, a wrong key, another game) is dropped as ``bad_magic``.
The ``C`` fields after byte 344 are from public reverse engineering (2026), not verified here.

Session signals: ``on_track`` going 0 -> 1 (a race entered from the menus), the packet id
going back (the game restarted) and the lap counter going down (a race restarted) start a new
session. The packet id counts the console's 60 Hz ticks, so it is the source clock.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from Crypto.Cipher import Salsa20

from wrtfd.decoders._common import RecentTexts, TupleLayout, selected_definition
from wrtfd.decoders.base import Decoded
from wrtfd.errors import DecodeError

__all__ = [
    "HEARTBEAT_PORT",
    "KEY",
    "MAGIC",
    "RECEIVE_PORT",
    "TICK_HZ",
    "VARIANTS",
    "Gt7Decoder",
    "Variant",
    "decrypt",
]

#: The console listens for heartbeats here and streams to the heartbeat's sender on RECEIVE_PORT.
HEARTBEAT_PORT = 33739
RECEIVE_PORT = 33740
#: Salsa20 key: the first 32 bytes of the interface's name.
KEY = b"Simulator Interface Packet GT7 ver 0.0"[:32]
#: The first plaintext u32 ("0S7G" on the wire).
MAGIC = 0x47375330
#: Packet ids advance once per console tick.
TICK_HZ = 60
_TICK_NS = 1_000_000_000
#: A packet id this far behind the previous one is a restart of the game, not reordering.
PACKET_ID_RESET = 600

_U32 = struct.Struct("<I")
_NONCE = struct.Struct("<II")

# Variant A (296 B): magic, position, velocity, rotation, north, angular velocity, body height,
# rpm, IV (4 bytes, noise once decrypted), fuel level/capacity, speed, boost, oil pressure,
# water/oil temperature, tyre temperatures x4, packet id, lap, laps in race, best/last lap ms,
# time of day ms, pre-race position, cars, rev alert min/max, max speed, flags, gear byte,
# throttle, brake, (unused), road plane normal x3 + distance, wheel rotation x4, tyre radius
# x4, suspension height x4, 32 reserved bytes, clutch, clutch engagement, rpm after clutch,
# transmission top speed, gear ratios x8, car code.
_A = "i3f3f3ff3fff4xfffffff4fIhhiiIhhHHHHBBBx3ff4f4f4f32xffff8fi"
_A_SPEC: list[tuple[str | None, int]] = [
    ("_magic", 1),
    ("position_x", 1),
    ("position_y", 1),
    ("position_z", 1),
    ("velocity_x", 1),
    ("velocity_y", 1),
    ("velocity_z", 1),
    ("rotation_pitch", 1),
    ("rotation_yaw", 1),
    ("rotation_roll", 1),
    ("orientation_to_north", 1),
    ("angular_velocity_x", 1),
    ("angular_velocity_y", 1),
    ("angular_velocity_z", 1),
    ("body_height", 1),
    ("engine_rpm", 1),
    ("fuel_level", 1),
    ("fuel_capacity", 1),
    ("speed", 1),
    ("boost_pressure", 1),
    ("oil_pressure", 1),
    ("water_temp", 1),
    ("oil_temp", 1),
    ("tyre_temp", 4),
    ("packet_id", 1),
    ("lap_count", 1),
    ("laps_in_race", 1),
    ("best_lap_ms", 1),
    ("last_lap_ms", 1),
    ("time_of_day_ms", 1),
    ("pre_race_position", 1),
    ("pre_race_cars", 1),
    ("rev_alert_min_rpm", 1),
    ("rev_alert_max_rpm", 1),
    ("max_speed_kmh", 1),
    ("flags", 1),
    ("_gear_byte", 1),  # split into gear / suggested_gear
    ("throttle", 1),
    ("brake", 1),
    ("road_plane_normal_x", 1),
    ("road_plane_normal_y", 1),
    ("road_plane_normal_z", 1),
    ("road_plane_distance", 1),
    ("wheel_rotation", 4),
    ("tyre_radius", 4),
    ("suspension_height", 4),
    ("clutch_pedal", 1),
    ("clutch_engagement", 1),
    ("rpm_after_clutch", 1),
    ("transmission_top_speed", 1),
    ("gear_ratios", 8),
    ("car_code", 1),
]
# Variant B (+20 B): steering wheel angle, force feedback, sway, heave, surge.
_B = "5f"
_B_SPEC: list[tuple[str | None, int]] = [
    ("steering_wheel_angle", 1),
    ("steering_force_feedback", 1),
    ("sway", 1),
    ("heave", 1),
    ("surge", 1),
]
# Variant ~ (+28 B): throttle input, brake output, two unknown bytes, four unknown floats,
# energy recovery, one unknown float.
_TILDE = "BBBB4fff"
_TILDE_SPEC: list[tuple[str | None, int]] = [
    ("throttle_input", 1),
    ("brake_output", 1),
    ("unknown_0x13e", 1),
    ("unknown_0x13f", 1),
    ("torque_vectoring", 4),
    ("energy_recovery", 1),
    ("unknown_0x154", 1),
]
# Variant C (+24 B): surface letter per tyre, lap time ms, FL/FR wheel steer angle, an unknown
# steering-related float, car category (NUL-padded text).
_C = "4sIfff4s"
_C_SPEC: list[tuple[str | None, int]] = [
    ("_surface_types", 1),  # text
    ("current_lap_ms", 1),
    ("wheel_steer_angle_fl", 1),
    ("wheel_steer_angle_fr", 1),
    ("steering_unknown_0x168", 1),
    ("_car_category", 1),  # text
]

_FULL_SPEC = _A_SPEC + _B_SPEC + _TILDE_SPEC + _C_SPEC


def _position(name: str) -> int:
    """Index of ``name`` in the unpacked tuple (every variant's layout starts the same)."""
    pos = 0
    for entry, count in _FULL_SPEC:
        if entry == name:
            return pos
        pos += count
    raise KeyError(name)


#: Tuple positions of the values the decoder post-processes or reads for its session signals.
_I_MAGIC = _position("_magic")
_I_PACKET_ID = _position("packet_id")
_I_LAP = _position("lap_count")
_I_FLAGS = _position("flags")
_I_GEAR = _position("_gear_byte")
_I_CAR_CODE = _position("car_code")
_I_SURFACE = _position("_surface_types")
_I_CATEGORY = _position("_car_category")

_FLAG_BITS = (
    "on_track",
    "paused",
    "loading",
    "in_gear",
    "has_turbo",
    "rev_limiter_alert",
    "handbrake",
    "lights",
    "high_beams",
    "low_beams",
    "asm_active",
    "tcs_active",
)


class Variant:
    """One packet variant, compiled: its heartbeat letter, size, IV XOR constant and layout.

    ``layout.build(t)`` makes the channel dict of an unpacked plaintext with every key in place,
    in the order of the frames (the flags, gears, size and texts are set by the decoder).
    """

    __slots__ = ("layout", "letter", "size", "struct", "texts", "xor")

    def __init__(self, letter: str, xor: int, fmt: str, spec: list[tuple[str | None, int]]) -> None:
        self.letter = letter
        self.xor = xor
        self.struct = struct.Struct("<" + fmt)
        self.size = self.struct.size
        #: The variant has the C texts (surface letters, car category).
        self.texts = ("_surface_types", 1) in spec
        extra = [*_FLAG_BITS, "gear", "suggested_gear", "packet_size"]
        if self.texts:
            extra += ["surface_types", "car_category"]
        # names starting with "_" are read by position and post-processed, not mapped
        mapped = [(None if n is None or n[0] == "_" else n, c) for n, c in spec]
        self.layout = TupleLayout(mapped, extra=extra)


def _flag_table(names: Sequence[str]) -> tuple[dict[str, bool], ...]:
    """Every combination of len(names) flag bits as ready-made channel dicts (fast lookups)."""
    return tuple({n: bool(v >> i & 1) for i, n in enumerate(names)} for v in range(1 << len(names)))


_FLAGS_LO = _flag_table(_FLAG_BITS[:6])
_FLAGS_HI = _flag_table(_FLAG_BITS[6:])

VARIANTS: dict[str, Variant] = {
    "A": Variant("A", 0xDEADBEAF, _A, _A_SPEC),
    "B": Variant("B", 0xDEADBEEF, _A + _B, _A_SPEC + _B_SPEC),
    "~": Variant("~", 0x55FABB4F, _A + _B + _TILDE, _A_SPEC + _B_SPEC + _TILDE_SPEC),
    "C": Variant("C", 0xDEADBEEF, _A + _B + _TILDE + _C, _A_SPEC + _B_SPEC + _TILDE_SPEC + _C_SPEC),
}
_BY_SIZE: dict[int, Variant] = {v.size: v for v in VARIANTS.values()}
#: Flag combinations whose channel templates a decoder remembers per variant.
_MAX_TEMPLATES = 64


def decrypt(data: bytes, xor: int, out: bytearray | None = None) -> bytes | bytearray:
    """The plaintext of one datagram (Salsa20 from counter 0 with the nonce derived from it),
    into ``out`` when given (one buffer per variant saves an allocation per packet)."""
    (iv1,) = _U32.unpack_from(data, 0x40)
    cipher = Salsa20.new(key=KEY, nonce=_NONCE.pack(iv1 ^ xor, iv1))
    if out is None:
        return cipher.encrypt(data)  # a stream cipher: encrypting is decrypting
    cipher.encrypt(data, output=out)
    return out


class Gt7Decoder:
    """Decrypts and decodes one GT7 datagram of any variant (told apart by its length).

    Channels a shorter variant lacks hold their last value in the frames; ``packet_size``
    says which variant a frame's packet was. ``channels``: record only these.
    """

    protocol = "gt7"

    def __init__(self, *, channels: Sequence[str] | None = None) -> None:
        self.definition: dict[str, Any]
        self.definition, self._keep = selected_definition("gt7.wrtf.yaml", channels, "gt7.channels")
        #: The variant of the last packet decoded (None before the first).
        self.variant: Variant | None = None
        # length -> (variant, its plaintext buffer, its templates by flags): one buffer per
        # variant, no allocation per packet
        self._by_size: dict[int, tuple[Variant, bytearray, dict[int, dict[str, Any]]]] = {
            size: (v, bytearray(size), {}) for size, v in _BY_SIZE.items()
        }
        self._texts = RecentTexts()
        #: The last packet's on-track flag, packet id and lap (None off track); None before one.
        self._prev: tuple[bool, int, int | None] | None = None
        self._generation = 0
        self._car: int | None = None

    @staticmethod
    def _template(variant: Variant, templates: dict[int, dict[str, Any]], flags: int) -> dict[str, Any]:
        """The variant's channel template with the flag channels of ``flags`` and the packet size
        set, remembered (bounded): the flags change a few times a drive, not every packet, so
        a packet's dict is one copy of it instead of a copy and twelve flag stores."""
        if len(templates) >= _MAX_TEMPLATES:
            templates.clear()
        template = templates[flags] = variant.layout.template.copy()
        template.update(_FLAGS_LO[flags & 0x3F])
        template.update(_FLAGS_HI[flags >> 6 & 0x3F])
        template["packet_size"] = variant.size
        return template

    def decode(self, data: bytes) -> Decoded:
        entry = self._by_size.get(len(data))
        if entry is None:
            raise DecodeError(
                f"gt7: {len(data)}-byte datagram; expected 296, 316, 344 or 368", reason="wrong_size"
            )
        variant, plain, templates = entry
        (iv1,) = _U32.unpack_from(data, 0x40)  # decrypt(), inlined: this is half the time per packet
        Salsa20.new(KEY, _NONCE.pack(iv1 ^ variant.xor, iv1)).encrypt(data, output=plain)
        t = variant.struct.unpack(plain)
        if t[_I_MAGIC] != MAGIC:
            raise DecodeError(
                f"gt7: a {variant.letter} packet that does not decrypt to the magic 0S7G",
                reason="bad_magic",
            )
        self.variant = variant
        flags = t[_I_FLAGS] & 0x0FFF  # (the flag channel itself is the whole u16)
        template = templates.get(flags) or self._template(variant, templates, flags)
        values = variant.layout.build(t, template)
        gear = t[_I_GEAR]
        values["gear"] = gear & 0x0F
        values["suggested_gear"] = gear >> 4
        if variant.texts:
            values["surface_types"] = self._texts[t[_I_SURFACE]]
            values["car_category"] = self._texts[t[_I_CATEGORY]]

        packet_id = t[_I_PACKET_ID]
        lap = t[_I_LAP]
        on_track = flags & 1 == 1
        prev = self._prev
        new_session = prev is not None and (
            (on_track and not prev[0])
            or packet_id + PACKET_ID_RESET < prev[1]
            or (on_track and prev[2] is not None and lap < prev[2])
        )
        if new_session:
            self._generation += 1
        self._prev = (on_track, packet_id, lap if on_track else None)
        info = None
        car = t[_I_CAR_CODE]
        if new_session or car != self._car:
            self._car = car
            info = {"car": f"car code {car}", "track": ""}
        if self._keep is not None:
            values = {k: v for k, v in values.items() if k in self._keep}
        # positional (values, source_time_ns, session_key, new_session, session_info): faster
        return Decoded(values, packet_id * _TICK_NS // TICK_HZ, self._generation, new_session, info)
