"""Topic-to-channel mapping: which DDS topics become which WRTF channels.

The mapping is a TOML file::

    [rate]
    hz = 100                          # frame rate of the recording

    [source]                          # optional
    name = "dds"                      # channels are recorded as "<name>.<channel>"
    stale_after_s = 0.5               # optional: a channel not refreshed for this long is stale

    [limits]                          # optional caps on hostile input (defaults: 1 MiB)
    max_payload_bytes = 1048576
    max_string_bytes = 1048576

    [types.Vec3]                      # optional inline struct types
    members = [{ name = "x", type = "double" }, { name = "y", type = "double" }]

    [[topics]]
    topic = "rt/vehicle/odom"         # DDS topic name as in the .zddsrec header
    type = "nav::Odometry"            # a struct from [types] or from `idl`, or an inline table
    idl = "odom.idl"                  # optional, relative to this file
    participant = "car1"              # optional: only samples from this participant name
    instance = { id = 3 }             # optional: only the instance whose key members match
    [topics.channels]                 # member path -> channel
    "pose.x" = "x"
    "wheel_speed" = { channel = "wheel_speed", unit = "m/s", description = "per wheel" }

A member path is ``a.b.c`` with ``[i]`` indexes into arrays and sequences. A leaf must be a
primitive, an array of primitives (a channel with that many elements), a bounded sequence of
primitives (``bound`` elements, zero-padded) or a string (a NUL-padded ``uint8`` text channel of
its bound, or of ``size`` when unbounded).

Everything is checked when the file is loaded; errors name the file and the key path.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wrtfd.errors import ConfigError
from wrtfd.zddsrec.cdr import CdrDecoder
from wrtfd.zddsrec.format import Limits
from wrtfd.zddsrec.types import (
    ArrayType,
    Primitive,
    SequenceType,
    StringType,
    StructType,
    TypeDesc,
    parse_idl,
    struct_from_config,
)

__all__ = ["ChannelSpec", "MappingConfig", "TopicMapping", "load_mapping", "mapping_from_dict"]

#: Source and channel names: what the recorder accepts as WRTF field names (a letter first, at
#: most 64, no double underscore: the recorder uses ``__`` to prefix composed type names).
_IDENT = re.compile(r"(?!.*__)[A-Za-z][A-Za-z0-9_]{0,63}")
_RESERVED_SOURCE_NAMES = frozenset({"tick", "stale", "wrtfd", "start_timestamp", "frames", "sources"})
_PATH_PART = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)")

Extractor = Callable[[Mapping[str, Any]], Any]


@dataclass(frozen=True, slots=True)
class ChannelSpec:
    """One channel: where its value sits in the decoded sample and how it is recorded."""

    name: str
    path: str
    wrtf_type: str
    dimensions: int
    unit: str | None
    description: str
    text: bool
    extract: Extractor

    def field(self) -> dict[str, Any]:
        """The WRTF frame-field definition (wrtf-schema.md field entry)."""
        f: dict[str, Any] = {
            "name": self.name,
            "type": self.wrtf_type,
            "dimensions": self.dimensions,
            "description": self.description,
        }
        if self.unit:
            f["unit"] = self.unit
        if self.text:
            f["tags"] = ["text"]
        return f


@dataclass(frozen=True, slots=True)
class TopicMapping:
    topic: str
    struct: StructType
    decoder: CdrDecoder
    channels: tuple[ChannelSpec, ...]
    participant: str | None = None
    instance: tuple[tuple[str, Any], ...] = ()
    key_decoder: CdrDecoder | None = None  # decodes key-only payloads (dispose/unregister)

    @property
    def channel_names(self) -> frozenset[str]:
        return frozenset(c.name for c in self.channels)

    def matches_instance(self, value: Mapping[str, Any]) -> bool:
        return all(value.get(k) == v for k, v in self.instance)


@dataclass(frozen=True, slots=True)
class MappingConfig:
    rate_hz: int
    source_name: str
    stale_after_s: float | None
    limits: Limits
    topics: tuple[TopicMapping, ...]
    path: Path | None = None

    def by_topic(self) -> dict[str, tuple[TopicMapping, ...]]:
        out: dict[str, list[TopicMapping]] = {}
        for t in self.topics:
            out.setdefault(t.topic, []).append(t)
        return {k: tuple(v) for k, v in out.items()}

    def channels(self) -> tuple[ChannelSpec, ...]:
        return tuple(c for t in self.topics for c in t.channels)

    def definition(self) -> dict[str, Any]:
        """The WRTF definition of this source's frame fields (wrtf-schema.md; N4)."""
        return {
            "version": "1.0",
            "metadata": {
                "title": f"{self.source_name} (.zddsrec / DDS)",
                "description": "DDS topics mapped to channels by "
                + (self.path.name if self.path else "a mapping"),
            },
            "frame": {
                "description": "DDS samples, one channel per mapped member",
                "fields": [c.field() for c in self.channels()],
            },
        }


