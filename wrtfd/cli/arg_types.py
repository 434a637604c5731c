"""argparse types for the numbers commands take: ``nan``, ``inf`` and values out of range are
one error line (argparse's), not a traceback later or a run that never ends."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["SECONDS", "number"]


def number(low: float, high: float, *, above: bool = False) -> Callable[[str], float]:
    """A float from ``low`` (or above it, with ``above``) to ``high``."""
    bound = f"more than {low:g}" if above else f"from {low:g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not (math.isfinite(value) and (value > low if above else value >= low) and value <= high):
            raise argparse.ArgumentTypeError(f"{text} is not {bound} to {high:g}")
        return value

    parse.__name__ = "number"
    return parse


#: Seconds to wait for something (more than 0, at most a day).
SECONDS = number(0.0, 86400.0, above=True)
