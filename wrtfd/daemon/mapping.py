"""Apply a source's ``mapping`` (include / rename) to its definition and to its samples.

Done once on the definition at start (errors name the config key), and per sample by a
precomputed function; a source without a mapping gets no per-sample work at all.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from wrtfd.daemon.config import ChannelMapping
from wrtfd.decoders.base import Sample
from wrtfd.errors import ConfigError

__all__ = ["SampleTransform", "apply_mapping"]

SampleTransform = Callable[[Sample], Sample]


def _fields_of(definition: dict[str, Any]) -> list[dict[str, Any]] | None:
    frame = definition.get("frame")
    if isinstance(frame, dict) and isinstance(frame.get("fields"), list):
        fields: list[dict[str, Any]] = frame["fields"]
        return fields
    for key in ("channels", "fields"):
        if isinstance(definition.get(key), list):
            alt: list[dict[str, Any]] = definition[key]
            return alt
    return None


def apply_mapping(
    definition: Mapping[str, Any], mapping: ChannelMapping, where: str
) -> tuple[dict[str, Any], SampleTransform | None]:
    """The mapped definition and the per-sample transform (None when the mapping is empty).

    ``where`` is the config key path prefix for errors (``FILE: sources[0].mapping``).
    """
    out = copy.deepcopy(dict(definition))
    if mapping.include is None and not mapping.rename:
        return out, None
    fields = _fields_of(out)
    if fields is None:
        raise ConfigError(f"{where}: the protocol's definition has no frame fields to map")
    names = [str(f.get("name")) for f in fields]
    known = set(names)
    listed = ", ".join(names[:20]) + (f", ... ({len(names)} in all)" if len(names) > 20 else "")
    for name in mapping.include or ():
        if name not in known:
            raise ConfigError(f"{where}.include: no field {name!r}; fields are: {listed}")
    for name in mapping.rename:
        if name not in known:
            raise ConfigError(f"{where}.rename: no field {name!r}; fields are: {listed}")
    keep = set(mapping.include) if mapping.include is not None else known
    rename = dict(mapping.rename)
    final = [rename.get(n, n) for n in names if n in keep]
    if len(set(final)) != len(final):
        raise ConfigError(f"{where}.rename: two channels would share a name")
    if not final:
        raise ConfigError(f"{where}.include: keeps no field")
    fields[:] = [dict(f, name=rename.get(str(f["name"]), f["name"])) for f in fields if f.get("name") in keep]

    def transform(sample: Sample) -> Sample:
        values = {rename.get(k, k): v for k, v in sample.values.items() if k in keep}
        stale = (
            frozenset(rename.get(k, k) for k in sample.stale if k in keep) if sample.stale else sample.stale
        )
        return dataclasses.replace(sample, values=values, stale=stale)

    return out, transform
