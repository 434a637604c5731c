"""Precompiled writes of one source's values into the held frame row.

The held row is one structured record of the file's frame dtype; a source owns the struct field
named after it. Everything that depends on the layout (views per channel, which channels are
floats, whether the fast path applies) is worked out once here, so applying a sample costs one
numpy store per channel touched, or one store for the whole source when the sample carries
every channel of an all-float source (the common case for game telemetry).

Mixed-type sources (F1, Forza: floats, ints, bools and per-car arrays) take a second fast path:
a decoder sends the same channels in the same order every time, so for each such set of keys a
store is compiled once. First choice: one ``struct`` pack of every value (arrays flattened) and
a copy of the packed bytes into the row, run by run (several times cheaper than numpy's
conversion of a tuple of Python objects, which discovers the type of every element). ``struct``
is stricter than numpy (a float for an int field, a float32 overflow, a short array): then the
sample takes the second choice, a structured view of just those fields stored with one tuple
assignment (numpy converts field by field in C, with the same conversions as storing each
channel alone). If that fails too (a value that does not fit), the row is restored and the
per-channel path stores what fits and counts the rest, exactly as without the fast paths. A
store that keeps failing for a key set is not tried again for it.

Fixed-layout packets (Forza, F1) come as :class:`RawValues`: the packet's bytes and its
:class:`RawLayout`. For each layout a store is compiled that copies every channel whose wire
type is the row's type straight from the packet into the row (byte slices, no Python value),
packs the others (other types, strided per-car arrays, the decoder's computed values) with one
``struct`` pack, and gives up (False) before touching the row when the bytes would not be what
the dict path stores: a float32 with an all-ones exponent and the quiet bit clear (a signalling
NaN, which a round trip through a Python float makes quiet; or an infinity), or a value the
pack refuses. Then the values are made into the decoder's dict and take the path above.
"""

from __future__ import annotations

import itertools
import math
import operator
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from wrtfd.decoders.base import RawField, RawLayout, RawValues

__all__ = ["SourceRow"]

_NAN = math.nan
#: Key sets remembered per source (decoders send a few; a bound against varied input).
_MAX_PLANS = 32
#: Raw layouts remembered per source (F1: one per packet kind and player car; a bound).
_MAX_RAW = 256
#: A key set whose fast store failed this often is no longer tried (per-channel path only).
_MAX_PLAN_FAILURES = 3


#: numpy primitive -> struct code (little-endian, no alignment: the offsets come from the dtype).
_STRUCT_CODES = {
    "<f4": "f", "<f8": "d", "|i1": "b", "|u1": "B", "<i2": "h", "<u2": "H",
    "<i4": "i", "<u4": "I", "<i8": "q", "<u8": "Q", "|b1": "?",
}  # fmt: skip


