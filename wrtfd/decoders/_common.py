"""Helpers shared by the UDP game decoders: loading their WRTF definitions, text fields, layouts.

Kept private: the decoders' public face is their class and ``PROTOCOLS``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from operator import itemgetter
from pathlib import Path
from typing import Any

import yaml

from wrtfd.errors import ConfigError

__all__ = [
    "SCHEMA_DIR",
    "TupleLayout",
    "check_channels",
    "cstr",
    "load_definition",
    "select_channels",
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


def cstr(raw: bytes) -> str:
    """A NUL-terminated 8-bit string (LFS: Latin-1 code page text), cut at the first NUL."""
    end = raw.find(b"\x00")
    if end >= 0:
        raw = raw[:end]
    return raw.decode("latin-1")


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
    """

    __slots__ = ("_arrays", "_names", "_scalars", "size", "width")

    def __init__(
        self,
        spec: Sequence[tuple[str | None, int]],
        *,
        base: int = 0,
        reorder: Mapping[str, Sequence[int]] | None = None,
    ) -> None:
        reorder = reorder or {}
        pos = base
        scalar_names: list[str] = []
        scalar_pos: list[int] = []
        arrays: list[tuple[str, int, int, Callable[[Sequence[Any]], tuple[Any, ...]] | None]] = []
        for name, count in spec:
            if name is not None:
                if count == 1:
                    scalar_names.append(name)
                    scalar_pos.append(pos)
                else:
                    perm = reorder.get(name)
                    getter = itemgetter(*perm) if perm is not None else None
                    arrays.append((name, pos, pos + count, getter))
            pos += count
        self.width = pos - base
        self.size = len(scalar_names) + len(arrays)
        self._names = tuple(scalar_names)
        if len(scalar_pos) == 1:
            only = scalar_pos[0]
            self._scalars: Callable[[Sequence[Any]], tuple[Any, ...]] = lambda t: (t[only],)
        elif scalar_pos:
            self._scalars = itemgetter(*scalar_pos)
        else:
            self._scalars = lambda t: ()
        self._arrays = tuple(arrays)

    @property
    def names(self) -> tuple[str, ...]:
        return self._names + tuple(a[0] for a in self._arrays)

    def into(self, out: dict[str, Any], t: Sequence[Any]) -> None:
        """Add this layout's channels from the unpacked tuple ``t`` to ``out``."""
        out.update(zip(self._names, self._scalars(t), strict=True))
        for name, start, stop, getter in self._arrays:
            chunk = t[start:stop]
            out[name] = getter(chunk) if getter is not None else chunk
