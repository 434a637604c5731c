"""EA / Codemasters F1 UDP telemetry, packet formats 2018-2025 (F1 2018 ... F1 25).

Layouts: ``shared/spec/protocols/f1.md`` and :mod:`wrtfd.decoders._f1_layouts`. Dispatch is on
``packetFormat`` (u16 at offset 0, not on the game: F1 25 can send 2023/2024 formats), then on
``packetId``; each (format, id) has one exact size. The car count comes from the format's
table, never from a literal. Each packet yields its own :class:`Decoded` with only the
channels it carries (the recorder's sample-and-hold merges them): the player's car as scalar
and wheel channels, every car's key values as ``all_*`` arrays.

Mapped: Motion (0), Session (1), Lap Data (2), Event (3), Car Telemetry (6), Car Status (7),
Motion Ex (13, 2023+). Other known ids return None and are counted in ``skipped``; unknown
formats and ids raise :class:`DecodeError` (the source counts the drop).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from wrtfd.decoders._common import (
    TupleLayout,
    check_channels,
    load_definition,
    raw_fields,
    select_channels,
)
from wrtfd.decoders._f1_layouts import (
    FORMATS,
    FORMULAS,
    SESSION_PREFIX,
    TRACKS,
    CarPacket,
    FormatLayout,
    Spec,
)
from wrtfd.decoders.base import Decoded, DropCounter, RawField, RawLayout, RawValues
from wrtfd.errors import ConfigError, DecodeError

__all__ = ["F1Decoder", "looks_like", "supported_formats"]

_U16 = struct.Struct("<H")
_EVENT_CODE = struct.Struct("<4s")
_U8 = struct.Struct("<B")
_U32 = struct.Struct("<I")
_WHEELS = (2, 3, 0, 1)  # RL, RR, FL, FR on the wire -> FL, FR, RL, RR
_DIR_SCALE = 1.0 / 32767.0
_U32_MAX = 0xFFFFFFFF
#: Events whose first detail byte is a vehicle index.
_VEHICLE_EVENTS = frozenset({b"FTLP", b"RTMT", b"TMPT", b"RCWN", b"SPTP", b"DTSV", b"SGSV", b"OVTK", b"COLL"})
_DIR_KEYS = (
    "world_forward_dir_x",
    "world_forward_dir_y",
    "world_forward_dir_z",
    "world_right_dir_x",
    "world_right_dir_y",
    "world_right_dir_z",
)


#: A raw layout not made yet (None is a layout that takes the dict path).
_UNSEEN: Any = object()


def supported_formats() -> tuple[int, ...]:
    return tuple(sorted(FORMATS))


def _code(code: str, count: int) -> str:
    return code if count == 1 else f"{count}{code}"


def _fmt(spec: Spec) -> str:
    return "".join(_code(code, count) for _name, code, count in spec)


def _n_items(code: str, count: int) -> int:
    """How many values ``struct`` yields for one spec entry (0 for pad bytes)."""
    compiled = struct.Struct("<" + _code(code, count))
    return len(compiled.unpack(bytes(compiled.size)))


def _layout(spec: Spec, base: int = 0) -> TupleLayout:
    items = [(name, _n_items(code, count)) for name, code, count in spec]
    reorder = {name: _WHEELS for name, _code_, count in spec if name is not None and count == 4}
    return TupleLayout(items, base=base, reorder=reorder)


def _seconds_to_ms(out: dict[str, Any]) -> None:
    for src, dst in (
        ("_last_lap_time_s", "last_lap_time_ms"),
        ("_current_lap_time_s", "current_lap_time_ms"),
        ("_sector1_time_s", "sector1_time_ms"),
        ("_sector2_time_s", "sector2_time_ms"),
    ):
        v = out.pop(src, None)
        if v is not None:  # clamped to the uint32 channel: NaN, inf and junk must not escape
            out[dst] = min(_U32_MAX, max(0, round(v * 1000.0))) if math.isfinite(v) else 0


def _sector_parts(out: dict[str, Any]) -> None:
    if "_sector1_ms_part" in out:
        out["sector1_time_ms"] = out.pop("_sector1_ms_part") + 60000 * out.pop("_sector1_min_part")
        out["sector2_time_ms"] = out.pop("_sector2_ms_part") + 60000 * out.pop("_sector2_min_part")


def _pedals_2018(out: dict[str, Any]) -> None:
    if "throttle" in out:
        out["throttle"] = out["throttle"] / 100.0
        out["steer"] = out["steer"] / 100.0
        out["brake"] = out["brake"] / 100.0


def _directions(out: dict[str, Any]) -> None:
    if "world_forward_dir_x" in out:
        for key in _DIR_KEYS:
            out[key] = out[key] * _DIR_SCALE


#: Per hook: the channels it reads (left out of the raw copy) and the ones it writes (handed
#: over computed, in the raw path's extra dict).
_HOOK_KEYS: dict[Callable[[dict[str, Any]], None], tuple[tuple[str, ...], tuple[str, ...]]] = {
    _directions: (_DIR_KEYS, _DIR_KEYS),
    _pedals_2018: (("throttle", "steer", "brake"), ("throttle", "steer", "brake")),
    _seconds_to_ms: (
        ("_last_lap_time_s", "_current_lap_time_s", "_sector1_time_s", "_sector2_time_s"),
        ("last_lap_time_ms", "current_lap_time_ms", "sector1_time_ms", "sector2_time_ms"),
    ),
    _sector_parts: (
        ("_sector1_ms_part", "_sector1_min_part", "_sector2_ms_part", "_sector2_min_part"),
        ("sector1_time_ms", "sector2_time_ms"),
    ),
}


def _spec_items(spec: Spec) -> list[tuple[str | None, int]]:
    return [(name, _n_items(code, count)) for name, code, count in spec]


def _reorder(spec: Spec) -> dict[str, tuple[int, ...]]:
    return {name: _WHEELS for name, _code_, count in spec if name is not None and count == 4}


def _hook(packet: CarPacket, layout: FormatLayout) -> Callable[[dict[str, Any]], None] | None:
    """The unit conversion a packet kind needs after unpacking (None: values are final)."""
    if packet.kind == "motion":
        return _directions
    if packet.kind == "telemetry2018":
        return _pedals_2018
    if packet.kind == "lap":
        return _seconds_to_ms if layout.packet_format <= 2020 else _sector_parts
    return None


class _CarArray:
    """One per-car packet of one format, compiled once.

    Three small unpacks per datagram instead of one big one: the player's block, the fields
    kept for every car (the rest of each block is skipped as pad bytes, so no Python objects
    are made for it), and the trailer. This is what makes 100k packets/s possible.
    """

    __slots__ = (
        "all",
        "all_raw",
        "all_struct",
        "car",
        "car_raw",
        "car_struct",
        "fixed",
        "header_size",
        "hook",
        "hook_keys",
        "hook_layout",
        "hook_struct",
        "k",
        "n",
        "pad",
        "raw",
        "size",
        "trailer",
        "trailer_at",
        "trailer_raw",
        "trailer_struct",
    )  # fmt: skip

    def __init__(
        self,
        packet: CarPacket,
        header_size: int,
        n_cars: int,
        max_cars: int,
        hook: Callable[[dict[str, Any]], None] | None,
    ) -> None:
        self.car_struct = struct.Struct("<" + _fmt(packet.car))
        self.trailer_struct = struct.Struct("<" + _fmt(packet.trailer))
        self.header_size = header_size
        self.trailer_at = header_size + n_cars * self.car_struct.size
        self.size = self.trailer_at + self.trailer_struct.size
        self.car = _layout(packet.car)
        self.trailer = _layout(packet.trailer)
        self.n = n_cars
        wanted = {field: channel for channel, field in packet.all_cars}
        kept_fmt: list[str] = []
        order: list[str] = []
        for name, code, count in packet.car:
            piece = _code(code, count)
            if name in wanted:
                kept_fmt.append(piece)
                order.append(wanted[name])
            else:
                kept_fmt.append(f"{struct.calcsize('<' + piece)}x")
        kept = min(n_cars, max_cars)
        self.k = len(order)
        self.all_struct = struct.Struct("<" + "".join(kept_fmt) * kept)
        self.all = tuple((channel, j) for j, channel in enumerate(order))
        self.pad: tuple[int, ...] = (0,) * (max_cars - kept)
        self.hook = hook
        # The raw path: fields read from the packet (None: this packet takes the dict path).
        reads, writes = _HOOK_KEYS.get(hook, ((), ())) if hook is not None else ((), ())
        #: The channels the hook writes (handed over computed), and what it reads: a struct of
        #: only those fields of the car block (the others skipped as pad bytes).
        self.hook_keys: tuple[str, ...] = writes
        only: Spec = tuple(
            (name, code, count) if name in reads else (None, "x", struct.calcsize("<" + _code(code, count)))
            for name, code, count in packet.car
        )
        self.hook_struct = struct.Struct("<" + _fmt(only))
        self.hook_layout = _layout(only)
        if hook is not None:  # only what the hook makes from this layout (a year may send a channel as is)
            probe = self.hook_layout.build(self.hook_struct.unpack(bytes(self.hook_struct.size)))
            hook(probe)
            self.hook_keys = tuple(k for k in writes if k in probe)
        self.car_raw = raw_fields(
            self.car_struct.format, _spec_items(packet.car), reorder=_reorder(packet.car), skip=reads
        )
        self.trailer_raw = raw_fields(
            self.trailer_struct.format, _spec_items(packet.trailer), base=self.trailer_at,
            reorder=_reorder(packet.trailer), skip=reads,
        )  # fmt: skip
        all_raw: list[RawField] | None = []
        car_fields = raw_fields(self.car_struct.format, _spec_items(packet.car)) or ()
        at = {f.name: f for f in car_fields}
        for channel, fld in packet.all_cars:
            f = at.get(fld)
            if f is None or f.count != 1 or all_raw is None:
                all_raw = None
                continue
            all_raw.append(
                RawField(channel, header_size + f.offset, f.code, kept, self.car_struct.size, None,
                         max_cars - kept, True)
            )  # fmt: skip
        self.all_raw = None if all_raw is None else tuple(all_raw)
        #: player car index (its layout) or -1 (no player car) -> RawLayout; an index of no car
        #: (a spectator's 255) is kept too, with the -1 layout (at most 256 + 1 entries)
        self.raw: dict[int, RawLayout | None] = {}
        #: player car index -> the extra values of a packet without a hook (never changed)
        self.fixed: dict[int, dict[str, Any]] = {}

    def fill(self, data: bytes, player: int, out: dict[str, Any]) -> None:
        if self.k:
            t = self.all_struct.unpack_from(data, self.header_size)
            k = self.k
            pad = self.pad
            for channel, j in self.all:
                out[channel] = t[j::k] + pad
        out["num_cars"] = self.n
        if 0 <= player < self.n:
            car = self.car_struct
            self.car.into(out, car.unpack_from(data, self.header_size + player * car.size))
        if self.trailer.size:
            self.trailer.into(out, self.trailer_struct.unpack_from(data, self.trailer_at))
        if self.hook is not None:
            self.hook(out)

    def raw_layout(self, fmt: _Format, player: int) -> RawLayout | None:
        """The raw path's layout for this packet with ``player``'s car (compiled once each)."""
        key = player if 0 <= player < self.n else -1
        if key in self.raw:
            self.raw[player] = self.raw[key]  # looked up by the player's index from now on
            return self.raw[key]
        layout = None
        if self.car_raw is not None and self.trailer_raw is not None and self.all_raw is not None:
            fields = [*fmt.raw_header, *self.all_raw]
            if key >= 0:
                base = self.header_size + key * self.car_struct.size
                fields += [
                    RawField(f.name, base + f.offset, f.code, f.count, f.stride, f.order, f.pad, f.array)
                    for f in self.car_raw
                ]
            if self.trailer.size:
                fields += self.trailer_raw
            extra = ("player_car_index", "num_cars", *(self.hook_keys if key >= 0 else ()))
            layout = RawLayout(tuple(fields), extra, fmt.raw_build(self))
        self.raw[key] = self.raw[player] = layout
        return layout

    def extra(self, data: bytes, player: int) -> dict[str, Any]:
        """What the raw path hands over computed: the player's index, the car count and what
        the hook makes from the player's block."""
        if self.hook is None or not 0 <= player < self.n:
            fixed = self.fixed.get(player)
            if fixed is None:  # the same two values for every packet of this car: made once
                fixed = self.fixed[player] = {"player_car_index": player, "num_cars": self.n}
            return fixed
        out: dict[str, Any] = {"player_car_index": player, "num_cars": self.n}
        values = self.hook_layout.build(
            self.hook_struct.unpack_from(data, self.header_size + player * self.car_struct.size)
        )
        self.hook(values)
        for key in self.hook_keys:
            out[key] = values[key]
        return out


