"""The docs say what the code does: the numbers they quote are the code's defaults, the reading
notes they cite exist, and the files they point at are there.

Quoting a default: write the key or constant in backticks, then its value in parentheses,
``jitter_s`` (100 ms), or give it a row of a table, | ``session_idle_s`` | 30 | (seconds, bytes and
counts in the config's own units). Every such quote of a name known to :func:`code_defaults` is
checked; to cover a new default, document it that way and, if it is neither a config key nor a
constant of :mod:`wrtfd.defaults`, add it to :data:`EXTRA_DEFAULTS`.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from pathlib import Path

import pytest
from pydantic import BaseModel

import wrtfd.defaults
from wrtfd.daemon import config as config_models

REPO = Path(__file__).resolve().parent.parent
DOCS = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md", REPO / "CONTRIBUTING.md"]

#: Defaults that live elsewhere than the config models and wrtfd.defaults: name -> value.
EXTRA_DEFAULTS: dict[str, float] = {}

_UNITS = {None: 1.0, "s": 1.0, "ms": 1e-3, "B": 1.0, "KiB": 1024.0, "MiB": 1024.0**2, "Hz": 1.0}
_NUMBER = r"(?P<num>-?\d+(?:\.\d+)?)(?: ?(?P<unit>ms|s|B|KiB|MiB|Hz)\b)?"
_QUOTES = (
    re.compile(r"`(?P<name>[A-Za-z_][A-Za-z0-9_]*)`\s+\(" + _NUMBER + r"(?=[);,:\s])"),
    re.compile(r"\| `(?P<name>[A-Za-z_][A-Za-z0-9_]*)` \| " + _NUMBER + r" \|"),
)


def _model_defaults() -> dict[str, set[float]]:
    """Every numeric default of the daemon's config models, by key (a key may be in several)."""
    found: dict[str, set[float]] = defaultdict(set)
    for obj in vars(config_models).values():
        if not (isinstance(obj, type) and issubclass(obj, BaseModel)):
            continue
        for name, info in obj.model_fields.items():
            value = info.default
            if isinstance(value, int | float) and not isinstance(value, bool):
                found[info.alias or name].add(float(value))
    return found


def code_defaults() -> dict[str, set[float]]:
    """Name -> the values the code gives it (config keys, wrtfd.defaults constants, extras)."""
    found = _model_defaults()
    for name in wrtfd.defaults.__all__:
        found[name].add(float(getattr(wrtfd.defaults, name)))
    for name, value in EXTRA_DEFAULTS.items():
        found[name].add(float(value))
    # The scheduler's keys, under the names the docs use.
    found["jitter_s"].add(wrtfd.defaults.TICK_JITTER_S)
    found["bunch_s"].add(wrtfd.defaults.ARRIVAL_BUNCH_S)
    return found


def documented_defaults() -> list[tuple[str, str, float, str]]:
    """(doc, name, value in the code's units, quoted text) for every quote of a known name."""
    known = code_defaults()
    out = []
    for doc in DOCS:
        if not doc.is_file():
            continue
        text = doc.read_text(encoding="utf-8")
        for pattern in _QUOTES:
            for m in pattern.finditer(text):
                if m["name"] in known:
                    value = float(m["num"]) * _UNITS[m["unit"]]
                    out.append((doc.name, m["name"], value, m.group(0)))
    return out


def test_the_parser_reads_both_forms() -> None:
    text = "a `jitter_s` (100 ms) and | `rcvbuf_bytes` | 2 MiB | and `x` (3 s)"
    got = [(m["name"], m["num"], m["unit"]) for p in _QUOTES for m in p.finditer(text)]
    assert got == [("jitter_s", "100", "ms"), ("x", "3", "s"), ("rcvbuf_bytes", "2", "MiB")]


def test_the_docs_quote_the_main_defaults() -> None:
    quoted = {name for _, name, _, _ in documented_defaults()}
    assert {
        "jitter_s",
        "bunch_s",
        "CLOCK_OFFSET_STEP_S",
        "CLOCK_DRIFT_WINDOW_S",
        "read_interval_s",
        "engine_tick_s",
        "session_idle_s",
    } <= quoted


@pytest.mark.parametrize(
    ("doc", "name", "value", "quote"),
    documented_defaults(),
    ids=lambda v: str(v) if isinstance(v, str) else "",
)
def test_documented_default_equals_the_code(doc: str, name: str, value: float, quote: str) -> None:
    values = code_defaults()[name]
    assert any(math.isclose(value, v, rel_tol=1e-9) for v in values), (
        f"{doc}: {quote!r} but the code's default of {name} is {sorted(values)}"
    )


NOTE = re.compile(r"\bN(1[0-2]|[1-9])\b")


def test_every_cited_reading_note_is_in_docs() -> None:
    notes = (REPO / "docs" / "wrtf-notes.md").read_text(encoding="utf-8")
    defined = {int(n) for n in re.findall(r"^## N(\d+) ", notes, flags=re.M)}
    assert defined == set(range(1, 13))
    cited: set[int] = set()
    for tree in ("wrtfd", "tests"):
        for path in (REPO / tree).rglob("*.py"):
            cited |= {int(n) for n in NOTE.findall(path.read_text(encoding="utf-8"))}
    assert cited and cited <= defined


def test_docs_that_the_code_points_at_exist() -> None:
    pointer = re.compile(r"\bdocs/([\w.-]+\.md)\b")
    missing = set()
    for tree in ("wrtfd", "tests"):
        for path in (REPO / tree).rglob("*.py"):
            for name in pointer.findall(path.read_text(encoding="utf-8")):
                if not (REPO / "docs" / name).is_file():
                    missing.add(f"{path.relative_to(REPO)} -> docs/{name}")
    assert missing == set()
