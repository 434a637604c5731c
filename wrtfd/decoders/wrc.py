"""EA SPORTS WRC UDP telemetry, laid out by the game's JSON structure files.

Facts: ``shared/spec/protocols/wave2-games.md`` (section 4). The game writes, on its first launch,
``Documents/My Games/WRC/telemetry/``: ``config.json`` (which packets go where:
``udp.packets[] = {structure, packet, ip, port, frequencyHz, bEnabled}``), ``readme/channels.json``
(every channel: id, type, units, description) and ``readme/udp/wrc.json`` (a *structure*: header
channels, then packets, each an ordered list of channel ids); users may add their own structures
in ``telemetry/udp/``. A datagram is the header's channels then the packet's, packed,
little-endian, each at its type's size (``fourcc`` 4 bytes, ``boolean`` 1 ...), nothing else.

The decoder compiles one packet of a structure (``packet``, default ``session_update``) into one
``struct`` layout when it is built; every channel becomes a frame field. ``structure`` names the
structure file (absent, or a name ``wrc.json`` / ``wrc`` with no such file: the structure wrtfd
ships, written from the game's documented channel list); ``channels_file`` the game's
``channels.json`` when the structure uses channels the shipped catalogue lacks. Both files are
checked when the decoder is built (size, JSON, schema version, known channels and types, the
packet, the layout's size) and any problem is a :class:`ConfigError` naming the file.

A datagram of the packet's exact size is decoded; one of another packet's size of the same
structure (``session_start`` ...) is counted in ``skipped``; anything else is a ``wrong_size``
drop. Rally stages have no laps: the timing channels are ``stage_current_time``,
``stage_progress``, ``stage_current_distance`` and ``stage_previous_split_time``, and the decoder
adds ``stage_split_count`` (split checkpoints passed on this stage) when the packet has the split
time. Sessions: a stage time going back (a new stage or a restart) or another location, route or
car starts a new session; silence ends one (the recorder's idle rule). Source clock:
``game_total_time`` when the packet has it.
"""

from __future__ import annotations

import json
import math
import operator
import re
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wrtfd.decoders._common import SCHEMA_DIR, TupleLayout, check_channels, fit_utf8, select_channels
from wrtfd.decoders.base import Decoded, DropCounter, generated_definition
from wrtfd.errors import ConfigError, DecodeError

__all__ = [
    "MAX_FILE_BYTES",
    "SHIPPED_CHANNELS",
    "SHIPPED_STRUCTURE",
    "TYPES",
    "Channel",
    "Structure",
    "WrcDecoder",
    "load_channels",
    "load_structure",
]

SHIPPED_STRUCTURE = SCHEMA_DIR / "wrc.json"
SHIPPED_CHANNELS = SCHEMA_DIR / "wrc.channels.json"
#: Structure names that mean the shipped structure when no such file exists.
SHIPPED_NAMES = frozenset({"wrc.json", "wrc"})
#: Channel type -> (struct code, WRTF type, size). ``fourcc`` is recorded as 4 bytes of text.
TYPES: dict[str, tuple[str, str, int]] = {
    "boolean": ("?", "bool", 1),
    "bool": ("?", "bool", 1),
    "int8": ("b", "int8", 1),
    "uint8": ("B", "uint8", 1),
    "int16": ("h", "int16", 2),
    "uint16": ("H", "uint16", 2),
    "int32": ("i", "int32", 4),
    "uint32": ("I", "uint32", 4),
    "int64": ("q", "int64", 8),
    "uint64": ("Q", "uint64", 8),
    "float32": ("f", "float32", 4),
    "float64": ("d", "float64", 8),
    "fourcc": ("4s", "uint8", 4),
}
MAX_FILE_BYTES = 1 << 20
MAX_PACKETS = 64
#: At most 1024 channels of at most 8 bytes: a packet is never larger than a datagram.
MAX_PACKET_CHANNELS = 1024
MAX_CATALOGUE = 4096
SCHEMA_VERSION = 1
_ID = re.compile(r"^[a-z_][a-z0-9_]{0,63}$")
#: A stage time this far below the previous one is a new stage (or a restart).
STAGE_RESTART_S = 1.0