class _PackedStore:
    """One key set's store as a ``struct`` pack plus byte copies into the row (module docstring).

    ``store`` is generated per key set: the values taken in key order, arrays spread, one pack,
    then one slice copy per run of adjacent fields, all unrolled (a loop over the runs and a
    separate flatten call cost a third of the store).
    """

    __slots__ = ("packer", "runs", "store")

    def __init__(
        self,
        store: Callable[[memoryview, Mapping[str, Any]], None],
        packer: struct.Struct,
        runs: tuple[tuple[int, int, int], ...],
    ) -> None:
        #: ``store(row, values)``: everything that can fail (struct.error, TypeError, ValueError
        #: for an array of the wrong length...) happens before the row is touched.
        self.store = store
        self.packer = packer
        self.runs = runs  # (row offset, packed offset, length)

    @classmethod
    def compile(cls, dt: np.dtype[Any], keys: tuple[str, ...]) -> _PackedStore | None:
        """None when a field has no struct code (nested struct, other byte order)."""
        fields: Mapping[str, Any] = dt.fields or {}
        placed: list[tuple[int, int, str, int | None]] = []  # row offset, key index, code, count
        for i, key in enumerate(keys):
            fdt, offset = fields[key][:2]
            base, shape = (fdt.base, fdt.shape) if fdt.shape else (fdt, ())
            code = _STRUCT_CODES.get(base.str)
            if code is None or len(shape) > 1:
                return None
            placed.append((offset, i, code, shape[0] if shape else None))
        placed.sort()
        parts: list[str] = []
        checks: list[str] = []  # arrays one short and one long must not add up to a valid pack
        fmt: list[str] = []
        runs: list[tuple[int, int, int]] = []
        packed_at = 0
        for offset, i, code, count in placed:
            size = struct.calcsize("<" + code) * (count or 1)
            if runs and runs[-1][0] + runs[-1][2] == offset:
                row_at, p_at, length = runs[-1]
                runs[-1] = (row_at, p_at, length + size)
            else:
                runs.append((offset, packed_at, size))
            packed_at += size
            fmt.append(f"{count}{code}" if count is not None else code)
            parts.append(f"*v[{i}]" if count is not None else f"v[{i}]")
            if count is not None:
                checks.append(f"len(v[{i}]) != {count}")
        packer = struct.Struct("<" + "".join(fmt))
        lines = ["def store(row, values, pack=PACK):", "    v = tuple(values.values())"]
        if checks:
            lines.append(f"    if {' or '.join(checks)}:\n        raise ValueError")
        if len(runs) == 1 and runs[0][1] == 0:
            lines.append(f"    row[{runs[0][0]}:{runs[0][0] + runs[0][2]}] = pack({', '.join(parts)})")
        else:
            lines.append(f"    p = memoryview(pack({', '.join(parts)}))")
            lines.extend(f"    row[{r}:{r + n}] = p[{a}:{a + n}]" for r, a, n in runs)
        namespace: dict[str, Any] = {"PACK": packer.pack}
        exec(compile("\n".join(lines) + "\n", "<SourceRow>", "exec"), namespace)
        return cls(namespace["store"], packer, tuple(runs))


#: Wire codes a raw store reads (numbers; ``?`` is read and packed, never copied: any nonzero
#: byte is True, stored as 1).
_RAW_CODES = frozenset("bBhHiIqQfd?")
_MISSING = object()
#: Float words this close (bytes) share one sNaN check.
_NAN_GAP = 16


def _mask_words(offsets: Sequence[int], lo: int, bits: int) -> int:
    """An int with ``bits`` set in each little-endian 32-bit word at byte ``offsets`` (from ``lo``)."""
    out = 0
    for off in offsets:
        out |= bits << (8 * (off - lo))
    return out