# --------------------------------------------------------------------------- helpers


def _err(where: str, msg: str) -> ConfigError:
    return ConfigError(f"{where}: {msg}")


def _check_keys(table: Mapping[str, Any], allowed: set[str], where: str) -> None:
    extra = set(table) - allowed
    if extra:
        raise _err(where, f"unknown key(s) {', '.join(sorted(extra))}; allowed: {', '.join(sorted(allowed))}")


def _zero(p: Primitive) -> Any:
    if p.code == "?":
        return False
    return math.nan if p.code in "fd" else 0


def _compile_path(struct: StructType, path: str, where: str) -> tuple[Extractor, TypeDesc]:
    """Resolve ``a.b[2].c`` against ``struct``: an extractor over decoded dicts and the leaf type."""
    steps: list[tuple[str, Any]] = []  # ("key", name) | ("index", i, default-maker)
    t: TypeDesc = struct
    if not path:
        raise _err(where, "empty member path")
    for part in path.split("."):
        m = _PATH_PART.fullmatch(part)
        if m is None:
            raise _err(where, f"bad member path {path!r} (expected a.b[2].c)")
        name, idx_text = m.group(1), m.group(2)
        if not isinstance(t, StructType):
            raise _err(where, f"{path!r}: {name!r} is not inside a struct")
        member = t.member(name)
        if member is None:
            raise _err(
                where,
                f"{path!r}: type {t.name} has no member {name!r} "
                f"(has {', '.join(x.name for x in t.members)})",
            )
        steps.append(("key", name))
        t = member.type
        for idx in re.findall(r"\[(\d+)\]", idx_text):
            i = int(idx)
            if isinstance(t, ArrayType):
                if i >= t.length:
                    raise _err(where, f"{path!r}: index {i} outside the array of {t.length}")
                steps.append(("index", i))
                t = t.element
            elif isinstance(t, SequenceType):
                if t.bound is not None and i >= t.bound:
                    raise _err(where, f"{path!r}: index {i} outside the sequence bound {t.bound}")
                steps.append(("index", i))
                t = t.element
            else:
                raise _err(where, f"{path!r}: [{i}] indexes something that is not an array or sequence")

    leaf = t
    missing = _zero(leaf) if isinstance(leaf, Primitive) else None

    def extract(value: Mapping[str, Any]) -> Any:
        v: Any = value
        for kind, arg in steps:
            if kind == "key":
                v = v[arg]
            else:
                if arg >= len(v):  # a short sequence: the element is absent
                    return missing
                v = v[arg]
        return v

    return extract, leaf


def _channel(struct: StructType, path: str, spec: Any, topic: str, where: str) -> ChannelSpec:
    if isinstance(spec, str):
        spec = {"channel": spec}
    if not isinstance(spec, Mapping):
        raise _err(where, "must be a channel name or a table {channel, unit, description, size}")
    _check_keys(spec, {"channel", "unit", "description", "size"}, where)
    name = spec.get("channel")
    if not isinstance(name, str) or not _IDENT.fullmatch(name):
        raise _err(where, f"channel must be a letter then letters, digits or single _, got {name!r}")
    unit = spec.get("unit")
    if unit is not None and not isinstance(unit, str):
        raise _err(where, "unit must be a string")
    description = spec.get("description", f"{topic} {path}")
    if not isinstance(description, str) or not description.strip():
        raise _err(where, "description must be a non-empty string")
    size = spec.get("size")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or not 0 < size <= 65536):
        raise _err(where, f"size must be an integer in 1..65536, got {size!r}")
    get, leaf = _compile_path(struct, path, where)

    if isinstance(leaf, Primitive):
        return ChannelSpec(name, path, leaf.wrtf, 0, unit, description, False, get)
    if isinstance(leaf, ArrayType) and isinstance(leaf.element, Primitive):
        return ChannelSpec(name, path, leaf.element.wrtf, leaf.length, unit, description, False, get)
    if isinstance(leaf, SequenceType) and isinstance(leaf.element, Primitive):
        n = size or leaf.bound
        if n is None:
            raise _err(where, f"{path!r} is an unbounded sequence: give size = N (elements recorded)")
        pad = _zero(leaf.element)

        def get_seq(value: Mapping[str, Any], get: Extractor = get, n: int = n, pad: Any = pad) -> Any:
            seq = get(value)
            if seq is None:
                return [pad] * n
            if len(seq) >= n:
                return list(seq[:n])
            return list(seq) + [pad] * (n - len(seq))

        return ChannelSpec(name, path, leaf.element.wrtf, n, unit, description, False, get_seq)
    if isinstance(leaf, StringType):
        n = size or leaf.bound
        if n is None:
            raise _err(where, f"{path!r} is an unbounded string: give size = N (bytes recorded)")

        def get_text(value: Mapping[str, Any], get: Extractor = get, n: int = n) -> Any:
            raw = (get(value) or "").encode("utf-8")[:n]
            return list(raw) + [0] * (n - len(raw))

        return ChannelSpec(name, path, "uint8", n, unit, description, True, get_text)
    raise _err(
        where, f"{path!r} is not a primitive, primitive array, sequence or string; map its members instead"
    )


