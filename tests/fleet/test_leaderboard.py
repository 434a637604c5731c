"""The team's leaderboard from lap records: best per driver, gaps, theoretical bests, filters,
and records that are not laps (untrusted: any client writes the bucket)."""

from __future__ import annotations

from typing import Any

import pytest

from wrtfd.fleet.leaderboard import leaderboard


def rec(driver: str | None, time_s: Any, sectors: Any, **kw: Any) -> dict[str, Any]:
    return {
        "rig": kw.pop("rig", "rig-1"),
        "driver": driver,
        "track": "Oval",
        "car": "GT3",
        "time_s": time_s,
        "sectors_s": sectors,
        **kw,
    }


def test_best_per_driver_gaps_and_theoretical_bests() -> None:
    records = [
        rec("Ada", 30.5, [10.0, 10.2, 10.3]),
        rec("Ada", 30.1, [10.1, 9.9, 10.1]),  # Ada's best; her best sectors 10.0 + 9.9 + 10.1
        rec("Bob", 29.8, [9.8, 10.0, 10.0]),
        rec("Bob", 29.0, [9.0, 9.0, 9.0], valid=False),  # invalid: never counts
        rec(None, 31.0, [10.0, 10.0, 11.0], rig="rig-7"),  # no driver: the rig's name
        rec("Cy", 28.0, [9.0, 9.0, 10.0], car="LMP2"),  # another car
        rec("Dee", 27.0, [9.0, 9.0, 9.0], track="Ring"),  # another track
    ]
    board = leaderboard(records, track="oval", car="gt3")
    assert [(r.driver, r.best_s, r.laps) for r in board.rows] == [
        ("Bob", 29.8, 1),
        ("Ada", 30.1, 2),
        ("(rig-7)", 31.0, 1),
    ]
    assert [round(r.gap_s, 6) for r in board.rows] == [0.0, 0.3, 1.2]
    assert board.rows[1].theoretical_s == pytest.approx(30.0)
    assert board.rows[1].best["sectors_s"] == [10.1, 9.9, 10.1]
    assert board.theoretical_s == pytest.approx(9.8 + 9.9 + 10.0)  # Bob S1, Ada S2, Bob/rig-7 S3
    assert [r.driver for r in leaderboard(records, track="Oval", driver="ada").rows] == ["Ada"]
    assert leaderboard(records, track="Oval").rows[0].driver == "Cy"
    assert board.invalid == 1


def test_pit_laps_never_count() -> None:
    """An in-lap or out-lap (GNSS laps on a circuit with pit lines) is never on the board, even
    a faster one (a pit lane that cuts a corner), nor in the theoretical best."""
    records = [
        rec("Ada", 30.0, [10.0, 10.0, 10.0]),
        rec("Ada", 28.0, [9.0, 9.0, 10.0], pit="in"),
        rec("Bob", 27.0, [9.0, 9.0, 9.0], pit="out"),
        rec("Bob", 29.5, [9.5, 10.0, 10.0], pit=None),
    ]
    for board in (
        leaderboard(records, track="Oval"),
        leaderboard(records, track="Oval", include_invalid=True),
    ):
        assert [(r.driver, r.best_s, r.laps) for r in board.rows] == [("Bob", 29.5, 1), ("Ada", 30.0, 1)]
        assert board.theoretical_s == pytest.approx(29.5)
        assert board.pit == 2 and board.invalid == 0


def test_invalid_laps_count_only_when_asked() -> None:
    records = [
        rec("Ada", 30.0, [10.0, 10.0, 10.0]),
        rec("Bob", 29.0, [9.0, 10.0, 10.0], valid=False),
        rec("Bob", 31.0, [10.0, 11.0, 10.0], valid=None),  # the source said nothing: counts
    ]
    board = leaderboard(records, track="Oval")
    assert [(r.driver, r.best_s, r.laps) for r in board.rows] == [("Ada", 30.0, 1), ("Bob", 31.0, 1)]
    assert board.invalid == 1
    board = leaderboard(records, track="Oval", include_invalid=True)
    assert [(r.driver, r.best_s, r.laps) for r in board.rows] == [("Bob", 29.0, 2), ("Ada", 30.0, 1)]
    assert board.invalid == 0 and board.theoretical_s == pytest.approx(29.0)


def test_records_that_are_not_laps_are_skipped_and_counted() -> None:
    bad = [
        rec("A", "30", [1.0]),
        rec("A", -1.0, [1.0]),
        rec("A", float("nan"), []),
        rec("A", True, []),
        rec("A", 30.0, ["x"]),
        rec("A", 30.0, None),
    ]
    board = leaderboard([*bad, rec("B", 40.0, [])], track="Oval")
    assert board.skipped == len(bad)
    assert [(r.driver, r.theoretical_s) for r in board.rows] == [("B", None)]
    assert board.theoretical_s is None


def test_laps_command_usage_errors_are_one_line_exit_2() -> None:
    import subprocess
    import sys

    for args, said in (
        ([], "give a WRTF FILE"),
        (["--fleet"], "--fleet needs --track"),
        (["x.wrtf", "--fleet", "--track", "Oval"], "give no FILE"),
    ):
        out = subprocess.run([sys.executable, "-m", "wrtfd", "laps", *args], capture_output=True, text=True)
        assert out.returncode == 2 and said in out.stderr, (args, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