def _compile_raw(
    dt: np.dtype[Any], layout: RawLayout
) -> Callable[[memoryview, bytes, Mapping[str, Any]], bool] | None:
    """The raw store of ``layout`` into a source struct of dtype ``dt`` (None: the layout does
    not fit the row, e.g. a channel it lacks; such samples take the dict path)."""
    fields: Mapping[str, Any] = dt.fields or {}
    names = [f.name for f in layout.fields] + list(layout.extra)
    if len(set(names)) != len(names):
        return None
    copies: list[tuple[int, int, int]] = []  # row offset, wire offset, length
    f32: list[int] = []  # wire offsets of float32 words copied as bytes
    packed: list[tuple[int, str, str, int | None]] = []  # row offset, code, expression, array length
    reads: list[str] = []
    strided: list[tuple[RawField, int, str]] = []
    steps: list[str] = []
    checks: list[str] = []
    namespace: dict[str, Any] = {"FROM": int.from_bytes}
    for name in names:
        if name not in fields:
            return None
        fdt, roff = fields[name][:2]
        base, shape = (fdt.base, fdt.shape) if fdt.shape else (fdt, ())
        code = _STRUCT_CODES.get(base.str)
        if code is None or len(shape) > 1:
            return None
        length = shape[0] if shape else None
        if name in layout.extra:
            if length is None:
                packed.append((roff, code, f"e[{name!r}]", None))
            else:
                packed.append((roff, code, f"*e[{name!r}]", length))
                checks.append(f"len(e[{name!r}]) != {length}")
            continue
        f = next(x for x in layout.fields if x.name == name)
        if f.code not in _RAW_CODES or (length is None) == f.array:
            return None
        if length is not None and length != f.count + f.pad:
            return None
        size = struct.calcsize("<" + f.code)
        stride = f.stride or size
        order = f.order or tuple(range(f.count))
        if code == f.code and code != "?" and (stride == size or f.count == 1):
            for i, j in enumerate(order):
                copies.append((roff + i * size, f.offset + j * stride, size))
                if code == "f":
                    f32.append(f.offset + j * stride)
            if f.pad:
                packed.append((roff + f.count * size, code, "*" + repr((0,) * f.pad), f.pad))
            continue
        if f.array and f.order is None and f.count > 1 and stride > size and size == 1 and code == f.code:
            # One byte per car: an extended slice of the packet is the row's bytes.
            end = f.offset + (f.count - 1) * stride + 1
            steps.append(f"    row[{roff}:{roff + f.count}] = data[{f.offset}:{end}:{stride}]")
            if f.pad:
                packed.append((roff + f.count, code, "*" + repr((0,) * f.pad), f.pad))
            continue
        if f.array and f.order is None and f.count > 1 and stride > size:
            strided.append((f, roff, code))  # per-car arrays: read together below
            continue
        # Read with struct (the value the dict path would hold), pack with the row's code.
        n = len(reads)
        gap = f"{stride - size}x" if stride > size else ""
        namespace[f"R{n}"] = struct.Struct("<" + gap.join([f.code] * f.count)).unpack_from
        reads.append(f"    r{n} = R{n}(data, {f.offset})")
        if not f.array:
            packed.append((roff, code, f"r{n}[0]", None))
        else:
            items = ", ".join(f"r{n}[{j}]" for j in order) if f.order else f"*r{n}"
            if f.pad:
                items += ", *" + repr((0,) * f.pad)
            packed.append((roff, code, items, f.count + f.pad))
    # Arrays of the same stride and count (one field per car block, F1's all_* channels): one
    # unpack of every car's fields, each array a slice of it.
    groups: dict[tuple[int, int], list[tuple[RawField, int, str]]] = {}
    for item in strided:
        groups.setdefault((item[0].stride, item[0].count), []).append(item)
    for (stride, count), members in groups.items():
        members.sort(key=lambda m: m[0].offset)
        start = members[0][0].offset
        block: list[str] = []
        at = start
        for f, _roff, _code in members:
            if f.offset < at:
                return None  # overlapping fields
            if f.offset > at:
                block.append(f"{f.offset - at}x")
            block.append(f.code)
            at = f.offset + struct.calcsize("<" + f.code)
        if at - start > stride:
            return None
        n = len(reads)
        one = "".join(block)
        namespace[f"R{n}"] = struct.Struct("<" + f"{stride - (at - start)}x".join([one] * count)).unpack_from
        reads.append(f"    r{n} = R{n}(data, {start})")
        k = len(members)
        for j, (f, roff, code) in enumerate(members):
            items = f"*r{n}[{j}::{k}]" if k > 1 else f"*r{n}"
            if f.pad:
                items += ", *" + repr((0,) * f.pad)
            packed.append((roff, code, items, f.count + f.pad))
    lines = ["def store(row, data, e):"]
    if f32:
        words = sorted(set(f32))
        if any(b - a < 4 for a, b in itertools.pairwise(words)):
            return None  # overlapping float words: the check below assumes whole words
        # Per cluster of nearby words (an int over the whole packet costs more than the rest).
        clusters: list[list[int]] = []
        for w in words:
            if clusters and w - clusters[-1][-1] <= _NAN_GAP:
                clusters[-1].append(w)
            else:
                clusters.append([w])
        tests = []
        for i, cluster in enumerate(clusters):
            lo, hi = cluster[0], cluster[-1] + 4
            namespace[f"M{i}"] = _mask_words(cluster, lo, 0x1FF << 22)  # exponent and quiet bit
            namespace[f"E{i}"] = _mask_words(cluster, lo, 0xFF << 23)  # exponent all ones
            namespace[f"H{i}"] = _mask_words(cluster, lo, 1 << 31)
            # ``+ M``: a nonzero 9-bit field (anything but all-ones exponent, quiet clear) carries
            # into bit 31 of its word.
            tests.append(f"((FROM(data[{lo}:{hi}], 'little') & M{i}) ^ E{i}) + M{i} & H{i} != H{i}")
        # A word with exponent all ones and quiet bit clear (sNaN or inf): the dict path.
        lines.append(f"    if {' or '.join(tests)}:\n        return False")
    lines.extend(reads)
    if checks:
        lines.append(f"    if {' or '.join(checks)}:\n        return False")
    runs: list[tuple[int, int, int]] = []
    if packed:
        packed.sort()
        fmt: list[str] = []
        at = 0
        for roff, code, _expr, n_items in packed:
            size = struct.calcsize("<" + code) * (n_items or 1)
            if runs and runs[-1][0] + runs[-1][2] == roff:
                runs[-1] = (runs[-1][0], runs[-1][1], runs[-1][2] + size)
            else:
                runs.append((roff, at, size))
            at += size
            fmt.append(f"{n_items}{code}" if n_items is not None else code)
        namespace["PACK"] = struct.Struct("<" + "".join(fmt)).pack
        lines.append(f"    p = PACK({', '.join(expr for _, _, expr, _ in packed)})")
    copies.sort()
    merged: list[list[int]] = []
    for roff, woff, n in copies:
        if merged and merged[-1][0] + merged[-1][2] == roff and merged[-1][1] + merged[-1][2] == woff:
            merged[-1][2] += n
        else:
            merged.append([roff, woff, n])
    # Pieces that fill one stretch of the row (wheel arrays in another order) are joined first:
    # one slice assignment per stretch, the pieces cut by one itemgetter call.
    stretches: list[list[list[int]]] = []
    for piece in merged:
        if stretches and stretches[-1][-1][0] + stretches[-1][-1][2] == piece[0]:
            stretches[-1].append(piece)
        else:
            stretches.append([piece])
    for i, stretch in enumerate(stretches):
        r0, end = stretch[0][0], stretch[-1][0] + stretch[-1][2]
        if len(stretch) == 1:
            lines.append(f"    row[{r0}:{end}] = data[{stretch[0][1]}:{stretch[0][1] + stretch[0][2]}]")
        else:
            namespace[f"C{i}"] = operator.itemgetter(*(slice(w, w + n) for _, w, n in stretch))
            lines.append(f"    row[{r0}:{end}] = b''.join(C{i}(data))")
    lines.extend(steps)
    lines.extend(f"    row[{r}:{r + n}] = p[{a}:{a + n}]" for r, a, n in runs)
    lines.append("    return True")
    exec(compile("\n".join(lines) + "\n", "<SourceRow raw>", "exec"), namespace)
    store: Callable[[memoryview, bytes, Mapping[str, Any]], bool] = namespace["store"]
    return store


