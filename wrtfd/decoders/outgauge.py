"""Live for Speed / BeamNG.drive OutGauge, OutSim (v1) and OutSim2.

Layouts: ``shared/spec/protocols/lfs_outgauge_outsim.md`` (LFS ``InSim.txt`` /
``OutSimPack.txt``). No handshake, little-endian, packed. OutGauge is 92 bytes (96 with the
optional ID), OutSim v1 64 (68). OutSim2's size follows the ``OutSim Opts`` the user set in
LFS, which is not in the packet (only the optional ``LFST`` header is), so the decoder takes
the same opts value and checks ``len == size(opts)``.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from wrtfd.decoders._common import TupleLayout, check_channels, cstr, load_definition, select_channels
from wrtfd.decoders.base import Decoded
from wrtfd.errors import ConfigError, DecodeError

__all__ = [
    "OSO_DISTANCE",
    "OSO_DRIVE",
    "OSO_EXTRA_1",
    "OSO_HEADER",
    "OSO_ID",
    "OSO_INPUTS",
    "OSO_MAIN",
    "OSO_TIME",
    "OSO_WHEELS",
    "OutGaugeDecoder",
    "OutSim2Decoder",
    "OutSimDecoder",
    "looks_like_outgauge",
    "looks_like_outsim",
    "outsim2_size",
    "parse_opts",
]

# OutGauge: Time u32, Car char[4], Flags u16, Gear u8, PLID u8, Speed, RPM, Turbo, EngTemp, Fuel,
# OilPressure, OilTemp (f32), DashLights, ShowLights (u32), Throttle, Brake, Clutch (f32),
# Display1, Display2 char[16]; + ID s32 when configured.
_OUTGAUGE = struct.Struct("<I4sHBB7fII3f16s16s")
_OUTGAUGE_ID = struct.Struct("<I4sHBB7fII3f16s16si")
_OUTGAUGE_NAMES = (
    "time_ms", "car", "flags", "gear", "plid", "speed", "rpm", "turbo", "eng_temp", "fuel",
    "oil_pressure", "oil_temp", "dash_lights", "show_lights", "throttle", "brake", "clutch",
    "display1", "display2", "id",
)  # fmt: skip

# OutSim v1: Time u32, AngVel 3f, Heading, Pitch, Roll f32, Accel 3f, Vel 3f, Pos 3 s32 (1 m = 65536).
_OUTSIM = struct.Struct("<I12f3i")
_OUTSIM_ID = struct.Struct("<I12f3ii")
_MAIN_NAMES = (
    "ang_vel_x", "ang_vel_y", "ang_vel_z", "heading", "pitch", "roll", "accel_x", "accel_y", "accel_z",
    "vel_x", "vel_y", "vel_z",
)  # fmt: skip
_POS_SCALE = 1.0 / 65536.0

OSO_HEADER = 0x001
OSO_ID = 0x002
OSO_TIME = 0x004
OSO_MAIN = 0x008
OSO_INPUTS = 0x010
OSO_DRIVE = 0x020
OSO_DISTANCE = 0x040
OSO_WHEELS = 0x080
OSO_EXTRA_1 = 0x100
_OSO_ALL = 0x1FF
_WHEELS = (2, 3, 0, 1)  # LFS sends RL, RR, FL, FR -> FL, FR, RL, RR

#: OutSim2 sections in packet order: (bit, tag in the yaml, struct format, channel spec).
_SECTIONS: tuple[tuple[int, str, str, tuple[tuple[str | None, int], ...]], ...] = (
    (OSO_HEADER, "oso_header", "4s", ((None, 1),)),
    (OSO_ID, "oso_id", "i", (("id", 1),)),
    (OSO_TIME, "oso_time", "I", (("time_ms", 1),)),
    (OSO_MAIN, "oso_main", "12f3i",
     (*((n, 1) for n in _MAIN_NAMES), ("_pos_x", 1), ("_pos_y", 1), ("_pos_z", 1))),
    (OSO_INPUTS, "oso_inputs", "5f",
     (("throttle", 1), ("brake", 1), ("input_steer", 1), ("clutch", 1), ("handbrake", 1))),
    (OSO_DRIVE, "oso_drive", "B3xff", (("gear", 1), ("engine_ang_vel", 1), ("max_torque_at_vel", 1))),
    (OSO_DISTANCE, "oso_distance", "ff", (("current_lap_dist", 1), ("indexed_distance", 1))),
    (OSO_WHEELS, "oso_wheels", "7f4B2f" * 4, ()),  # wheels are regrouped per channel below
    (OSO_EXTRA_1, "oso_extra_1", "ff", (("steer_torque", 1), (None, 1))),
)  # fmt: skip
_WHEEL_FIELDS = (
    "susp_deflect", "wheel_steer", "x_force", "y_force", "vertical_load", "wheel_ang_vel", "lean_rel_to_road",
    "air_temp", "slip_fraction", "touching", None, "slip_ratio", "tan_slip_angle",
)  # fmt: skip


def parse_opts(opts: int | str) -> int:
    """OutSim Opts as LFS's cfg.txt writes it (hex, e.g. "1ff") or as an int."""
    try:
        value = int(opts, 16) if isinstance(opts, str) else int(opts)
    except ValueError:
        raise ConfigError(f"outsim2.opts: {opts!r} is not a hex number like '1ff'") from None
    if not 0 < value <= _OSO_ALL:
        raise ConfigError(
            f"outsim2.opts: {value:#x} is outside 0x001..0x1ff (0 means OutSim v1: use 'outsim')"
        )
    return value