@dataclass(frozen=True, slots=True)
class Channel:
    """One entry of a channel catalogue (the game's ``channels.json``)."""

    id: str
    type: str
    unit: str
    description: str


@dataclass(frozen=True, slots=True)
class Structure:
    """A validated structure file: its id and each packet's channels (header first)."""

    id: str
    packets: Mapping[str, tuple[str, ...]]
    path: Path


def _read_json(path: Path, what: str) -> Any:
    """Bounded read; UTF-8 or UTF-16 (with its BOM: the game writes some files so)."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(f"{path}: larger than {MAX_FILE_BYTES} bytes; not a {what}")
    encoding = "utf-16" if raw.startswith((b"\xff\xfe", b"\xfe\xff")) else "utf-8-sig"
    try:
        return json.loads(raw.decode(encoding))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: the {what} is not UTF-8 or UTF-16 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: the {what} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
    except RecursionError:
        raise ConfigError(f"{path}: the {what} nests too deeply") from None


def _check_version(doc: Mapping[str, Any], path: Path, what: str) -> None:
    versions = doc.get("versions")
    if versions is None:
        return
    schema = versions.get("schema") if isinstance(versions, dict) else None
    if schema != SCHEMA_VERSION:
        raise ConfigError(
            f"{path}: {what} schema version {schema!r} is not supported (expected {SCHEMA_VERSION})"
        )


def _text(value: Any, limit: int) -> str:
    return fit_utf8(value, limit) if isinstance(value, str) else ""


def load_channels(path: Path) -> dict[str, Channel]:
    """A channel catalogue (``{"channels": [{"id", "type", "units", "description"}, ...]}``).

    :raises ConfigError: naming ``path`` and the problem.
    """
    doc = _read_json(path, "channel catalogue")
    if not isinstance(doc, dict) or not isinstance(doc.get("channels"), list):
        raise ConfigError(f"{path}: not a channel catalogue (expected an object with a `channels` list)")
    _check_version(doc, path, "channel catalogue")
    entries = doc["channels"]
    if len(entries) > MAX_CATALOGUE:
        raise ConfigError(f"{path}: {len(entries)} channels; at most {MAX_CATALOGUE}")
    out: dict[str, Channel] = {}
    for i, entry in enumerate(entries):
        where = f"{path}: channels[{i}]"
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: expected an object with id and type")
        cid = entry.get("id")
        if not isinstance(cid, str) or not _ID.fullmatch(cid):
            raise ConfigError(f"{where}.id: {cid!r} is not a channel id (lowercase letters, digits, _)")
        ctype = entry.get("type")
        if not isinstance(ctype, str) or ctype.lower() not in TYPES:
            raise ConfigError(f"{where}.type: {ctype!r} is not one of {', '.join(TYPES)}")
        if cid in out:
            raise ConfigError(f"{where}.id: channel {cid!r} is listed twice")
        out[cid] = Channel(
            cid, ctype.lower(), _text(entry.get("units"), 32), _text(entry.get("description"), 200)
        )
    return out


def _channel_list(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(c, str) for c in value):
        raise ConfigError(f"{where}: expected a list of channel ids")
    if len(value) > MAX_PACKET_CHANNELS:
        raise ConfigError(f"{where}: {len(value)} channels; at most {MAX_PACKET_CHANNELS}")
    return tuple(value)


def load_structure(path: Path, catalogue: Mapping[str, Channel]) -> Structure:
    """A structure file, every packet checked against ``catalogue``.

    :raises ConfigError: naming ``path`` and the problem.
    """
    doc = _read_json(path, "structure file")
    if not isinstance(doc, dict) or not isinstance(doc.get("packets"), list):
        raise ConfigError(f"{path}: not a WRC structure file (expected an object with a `packets` list)")
    _check_version(doc, path, "structure file")
    sid = doc.get("id", path.stem)
    if not isinstance(sid, str):
        raise ConfigError(f"{path}: id: expected text, got {sid!r}")
    header_doc = doc.get("header", {})
    if not isinstance(header_doc, dict):
        raise ConfigError(f"{path}: header: expected an object with `channels`")
    header = _channel_list(header_doc.get("channels", []), f"{path}: header.channels")
    if len(doc["packets"]) > MAX_PACKETS:
        raise ConfigError(f"{path}: {len(doc['packets'])} packets; at most {MAX_PACKETS}")
    packets: dict[str, tuple[str, ...]] = {}
    for i, packet in enumerate(doc["packets"]):
        where = f"{path}: packets[{i}]"
        if not isinstance(packet, dict) or not isinstance(packet.get("id"), str) or not packet["id"]:
            raise ConfigError(f"{where}: expected an object with an `id` and `channels`")
        pid = packet["id"]
        if pid in packets:
            raise ConfigError(f"{where}: packet {pid!r} is listed twice")
        order = header + _channel_list(packet.get("channels", []), f"{where}.channels")
        seen: set[str] = set()
        for cid in order:
            channel = catalogue.get(cid)
            if channel is None:
                raise ConfigError(
                    f"{where}: unknown channel {cid!r} (not in the channel catalogue; give the game's"
                    " channels.json as `channels_file`)"
                )
            if cid in seen:
                raise ConfigError(f"{where}: channel {cid!r} appears twice in packet {pid!r}")
            seen.add(cid)
        packets[pid] = order
    if not packets:
        raise ConfigError(f"{path}: the structure has no packets")
    return Structure(sid, packets, path)


def _resolve_structure(structure: str | None) -> Path:
    if structure is None:
        return SHIPPED_STRUCTURE
    if not isinstance(structure, str) or not structure:
        raise ConfigError(f"wrc.structure: {structure!r} is not a path")
    path = Path(structure)
    if path.is_file():
        return path
    if path.name in SHIPPED_NAMES:
        return SHIPPED_STRUCTURE
    raise ConfigError(f"wrc.structure: {path}: no such file")


def _fourcc(raw: bytes) -> str:
    """Four bytes as text: printable ASCII as is, anything else as ``?`` (fits 4 bytes)."""
    if raw.isascii() and raw.isalnum():
        return raw.decode("ascii")
    return "".join(chr(b) if 32 < b < 127 else "?" for b in raw)


class WrcDecoder:
    """Decodes one packet of an EA SPORTS WRC structure (see the module docstring).

    ``structure``: the structure file (default: the shipped one). ``packet``: which of its
    packets this source receives. ``channels_file``: the game's channel catalogue, for channels
    the shipped one lacks. ``channels``: record only these. ``skipped`` counts datagrams of the
    structure's other packets.
    """

    protocol = "wrc"

    def __init__(
        self,
        *,
        structure: str | None = None,
        packet: str = "session_update",
        channels_file: str | None = None,
        channels: Sequence[str] | None = None,
    ) -> None:
        catalogue = load_channels(SHIPPED_CHANNELS)
        if channels_file is not None:
            catalogue.update(load_channels(Path(channels_file)))
        self.structure = load_structure(_resolve_structure(structure), catalogue)
        order = self.structure.packets.get(packet)
        if order is None:
            known = ", ".join(self.structure.packets)
            raise ConfigError(f"{self.structure.path}: no packet {packet!r} in structure (packets: {known})")
        if not order:
            raise ConfigError(f"{self.structure.path}: packet {packet!r} has no channels")
        self.packet = packet
        self.layout = tuple(catalogue[c] for c in order)
        self._struct = struct.Struct("<" + "".join(TYPES[c.type][0] for c in self.layout))
        self.size = self._struct.size
        self._build = TupleLayout([(c.id, 1) for c in self.layout]).build
        self._fourccs = tuple(c.id for c in self.layout if c.type == "fourcc")
        others: dict[int, set[str]] = {}
        for pid, chans in self.structure.packets.items():
            size = sum(TYPES[catalogue[c].type][2] for c in chans)
            if pid != packet and size != self.size:
                others.setdefault(size, set()).add(pid)
        self._others = {
            n: f"packet_{next(iter(p))}" if len(p) == 1 else "other_packet" for n, p in others.items()
        }
        ids = {c.id for c in self.layout}
        self._stage_time = "stage_current_time" if "stage_current_time" in ids else None
        self._split = "stage_previous_split_time" if "stage_previous_split_time" in ids else None
        self._clock = "game_total_time" if "game_total_time" in ids else None
        key_ids = [k for k in ("location_id", "route_id", "vehicle_id") if k in ids]
        self._key_ids = tuple(key_ids)
        self._key: Callable[[Mapping[str, Any]], Any] | None = (
            operator.itemgetter(*key_ids) if key_ids else None
        )
        definition = self._definition()
        chosen = check_channels(definition, channels, "wrc.channels")
        self.definition: dict[str, Any] = select_channels(definition, chosen) if chosen else definition
        self._keep = frozenset(chosen) if chosen else None
        self.skipped = DropCounter()
        self._last_key: Any = None
        self._prev_stage_time: float | None = None
        self._last_split = 0.0
        self._splits = 0
        self._pending_new = False

    def _definition(self) -> dict[str, Any]:
        fields: list[dict[str, Any]] = []
        for c in self.layout:
            _code, wrtf_type, size = TYPES[c.type]
            entry: dict[str, Any] = {"name": c.id, "type": wrtf_type}
            if c.type == "fourcc":
                entry["dimensions"] = size
            entry["description"] = c.description or f"{c.id} ({c.type})"
            if c.unit:
                entry["unit"] = c.unit
            if c.type == "fourcc":
                entry["tags"] = ["text"]
            fields.append(entry)
        if self._split is not None:
            fields.append(
                {
                    "name": "stage_split_count",
                    "type": "uint8",
                    "description": "Split checkpoints passed on this stage (wrtfd: counts changes of"
                    " stage_previous_split_time)",
                    "tags": ["lap"],
                }
            )
        return generated_definition(
            title="EA SPORTS WRC telemetry",
            description=f"EA SPORTS WRC UDP telemetry, structure {self.structure.id!r}, packet"
            f" {self.packet!r} ({self.size} bytes)",
            session_description="One stage: a new stage or another location, route or car starts a new"
            " session; silence ends it",
            frame_description=f"Latest {self.packet} packet",
            fields=fields,
        )

    def decode(self, data: bytes) -> Decoded | None:
        n = len(data)
        if n != self.size:
            other = self._others.get(n)
            if other is not None:
                self.skipped.add(other)
                return None
            raise DecodeError(
                f"wrc: {n}-byte datagram; {self.packet} is {self.size} bytes", reason="wrong_size"
            )
        values = self._build(self._struct.unpack(data))
        for cid in self._fourccs:
            values[cid] = _fourcc(values[cid])
        info: dict[str, str] | None = None
        if self._key is not None:
            key = self._key(values)
            if key != self._last_key:
                if self._last_key is not None:
                    self._new_stage()
                self._last_key = key
                info = self._session_info(values)
        if self._stage_time is not None:
            st = values[self._stage_time]
            prev = self._prev_stage_time
            if prev is not None and st < prev - STAGE_RESTART_S:
                self._new_stage()
            self._prev_stage_time = st if math.isfinite(st) else prev
        if self._split is not None:
            split = values[self._split]
            if split > 0.0 and split != self._last_split and math.isfinite(split):
                self._splits = min(self._splits + 1, 255)
                self._last_split = split
            values["stage_split_count"] = self._splits
        source_ns = None
        if self._clock is not None:
            t = values[self._clock]
            if math.isfinite(t) and abs(t) < 1e9:
                source_ns = int(t * 1e9)
        if self._keep is not None:
            values = {k: v for k, v in values.items() if k in self._keep}
        new, self._pending_new = self._pending_new, False
        return Decoded(values=values, source_time_ns=source_ns, new_session=new, session_info=info)

    def _new_stage(self) -> None:
        self._pending_new = True
        self._splits = 0
        self._last_split = 0.0

    def _session_info(self, values: Mapping[str, Any]) -> dict[str, str]:
        info: dict[str, str] = {}
        if "location_id" in values:
            route = f" route {values['route_id']}" if "route_id" in values else ""
            info["track"] = f"location {values['location_id']}{route}"
        if "vehicle_id" in values:
            info["car"] = f"vehicle {values['vehicle_id']}"
        if values.get("stage_shakedown"):
            info["session_type"] = "shakedown"
        return info
