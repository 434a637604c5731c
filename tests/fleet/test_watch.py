"""The pit wall's view: status, layouts, frames and lap events become rows; junk is counted."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.fleet.conftest import forza_frames, forza_schema
from wrtfd.fleet.encoding import encode_frames, encode_layout, layout_of
from wrtfd.fleet.watch import MAX_RIGS, FleetView


@pytest.fixture(scope="module")
def schema(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return forza_schema(tmp_path_factory.mktemp("schema"))


def _status(rig: str, *, in_session: bool = True, state: str = "recording", **extra: object) -> bytes:
    doc = {
        "v": 1,
        "rig": rig,
        "state": state,
        "status_interval_s": 2.0,
        "groups": {
            "main": {
                "in_session": in_session,
                "laps": {"lap_count": 3, "best_lap_ms": 61_234, "last_lap_ms": 62_000},
            }
        },
        "fleet": {
            "state": "connected",
            "uploads": {"queued": 2, "queued_bytes": 2048},
            "live": {"dropped_total": 5},
        },
        **extra,
    }
    return json.dumps(doc).encode()


def test_rows_combine_status_and_the_latest_frame(schema) -> None:  # type: ignore[no-untyped-def]
    view = FleetView()
    layout = layout_of(schema, 60)
    view.feed("wrtfd.rig-1.status", _status("rig-1"), 100.0)
    view.feed("wrtfd.rig-1.main.layout", encode_layout(layout, rig="rig-1", group="main"), 100.0)
    frames, times = forza_frames(schema, 5)
    frames["forza"]["speed"] = 50.0  # m/s
    frames["forza"]["lap_number"] = 4
    frames["forza"]["gear"][-1] = 5
    for payload in encode_frames(layout.layout_id, frames, times):
        assert not view.needs_layout("wrtfd.rig-1.main.frames", payload)
        view.feed("wrtfd.rig-1.main.frames", payload, 100.5)
    (row,) = view.rows(101.0)
    assert (row.rig, row.group, row.state) == ("rig-1", "main", "recording")
    assert row.speed_kmh == pytest.approx(180.0)
    assert (row.gear, row.lap) == (5, 4)
    assert (row.best_lap_ms, row.last_lap_ms) == (61_234, 62_000)
    assert (row.uploads_queued, row.uploads_bytes, row.live_dropped, row.link) == (2, 2048, 5, "connected")
    # a lap event is fresher than the last status
    view.feed(
        "wrtfd.rig-1.events",
        json.dumps({"type": "lap", "group": "main", "lap": 4, "lap_ms": 60_500}).encode(),
        101.0,
    )
    assert view.rows(101.0)[0].last_lap_ms == 60_500


def test_a_silent_or_stopped_rig_is_offline(schema) -> None:  # type: ignore[no-untyped-def]
    view = FleetView()
    view.feed("wrtfd.a.status", _status("a"), 0.0)
    view.feed("wrtfd.b.status", _status("b", state="stopped"), 10.0)
    view.feed("wrtfd.c.status", _status("c", in_session=False), 10.0)
    rows = {r.rig: r for r in view.rows(10.0)}
    assert rows["a"].state == "offline"  # 10 s > 3 intervals of 2 s
    assert rows["b"].state == "offline"
    assert rows["c"].state == "idle"
    view.age_status("c", 30.0, 10.0)  # read from the stream: 30 s old
    assert {r.rig: r for r in view.rows(10.0)}["c"].state == "offline"


def test_junk_is_counted_and_dropped(schema) -> None:  # type: ignore[no-untyped-def]
    view = FleetView()
    layout = layout_of(schema, 60)
    frames, times = forza_frames(schema, 2)
    (payload,) = list(encode_frames(layout.layout_id, frames, times))
    assert view.needs_layout("wrtfd.r.main.frames", payload)
    view.feed("wrtfd.r.main.frames", payload, 0.0)  # no layout yet
    view.feed("wrtfd.r.status", b"{not json", 0.0)
    view.feed("wrtfd.r.status", json.dumps({"rig": "someone-else"}).encode(), 0.0)
    view.feed("wrtfd.r.main.layout", b"[]", 0.0)
    view.feed("wrtfd.r.main.layout", encode_layout(layout, rig="r", group="main"), 0.0)
    view.feed("wrtfd.r.main.frames", b"WLF1" + b"\x00" * 40, 0.0)
    view.feed("other.subject", b"", 0.0)
    assert view.dropped == {
        "no_layout": 1,
        "status_not_json": 1,
        "status_not_a_status": 1,
        "bad_layout": 1,
        "layout_mismatch": 1,
        "unknown_subject": 1,
    }


def test_the_view_is_bounded_in_rigs() -> None:
    view = FleetView()
    for i in range(MAX_RIGS + 10):
        view.feed(f"wrtfd.rig{i}.status", _status(f"rig{i}"), 0.0)
    assert len(view.rigs) == MAX_RIGS
    assert view.dropped["rig_evicted"] == 10


def test_game_lap_channels_fill_in_without_lap_channels(schema) -> None:  # type: ignore[no-untyped-def]
    view = FleetView()
    layout = layout_of(schema, 60)
    doc = json.loads(_status("r"))
    doc["groups"]["main"]["laps"] = None
    view.feed("wrtfd.r.status", json.dumps(doc).encode(), 0.0)
    view.feed("wrtfd.r.main.layout", encode_layout(layout, rig="r", group="main"), 0.0)
    frames, times = forza_frames(schema, 1)
    frames["forza"]["last_lap"] = 71.5
    frames["forza"]["best_lap"] = np.float32(70.25)
    for payload in encode_frames(layout.layout_id, frames, times):
        view.feed("wrtfd.r.main.frames", payload, 0.0)
    (row,) = view.rows(0.5)
    assert (row.last_lap_ms, row.best_lap_ms) == (71_500, 70_250)


def test_rendering_reads_every_value_defensively(schema, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from rich.console import Console

    from wrtfd.daemon.fleet_view import render_fleet_status, render_watch

    view = FleetView()
    view.feed("wrtfd.r.status", _status("r"), 0.0)
    view.feed(
        "wrtfd.odd.status",
        json.dumps({"rig": "odd", "groups": [], "fleet": "x", "problems": 3}).encode(),
        0.0,
    )
    console = Console(width=200, record=True, file=open(tmp_path / "out", "w"))  # noqa: SIM115
    console.print(render_watch(view.rows(1.0)))
    text = console.export_text()
    assert "r  " in text and "recording" in text and "1:01.234" in text and "2 queued (2.0 KiB)" in text
    rigs = {"r": (json.loads(_status("r")), 1.0), "odd": ({"fleet": [], "groups": 1}, None)}
    console.print(render_fleet_status(rigs, url="nats://x:4222"))
    text = console.export_text()
    assert "odd" in text and "offline" in text and "2 rig(s)" in text


def _rendered(renderable: object, tmp_path: Path) -> str:
    from rich.console import Console

    with open(tmp_path / "rendered", "w") as out:
        console = Console(width=250, record=True, file=out)
        console.print(renderable)
        return console.export_text()


def test_hostile_statuses_are_dropped_or_shown_as_dashes(tmp_path: Path) -> None:
    """Found against a real server: one such status (kept in WRTFD_STATE) killed ``watch`` and
    ``fleet status`` for as long as it stayed there."""
    from wrtfd.daemon.fleet_view import render_fleet_status, render_watch

    view = FleetView()
    view.feed("wrtfd.rig-1.status", _status("rig-1"), 0.0)
    view.feed("wrtfd.deep.status", b'{"rig": "deep", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}", 0.0)
    huge = json.loads(_status("huge"))
    huge["fleet"]["uploads"] = {"queued": 10**400, "queued_bytes": 10**400, "done": 10**400}
    huge["fleet"]["live"] = {"dropped_total": 10**400}
    huge["status_interval_s"] = 10**400
    huge["groups"]["main"]["laps"] = {"best_lap_ms": 10**400, "last_lap_ms": 10**400}
    view.feed("wrtfd.huge.status", json.dumps(huge).encode(), 0.0)
    assert view.dropped == {"status_not_json": 1}
    rows = {r.rig: r for r in view.rows(1.0)}
    assert set(rows) == {"rig-1", "huge"}
    assert rows["huge"].state == "recording"  # the default interval, not 10**400 s
    assert (rows["huge"].uploads_queued, rows["huge"].uploads_bytes, rows["huge"].best_lap_ms) == (None,) * 3
    text = _rendered(render_watch(view.rows(1.0)), tmp_path)
    assert "2 queued (2.0 KiB)" in text and "huge" in text
    rigs = {"rig-1": (json.loads(_status("rig-1")), 1.0), "huge": (huge, 1.0)}
    text = _rendered(render_fleet_status(rigs, url="nats://x:4222"), tmp_path)
    (line,) = [x for x in text.splitlines() if x.startswith("huge")]
    assert line.split()[1:4] == ["recording", "main", "-"], line  # queued: a dash, not 400 digits


def test_a_lap_channel_of_1e308_is_no_lap(tmp_path: Path) -> None:
    """``round(1e308 * 1000)`` raised OverflowError at every render while the frame was fresh."""
    from wrtfd.daemon.fleet_view import render_watch
    from wrtfd.fleet.encoding import FRAMES_HEAD, Layout, LayoutField

    view = FleetView()
    fields = (LayoutField("tick", 0, "<u8"), LayoutField("game.last_lap", 8, "<f8", (), "s"))
    layout = Layout(12345, 10.0, 16, fields)
    view.feed("wrtfd.evil.status", _status("evil"), 0.0)
    view.feed("wrtfd.evil.main.layout", encode_layout(layout, rig="evil", group="main"), 0.0)
    frame = FRAMES_HEAD.pack(b"WLF1", 12345, 1, 16) + (0).to_bytes(8, "little") + (1).to_bytes(8, "little")
    view.feed("wrtfd.evil.main.frames", frame + np.float64(1e308).tobytes(), 0.0)
    doc = json.loads(_status("evil"))
    doc["groups"]["main"]["laps"] = None
    view.feed("wrtfd.evil.status", json.dumps(doc).encode(), 0.0)
    (row,) = view.rows(0.5)
    assert row.last_lap_ms is None and row.state == "recording"
    assert "evil" in _rendered(render_watch([row]), tmp_path)


def test_rich_markup_in_names_and_problems_is_shown_as_written(tmp_path: Path) -> None:
    """Names and problems come from other rigs: ``[/]`` raised rich's MarkupError in both views."""
    from wrtfd.daemon.fleet_view import render_fleet_status, render_watch

    view = FleetView()
    rig, group, problem = "r[/]", "g[bold]", "disk [/red] full"
    doc = json.loads(_status(rig))
    doc["groups"] = {group: {"in_session": True}}
    doc["problems"] = [problem]
    view.feed(f"wrtfd.{rig}.status", json.dumps(doc).encode(), 0.0)
    text = _rendered(render_watch(view.rows(1.0)), tmp_path)
    assert f"{rig}  {group}  recording" in text
    text = _rendered(render_fleet_status({rig: (doc, 1.0)}, url="nats://x:4222"), tmp_path)
    assert rig in text and group in text and problem in text