def outsim2_size(opts: int) -> int:
    """Datagram size of OutSim2 for these option bits (0x0ff -> 272, 0x1ff -> 280)."""
    return sum(struct.calcsize("<" + fmt) for bit, _tag, fmt, _spec in _SECTIONS if opts & bit)


def _filtered(definition: dict[str, Any], channels: Sequence[str] | None, where: str) -> dict[str, Any]:
    chosen = check_channels(definition, channels, where)
    return select_channels(definition, chosen) if chosen else definition


class OutGaugeDecoder:
    """OutGauge (LFS dashboard data; BeamNG sends the same layout, 96 bytes with ID)."""

    protocol = "outgauge"

    def __init__(self, *, channels: Sequence[str] | None = None) -> None:
        self.definition: dict[str, Any] = _filtered(
            load_definition("outgauge.wrtf.yaml"), channels, "outgauge.channels"
        )
        self._keep = frozenset(channels) if channels else None
        self._car: str | None = None

    def decode(self, data: bytes) -> Decoded:
        size = len(data)
        if size == 92:
            t = _OUTGAUGE.unpack(data)
        elif size == 96:
            t = _OUTGAUGE_ID.unpack(data)
        else:
            raise DecodeError(f"outgauge: {size}-byte datagram; expected 92 or 96", reason="wrong_size")
        values: dict[str, Any] = dict(zip(_OUTGAUGE_NAMES, t, strict=False))
        car = cstr(t[1])
        values["car"] = car
        values["display1"] = cstr(t[17])
        values["display2"] = cstr(t[18])
        info = None
        if car != self._car:
            self._car = car
            info = {"car": car}
        if self._keep is not None:
            values = {k: v for k, v in values.items() if k in self._keep}
        return Decoded(values=values, source_time_ns=t[0] * 1_000_000 if t[0] else None, session_info=info)


class OutSimDecoder:
    """OutSim v1 (``OutSim Opts 0``): motion only; positions converted to metres."""

    protocol = "outsim"

    def __init__(self, *, channels: Sequence[str] | None = None) -> None:
        self.definition: dict[str, Any] = _filtered(
            load_definition("outsim.wrtf.yaml"), channels, "outsim.channels"
        )
        self._keep = frozenset(channels) if channels else None

    def decode(self, data: bytes) -> Decoded:
        size = len(data)
        if size == 64:
            t = _OUTSIM.unpack(data)
        elif size == 68:
            t = _OUTSIM_ID.unpack(data)
        else:
            raise DecodeError(f"outsim: {size}-byte datagram; expected 64 or 68", reason="wrong_size")
        values: dict[str, Any] = dict(zip(_MAIN_NAMES, t[1:13], strict=True))
        values["time_ms"] = t[0]
        values["pos_x"] = t[13] * _POS_SCALE
        values["pos_y"] = t[14] * _POS_SCALE
        values["pos_z"] = t[15] * _POS_SCALE
        if size == 68:
            values["id"] = t[16]
        if self._keep is not None:
            values = {k: v for k, v in values.items() if k in self._keep}
        return Decoded(values=values, source_time_ns=t[0] * 1_000_000 if t[0] else None)