def _store(view: np.ndarray, value: Any) -> None:
    """Store ``value`` into ``view`` (a (1, ...) view); nested mappings for structs."""
    names = view.dtype.names
    if names:
        if isinstance(value, Mapping):
            for key, item in value.items():
                if key not in names:
                    raise KeyError(key)
                _store(view[key], item)
            return
        if isinstance(value, Sequence) and not isinstance(value, (str, bytes)) and view.ndim >= 2:
            if len(value) != view.shape[1]:
                raise ValueError(f"expected {view.shape[1]} items, got {len(value)}")
            for i, item in enumerate(value):
                _store(view[:, i], item)
            return
        raise TypeError(f"expected a mapping for a struct, got {type(value).__name__}")
    if isinstance(value, (str, bytes)) and view.dtype == np.uint8 and view.ndim == 2:
        raw = value.encode("utf-8") if isinstance(value, str) else value
        raw = raw[: view.shape[1]]
        buf = np.zeros(view.shape[1], dtype=np.uint8)
        buf[: len(raw)] = np.frombuffer(raw, dtype=np.uint8)
        view[0] = buf
        return
    view[0] = value


class SourceRow:
    """Writes of one source into ``held[field]`` (``held`` is a 1-element structured array)."""

    __slots__ = (
        "_all",
        "_backup",
        "_flat",
        "_flat_names",
        "_float_views",
        "_getter",
        "_plans",
        "_raw",
        "_raw_mv",
        "_raw_stores",
        "_scalar",
        "_sub",
        "_views",
        "names",
    )

    def __init__(self, held: np.ndarray, field: str) -> None:
        sub = held[field]
        self._sub = sub
        dt = sub.dtype
        self.names: tuple[str, ...] = tuple(dt.names or ())
        self._views: dict[str, np.ndarray] = {n: sub[n] for n in self.names}
        fields: Mapping[str, Any] = dt.fields or {}
        self._scalar: dict[str, bool] = {
            n: not fields[n][0].names and fields[n][0].shape == () for n in self.names
        }
        self._float_views: dict[str, np.ndarray] = {}
        for n in self.names:
            fdt = fields[n][0]
            base = fdt.base if fdt.shape else fdt
            if base.kind == "f":
                self._float_views[n] = self._views[n]
        # Fast path: every channel a scalar of one float dtype, packed with no holes.
        self._flat: np.ndarray | None = None
        self._flat_names: tuple[str, ...] = ()
        if self.names and len(self._float_views) == len(self.names) and all(self._scalar.values()):
            kinds = {dt.fields[n][0] for n in self.names}  # type: ignore[index]
            offsets = sorted((dt.fields[n][1], n) for n in self.names)  # type: ignore[index]
            if len(kinds) == 1:
                fdt = next(iter(kinds))
                size = fdt.itemsize
                packed = all(off == offsets[0][0] + i * size for i, (off, _) in enumerate(offsets))
                if packed and held.flags.c_contiguous:
                    start = held.dtype.fields[field][1] + offsets[0][0]  # type: ignore[index]
                    raw = held.view(np.uint8)[start : start + size * len(offsets)]
                    self._flat = raw.view(fdt)
                    self._flat_names = tuple(n for _, n in offsets)
        self._getter = operator.itemgetter(*self._flat_names) if len(self._flat_names) > 1 else None
        self._all = frozenset(self.names)
        # The source's bytes in the held row (restored when a fast store fails half-way).
        self._raw: np.ndarray | None = None
        self._raw_mv: memoryview | None = None
        self._backup: np.ndarray | None = None
        if held.flags.c_contiguous and len(held) == 1:
            start = held.dtype.fields[field][1]  # type: ignore[index]
            self._raw = held.view(np.uint8)[start : start + dt.itemsize]
            self._raw_mv = memoryview(self._raw.data)
            self._backup = np.empty(dt.itemsize, dtype=np.uint8)
        # keys -> [packed store or None, view or None, failures of each]
        self._plans: dict[tuple[str, ...], list[Any]] = {}
        # RawLayout -> its compiled store (None: the dict path)
        self._raw_stores: dict[RawLayout, Any] = {}

    def _plan(self, keys: tuple[str, ...]) -> list[Any]:
        """The fast stores for this key order: ``[packed, view, failures, failures]`` (None: not possible)."""
        dt = self._sub.dtype
        fields: Mapping[str, Any] = dt.fields or {}
        view = None
        if (
            self._raw is not None
            and keys
            and len(set(keys)) == len(keys)
            and all(k in fields and fields[k][0].base.names is None for k in keys)
        ):
            plan_dt = np.dtype(
                {
                    "names": list(keys),
                    "formats": [fields[k][0] for k in keys],
                    "offsets": [fields[k][1] for k in keys],
                    "itemsize": dt.itemsize,
                }
            )
            view = self._sub.view(plan_dt)
        packed = _PackedStore.compile(dt, keys) if view is not None and self._raw_mv is not None else None
        plan = [packed, view, 0, 0]
        if len(self._plans) < _MAX_PLANS:
            self._plans[keys] = plan
        return plan

    def apply(self, values: Mapping[str, object]) -> tuple[int, int]:
        """Store the values; return ``(unknown_channels, bad_values)`` (both 0 normally)."""
        if type(values) is RawValues:
            store = self._raw_stores.get(values.layout, _MISSING)
            if store is _MISSING:
                store = self._raw_store(values.layout)
            if store is not None:
                try:
                    if store(self._raw_mv, values.data, values.extra):
                        return 0, 0
                except Exception:  # a computed value the pack refuses: row untouched, the dict path
                    pass
            values = values.materialize()
        flat = self._flat
        if flat is not None and self._getter is not None and len(values) == len(self._flat_names):
            try:
                flat[:] = self._getter(values)
                return 0, 0
            except (KeyError, TypeError, ValueError, OverflowError):
                pass  # fall back to the per-channel path, which says what was wrong
        elif values:
            keys = tuple(values)
            plan = self._plans.get(keys) or self._plan(keys)
            packed = plan[0]
            if packed is not None:
                try:
                    packed.store(self._raw_mv, values)
                    if plan[2]:
                        plan[2] = 0  # failures count in a row: a rare odd value keeps the store
                    return 0, 0
                except Exception:  # stricter than numpy (or a hostile value): row untouched, try the view
                    plan[2] += 1
                    if plan[2] >= _MAX_PLAN_FAILURES:
                        plan[0] = None
            view = plan[1]
            if view is not None:
                raw = self._raw
                backup = self._backup
                backup[:] = raw  # type: ignore[index]
                try:
                    with np.errstate(over="ignore", invalid="ignore"):  # 1e300 into float32: inf
                        view[0] = tuple(values.values())
                    return 0, 0
                except Exception:  # a value that does not fit: restore, store channel by channel
                    raw[:] = backup  # type: ignore[index]
                    plan[3] += 1
                    if plan[3] >= _MAX_PLAN_FAILURES:
                        plan[1] = None
        with np.errstate(over="ignore", invalid="ignore"):
            return self._apply_each(values)

    def _raw_store(self, layout: RawLayout) -> Any:
        store = None
        if self._raw_mv is not None:
            store = _compile_raw(self._sub.dtype, layout)
        if len(self._raw_stores) < _MAX_RAW:
            self._raw_stores[layout] = store
        return store

    def _apply_each(self, values: Mapping[str, object]) -> tuple[int, int]:
        """The per-channel path: store what fits, count the rest."""
        unknown = bad = 0
        views = self._views
        scalar = self._scalar
        for name, value in values.items():
            view = views.get(name)
            if view is None:
                unknown += 1
                continue
            try:
                if scalar[name]:
                    view[0] = value
                else:
                    _store(view, value)
            except (KeyError, TypeError, ValueError, OverflowError):
                bad += 1
        return unknown, bad

    @property
    def casts_in_numpy(self) -> bool:
        """True when the common path stores through numpy (all-float sources): the caller
        silences numpy's overflow warnings around it; every other numpy store here does so itself."""
        return self._flat is not None

    def mark_stale(self, names: frozenset[str] | None = None) -> None:
        """Set float channels to NaN (all of them, or the ``names`` given)."""
        for name, view in self._float_views.items():
            if names is None or name in names:
                view[...] = _NAN

    @property
    def all_names(self) -> frozenset[str]:
        return self._all
