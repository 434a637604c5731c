"""Generic struct decoder: a datagram layout described in the configuration.

For any game or microcontroller that sends fixed binary records over UDP. The user lists the
fields (type, optional offset, count), the byte order, and optionally an exact length and a
magic; each field becomes a channel (renamed, scaled, with a unit) unless ``record`` is false.
Everything is checked and compiled into one ``struct.Struct`` when the decoder is built, so a
bad layout fails at start with a :class:`ConfigError` naming the field, never per packet.

Example (TOML)::

    [[sources]]
    protocol = "struct"
    options = { endian = "little", length = 16, magic = "WR", time_field = "t_ms", time_unit = "ms",
                fields = [ { name = "magic", type = "char", count = 2, record = false },
                           { name = "t_ms", type = "uint32", offset = 4 },
                           { name = "rpm", type = "uint16", scale = 0.25, unit = "rpm" },
                           { name = "speed", type = "float32", offset = 12, unit = "m/s" } ] }
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wrtfd.decoders._common import fit_utf8
from wrtfd.decoders.base import Decoded, generated_definition
from wrtfd.errors import ConfigError, DecodeError

__all__ = ["TYPES", "FieldSpec", "StructDecoder"]

#: Field type -> (struct code, WRTF type of the channel).
TYPES: dict[str, tuple[str, str]] = {
    "int8": ("b", "int8"),
    "uint8": ("B", "uint8"),
    "int16": ("h", "int16"),
    "uint16": ("H", "uint16"),
    "int32": ("i", "int32"),
    "uint32": ("I", "uint32"),
    "int64": ("q", "int64"),
    "uint64": ("Q", "uint64"),
    "float32": ("f", "float32"),
    "float64": ("d", "float64"),
    "bool": ("?", "bool"),
    "char": ("s", "uint8"),  # ``count`` bytes of text, recorded as a text field
}
_ENDIAN = {"little": "<", "big": ">", "<": "<", ">": ">"}
_TIME_UNITS_NS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_DATAGRAM = 65507
MAX_COUNT = 4096
_FIELD_KEYS = {"name", "type", "offset", "count", "channel", "unit", "description", "scale", "bias", "record"}


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One configured field after validation."""

    name: str
    type: str
    offset: int
    count: int
    channel: str
    unit: str | None
    description: str
    scale: float | None
    bias: float | None
    record: bool

    @property
    def size(self) -> int:
        code = TYPES[self.type][0]
        return struct.calcsize(f"<{self.count}{code}")


def _opt_float(raw: Mapping[str, Any], key: str, where: str) -> float | None:
    v = raw.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise ConfigError(f"{where}.{key}: {v!r} is not a finite number")
    return float(v)