class OutSim2Decoder:
    """OutSim2 (``OutSim Opts`` != 0). ``opts``: the same value as in LFS's cfg.txt (hex str or int).

    The definition holds only the sections those bits enable.
    """

    protocol = "outsim2"

    def __init__(self, *, opts: int | str = 0x1FF, channels: Sequence[str] | None = None) -> None:
        self.opts = parse_opts(opts)
        fmt = "<"
        spec: list[tuple[str | None, int]] = []
        tags: set[str] = set()
        self._wheel_base: int | None = None
        for bit, tag, piece, fields in _SECTIONS:
            if not self.opts & bit:
                continue
            tags.add(tag)
            fmt += piece
            if bit == OSO_WHEELS:
                self._wheel_base = sum(count for _n, count in spec)
                spec.append((None, 4 * len(_WHEEL_FIELDS)))
            else:
                spec.extend(fields)
        if not spec or (all(name is None for name, _c in spec) and self._wheel_base is None):
            raise ConfigError(f"outsim2.opts: {self.opts:#x} enables no data section (only the LFST header)")
        self._struct = struct.Struct(fmt)
        self.size = self._struct.size
        self._layout = TupleLayout(spec)
        self._has_header = bool(self.opts & OSO_HEADER)
        self._has_main = bool(self.opts & OSO_MAIN)
        self._has_time = bool(self.opts & OSO_TIME)
        definition = load_definition("outsim2.wrtf.yaml")
        definition["frame"]["fields"] = [
            f for f in definition["frame"]["fields"] if tags.intersection(f.get("tags", ()))
        ]
        self.definition: dict[str, Any] = _filtered(definition, channels, "outsim2.channels")
        self._keep = frozenset(channels) if channels else None

    def decode(self, data: bytes) -> Decoded:
        if len(data) != self.size:
            raise DecodeError(
                f"outsim2: {len(data)}-byte datagram; OutSim Opts {self.opts:x} give {self.size}",
                reason="wrong_size",
            )
        if self._has_header and data[:4] != b"LFST":
            raise DecodeError(f"outsim2: header {data[:4]!r} is not b'LFST'", reason="bad_magic")
        t = self._struct.unpack(data)
        values: dict[str, Any] = {}
        self._layout.into(values, t)
        if self._has_main:
            values["pos_x"] = values.pop("_pos_x") * _POS_SCALE
            values["pos_y"] = values.pop("_pos_y") * _POS_SCALE
            values["pos_z"] = values.pop("_pos_z") * _POS_SCALE
        base = self._wheel_base
        if base is not None:
            stride = len(_WHEEL_FIELDS)
            for j, name in enumerate(_WHEEL_FIELDS):
                if name is None:
                    continue
                per_wheel = t[base + j : base + j + 4 * stride : stride]
                values[name] = (per_wheel[2], per_wheel[3], per_wheel[0], per_wheel[1])
        if self._keep is not None:
            values = {k: v for k, v in values.items() if k in self._keep}
        ts = values.get("time_ms") if self._has_time else None
        return Decoded(values=values, source_time_ns=ts * 1_000_000 if ts else None)


def looks_like_outgauge(data: bytes) -> bool:
    """OutGauge: 92 or 96 bytes, and the car name (4 bytes at 4) is printable or NUL."""
    return len(data) in (92, 96) and all(b == 0 or 32 <= b < 127 for b in data[4:8])


def looks_like_outsim(data: bytes) -> bool:
    """OutSim v1: 64 or 68 bytes (the only content check is the size)."""
    return len(data) in (64, 68)
