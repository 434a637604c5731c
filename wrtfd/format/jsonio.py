"""JSON Lines view of a WRTF file: what ``wrtfd dump`` prints and ``wrtfd write`` reads back.

Values map one to one so that dump -> write gives the same bytes: structs are objects, arrays
lists, enums the value's name (the number when it has none), bools true/false, NaN and the
infinities the strings ``"nan"``, ``"inf"``, ``"-inf"``. A float32 is printed as the shortest
decimal that reads back as the same float32. A ``uint8`` array tagged ``text`` is a string
when its bytes are clean NUL-padded UTF-8, otherwise a list of numbers (so nothing is lost).
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np

from wrtfd.errors import FormatError
from wrtfd.format.check import CheckFailure
from wrtfd.format.markers import has_markers, session_marker_rows
from wrtfd.format.reader import Reader, check_dropped, ticks_to_time_us
from wrtfd.format.schema import EnumDef, FieldDef, Schema, StructDef

if TYPE_CHECKING:
    from wrtfd.format.writer import Writer

__all__ = [
    "JsonCodec",
    "dump_jsonl",
    "iter_dump_lines",
    "session_object",
    "write_jsonl",
]

ToJson = Callable[[Any], Any]
FromJson = Callable[[Any, str], Any]
_BATCH = 4096


_F32 = struct.Struct("<f")
_F32_CACHE: dict[float, float] = {}
_F32_CACHE_MAX = 1 << 16


def _f32_to_json(v: float) -> Any:
    """The shortest decimal that reads back (via float64, as JSON does) as the same float32."""
    v = float(v)
    if v != v:
        return "nan"
    if v in (math.inf, -math.inf):
        return "inf" if v > 0 else "-inf"
    if v == 0.0:
        return v  # keeps the sign of -0.0 (and 0.0 == -0.0 would confuse the cache)
    hit = _F32_CACHE.get(v)
    if hit is not None:
        return hit
    packed = _F32.pack(v)
    out = v  # the exact double always reads back exactly
    for digits in (6, 7, 8, 9):
        short = float(f"{v:.{digits}g}")
        if _F32.pack(short) == packed:  # the same double -> float32 rounding numpy does on write
            out = short
            break
    if len(_F32_CACHE) >= _F32_CACHE_MAX:
        _F32_CACHE.clear()
    _F32_CACHE[v] = out
    return out


def _f64_to_json(v: float) -> Any:
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def _plain(v: Any) -> Any:
    """numpy leaves subarrays as ndarrays even in ``tolist()`` of structured data."""
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    return v


def _text_to_json(v: Any) -> Any:
    values = [int(x) for x in _plain(v)]
    raw = bytes(values)
    body, _, rest = raw.partition(b"\0")
    if rest.strip(b"\0"):
        return values
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return values


def _float_from_json(v: Any, path: str) -> float:
    if isinstance(v, str):
        if v in ("nan", "inf", "-inf"):
            return float(v)
        raise FormatError(f"{path}: expected a number, got {v!r}")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise FormatError(f"{path}: expected a number, got {type(v).__name__}")
    return float(v)


def _int_from_json(v: Any, path: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise FormatError(f"{path}: expected an integer, got {v!r}")
    return v


def _bool_from_json(v: Any, path: str) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    raise FormatError(f"{path}: expected true or false, got {v!r}")


class JsonCodec:
    """Converters between records of a schema and JSON-ready Python values, compiled once.

    ``hide`` names a top-level frame field that ``frame_to_json`` leaves out (the frame check).
    """

    def __init__(self, schema: Schema, *, hide: str | None = None) -> None:
        self.schema = schema
        self.header_to_json = self._struct_to_json(schema.header_fields)
        self.frame_to_json = self._struct_to_json(schema.frame_fields, hide)
        self.footer_to_json = self._struct_to_json(schema.footer_fields) if schema.footer_fields else None
        self._header_from = self._struct_from_json(schema.header_fields, schema.header_dtype)
        self._frame_from = self._struct_from_json(schema.frame_fields, None)
        self._footer_from = (
            self._struct_from_json(schema.footer_fields, schema.footer_dtype)
            if schema.footer_fields is not None and schema.footer_dtype is not None
            else None
        )

    # -- records -> JSON --------------------------------------------------------------------------

    def _field_to_json(self, f: FieldDef) -> ToJson:
        if f.is_text:
            return _text_to_json
        t = self.schema.types.get(f.type)
        conv: ToJson
        if isinstance(t, StructDef):
            conv = self._struct_to_json(t.fields)
        elif isinstance(t, EnumDef):
            names = {v: n for n, v in t.values}
            conv = lambda v: names.get(int(v), int(v))  # noqa: E731
        elif f.type == "float32":
            conv = _f32_to_json
        elif f.type == "float64":
            conv = _f64_to_json
        else:
            return _plain
        if f.dimensions == 0:
            return conv
        return lambda vs: [conv(v) for v in _plain(vs)]

    def _struct_to_json(self, fields: Sequence[FieldDef], hide: str | None = None) -> ToJson:
        convs = [(f.name, self._field_to_json(f)) for f in fields]
        if hide is not None and any(name == hide for name, _ in convs):
            keep = [i for i, (name, _) in enumerate(convs) if name != hide]
            kept = [convs[i] for i in keep]

            def to_json_hiding(row: Any) -> dict[str, Any]:
                if isinstance(row, np.void):
                    row = row.item()
                return {name: conv(row[i]) for i, (name, conv) in zip(keep, kept, strict=True)}

            return to_json_hiding

        def to_json(row: Any) -> dict[str, Any]:
            if isinstance(row, np.void):
                row = row.item()
            return {name: conv(v) for (name, conv), v in zip(convs, row, strict=True)}

        return to_json

    # -- JSON -> records --------------------------------------------------------------------------

    def _field_from_json(self, f: FieldDef, zero: Any) -> FromJson:
        t = self.schema.types.get(f.type)
        conv: FromJson
        if f.is_text:
            n = f.dimensions

            def text(v: Any, path: str) -> Any:
                if isinstance(v, str):
                    raw = v.encode("utf-8")
                    if len(raw) > n:
                        raise FormatError(f"{path}: text is {len(raw)} bytes, the field holds {n}")
                    return list(raw) + [0] * (n - len(raw))
                if isinstance(v, list) and len(v) == n:
                    return [_int_from_json(x, path) for x in v]
                raise FormatError(f"{path}: expected a string of at most {n} bytes")

            return text
        if isinstance(t, StructDef):
            sub_zero = zero[0] if f.dimensions else zero
            conv = self._struct_from_json(t.fields, None, sub_zero)
        elif isinstance(t, EnumDef):
            values = {n: v for n, v in t.values}

            def enum(v: Any, path: str) -> int:
                if isinstance(v, str):
                    if v not in values:
                        raise FormatError(f"{path}: '{v}' is not a value of enum {t.name}")
                    return values[v]
                return _int_from_json(v, path)

            conv = enum
        elif f.type in ("float32", "float64"):
            conv = _float_from_json
        elif f.type == "bool":
            conv = _bool_from_json
        else:
            conv = _int_from_json
        if f.dimensions == 0:
            return conv
        n = f.dimensions

        def array(vs: Any, path: str) -> list[Any]:
            if not isinstance(vs, list) or len(vs) != n:
                raise FormatError(f"{path}: expected a list of {n} items")
            return [conv(v, f"{path}[{i}]") for i, v in enumerate(vs)]

        return array

    def _struct_from_json(
        self, fields: Sequence[FieldDef], dtype: np.dtype[Any] | None, zero: Any = None
    ) -> FromJson:
        if zero is None:
            dt = dtype if dtype is not None else self._frame_struct_dtype()
            zero = np.zeros((), dtype=dt).item()
        convs = [(f.name, self._field_from_json(f, zero[i]), zero[i]) for i, f in enumerate(fields)]
        names = {f.name for f in fields}

        def from_json(obj: Any, path: str) -> tuple[Any, ...]:
            if not isinstance(obj, Mapping):
                raise FormatError(f"{path}: expected an object, got {type(obj).__name__}")
            for k in obj:
                if k not in names:
                    raise FormatError(f"{path}.{k}: no such field")
            return tuple(conv(obj[name], f"{path}.{name}") if name in obj else z for name, conv, z in convs)

        return from_json

    def _frame_struct_dtype(self) -> np.dtype[Any]:
        dt = self.schema.frame_dtype
        names = [n for n in dt.names or () if n != "tick"]
        fields: dict[str, Any] = dict(dt.fields or {})
        return np.dtype([(n, fields[n][0]) for n in names])

    def header_record(self, obj: Any, path: str = "header") -> np.ndarray:
        """A 0-d record of ``header_dtype`` from its JSON object."""
        return self._record(self.schema.header_dtype, self._header_from(obj or {}, path), path)

    def footer_record(self, obj: Any, path: str = "footer") -> np.ndarray | None:
        if obj is None:
            return None
        if self._footer_from is None or self.schema.footer_dtype is None:
            raise FormatError(f"{path}: a footer is given, but the definition has no session.footer")
        return self._record(self.schema.footer_dtype, self._footer_from(obj, path), path)

    def frame_row(self, tick: int, data: Any, path: str = "frame") -> tuple[Any, ...]:
        return (tick, *self._frame_from(data or {}, f"{path}.data"))

    def frames_array(self, rows: list[tuple[Any, ...]], path: str = "frames") -> np.ndarray:
        return _zero_padded(rows, self.schema.frame_dtype, path)

    @staticmethod
    def _record(dtype: np.dtype[Any], row: tuple[Any, ...], path: str) -> np.ndarray:
        return _zero_padded(row, dtype, path)


def _zero_padded(rows: Any, dtype: np.dtype[Any], path: str) -> np.ndarray:
    """``np.array(rows, dtype)`` with padding bytes zero (numpy leaves them uninitialised)."""
    try:
        tmp = np.array(rows, dtype=dtype)
    except (TypeError, ValueError, OverflowError) as exc:
        raise FormatError(f"{path}: value does not fit its field type ({exc})") from exc
    out = np.zeros(tmp.shape, dtype=dtype)
    _copy_fields(out, tmp)
    return out


def _copy_fields(dst: np.ndarray, src: np.ndarray) -> None:
    for name in dst.dtype.names or ():
        d, s = dst[name], src[name]
        if d.dtype.names is not None:
            _copy_fields(d, s)
        else:
            d[...] = s


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def session_object(
    reader: Reader, codec: JsonCodec, i: int, frames: np.ndarray | None = None
) -> dict[str, Any]:
    """The session line; ``frames`` (the frames dumped, default all) gives its count and last tick."""
    s = reader.sessions[i]
    footer = None
    if s.footer is not None and codec.footer_to_json is not None:
        footer = codec.footer_to_json(s.footer.item())
    count, last = s.frame_count, s.last_tick
    if frames is not None and len(frames) != count:
        count, last = len(frames), (int(frames["tick"][-1]) if len(frames) else None)
    obj = {
        "kind": "session",
        "session": i,
        "header": codec.header_to_json(s.header.item()),
        "footer": footer,
        "frames": count,
        "last_tick": last,
    }
    if has_markers(reader.schema.frame_dtype):  # wrtfd recordings (docs/markers.md)
        obj["markers"] = session_marker_rows(reader, i)
    return obj


def iter_dump_lines(
    reader: Reader,
    session: int | None = None,
    chunk: int = 8192,
    *,
    with_check: bool = False,
    dropped: list[tuple[int, CheckFailure]] | None = None,
) -> Iterator[str]:
    """The JSON Lines of ``wrtfd dump`` (without newlines).

    Only frames that pass the frame check are dumped; the others are appended to ``dropped``
    (with the ones the reader's scan already left out, see :func:`check_dropped`). The check
    field is not in the frames' data unless ``with_check``.
    """
    codec = JsonCodec(reader.schema, hide=None if with_check else reader.check_field)
    indices = range(len(reader.sessions)) if session is None else [reader._session(session).index]
    if dropped is not None:
        dropped.extend(f for f in check_dropped(reader) if session is None or f[0] in indices)
    for i in indices:
        frames, failures = reader.verified_frames(i)
        if dropped is not None:
            dropped.extend((i, f) for f in failures)
        yield _dumps(session_object(reader, codec, i, frames))
        base = reader.sessions[i].time_base_us
        for start in range(0, len(frames), chunk):
            arr = frames[start : start + chunk]
            times = ticks_to_time_us(arr["tick"], base, reader.rate_hz).tolist()
            for row, t in zip(arr.tolist(), times, strict=True):
                yield _dumps(
                    {
                        "kind": "frame",
                        "session": i,
                        "tick": row[0],
                        "time_us": t,
                        "data": codec.frame_to_json(row[1:]),
                    }
                )


def dump_jsonl(reader: Reader, out: TextIO, session: int | None = None) -> int:
    """Write the dump of ``reader`` to ``out``; returns the number of lines."""
    n = 0
    for line in iter_dump_lines(reader, session):
        out.write(line)
        out.write("\n")
        n += 1
    return n


def write_jsonl(lines: Iterable[str], writer: Writer) -> tuple[int, int]:
    """Feed dump lines into ``writer`` (the inverse of :func:`dump_jsonl`).

    Returns (sessions, frames). Errors name the line number.
    """
    codec = JsonCodec(writer.schema)
    pending_footer: np.ndarray | None = None
    rows: list[tuple[Any, ...]] = []
    in_session = False
    last_tick: int | None = None
    sessions = frames = 0

    def flush_rows(where: str) -> None:
        if rows:
            writer.write_frames(codec.frames_array(rows, where))
            rows.clear()

    lineno = 0
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"line {lineno}"
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise FormatError(f"{where}: not JSON ({exc})") from exc
        if not isinstance(obj, dict):
            raise FormatError(f"{where}: expected a JSON object")
        kind = obj.get("kind")
        if kind == "session":
            flush_rows(where)
            if in_session:
                writer.end_session(pending_footer)
            pending_footer = codec.footer_record(obj.get("footer"), f"{where}: footer")
            writer.begin_session(codec.header_record(obj.get("header"), f"{where}: header"))
            in_session = True
            last_tick = None
            sessions += 1
        elif kind == "frame":
            if not in_session:
                raise FormatError(f"{where}: a frame before any session line")
            tick = obj.get("tick")
            if isinstance(tick, bool) or not isinstance(tick, int) or not 0 <= tick < 1 << 64:
                raise FormatError(f"{where}: tick must be an unsigned 64-bit integer, got {tick!r}")
            if last_tick is not None and tick <= last_tick:
                raise FormatError(
                    f"{where}: tick {tick} after {last_tick}: ticks must strictly increase (N10)"
                )
            last_tick = tick
            rows.append(codec.frame_row(tick, obj.get("data"), where))
            frames += 1
            if len(rows) >= _BATCH:
                flush_rows(f"lines up to {lineno}")
        else:
            raise FormatError(f"{where}: unknown kind {kind!r} (expected 'session' or 'frame')")
    flush_rows(f"lines up to {lineno}")
    if in_session:
        writer.end_session(pending_footer)
    return sessions, frames