def _parse_fields(fields: Sequence[Mapping[str, Any]]) -> list[FieldSpec]:
    if not fields:
        raise ConfigError("struct.fields: at least one field is needed")
    out: list[FieldSpec] = []
    pos = 0
    for i, raw in enumerate(fields):
        where = f"struct.fields[{i}]"
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{where}: expected a table with name and type")
        extra = set(raw) - _FIELD_KEYS
        if extra:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(extra))}")
        name = raw.get("name")
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ConfigError(f"{where}.name: {name!r} is not a valid name")
        typ = raw.get("type")
        if typ not in TYPES:
            raise ConfigError(f"{where}.type: {typ!r} is not one of {', '.join(TYPES)}")
        count = raw.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
            raise ConfigError(f"{where}.count: {count!r} is not in 1..{MAX_COUNT}")
        offset = raw.get("offset", pos)
        if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset < MAX_DATAGRAM:
            raise ConfigError(f"{where}.offset: {offset!r} is not a byte offset")
        channel = raw.get("channel", name)
        if not isinstance(channel, str) or not _NAME.fullmatch(channel):
            raise ConfigError(f"{where}.channel: {channel!r} is not a valid name")
        scale = _opt_float(raw, "scale", where)
        bias = _opt_float(raw, "bias", where)
        if (scale is not None or bias is not None) and typ in ("char", "bool"):
            raise ConfigError(f"{where}: scale/bias need a numeric type, not {typ}")
        unit = raw.get("unit")
        if unit is not None and not isinstance(unit, str):
            raise ConfigError(f"{where}.unit: {unit!r} is not text")
        record = raw.get("record", True)
        if not isinstance(record, bool):
            raise ConfigError(f"{where}.record: {record!r} is not true/false")
        spec = FieldSpec(
            name=name, type=typ, offset=offset, count=count, channel=channel, unit=unit,
            description=str(raw.get("description") or f"{name} ({typ}) at byte {offset}"),
            scale=scale, bias=bias, record=record,
        )  # fmt: skip
        out.append(spec)
        pos = offset + spec.size
    names = [f.name for f in out]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ConfigError(f"struct.fields: duplicate field name(s) {', '.join(sorted(dup))}")
    channels = [f.channel for f in out if f.record]
    dup = {n for n in channels if channels.count(n) > 1}
    if dup:
        raise ConfigError(f"struct.fields: duplicate channel name(s) {', '.join(sorted(dup))}")
    if not channels:
        raise ConfigError("struct.fields: no field is recorded (all have record = false)")
    return out


def _compile(fields: list[FieldSpec], endian: str) -> tuple[struct.Struct, dict[str, int]]:
    """One Struct covering every field in offset order, gaps as pad bytes; overlaps rejected."""
    fmt = endian
    pos = 0
    index: dict[str, int] = {}
    item = 0
    for f in sorted(fields, key=lambda f: f.offset):
        if f.offset < pos:
            raise ConfigError(f"struct.fields: {f.name!r} at byte {f.offset} overlaps the field before it")
        if f.offset > pos:
            fmt += f"{f.offset - pos}x"
        code = TYPES[f.type][0]
        fmt += f"{f.count}{code}"
        index[f.name] = item
        item += 1 if f.type == "char" else f.count
        pos = f.offset + f.size
    if pos > MAX_DATAGRAM:
        raise ConfigError(f"struct.fields: the layout needs {pos} bytes, more than a UDP datagram holds")
    return struct.Struct(fmt), index


def _converter(f: FieldSpec, at: int) -> Callable[[tuple[Any, ...]], Any]:
    scale = 1.0 if f.scale is None else f.scale
    bias = 0.0 if f.bias is None else f.bias
    scaled = f.scale is not None or f.bias is not None
    if f.type == "char":
        size = f.count

        def text(t: tuple[Any, ...]) -> str:
            raw: bytes = t[at]
            end = raw.find(b"\x00")
            return fit_utf8((raw if end < 0 else raw[:end]).decode("utf-8", errors="replace"), size)

        return text
    if f.count == 1:
        if scaled:
            return lambda t: t[at] * scale + bias
        return lambda t: t[at]
    stop = at + f.count
    if scaled:
        return lambda t: tuple(v * scale + bias for v in t[at:stop])
    return lambda t: t[at:stop]


