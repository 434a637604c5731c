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
    assert view.dropped["too_many_rigs"] == 10


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
