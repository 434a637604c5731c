"""The golden corpus: every committed file is still the same bytes, and reads as its .json says.

The files and their expectations are written once by ``make_golden.py`` (beside this file) and
committed; a change to the reader that reads any of them differently fails here. The reading
is the generator's own :func:`expectations` (one definition of what is compared); the values
compared are the committed ones.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.golden.make_golden import expectations

HERE = Path(__file__).resolve().parent
EXPECTED = sorted(HERE.glob("*.json"))


def test_every_file_has_its_expectations() -> None:
    assert len(EXPECTED) >= 5
    assert {p.stem for p in HERE.glob("*.wrtf")} == {p.stem for p in EXPECTED}


def _same(got: Any, want: Any) -> bool:
    """JSON equality where NaN equals NaN (dump writes non-finite floats as strings anyway)."""
    if isinstance(got, float) and isinstance(want, float):
        return got == want or (math.isnan(got) and math.isnan(want))
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(_same(got[k], want[k]) for k in got)
    if isinstance(got, list) and isinstance(want, list):
        return len(got) == len(want) and all(_same(a, b) for a, b in zip(got, want, strict=True))
    return type(got) is type(want) and bool(got == want)


@pytest.mark.parametrize("expected_path", EXPECTED, ids=lambda p: p.stem)
def test_golden_file_reads_as_expected(expected_path: Path) -> None:
    want = json.loads(expected_path.read_text(encoding="utf-8"))
    path = HERE / want["file"]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == want["sha256"], f"{path.name} changed"
    got = expectations(path, want["definition"])  # what today's reader reads, in the same shape
    assert got.keys() == want.keys()
    for key in got.keys() - {"dump"}:
        assert got[key] == want[key], key
    assert len(got["dump"]) == len(want["dump"])
    for i, (line, expected) in enumerate(zip(got["dump"], want["dump"], strict=True)):
        assert _same(line, expected), f"dump line {i}: {line} != {expected}"


def test_the_corpus_covers_every_feature() -> None:
    """What the corpus is for: each feature is in at least one file."""
    cases = [json.loads(p.read_text(encoding="utf-8")) for p in EXPECTED]
    sessions = [s for c in cases for s in c["sessions"]]
    assert {s["footer_order"] for s in sessions} >= {"spec", "reference", None}
    assert any(s["dropped_ticks"] > 0 for s in sessions)
    assert any(s["torn_bytes"] > 0 for s in sessions)
    assert any(s["frame_count"] == 0 for s in sessions)
    assert any(not c["complete"] for c in cases)
    assert any(c["definition"] for c in cases)
    assert any(len(c["sessions"]) >= 3 for c in cases)
    frames = [line["data"] for c in cases for line in c["dump"] if line["kind"] == "frame"]
    car = [f for f in frames if "wheels" in f]
    assert {"nan", "inf", "-inf"} <= {f["speed_mps"] for f in car if isinstance(f["speed_mps"], str)}
    assert any(f["state"] == "finished" for f in car) and any(f["state"] == 7 for f in car)  # named, unnamed
    assert any(f["driver"] == "鈴鹿 R" for f in car)  # UTF-8 text
    assert all(len(f["wheels"]) == 4 and "slip" in f["wheels"][0] for f in car)  # arrays of nested structs