def _key_struct(struct: StructType) -> StructType | None:
    keys = tuple(m for m in struct.members if m.key)
    if not keys:
        return None
    return StructType(struct.name + "::KeyHolder", keys, "final")


# --------------------------------------------------------------------------- loading


def mapping_from_dict(
    doc: Mapping[str, Any], *, base_dir: Path | None = None, where: str = "<mapping>"
) -> MappingConfig:
    """Validate a parsed mapping document. :raises ConfigError: naming ``where`` and the key."""
    base = base_dir or Path.cwd()
    _check_keys(doc, {"rate", "source", "limits", "types", "topics"}, where)

    rate = doc.get("rate", {})
    if not isinstance(rate, Mapping):
        raise _err(f"{where}: rate", "must be a table")
    _check_keys(rate, {"hz"}, f"{where}: rate")
    hz = rate.get("hz", 60)
    if not isinstance(hz, int) or isinstance(hz, bool) or not 1 <= hz <= 100_000:
        raise _err(f"{where}: rate.hz", f"must be an integer frame rate in 1..100000, got {hz!r}")

    src = doc.get("source", {})
    if not isinstance(src, Mapping):
        raise _err(f"{where}: source", "must be a table")
    _check_keys(src, {"name", "stale_after_s"}, f"{where}: source")
    source_name = src.get("name", "dds")
    if not isinstance(source_name, str) or not _IDENT.fullmatch(source_name):
        raise _err(
            f"{where}: source.name", f"must be a letter then letters, digits or single _, got {source_name!r}"
        )
    if source_name in _RESERVED_SOURCE_NAMES:
        raise _err(f"{where}: source.name", f"{source_name!r} is reserved by the recording layout")
    stale = src.get("stale_after_s")
    if stale is not None and (not isinstance(stale, int | float) or isinstance(stale, bool) or stale <= 0):
        raise _err(f"{where}: source.stale_after_s", f"must be a positive number, got {stale!r}")

    lim = doc.get("limits", {})
    if not isinstance(lim, Mapping):
        raise _err(f"{where}: limits", "must be a table")
    _check_keys(lim, {"max_payload_bytes", "max_string_bytes"}, f"{where}: limits")
    for k in ("max_payload_bytes", "max_string_bytes"):
        v = lim.get(k)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or not 0 < v <= (1 << 30)):
            raise _err(f"{where}: limits.{k}", f"must be an integer in 1..2^30, got {v!r}")
    limits = Limits(
        max_payload_bytes=int(lim.get("max_payload_bytes", 1 << 20)),
        max_string_bytes=int(lim.get("max_string_bytes", 1 << 20)),
    )

    types: dict[str, TypeDesc] = {}
    raw_types = doc.get("types", {})
    if not isinstance(raw_types, Mapping):
        raise _err(f"{where}: types", "must be a table of struct tables")
    for tname, table in raw_types.items():
        types[tname] = struct_from_config(tname, table, types, where=f"{where}: types.{tname}")

    raw_topics = doc.get("topics")
    if not isinstance(raw_topics, list) or not raw_topics:
        raise _err(f"{where}: topics", "must be a non-empty array of tables ([[topics]])")
    idl_cache: dict[Path, dict[str, StructType]] = {}
    topics: list[TopicMapping] = []
    seen_channels: dict[str, str] = {}
    for i, t in enumerate(raw_topics):
        at = f"{where}: topics[{i}]"
        if not isinstance(t, Mapping):
            raise _err(at, "must be a table")
        _check_keys(t, {"topic", "type", "idl", "participant", "instance", "channels"}, at)
        topic = t.get("topic")
        if not isinstance(topic, str) or not topic:
            raise _err(f"{at}.topic", "must be the DDS topic name (a non-empty string)")
        struct = _resolve_type(t, types, base, idl_cache, at)
        participant = t.get("participant")
        if participant is not None and not isinstance(participant, str):
            raise _err(f"{at}.participant", "must be a participant name")
        inst = t.get("instance", {})
        if not isinstance(inst, Mapping):
            raise _err(f"{at}.instance", "must be a table of key member = value")
        for k, v in inst.items():
            member = struct.member(k)
            if member is None or not isinstance(member.type, Primitive | StringType):
                raise _err(
                    f"{at}.instance.{k}", f"type {struct.name} has no primitive or string member {k!r}"
                )
            if isinstance(v, Mapping | list):
                raise _err(f"{at}.instance.{k}", "must be a scalar value")
        chans = t.get("channels")
        if not isinstance(chans, Mapping) or not chans:
            raise _err(f"{at}.channels", 'must be a non-empty table of "member.path" = "channel"')
        specs = []
        for path, spec in chans.items():
            cs = _channel(struct, path, spec, topic, f'{at}.channels."{path}"')
            if cs.name in seen_channels:
                raise _err(
                    f'{at}.channels."{path}"',
                    f"channel {cs.name!r} is already mapped by {seen_channels[cs.name]}",
                )
            seen_channels[cs.name] = f"{topic} {path}"
            specs.append(cs)
        key_struct = _key_struct(struct)
        topics.append(
            TopicMapping(
                topic=topic,
                struct=struct,
                decoder=CdrDecoder(struct, max_string_bytes=limits.max_string_bytes),
                channels=tuple(specs),
                participant=participant,
                instance=tuple(inst.items()),
                key_decoder=None
                if key_struct is None
                else CdrDecoder(key_struct, max_string_bytes=limits.max_string_bytes),
            )
        )
    return MappingConfig(
        rate_hz=hz,
        source_name=source_name,
        stale_after_s=None if stale is None else float(stale),
        limits=limits,
        topics=tuple(topics),
    )


