"""Helpers shared by the UDP game decoders: loading their WRTF definitions, text fields, layouts.

Kept private: the decoders' public face is their class and ``PROTOCOLS``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from wrtfd.errors import ConfigError

__all__ = [
    "SCHEMA_DIR",
    "TupleLayout",
    "check_channels",
    "cstr",
    "fit_utf8",
    "load_definition",
    "select_channels",
    "selected_definition",
    "utf16_str",
]

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"


@cache
def _load_cached(file_name: str) -> dict[str, Any]:
    with (SCHEMA_DIR / file_name).open(encoding="utf-8") as fh:
        loaded = yaml.safe_load(fh)
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


def utf16_str(raw: bytes) -> str:
    """A UTF-16LE string cut at the first U+0000 (garbage after it is common in AC)."""
    text = raw.decode("utf-16-le", errors="replace")
    end = text.find("\x00")
    return text if end < 0 else text[:end]


class TupleLayout:
    """Maps the flat tuple of one ``struct.unpack`` to channel values, fast.

    ``spec`` lists ``(name, count)`` in unpack order; ``name`` None skips the items (padding,
    fields not mapped). ``count`` > 1 makes an array channel (a tuple slice). ``reorder`` maps
    an array name to an index permutation (e.g. a game's RL,RR,FL,FR wheels to FL,FR,RL,RR).

    The mapping is compiled once into a function returning a dict display
    (``{"speed": t[3], "wheel_speed": t[8:12], ...}``), the fastest way CPython builds a dict;
    names are checked to be identifiers and inserted with ``repr``, so no text from outside
    the program reaches the compiled code.
    """

    __slots__ = ("_build", "names", "size", "width")

    def __init__(
        self,
        spec: Sequence[tuple[str | None, int]],
        *,
        base: int = 0,
        reorder: Mapping[str, Sequence[int]] | None = None,
    ) -> None:
        reorder = reorder or {}
        pos = base
        items: list[str] = []
        names: list[str] = []
        for name, count in spec:
            if name is not None:
                if not name.isidentifier():
                    raise ValueError(f"layout field {name!r} is not an identifier")
                names.append(name)
                if count == 1:
                    items.append(f"{name!r}: t[{pos}]")
                else:
                    perm = reorder.get(name)
                    if perm is None:
                        items.append(f"{name!r}: t[{pos}:{pos + count}]")
                    else:
                        if sorted(perm) != list(range(count)):
                            raise ValueError(f"layout field {name!r}: {perm} is not a permutation of {count}")
                        picked = ", ".join(f"t[{pos + i}]" for i in perm)
                        items.append(f"{name!r}: ({picked},)")
            pos += count
        self.width = pos - base
        self.size = len(names)
        self.names = tuple(names)
        source = "def build(t):\n    return {" + ", ".join(items) + "}\n"
        namespace: dict[str, Any] = {}
        exec(compile(source, "<TupleLayout>", "exec"), namespace)
        self._build: Callable[[Sequence[Any]], dict[str, Any]] = namespace["build"]

    def build(self, t: Sequence[Any]) -> dict[str, Any]:
        """A new dict of this layout's channels from the unpacked tuple ``t``."""
        return self._build(t)

    def into(self, out: dict[str, Any], t: Sequence[Any]) -> None:
        """Add this layout's channels from the unpacked tuple ``t`` to ``out``."""
        out.update(self._build(t))
