"""The team panel's board (pure parts): records held and bounded, ranked at the current track
like the leaderboard, this rig's driver found; malformed messages are skipped."""

from __future__ import annotations

import json
from typing import Any

import pytest

from wrtfd.fleet import team as team_mod
from wrtfd.fleet.leaderboard import leaderboard
from wrtfd.fleet.team import TeamBoard


def rec(rid: str, driver: str | None, time_s: float, **kw: Any) -> bytes:
    doc = {"id": rid, "rig": kw.pop("rig", "rig-1"), "driver": driver, "car": "GT3", "track": "Oval"}
    doc.update(time_s=time_s, sectors_s=[time_s / 2, time_s / 2], **kw)
    return json.dumps(doc).encode()


def test_rank_is_the_leaderboard_cut_to_the_rows_with_my_place() -> None:
    board = TeamBoard("b", rows=2, rig="rig-9", driver="cy")
    subjects = {}
    laps: list[tuple[str, float, dict[str, Any]]] = [
        ("Ada", 30.0, {}),
        ("Bob", 29.5, {}),
        ("Cy", 31.0, {}),
        ("Bob", 28.0, {"valid": False}),
        ("Dee", 20.0, {"track": "Ring"}),
    ]
    for i, (who, t, extra) in enumerate(laps):
        subjects[i] = f"$KV.b.rig-1.{i:024x}"
        board.add(subjects[i], rec(f"{i:024x}", who, t, **extra))
    board.add("$KV.b.x", b"not json")
    board.add("$KV.b.y", b"[1, 2]")
    board.track = "oval"
    board.rank()
    snap = board.snapshot()
    want = leaderboard(board.records.values(), track="oval")
    assert [(r["pos"], r["driver"], r["best_s"], r["gap_s"]) for r in snap["rows"]] == [
        (1, "Bob", 29.5, 0.0),
        (2, "Ada", 30.0, 0.5),
    ]
    assert [r.driver for r in want.rows][:2] == ["Bob", "Ada"] and snap["drivers"] == len(want.rows) == 3
    assert snap["me"] == {"pos": 3, "driver": "Cy", "best_s": 31.0, "gap_s": 1.5}
    assert snap["records"] == 5 and snap["track"] == "oval"
    board.add(subjects[2], b"", deleted=True)  # Cy's lap deleted from the bucket
    board.rank()
    assert board.snapshot()["me"] is None and board.snapshot()["drivers"] == 2


def test_records_held_are_bounded_oldest_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(team_mod, "MAX_TEAM_RECORDS", 3)
    board = TeamBoard("b", rows=5, rig="rig-1", driver=None)
    for i in range(5):
        board.add(f"s{i}", rec(f"{i:024x}", f"D{i}", 30.0 + i))
    assert list(board.records) == ["s2", "s3", "s4"] and board.dropped == 2
    board.track = "Oval"
    board.rank()
    assert [r["driver"] for r in board.snapshot()["rows"]] == ["D2", "D3", "D4"]
    assert board.snapshot()["driver"] == "(rig-1)"  # no driver: the rig's name, as the records say


def test_no_track_yet_gives_no_rows() -> None:
    board = TeamBoard("b", rows=5, rig="rig-1", driver="Ada")
    board.add("s", rec("0" * 24, "Ada", 30.0))
    board.rank()
    assert board.snapshot()["rows"] == [] and board.snapshot()["me"] is None


def test_names_from_the_bucket_are_cut_for_the_page() -> None:
    board = TeamBoard("b", rows=5, rig="rig-1", driver=None)
    board.add("s", rec("0" * 24, "A" * 5000, 30.0, car="C" * 5000))
    board.track = "Oval"
    board.rank()
    (row,) = board.snapshot()["rows"]
    assert row["driver"] == "A" * team_mod.MAX_NAME and row["car"] == "C" * team_mod.MAX_NAME
