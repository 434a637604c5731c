"""Helpers shared by the UDP game decoders: loading their WRTF definitions, text fields, layouts.

Kept private: the decoders' public face is their class (their descriptors are in wrtfd.protocols).
"""

from __future__ import annotations

import copy
import re
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache, lru_cache
from pathlib import Path
from types import CodeType
from typing import Any

import yaml

from wrtfd.decoders.base import RawField
from wrtfd.errors import ConfigError

__all__ = [
    "SCHEMA_DIR",
    "RecentTexts",
    "TupleLayout",
    "check_channels",
    "cstr",
    "fit_utf8",
    "item_offsets",
    "load_definition",
    "raw_fields",
    "select_channels",
    "selected_definition",
    "utf16_str",
]

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"
#: libyaml's safe loader when PyYAML has it (the same data, an eighth of the CPU: every process
#: that makes a decoder loads its definition), else the pure-Python one.
_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@lru_cache(maxsize=4096)
def _compiled(source: str) -> CodeType:
    """A layout's ``build`` compiled once per source text: a decoder makes dozens of layouts (F1:
    75), each decoder made the same ones, and compiling was ~40% of making an F1 decoder. A code
    object is immutable; each layout still executes it in a namespace of its own."""
    return compile(source, "<TupleLayout>", "exec")


@cache
def _load_cached(file_name: str) -> dict[str, Any]:
    with (SCHEMA_DIR / file_name).open(encoding="utf-8") as fh:
        loaded = yaml.load(fh, Loader=_YAML_LOADER)
    if not isinstance(loaded, dict):
        raise ConfigError(f"{SCHEMA_DIR / file_name}: not a WRTF definition")
    return loaded


def load_definition(file_name: str) -> dict[str, Any]:
    """A fresh copy of the packaged definition ``wrtfd/schemas/<file_name>``.

    A copy, because decoders with options (OutSim2 sections, channel selections, F1 car count)
    edit their own definition.
    """
    return copy.deepcopy(_load_cached(file_name))


def frame_fields(definition: Mapping[str, Any]) -> list[dict[str, Any]]:
    frame = definition.get("frame") or {}
    fields = frame.get("fields") or []
    return list(fields)