class _Format:
    """A compiled :class:`FormatLayout`."""

    __slots__ = (
        "cars", "event_size", "header", "i_frame", "i_id", "i_player", "i_time", "i_uid", "known_ids",
        "layout", "motion_ex", "motion_ex_raw", "motion_ex_size", "raw_header", "session", "session_size",
    )  # fmt: skip

    def __init__(self, layout: FormatLayout, max_cars: int) -> None:
        fmt, self.i_id, self.i_uid, self.i_time, self.i_frame, self.i_player = layout.header
        self.header = struct.Struct(fmt)
        self.layout = layout
        hsize = self.header.size
        head = raw_fields(fmt, [(None, 1)] * self.i_time + [("session_time", 1), ("frame_identifier", 1)])
        assert head is not None and self.i_frame == self.i_time + 1
        self.raw_header: tuple[RawField, ...] = head
        self.cars: dict[int, _CarArray] = {}
        for pid, packet in layout.car_packets.items():
            self.cars[pid] = _CarArray(packet, hsize, layout.num_cars, max_cars, _hook(packet, layout))
        self.motion_ex: tuple[struct.Struct, TupleLayout] | None = None
        self.motion_ex_size = 0
        self.motion_ex_raw: RawLayout | None = None
        if layout.motion_ex is not None:
            body = struct.Struct("<" + _fmt(layout.motion_ex))
            self.motion_ex = (body, _layout(layout.motion_ex))
            self.motion_ex_size = hsize + body.size
            fields = raw_fields(
                body.format, _spec_items(layout.motion_ex), base=hsize, reorder=_reorder(layout.motion_ex)
            )
            if fields is not None:
                self.motion_ex_raw = RawLayout(
                    (*self.raw_header, *fields), ("player_car_index",), self._ex_build
                )
        self.session = (struct.Struct("<" + _fmt(SESSION_PREFIX)), _layout(SESSION_PREFIX))
        self.session_size = layout.session_size
        self.event_size = layout.event_size
        self.known_ids = layout.known_ids

    def _head(self, data: bytes, extra: Mapping[str, Any]) -> dict[str, Any]:
        h = self.header.unpack_from(data)
        return {
            "session_time": h[self.i_time],
            "frame_identifier": h[self.i_frame],
            "player_car_index": extra["player_car_index"],
        }

    def raw_build(self, car: _CarArray) -> Callable[[bytes, Mapping[str, Any]], dict[str, Any]]:
        """A car packet's dict, made as :meth:`F1Decoder.decode` makes it."""

        def build(data: bytes, extra: Mapping[str, Any]) -> dict[str, Any]:
            out = self._head(data, extra)
            car.fill(data, extra["player_car_index"], out)
            return out

        return build

    def _ex_build(self, data: bytes, extra: Mapping[str, Any]) -> dict[str, Any]:
        out = self._head(data, extra)
        assert self.motion_ex is not None
        body, layout = self.motion_ex
        layout.into(out, body.unpack_from(data, self.header.size))
        return out


