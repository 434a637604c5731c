"""WRTF definitions (``wrtf-schema.md``) and their C layout as numpy structured dtypes (N4, N6-N8).

A definition is validated once, when it is loaded; every rule of ``wrtf-schema.md`` gives a
:class:`~wrtfd.errors.SchemaError` whose message starts with the path of the offending item
(``types.wheel_data.fields[1].type: unknown type 'flaot32'``). After that the layouts are fixed:
readers and writers never re-check the definition per frame.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from wrtfd.errors import SchemaError
from wrtfd.format.spec import pad8

__all__ = [
    "PRIMITIVES",
    "TEXT_TAG",
    "EnumDef",
    "FieldDef",
    "Leaf",
    "Schema",
    "StructDef",
    "covered_bytes",
    "layout_difference",
    "layout_fields",
    "leaf_column",
]

#: Primitive type name -> little-endian numpy dtype (N6: each aligned to its own size).
PRIMITIVES: dict[str, np.dtype[Any]] = {
    "int8": np.dtype("i1"),
    "uint8": np.dtype("u1"),
    "int16": np.dtype("<i2"),
    "uint16": np.dtype("<u2"),
    "int32": np.dtype("<i4"),
    "uint32": np.dtype("<u4"),
    "int64": np.dtype("<i8"),
    "uint64": np.dtype("<u8"),
    "float32": np.dtype("<f4"),
    "float64": np.dtype("<f8"),
    "bool": np.dtype("?"),
}
_ENUM_DTYPE = np.dtype("<u4")

#: Tag marking a uint8 array as NUL-padded UTF-8 text (project convention).
TEXT_TAG = "text"

#: Refuse definitions whose blobs exceed this: a hostile file must not make us allocate gigabytes.
MAX_BLOB_BYTES = 16 * 1024 * 1024

#: The session-header field that gives the session's own time base (N9).
TIME_BASE_FIELD = "start_timestamp"


@dataclass(frozen=True, slots=True)
class FieldDef:
    """One field of a struct, session header/footer or frame."""

    name: str
    type: str
    dimensions: int = 0
    description: str | None = None
    unit: str | None = None
    tags: tuple[str, ...] = ()

    @property
    def is_text(self) -> bool:
        return TEXT_TAG in self.tags and self.type == "uint8" and self.dimensions > 0


@dataclass(frozen=True, slots=True)
class EnumDef:
    name: str
    values: tuple[tuple[str, int], ...]
    description: str | None = None

    def name_of(self, value: int) -> str | None:
        for n, v in self.values:
            if v == value:
                return n
        return None

    def value_of(self, name: str) -> int | None:
        for n, v in self.values:
            if n == name:
                return v
        return None


@dataclass(frozen=True, slots=True)
class StructDef:
    name: str
    fields: tuple[FieldDef, ...]
    description: str | None = None


@dataclass(frozen=True, slots=True)
class Leaf:
    """A scalar or text column reached from a blob: what dump and export flatten to.

    ``path`` holds field names and array indices from the blob's top (``("wheels", 0,
    "temperature")``); ``kind`` is a primitive name, ``"enum"`` or ``"text"``.
    """

    path: tuple[str | int, ...]
    kind: str
    enum: EnumDef | None = None
    unit: str | None = None
    description: str | None = None

    @property
    def column(self) -> str:
        return "_".join(str(p) for p in self.path)


_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SCHEMA_CACHE: dict[str, Schema] = {}


def _err(path: str, message: str) -> SchemaError:
    return SchemaError(f"{path}: {message}")


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _opt_text(raw: Mapping[str, Any], key: str, path: str, *, required: bool) -> str | None:
    v = raw.get(key)
    if v is None:
        if required:
            raise _err(f"{path}.{key}" if path else key, "missing (must be a non-empty string)")
        return None
    if not isinstance(v, str) or not v.strip():
        raise _err(f"{path}.{key}" if path else key, "must be a non-empty string")
    return v


def _mapping(v: object, path: str) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise _err(path, f"must be a mapping, got {type(v).__name__}")
    return v


def _parse_field(raw: object, path: str) -> FieldDef:
    m = _mapping(raw, path)
    name = m.get("name")
    if not isinstance(name, str) or not name:
        raise _err(f"{path}.name", "must be a non-empty string")
    type_name = m.get("type")
    if not isinstance(type_name, str) or not type_name:
        raise _err(f"{path}.type", "must be a non-empty string")
    dims = m.get("dimensions", 0)
    if dims is None:
        dims = 0
    if not _is_int(dims) or dims < 0:
        raise _err(f"{path}.dimensions", f"must be a non-negative integer, got {dims!r}")
    description = _opt_text(m, "description", path, required=True)
    unit = m.get("unit")
    if unit is not None and not isinstance(unit, str):
        raise _err(f"{path}.unit", "must be a string")
    tags_raw = m.get("tags") or []
    if not isinstance(tags_raw, list) or not all(isinstance(t, str) for t in tags_raw):
        raise _err(f"{path}.tags", "must be a list of strings")
    f = FieldDef(name, type_name, int(dims), description, unit, tuple(tags_raw))
    if TEXT_TAG in f.tags and not f.is_text:
        raise _err(f"{path}.tags", "'text' needs a uint8 field with dimensions > 0")
    return f


def _parse_fields(raw: object, path: str, *, forbid: frozenset[str] = frozenset()) -> tuple[FieldDef, ...]:
    if not isinstance(raw, list):
        raise _err(path, "must be a list of fields")
    if not raw:
        raise _err(path, "must have at least one field")
    fields: list[FieldDef] = []
    seen: set[str] = set()
    for i, item in enumerate(raw):
        f = _parse_field(item, f"{path}[{i}]")
        if f.name in seen:
            raise _err(f"{path}[{i}].name", f"duplicate field name '{f.name}'")
        if f.name in forbid:
            raise _err(f"{path}[{i}].name", f"'{f.name}' is reserved (the frame tick, N7)")
        seen.add(f.name)
        fields.append(f)
    return tuple(fields)


def _parse_type(name: str, raw: object) -> StructDef | EnumDef:
    path = f"types.{name}"
    m = _mapping(raw, path)
    kind = m.get("type")
    description = _opt_text(m, "description", path, required=True)
    if kind == "enum":
        if "fields" in m:
            raise _err(f"{path}.fields", "an enum cannot have fields")
        values = m.get("values")
        if not isinstance(values, list) or not values:
            raise _err(f"{path}.values", "an enum must have at least one value")
        out: list[tuple[str, int]] = []
        names: set[str] = set()
        nums: set[int] = set()
        for i, v in enumerate(values):
            vp = f"{path}.values[{i}]"
            vm = _mapping(v, vp)
            vname = vm.get("name")
            if not isinstance(vname, str) or not vname:
                raise _err(f"{vp}.name", "must be a non-empty string")
            _opt_text(vm, "description", vp, required=True)
            num = vm.get("value")
            if not isinstance(num, int) or isinstance(num, bool) or not 0 <= num <= 0xFFFFFFFF:
                raise _err(f"{vp}.value", f"must be an unsigned 32-bit integer, got {num!r}")
            if vname in names:
                raise _err(f"{vp}.name", f"duplicate enum value name '{vname}'")
            if num in nums:
                raise _err(f"{vp}.value", f"duplicate enum value {num}")
            names.add(vname)
            nums.add(num)
            out.append((vname, int(num)))
        return EnumDef(name, tuple(out), description)
    if kind == "struct":
        if "values" in m:
            raise _err(f"{path}.values", "a struct cannot have enum values")
        return StructDef(name, _parse_fields(m.get("fields"), f"{path}.fields"), description)
    raise _err(f"{path}.type", f"must be 'struct' or 'enum', got {kind!r}")


class Schema:
    """A validated WRTF definition and its layouts.

    Build with :meth:`load`, :meth:`from_yaml` or :meth:`from_dict`. ``frame_dtype`` has ``tick``
    (``<u8``) at offset 0 and the frame fields from offset 8 (N7); ``header_dtype`` and
    ``footer_dtype`` are the session header/footer structs padded to 8 bytes (N8).
    """

    def __init__(self, definition: Mapping[str, Any], yaml_text: str) -> None:
        self.definition: dict[str, Any] = dict(definition)
        self.yaml_text = yaml_text
        d = definition
        version = d.get("version")
        if version not in ("1.0", 1.0):
            raise _err("version", f'must be "1.0", got {version!r}')
        meta = d.get("metadata")
        if meta is not None:
            mm = _mapping(meta, "metadata")
            _opt_text(mm, "title", "metadata", required=False)
            _opt_text(mm, "description", "metadata", required=False)
        types_raw = d.get("types") or {}
        types_map = _mapping(types_raw, "types")
        self.types: dict[str, StructDef | EnumDef] = {}
        for tname, traw in types_map.items():
            if not isinstance(tname, str) or not tname:
                raise _err("types", f"type names must be non-empty strings, got {tname!r}")
            if tname in PRIMITIVES or tname in ("struct", "enum"):
                raise _err(f"types.{tname}", "a custom type cannot reuse a base type name")
            self.types[tname] = _parse_type(tname, traw)

        session = _mapping(d.get("session"), "session") if "session" in d else None
        if session is None:
            raise _err("session", "missing (a session header is required)")
        _opt_text(session, "description", "session", required=True)
        header = _mapping(session.get("header"), "session.header") if "header" in session else None
        if header is None:
            raise _err("session.header", "missing (a session header is required)")
        self.header_fields = _parse_fields(header.get("fields"), "session.header.fields")
        self.footer_fields: tuple[FieldDef, ...] | None = None
        if session.get("footer") is not None:
            footer = _mapping(session["footer"], "session.footer")
            self.footer_fields = _parse_fields(footer.get("fields"), "session.footer.fields")

        tick_reserved = frozenset({"tick"})
        if "frame" in d and "channels" in d:
            raise _err("channels", "give either 'frame' or the older 'channels', not both")
        if "frame" in d:
            frame = _mapping(d["frame"], "frame")
            _opt_text(frame, "description", "frame", required=True)
            self._frame_path = "frame.fields"
            self.frame_fields = _parse_fields(frame.get("fields"), "frame.fields", forbid=tick_reserved)
        elif "channels" in d:
            self._frame_path = "channels"
            self.frame_fields = _parse_fields(d["channels"], "channels", forbid=tick_reserved)
        else:
            raise _err("frame", "missing (a frame definition is required)")

        self._check_references()
        self._check_cycles()
        self._struct_cache: dict[str, tuple[np.dtype[Any], int, int]] = {}
        hdt, _ = self._blob_dtype(self.header_fields, "session.header.fields")
        self.header_dtype: np.dtype[Any] = hdt
        self.footer_dtype: np.dtype[Any] | None = None
        if self.footer_fields is not None:
            self.footer_dtype = self._blob_dtype(self.footer_fields, "session.footer.fields")[0]
        self.frame_dtype: np.dtype[Any] = self._frame_dtype()
        self.frame_size: int = self.frame_dtype.itemsize
        self.header_size: int = self.header_dtype.itemsize
        self.footer_size: int = 0 if self.footer_dtype is None else self.footer_dtype.itemsize
        tb = next((f for f in self.header_fields if f.name == TIME_BASE_FIELD), None)
        self.has_time_base = tb is not None and tb.type == "uint64" and tb.dimensions == 0

    # -- constructors ---------------------------------------------------------------------------

    @classmethod
    def from_yaml(cls, text: str, *, source: str = "definition") -> Schema:
        """Parse definition text (YAML); ``source`` names it in error messages.

        Results are cached by text: a directory of recordings shares one definition, and
        parsing YAML costs more than opening a file.
        """
        cached = _SCHEMA_CACHE.get(text)
        if cached is not None:
            return cached
        schema = cls._parse_yaml(text, source)
        if len(_SCHEMA_CACHE) >= 64:
            _SCHEMA_CACHE.pop(next(iter(_SCHEMA_CACHE)))
        _SCHEMA_CACHE[text] = schema
        return schema

    @classmethod
    def _parse_yaml(cls, text: str, source: str) -> Schema:
        try:
            data = yaml.load(text, Loader=_YAML_LOADER)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" line {mark.line + 1}" if mark is not None else ""
            # one line: the reader's error (a NUL, say) runs over two
            problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
            raise SchemaError(f"{source}:{where} not valid YAML ({problem})") from exc
        except (ValueError, RecursionError) as exc:
            raise SchemaError(f"{source}: not valid YAML ({exc})") from exc
        if not isinstance(data, Mapping):
            raise SchemaError(f"{source}: a definition must be a YAML mapping")
        try:
            return cls(data, text)
        except SchemaError as exc:
            if source == "definition":
                raise
            raise SchemaError(f"{source}: {exc}") from exc

    @classmethod
    def load(cls, path: str | Path) -> Schema:
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise SchemaError(f"{p}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
        except OSError as exc:
            raise SchemaError(f"{p}: cannot read definition ({exc.strerror or exc})") from exc
        return cls.from_yaml(text, source=str(p))

    @classmethod
    def from_dict(cls, definition: Mapping[str, Any]) -> Schema:
        try:
            text = yaml.safe_dump(dict(definition), sort_keys=False, allow_unicode=True)
        except yaml.YAMLError as exc:
            raise SchemaError(f"definition: cannot be written as YAML ({exc})") from exc
        # Reparse so that the stored text and the layout can never disagree.
        return cls(yaml.load(text, Loader=_YAML_LOADER), text)

    # -- checks ---------------------------------------------------------------------------------

    def _sections(self) -> Iterator[tuple[str, tuple[FieldDef, ...]]]:
        for name, t in self.types.items():
            if isinstance(t, StructDef):
                yield f"types.{name}.fields", t.fields
        yield "session.header.fields", self.header_fields
        if self.footer_fields is not None:
            yield "session.footer.fields", self.footer_fields
        yield self._frame_path, self.frame_fields

    def _check_references(self) -> None:
        for path, fields in self._sections():
            for i, f in enumerate(fields):
                if f.type not in PRIMITIVES and f.type not in self.types:
                    raise _err(f"{path}[{i}].type", f"unknown type '{f.type}'")

    def _check_cycles(self) -> None:
        state: dict[str, int] = {}  # 1 = on the stack, 2 = done

        def visit(name: str, chain: list[str]) -> None:
            t = self.types[name]
            if not isinstance(t, StructDef):
                return
            st = state.get(name)
            if st == 2:
                return
            if st == 1:
                loop = [*chain[chain.index(name) :], name]
                raise _err(f"types.{loop[0]}", f"circular reference {' -> '.join(loop)}")
            state[name] = 1
            for f in t.fields:
                if f.type in self.types:
                    visit(f.type, [*chain, name])
            state[name] = 2

        for name in self.types:
            visit(name, [])

    # -- layout (N6) ----------------------------------------------------------------------------

    def _type_layout(self, type_name: str, path: str) -> tuple[np.dtype[Any], int, int]:
        """(dtype, size, alignment) of one element of ``type_name``."""
        prim = PRIMITIVES.get(type_name)
        if prim is not None:
            return prim, prim.itemsize, prim.itemsize
        t = self.types[type_name]
        if isinstance(t, EnumDef):
            return _ENUM_DTYPE, 4, 4
        cached = self._struct_cache.get(type_name)
        if cached is None:
            cached = self._struct_layout(t.fields, f"types.{type_name}.fields")
            self._struct_cache[type_name] = cached
        return cached

    def _struct_layout(self, fields: Sequence[FieldDef], path: str) -> tuple[np.dtype[Any], int, int]:
        names: list[str] = []
        formats: list[Any] = []
        offsets: list[int] = []
        offset = 0
        align = 1
        for i, f in enumerate(fields):
            dt, size, al = self._type_layout(f.type, f"{path}[{i}]")
            offset = (offset + al - 1) // al * al
            count = f.dimensions if f.dimensions > 0 else 1
            if size * count > MAX_BLOB_BYTES or offset + size * count > MAX_BLOB_BYTES:
                raise _err(f"{path}[{i}].dimensions", f"layout larger than {MAX_BLOB_BYTES} bytes")
            names.append(f.name)
            formats.append(dt if f.dimensions == 0 else np.dtype((dt, (f.dimensions,))))
            offsets.append(offset)
            offset += size * count
            align = max(align, al)
        size = (offset + align - 1) // align * align
        dtype = np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": size})
        return dtype, size, align

    def _blob_dtype(self, fields: Sequence[FieldDef], path: str) -> tuple[np.dtype[Any], int]:
        dt, size, _ = self._struct_layout(fields, path)
        padded = pad8(size)
        names = list(dt.names or ())
        fmts = [dt.fields[n][0] for n in names]  # type: ignore[index]
        offs = [dt.fields[n][1] for n in names]  # type: ignore[index]
        return np.dtype({"names": names, "formats": fmts, "offsets": offs, "itemsize": padded}), size

    def _frame_dtype(self) -> np.dtype[Any]:
        dt, size, _ = self._struct_layout(self.frame_fields, self._frame_path)
        names = ["tick", *(dt.names or ())]
        fmts: list[Any] = [np.dtype("<u8")] + [dt.fields[n][0] for n in dt.names or ()]  # type: ignore[index]
        offs = [0] + [8 + dt.fields[n][1] for n in dt.names or ()]  # type: ignore[index]
        return np.dtype({"names": names, "formats": fmts, "offsets": offs, "itemsize": pad8(8 + size)})

    # -- walking --------------------------------------------------------------------------------

    def leaves(self, fields: Sequence[FieldDef], prefix: tuple[str | int, ...] = ()) -> list[Leaf]:
        """Flatten fields to scalar/text columns (arrays by index, structs by field name)."""
        out: list[Leaf] = []
        for f in fields:
            base: tuple[str | int, ...] = (*prefix, f.name)
            if f.is_text:
                out.append(Leaf(base, "text", None, f.unit, f.description))
                continue
            paths = [base] if f.dimensions == 0 else [(*base, i) for i in range(f.dimensions)]
            t = self.types.get(f.type)
            for p in paths:
                if isinstance(t, StructDef):
                    out.extend(self.leaves(t.fields, p))
                elif isinstance(t, EnumDef):
                    out.append(Leaf(p, "enum", t, f.unit, f.description))
                else:
                    out.append(Leaf(p, f.type, None, f.unit, f.description))
        return out

    @property
    def frame_leaves(self) -> list[Leaf]:
        return self.leaves(self.frame_fields)

    def __repr__(self) -> str:
        title = (self.definition.get("metadata") or {}).get("title", "")
        sizes = f"frame={self.frame_size}B header={self.header_size}B footer={self.footer_size}B"
        return f"<Schema {title!r} {sizes}>"


def leaf_column(records: np.ndarray, path: tuple[str | int, ...]) -> np.ndarray:
    """The values of one leaf across an array of records (a view where numpy allows)."""
    col = records
    for p in path:
        col = col[p] if isinstance(p, str) else col[..., p]
    return col


def covered_bytes(dtype: np.dtype[Any]) -> np.ndarray:
    """Boolean mask over ``dtype.itemsize``: True where a field lives, False for padding."""
    mask = np.zeros(dtype.itemsize, dtype=bool)

    def mark(dt: np.dtype[Any], base: int) -> None:
        if dt.subdtype is not None:
            sub, shape = dt.subdtype
            n = int(np.prod(shape))
            mask[base : base + n * sub.itemsize] |= np.tile(covered_bytes(sub), n)
            return
        if dt.names is None:
            mask[base : base + dt.itemsize] = True
            return
        for name in dt.names:
            fdt, off = dt.fields[name][:2]  # type: ignore[index]
            mark(fdt, base + off)

    mark(dtype, 0)
    return mask


_PRIMITIVE_NAMES = {dt.str: name for name, dt in PRIMITIVES.items()}


def layout_fields(dtype: np.dtype[Any]) -> dict[str, tuple[int, str]]:
    """Every leaf of a record layout: dotted path -> (byte offset, WRTF type such as ``float32[4]``).

    Enums show as their storage type (``uint32``): the bytes are what is compared.
    """
    out: dict[str, tuple[int, str]] = {}

    def walk(dt: np.dtype[Any], base: int, path: str) -> None:
        if dt.subdtype is not None:
            sub, shape = dt.subdtype
            if sub.names is None:
                out[path] = (base, f"{_PRIMITIVE_NAMES.get(sub.str, sub.str)}{list(shape)}")
                return
            for i in range(int(np.prod(shape))):
                walk(sub, base + i * sub.itemsize, f"{path}[{i}]")
            return
        if dt.names is None:
            out[path] = (base, _PRIMITIVE_NAMES.get(dt.str, dt.str))
            return
        for name in dt.names:
            fdt, off = dt.fields[name][:2]  # type: ignore[index]
            walk(fdt, base + off, f"{path}.{name}" if path else name)

    walk(dtype, 0, "")
    return out


def layout_difference(expected: np.dtype[Any], actual: np.dtype[Any]) -> str | None:
    """The first way ``actual`` differs from ``expected`` as a record layout (None: same bytes).

    Missing and extra fields are named before moved ones (an added field moves all after it).
    """
    want, got = layout_fields(expected), layout_fields(actual)
    for label, first, second in (("missing", want, got), ("not in the pinned definition", got, want)):
        absent = [p for p in first if p not in second]
        if absent:
            more = f" (and {len(absent) - 1} more)" if len(absent) > 1 else ""
            return f"field {absent[0]} is {label}{more}"
    for path, (off, kind) in want.items():
        g_off, g_kind = got[path]
        if (g_off, g_kind) != (off, kind):
            return f"field {path} is {g_kind} at byte {g_off}, expected {kind} at byte {off}"
    if expected.itemsize != actual.itemsize:
        return f"frame size is {actual.itemsize} bytes, expected {expected.itemsize}"
    return None