def check_channels(
    definition: Mapping[str, Any], channels: Iterable[str] | None, where: str
) -> tuple[str, ...]:
    """Validate a user's channel selection against the definition; returns it as a tuple."""
    if channels is None:
        return ()
    known = {f["name"] for f in frame_fields(definition)}
    chosen = tuple(channels)
    unknown = [c for c in chosen if c not in known]
    if unknown:
        raise ConfigError(
            f"{where}: unknown channel(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    if not chosen:
        raise ConfigError(f"{where}: the channel selection is empty")
    return chosen


def select_channels(definition: dict[str, Any], channels: Sequence[str]) -> dict[str, Any]:
    """Keep only ``channels`` (in the definition's order) in the frame of ``definition``."""
    keep = set(channels)
    definition["frame"]["fields"] = [f for f in frame_fields(definition) if f["name"] in keep]
    return definition


def selected_definition(
    file_name: str, channels: Sequence[str] | None, where: str
) -> tuple[dict[str, Any], frozenset[str] | None]:
    """A decoder's packaged definition cut to the user's ``channels`` (checked against it), and
    the set of channels to keep (None: all)."""
    definition = load_definition(file_name)
    chosen = check_channels(definition, channels, where)
    if not chosen:
        return definition, None
    return select_channels(definition, chosen), frozenset(chosen)


def fit_utf8(text: str, max_bytes: int) -> str:
    """``text`` cut (on a character boundary) so that its UTF-8 form fits ``max_bytes``: a text
    channel of N bytes must hold what the decoder returns, whatever bytes came in."""
    raw = text.encode("utf-8")
    if len(raw) <= max_bytes:
        return text
    return raw[:max_bytes].decode("utf-8", errors="ignore")


def cstr(raw: bytes) -> str:
    """A NUL-terminated 8-bit string (LFS: Latin-1 code page text), cut at the first NUL.

    The result fits ``len(raw)`` bytes of UTF-8 (the text channel it goes to).
    """
    size = len(raw)
    end = raw.find(b"\x00")
    if end >= 0:
        raw = raw[:end]
    if raw.isascii():
        return raw.decode("ascii")
    return fit_utf8(raw.decode("latin-1"), size)


class RecentTexts(dict[bytes, str]):
    """``texts[raw]`` is ``cstr(raw)``, remembered: a game sends the same names, compounds and
    categories packet after packet, and a hit is one dict lookup (no Python call). Bounded: it
    starts over when ``limit`` distinct texts have been seen (a hostile stream cannot grow it).
    """

    __slots__ = ("limit",)

    def __init__(self, limit: int = 64) -> None:
        super().__init__()
        self.limit = limit

    def __missing__(self, raw: bytes) -> str:
        if len(self) >= self.limit:
            self.clear()
        text = self[raw] = cstr(raw)
        return text


def utf16_str(raw: bytes) -> str:
    """A UTF-16LE string cut at the first U+0000 (garbage after it is common in AC)."""
    text = raw.decode("utf-16-le", errors="replace")
    end = text.find("\x00")
    return text if end < 0 else text[:end]


_ITEM = re.compile(r"(\d*)([xcbB?hHiIlLqQnNefdspP])")


def item_offsets(fmt: str) -> list[tuple[int, str]]:
    """(byte offset, code) of each item a little-endian, unaligned ``struct`` format yields
    (``4s`` is one item, pad bytes none)."""
    out: list[tuple[int, str]] = []
    at = 0
    for count_text, code in _ITEM.findall(fmt.lstrip("<")):
        count = int(count_text) if count_text else 1
        size = struct.calcsize("<" + code)
        if code == "x":
            at += count
        elif code in "sp":
            out.append((at, code))
            at += count
        else:
            out.extend((at + i * size, code) for i in range(count))
            at += count * size
    return out


def raw_fields(
    fmt: str,
    spec: Sequence[tuple[str | None, int]],
    *,
    base: int = 0,
    reorder: Mapping[str, Sequence[int]] | None = None,
    skip: Iterable[str] = (),
) -> tuple[RawField, ...] | None:
    """The :class:`RawField` of each named ``spec`` entry (as :class:`TupleLayout` maps the items
    of ``fmt`` unpacked at ``base``), leaving out ``skip``; None when a named entry is not a
    run of adjacent numbers of one type (text, mixed codes)."""
    items = item_offsets(fmt)
    reorder = reorder or {}
    left_out = set(skip)
    out: list[RawField] = []
    pos = 0
    for name, count in spec:
        run = items[pos : pos + count]
        pos += count
        if name is None or name in left_out:
            continue
        codes = {code for _, code in run}
        if len(run) != count or len(codes) != 1:
            return None
        code = codes.pop()
        size = struct.calcsize("<" + code)
        if code in "sp" or any(off != run[0][0] + i * size for i, (off, _) in enumerate(run)):
            return None
        perm = reorder.get(name)
        out.append(
            RawField(
                name, base + run[0][0], code, count, order=tuple(perm) if perm else None, array=count > 1
            )
        )
    return tuple(out)


class TupleLayout:
    """Maps the flat tuple of one ``struct.unpack`` to channel values, fast.

    ``spec`` lists ``(name, count)`` in unpack order; ``name`` None skips the items (padding,
    fields not mapped). ``count`` > 1 makes an array channel (a tuple). ``reorder`` maps an
    array name to an index permutation (e.g. a game's RL,RR,FL,FR wheels to FL,FR,RL,RR).

    The mapping is compiled once into a function, ``build(t)``, returning a new dict; names
    are checked to be identifiers and inserted with ``repr``, so no text from outside the
    program reaches the compiled code. Two forms:

    - default: a dict display (``{"speed": t[3], "wheel_speed": t[8:12], ...}``), for any
      tuple that holds the layout from ``base`` on.
    - ``extra`` given (a tuple of exactly this layout, base 0): ``t`` is unpacked into locals
      and stored into a copy of ``template``, a dict that already has every key, the layout's
      and then ``extra`` (None: the caller sets them after ``build``). A display grows its
      table as it goes; the copy is presized, so for wide layouts (60+ channels) this form is
      1.8-1.9 times faster, and the key order never changes (the recorder compiles one store
      per key order). ``build(t, other)`` copies ``other`` instead: a copy of ``template``
      with some extra keys already set. ``bench/bench_decoders.py`` measures it (GT7, PCARS).
    """

    __slots__ = ("build", "names", "size", "template", "width")

    def __init__(
        self,
        spec: Sequence[tuple[str | None, int]],
        *,
        base: int = 0,
        reorder: Mapping[str, Sequence[int]] | None = None,
        extra: Sequence[str] | None = None,
    ) -> None:
        reorder = reorder or {}
        presized = extra is not None
        if presized and base:
            raise ValueError("a presized layout (extra=...) starts at item 0")
        pos = base
        items: list[tuple[str, str]] = []
        names: list[str] = []
        used: set[int] = set()  # tuple positions read (the presized form unpacks the others to _)
        for name, count in spec:
            if name is not None:
                if not name.isidentifier():
                    raise ValueError(f"layout field {name!r} is not an identifier")
                names.append(name)
                perm = reorder.get(name)
                if perm is not None and sorted(perm) != list(range(count)):
                    raise ValueError(f"layout field {name!r}: {perm} is not a permutation of {count}")
                picked = [pos + i for i in (perm or range(count))]
                used.update(picked)
                if count == 1:
                    value = f"a{pos}" if presized else f"t[{pos}]"
                elif perm is None and not presized:
                    value = f"t[{pos}:{pos + count}]"
                else:
                    pattern = "a{}" if presized else "t[{}]"
                    value = "(" + ", ".join(pattern.format(i) for i in picked) + ",)"
                items.append((name, value))
            pos += count
        self.width = pos - base
        self.size = len(names)
        self.names = tuple(names)
        namespace: dict[str, Any] = {}
        #: The presized form's dict of every key (None values); empty for the display form.
        self.template: dict[str, Any] = {}
        if extra is None:
            source = "def build(t):\n    return {" + ", ".join(f"{n!r}: {v}" for n, v in items) + "}\n"
        else:
            for name in extra:
                if not name.isidentifier() or name in names:
                    raise ValueError(f"extra key {name!r} is not an identifier or is in the layout")
            targets = "".join(f"a{i}, " if i in used else "_, " for i in range(self.width))
            self.template = namespace["TEMPLATE"] = dict.fromkeys((*names, *extra))
            source = (
                f"def build(t, template=TEMPLATE):\n    ({targets}) = t\n    d = template.copy()\n"
                + "".join(f"    d[{n!r}] = {v}\n" for n, v in items)
                + "    return d\n"
            )
        exec(_compiled(source), namespace)
        #: ``build(t)``: a new dict of this layout's channels from the unpacked tuple ``t``.
        self.build: Callable[..., dict[str, Any]] = namespace["build"]

    def into(self, out: dict[str, Any], t: Sequence[Any]) -> None:
        """Add this layout's channels from the unpacked tuple ``t`` to ``out``."""
        out.update(self.build(t))
