"""Reading what other rigs wrote: NATS messages, bucket records, and local files anyone may damage.

One rule for every reader: bad input raises :class:`ValueError` (so one ``except`` catches it)
or gives None, never another exception. ``json.loads`` alone breaks it twice: nesting deeper than
the interpreter's recursion limit raises ``RecursionError``, and a number of 400 digits is a
valid ``int`` that ``float()`` and ``math.isfinite`` answer with ``OverflowError``.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["loads", "number"]


def _finite(text: str) -> float | None:
    value = float(text)
    return value if math.isfinite(value) else None


def _no_constant(name: str) -> None:
    return None


def loads(data: bytes | str) -> Any:
    """``json.loads``, with :class:`ValueError` for everything that is not a JSON document
    (nesting too deep included). ``NaN``, ``Infinity`` (Python's extensions of JSON) and
    numbers too large for a float (``1e400``) read as None: what is read can be written as
    strict JSON again."""
    try:
        return json.loads(data, parse_float=_finite, parse_constant=_no_constant)
    except RecursionError as exc:
        raise ValueError("JSON nested too deep") from exc


def number(value: object, low: float = -math.inf, high: float = math.inf) -> float | None:
    """``value`` as a float if it is a JSON number (not a bool), finite, and from ``low`` to
    ``high``; None otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        f = float(value)
    except OverflowError:
        return None
    return f if math.isfinite(f) and low <= f <= high else None
