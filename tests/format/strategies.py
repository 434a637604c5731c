"""Hypothesis strategies: random WRTF definitions and random-but-valid frame bytes."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from wrtfd.format import Schema
from wrtfd.format.schema import PRIMITIVES, FieldDef, covered_bytes, leaf_column

_NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True).filter(lambda s: s != "tick")


@st.composite
def definitions(draw: st.DrawFn) -> dict[str, Any]:
    """Definitions with nested structs, struct arrays, enums, bools, text and every primitive."""
    types: dict[str, Any] = {}
    n_enums = draw(st.integers(0, 2))
    for i in range(n_enums):
        values = draw(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=4, unique=True))
        types[f"enum{i}"] = {
            "type": "enum",
            "description": f"enum {i}",
            "values": [{"name": f"v{j}", "value": v, "description": "value"} for j, v in enumerate(values)],
        }
    available = list(PRIMITIVES) + list(types)

    def fields(min_size: int, max_size: int, allow: list[str]) -> list[dict[str, Any]]:
        names = draw(st.lists(_NAMES, min_size=min_size, max_size=max_size, unique=True))
        out = []
        for name in names:
            if draw(st.integers(0, 9)) == 0:
                out.append(
                    {
                        "name": name,
                        "type": "uint8",
                        "dimensions": draw(st.integers(1, 12)),
                        "description": "text",
                        "tags": ["text"],
                    }
                )
                continue
            out.append(
                {
                    "name": name,
                    "type": draw(st.sampled_from(allow)),
                    "dimensions": draw(st.sampled_from([0, 0, 0, 1, 2, 3])),
                    "description": f"{name} field",
                }
            )
        return out

    for i in range(draw(st.integers(0, 3))):
        # A struct may use the structs before it: nesting without cycles.
        types[f"s{i}"] = {"type": "struct", "description": f"struct {i}", "fields": fields(1, 4, available)}
        available.append(f"s{i}")
    d: dict[str, Any] = {
        "version": "1.0",
        "session": {
            "description": "session",
            "header": {"description": "h", "fields": fields(1, 4, available)},
        },
        "frame": {"description": "frame", "fields": fields(1, 6, available)},
        "types": types,
    }
    if draw(st.booleans()):
        d["session"]["footer"] = {"description": "f", "fields": fields(1, 3, available)}
    return d


def random_records(
    schema: Schema, dtype: np.dtype[Any], fields: tuple[FieldDef, ...], n: int, seed: int
) -> np.ndarray:
    """Random bytes shaped as records, made representable: zero padding, bools 0/1, one NaN."""
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, size=n * dtype.itemsize, dtype=np.uint8)
    raw.reshape(n, dtype.itemsize)[:, ~covered_bytes(dtype)] = 0
    arr = raw.view(dtype)
    for leaf in schema.leaves(fields):
        col = leaf_column(arr, leaf.path)
        if leaf.kind == "bool":
            col.view(np.uint8)[...] &= 1
        elif leaf.kind in ("float32", "float64"):
            col[np.isnan(col)] = np.nan
    return arr