def _resolve_type(
    t: Mapping[str, Any],
    types: dict[str, TypeDesc],
    base: Path,
    idl_cache: dict[Path, dict[str, StructType]],
    at: str,
) -> StructType:
    type_spec = t.get("type")
    idl = t.get("idl")
    if isinstance(type_spec, Mapping):
        if idl is not None:
            raise _err(f"{at}.idl", "give either an inline type table or idl + type name, not both")
        return struct_from_config(f"{t.get('topic')}::type", type_spec, types, where=f"{at}.type")
    if not isinstance(type_spec, str) or not type_spec:
        raise _err(f"{at}.type", "must be a struct name or an inline {members = [...]} table")
    if idl is not None:
        if not isinstance(idl, str):
            raise _err(f"{at}.idl", "must be a file path")
        idl_path = (base / idl).resolve()
        if idl_path not in idl_cache:
            try:
                text = idl_path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise _err(f"{at}.idl", f"cannot read {idl_path}: {exc}") from None
            idl_cache[idl_path] = parse_idl(text, where=str(idl_path))
        structs = idl_cache[idl_path]
        found = structs.get(type_spec.lstrip(":")) or _unique_suffix(structs, type_spec)
        if found is None:
            raise _err(
                f"{at}.type",
                f"no struct {type_spec!r} in {idl_path} (has {', '.join(sorted(structs)) or 'none'})",
            )
        return found
    found_t = types.get(type_spec)
    if not isinstance(found_t, StructType):
        raise _err(f"{at}.type", f"unknown struct {type_spec!r}: define it in [types] or give idl = FILE")
    return found_t


def _unique_suffix(structs: Mapping[str, StructType], name: str) -> StructType | None:
    hits = [s for full, s in structs.items() if full.split("::")[-1] == name]
    return hits[0] if len(hits) == 1 else None


def load_mapping(path: str | Path) -> MappingConfig:
    """Load and validate a mapping TOML file.

    :raises ConfigError: unreadable file, TOML syntax error, or an invalid key (named).
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read mapping: {exc}") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: TOML syntax error: {exc}") from None
    cfg = mapping_from_dict(doc, base_dir=p.parent, where=str(p))
    return MappingConfig(cfg.rate_hz, cfg.source_name, cfg.stale_after_s, cfg.limits, cfg.topics, p)