class F1Decoder:
    """Decodes one F1 datagram of any supported ``packetFormat``.

    ``max_cars``: size of the ``all_*`` array channels (default 22; slots the packet lacks are
    0, cars beyond it are left out). ``formats``: accept only these packet formats.
    ``channels``: record only these. ``skipped`` counts valid packets that carry no mapped
    channel, by reason.
    """

    protocol = "f1"
    #: Hand the recorder :class:`RawValues` for car and motion-ex packets; False: the dict path
    #: everywhere (what the byte-identity tests compare against).
    raw_values = True

    def __init__(
        self,
        *,
        max_cars: int = 22,
        formats: Sequence[int] | None = None,
        channels: Sequence[str] | None = None,
    ) -> None:
        if not 1 <= max_cars <= 255:
            raise ConfigError(f"f1.max_cars: {max_cars} is not in 1..255")
        chosen = tuple(formats) if formats is not None else tuple(FORMATS)
        unknown = [f for f in chosen if f not in FORMATS]
        if unknown:
            raise ConfigError(
                f"f1.formats: unsupported packet format(s) {unknown}; supported: {supported_formats()}"
            )
        self._formats = {f: _Format(FORMATS[f], max_cars) for f in chosen}
        definition = load_definition("f1.wrtf.yaml")
        for fld in definition["frame"]["fields"]:
            if fld["name"].startswith("all_"):
                fld["dimensions"] = max_cars
        self._channels = check_channels(definition, channels, "f1.channels")
        self.definition: dict[str, Any] = (
            select_channels(definition, self._channels) if self._channels else definition
        )
        self._keep = frozenset(self._channels) if self._channels else None
        self.max_cars = max_cars
        self.skipped = DropCounter()
        self._spectator: int | None = None

    def decode(self, data: bytes) -> Decoded | None:
        size = len(data)
        if size < 2:
            raise DecodeError(f"f1: {size}-byte datagram is shorter than a header", reason="wrong_size")
        (packet_format,) = _U16.unpack_from(data)
        fmt = self._formats.get(packet_format)
        if fmt is None:
            raise DecodeError(f"f1: unknown packetFormat {packet_format}", reason="unknown_format")
        header = fmt.header
        if size < header.size:
            raise DecodeError(
                f"f1: {size}-byte datagram is shorter than the {packet_format} header ({header.size})",
                reason="wrong_size",
            )
        h = header.unpack_from(data)
        pid = h[fmt.i_id]
        player = h[fmt.i_player]
        if player >= fmt.layout.num_cars and self._spectator is not None:
            player = self._spectator
        car = fmt.cars.get(pid)
        if self.raw_values and self._keep is None:
            raw: RawLayout | None = None
            extra: Mapping[str, Any] | None = None
            if car is not None:
                if size != car.size:
                    self._check(size, car.size, packet_format, pid)
                raw = car.raw.get(player, _UNSEEN)
                if raw is _UNSEEN:
                    raw = car.raw_layout(fmt, player)
                if raw is not None:
                    extra = car.fixed.get(player) if car.hook is None else None
                    if extra is None:
                        extra = car.extra(data, player)
            elif pid == 13 and fmt.motion_ex_raw is not None:
                self._check(size, fmt.motion_ex_size, packet_format, pid)
                raw = fmt.motion_ex_raw
                extra = {"player_car_index": player}
            if raw is not None and extra is not None:
                session_time = h[fmt.i_time]
                return Decoded(  # bytes(): the sample keeps the packet, never a buffer reused later
                    RawValues(raw, data if type(data) is bytes else bytes(data), extra),
                    int(session_time * 1e9) if math.isfinite(session_time) else None,
                    h[fmt.i_uid],
                )
        out: dict[str, Any] = {
            "session_time": h[fmt.i_time],
            "frame_identifier": h[fmt.i_frame],
            "player_car_index": player,
        }
        info: dict[str, str] | None = None
        if car is not None:
            self._check(size, car.size, packet_format, pid)
            car.fill(data, player, out)
        elif pid == 1:
            self._check(size, fmt.session_size, packet_format, pid)
            info = self._session(fmt, data, out)
        elif pid == 3:
            self._check(size, fmt.event_size, packet_format, pid)
            self._event(fmt, data, out)
        elif pid == 13 and fmt.motion_ex is not None:
            self._check(size, fmt.motion_ex_size, packet_format, pid)
            body, layout = fmt.motion_ex
            layout.into(out, body.unpack_from(data, header.size))
        elif pid in fmt.known_ids:
            self.skipped.add(f"unmapped_packet_{pid}")
            return None
        else:
            raise DecodeError(
                f"f1: unknown packetId {pid} in format {packet_format}", reason="unknown_packet_id"
            )
        if self._keep is not None:
            out = {k: v for k, v in out.items() if k in self._keep}
        session_time = h[fmt.i_time]
        return Decoded(
            values=out,
            source_time_ns=int(session_time * 1e9) if math.isfinite(session_time) else None,
            session_key=h[fmt.i_uid],
            session_info=info,
        )

    @staticmethod
    def _check(size: int, expected: int, packet_format: int, pid: int) -> None:
        if size != expected:
            raise DecodeError(
                f"f1: format {packet_format} packet {pid} is {size} bytes; expected {expected}",
                reason="wrong_size",
            )

    def _session(self, fmt: _Format, data: bytes, out: dict[str, Any]) -> dict[str, str]:
        body, layout = fmt.session
        layout.into(out, body.unpack_from(data, fmt.header.size))
        spectating = out["is_spectating"] != 0
        idx = out["spectator_car_index"]
        self._spectator = idx if spectating and idx < fmt.layout.num_cars else None
        track_id = out["track_id"]
        session_type = out["session_type"]
        return {
            "track": TRACKS.get(track_id, f"track id {track_id}"),
            "session_type": fmt.layout.session_types.get(session_type, f"session type {session_type}"),
            "car": FORMULAS.get(out["formula"], f"formula {out['formula']}"),
        }

    @staticmethod
    def _event(fmt: _Format, data: bytes, out: dict[str, Any]) -> None:
        at = fmt.header.size
        (code,) = _EVENT_CODE.unpack_from(data, at)
        out["event_code"] = (
            code.decode("ascii")
            if code.isascii()
            else "".join(chr(b) if 32 <= b < 127 else "?" for b in code)
        )
        vehicle = 255
        if fmt.layout.event_details:
            if code in _VEHICLE_EVENTS:
                (vehicle,) = _U8.unpack_from(data, at + 4)
            elif code == b"PENA":
                (vehicle,) = _U8.unpack_from(data, at + 6)
            elif code == b"BUTN":
                (out["button_status"],) = _U32.unpack_from(data, at + 4)
        out["event_vehicle_index"] = vehicle


def _packet_ids(layout: FormatLayout) -> frozenset[int]:
    ids = set(layout.car_packets) | set(layout.known_ids) | {1, 3}
    if layout.motion_ex is not None:
        ids.add(13)
    return frozenset(ids)


#: packetFormat -> (header struct, index of packetId in it, every packetId of the format).
_SNIFF = {f: (struct.Struct(lay.header[0]), lay.header[1], _packet_ids(lay)) for f, lay in FORMATS.items()}


def looks_like(data: bytes) -> bool:
    """An F1 datagram: a known packetFormat (u16 at 0) and a packetId of that format."""
    if len(data) < 2:
        return False
    entry = _SNIFF.get(_U16.unpack_from(data)[0])
    if entry is None or len(data) < entry[0].size:
        return False
    return entry[0].unpack_from(data)[entry[1]] in entry[2]
