"""Each validator rule is triggered by its own broken file (mini.trk with one mistake)."""

from __future__ import annotations

from pathlib import Path

import pytest

from wrtfd.tracks import RULES, load_track, validate_track

DATA = Path(__file__).resolve().parent / "data"

# rule -> (expected set of rules found, expected paths)
EXPECTED: dict[str, tuple[set[str], set[str]]] = {
    "count-mismatch": ({"count-mismatch"}, {"num-vertices"}),
    "index-range": ({"index-range"}, {"lanes[0].segments[1].center"}),
    "sector-too-small": ({"sector-too-small"}, {"sectors[4].edges"}),
    "sector-not-ccw": ({"sector-not-ccw"}, {"sectors[4].edges"}),
    "sector-not-convex": ({"sector-not-convex"}, {"sectors[4].edges[3]"}),
    # the neighbor also loses its back-reference
    "neighbor-missing": (
        {"neighbor-missing", "neighbor-mismatch"},
        {"sectors[0].edges[1]", "sectors[1].edges[3]"},
    ),
    "wall-neighbor": ({"wall-neighbor"}, {"sectors[0].edges[0]"}),
    "neighbor-mismatch": ({"neighbor-mismatch"}, {"sectors[0].edges[1]", "sectors[1].edges[3]"}),
    "lane-empty": ({"lane-empty"}, {"lanes[1].segments"}),
    "lane-not-closed": (
        {"lane-not-closed"},
        {"lanes[0].segments[0].start", "lanes[0].segments[3].start", "lanes[0].segments[4].start"},
    ),
    "line-length": ({"line-length"}, {"lanes[0].segments[0].length"}),
    "arc-radius": ({"arc-radius"}, {"lanes[0].segments[1].center"}),
    "arc-length": ({"arc-length"}, {"lanes[0].segments[1].length"}),
    "arc-endpoint": ({"arc-endpoint"}, {"lanes[0].segments[1].angle"}),
}


def test_every_rule_has_a_broken_file() -> None:
    assert set(EXPECTED) == set(RULES)
    for rule in RULES:
        assert (DATA / "broken" / f"{rule}.trk").is_file()


def test_good_file_has_no_findings() -> None:
    assert validate_track(load_track(DATA / "mini.trk")) == []


@pytest.mark.parametrize("rule", sorted(EXPECTED))
def test_broken_file_triggers_its_rule(rule: str) -> None:
    findings = validate_track(load_track(DATA / "broken" / f"{rule}.trk"))
    rules, paths = EXPECTED[rule]
    assert {f.rule for f in findings} == rules
    assert {f.path for f in findings} == paths
    for f in findings:
        assert str(f).startswith(f"{f.path}: ") and str(f).endswith(f"[{f.rule}]")


def test_messages_carry_the_numbers() -> None:
    f = validate_track(load_track(DATA / "broken" / "line-length.trk"))[0]
    assert "31" in f.message and "30.0000" in f.message
    f = validate_track(load_track(DATA / "broken" / "arc-length.trk"))[0]
    assert "15.7080" in f.message


def test_tolerance_is_configurable() -> None:
    t = load_track(DATA / "broken" / "line-length.trk")  # 1 m off
    assert validate_track(t, abs_tol_m=1.5) == []