def test_a_status_naming_70000_groups_is_bounded(tmp_path: Path) -> None:
    """It took 130 s of CPU per render, and about 23 MiB per MiB of status was kept per rig."""
    import tracemalloc

    from wrtfd.daemon.fleet_view import render_fleet_status
    from wrtfd.fleet.watch import MAX_GROUPS, MAX_STATUS_BYTES

    doc = json.loads(_status("many"))
    doc["groups"] = {f"g{i:05d}": {} for i in range(70_000)}
    doc["groups"]["g00000"] = {"in_session": True}
    payload = json.dumps(doc, separators=(",", ":")).encode()
    assert len(payload) <= MAX_STATUS_BYTES
    view = FleetView()
    tracemalloc.start()
    try:
        view.feed("wrtfd.many.status", payload, 0.0)
        kept, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert kept < 64 << 10  # the status was 1 MiB of JSON: what the rows need is kept, not it
    rows = view.rows(1.0)
    assert [r.group for r in rows] == [f"g{i:05d}" for i in range(MAX_GROUPS)]
    assert view.dropped == {"too_many_groups": 1}
    line = next(
        x
        for x in _rendered(render_fleet_status({"many": (doc, 1.0)}, url="u"), tmp_path).splitlines()
        if x.startswith("many")
    )
    assert "g00000" in line and "g00100" not in line and len(line) < 250


def test_the_rig_heard_from_least_recently_makes_room() -> None:
    """256 rigs that published once and went quiet hid every other rig (``too_many_rigs``)."""
    view = FleetView()
    view.feed("wrtfd.rig-1.status", _status("rig-1"), 0.0)
    for i in range(MAX_RIGS + 44):
        view.feed(f"wrtfd.fake{i}.status", _status(f"fake{i}"), 1.0)
        if i % 50 == 0:
            view.feed("wrtfd.rig-1.status", _status("rig-1"), 1.0)  # a real rig keeps publishing
    assert len(view.rigs) == MAX_RIGS
    assert "rig-1" in view.rigs and "fake0" not in view.rigs and f"fake{MAX_RIGS + 43}" in view.rigs
    assert view.dropped == {"rig_evicted": 45}
    view.feed("wrtfd.late.status", _status("late"), 2.0)  # a rig arriving now is shown too
    assert "late" in {r.rig for r in view.rows(2.0)}