class StructDecoder:
    """Decodes datagrams of a user-described fixed layout (see the module docstring).

    ``length``: exact datagram size (default: at least the layout's size; extra bytes ignored).
    ``magic`` (text) / ``magic_hex``: bytes expected at ``magic_offset``. ``time_field`` (a field
    name) with ``time_unit`` (s, ms, us, ns) gives the source clock.
    """

    protocol = "struct"

    def __init__(
        self,
        *,
        fields: Sequence[Mapping[str, Any]],
        endian: str = "little",
        length: int | None = None,
        magic: str | None = None,
        magic_hex: str | None = None,
        magic_offset: int = 0,
        time_field: str | None = None,
        time_unit: str = "ms",
        title: str = "Custom UDP struct",
    ) -> None:
        if endian not in _ENDIAN:
            raise ConfigError(f"struct.endian: {endian!r} is not 'little' or 'big'")
        self.fields = _parse_fields(fields)
        self._struct, index = _compile(self.fields, _ENDIAN[endian])
        self.min_size = self._struct.size
        if length is not None and (isinstance(length, bool) or not self.min_size <= length <= MAX_DATAGRAM):
            raise ConfigError(f"struct.length: {length!r} is smaller than the layout ({self.min_size} bytes)")
        self.length = length
        if magic is not None and magic_hex is not None:
            raise ConfigError("struct: give magic or magic_hex, not both")
        try:
            self.magic = (
                magic.encode("utf-8") if magic is not None else bytes.fromhex(magic_hex) if magic_hex else b""
            )
        except ValueError:
            raise ConfigError(f"struct.magic_hex: {magic_hex!r} is not hex") from None
        if isinstance(magic_offset, bool) or not isinstance(magic_offset, int) or magic_offset < 0:
            raise ConfigError(f"struct.magic_offset: {magic_offset!r} is not a byte offset")
        self.magic_offset = magic_offset
        self._magic_end = magic_offset + len(self.magic)
        self._need = max(self.min_size, self._magic_end)
        by_name = {f.name: f for f in self.fields}
        self._time: Callable[[tuple[Any, ...]], Any] | None = None
        self._time_scale = 0
        if time_field is not None:
            f = by_name.get(time_field)
            if f is None or f.count != 1 or f.type in ("char", "bool"):
                raise ConfigError(f"struct.time_field: {time_field!r} is not a numeric scalar field")
            if time_unit not in _TIME_UNITS_NS:
                raise ConfigError(f"struct.time_unit: {time_unit!r} is not one of s, ms, us, ns")
            self._time = _converter(f, index[f.name])
            self._time_scale = _TIME_UNITS_NS[time_unit]
        self._convert = tuple((f.channel, _converter(f, index[f.name])) for f in self.fields if f.record)
        self.definition: dict[str, Any] = self._definition(title)

    def _definition(self, title: str) -> dict[str, Any]:
        frame: list[dict[str, Any]] = []
        for f in self.fields:
            if not f.record:
                continue
            typ = TYPES[f.type][1]
            if (f.scale is not None or f.bias is not None) and typ not in ("float32", "float64"):
                typ = "float64" if f.type in ("int64", "uint64", "int32", "uint32") else "float32"
            entry: dict[str, Any] = {"name": f.channel, "type": typ}
            if f.count > 1:
                entry["dimensions"] = f.count
            entry["description"] = f.description
            if f.unit:
                entry["unit"] = f.unit
            if f.type == "char":
                entry["tags"] = ["text"]
            frame.append(entry)
        return generated_definition(
            title=title,
            description="Datagram layout described in the wrtfd configuration",
            session_description="One recording session",
            frame_description="Latest datagram values",
            fields=frame,
        )

    def decode(self, data: bytes) -> Decoded:
        size = len(data)
        if self.length is not None:
            if size != self.length:
                raise DecodeError(
                    f"struct: {size}-byte datagram; expected {self.length}", reason="wrong_size"
                )
        elif size < self._need:
            raise DecodeError(
                f"struct: {size}-byte datagram; the layout needs {self._need}", reason="wrong_size"
            )
        if self.magic and data[self.magic_offset : self._magic_end] != self.magic:
            raise DecodeError(
                f"struct: bytes {self.magic_offset}..{self._magic_end} are "
                f"{bytes(data[self.magic_offset : self._magic_end])!r}, not {self.magic!r}",
                reason="bad_magic",
            )
        t = self._struct.unpack_from(data)
        values = {channel: conv(t) for channel, conv in self._convert}
        source_time_ns = None
        if self._time is not None:
            raw_time = self._time(t)
            if isinstance(raw_time, int) or math.isfinite(raw_time):
                source_time_ns = int(raw_time * self._time_scale)
        return Decoded(values=values, source_time_ns=source_time_ns)
