"""What the page is told: channels picked per protocol, updates from live frames, alerts, disk time."""

from __future__ import annotations

import json
import typing
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from wrtfd.daemon.web.live import Broadcaster, DiskRate, LiveView, Subscriber, alerts, pick_channels, to_json
from wrtfd.decoders.registry import SCHEMA_DIR
from wrtfd.format import Schema
from wrtfd.recorder.compose import compose_definition
from wrtfd.recorder.observe import (
    EVENT_KINDS,
    DiskSpaceChanged,
    FileClosed,
    FileOpened,
    LapCompleted,
    LiveFrames,
    MarkerAdded,
    ObserverHub,
    RecordingEvent,
    SessionEnded,
    SessionStarted,
    SourceStateChanged,
    WriteFailed,
)


def composed(protocol: str) -> Schema:
    definition = yaml.safe_load((SCHEMA_DIR / f"{protocol}.wrtf.yaml").read_text())
    return Schema.from_dict(compose_definition([(protocol, definition)]))


def test_default_channels_per_protocol() -> None:
    forza = {
        p.role: (p.name, p.scale)
        for p in pick_channels(composed("forza"), ["speed", "rpm", "throttle", "brake", "gear"])
    }
    assert forza["speed"] == ("forza.speed", None)
    assert forza["rpm"] == ("forza.engine_rpm", None)
    assert forza["throttle"] == ("forza.accel", 1 / 255)  # 0..255 -> 0..1
    assert forza["brake"][0] == "forza.brake" and forza["gear"][0] == "forza.gear"
    f1 = {p.role: (p.name, p.scale) for p in pick_channels(composed("f1"), ["speed", "throttle", "nope"])}
    assert f1 == {"speed": ("f1.speed", None), "throttle": ("f1.throttle", 1.0)}
    exact = pick_channels(composed("forza"), ["forza.position_x"])
    assert [p.name for p in exact] == ["forza.position_x"]


def test_view_turns_frames_into_values_traces_and_events() -> None:
    schema = composed("forza")
    view = LiveView()
    frames = np.zeros(30, dtype=schema.frame_dtype)
    frames["tick"] = np.arange(30)
    frames["forza"]["speed"] = np.linspace(10, 40, 30)
    frames["forza"]["accel"] = 255
    frames["forza"]["gear"] = 3
    frames["forza"]["engine_rpm"] = np.nan  # stale: shown as nothing, never NaN in JSON
    item = LiveFrames("forza", schema, frames, 1_000_000 + np.arange(30) * 16_667)
    view.notify(item)
    assert view.take()["groups"] == {}  # nobody listens: frames are not even kept ...
    hub = ObserverHub()
    hub.add(view)
    assert not hub.wants_frames  # ... nor copied for the view by the recorder
    view.active = True
    assert hub.wants_frames
    view.notify(item)
    view.notify(MarkerAdded("forza", 12, 1_700_000_000_000_000, "oil"))
    update = view.take()
    g = update["groups"]["forza"]
    assert g["values"]["speed"] == pytest.approx(40.0) and g["values"]["gear"] == 3
    assert g["values"]["throttle"] == 1.0 and g["values"]["rpm"] is None
    assert 2 <= len(g["trace"]["speed"]) <= 16 and g["trace"]["speed"][-1] == pytest.approx(40.0)
    assert update["events"][-1] == {
        "kind": "marker",
        "group": "forza",
        "tick": 12,
        "wall_us": 1_700_000_000_000_000,
        "note": "oil",
        "text": "marker in group forza at tick 12: oil",  # the journal's wording
        "warning": False,
    }
    assert {c["role"] for c in update["channels"]["forza"]} == {"speed", "rpm", "throttle", "brake", "gear"}
    json.loads(to_json(update))  # valid JSON for the browser


def test_alerts_for_silence_disk_and_a_failing_recorder() -> None:
    snap = {
        "uptime_s": 100.0,
        "problems": ["source gps silent for 12.0 s (limit 10 s)"],
        "sources": {
            "forza": {
                "required": False,
                "silent_after_s": 10.0,
                "last_sample_age_s": 30.0,
                "state": "listening",
            },
            "f1": {
                "required": False,
                "silent_after_s": 10.0,
                "last_sample_age_s": None,
                "state": "listening",
            },
        },
        "recorder": {"groups": {"forza": {"state": "failing", "error": "ENOSPC"}}},
        "disk": {"free_bytes": 300 << 20, "min_free_bytes": 200 << 20, "time_left_s": 600},
    }
    found = alerts(snap)
    assert {"level": "error", "text": "source gps silent for 12.0 s (limit 10 s)"} in found
    assert {"level": "warning", "text": "source forza silent for 30 s"} in found
    assert {"level": "error", "text": "recorder forza failing: ENOSPC"} in found
    assert {"level": "warning", "text": "disk low: 300 MiB free"} in found
    assert {"level": "warning", "text": "disk full in 10 min at this rate"} in found
    assert not any("f1" in a["text"] for a in found)  # never received: not an alert, just idle


def test_disk_time_left_from_the_write_rate() -> None:
    rate = DiskRate(window_s=10)
    disk = {"free_bytes": 1_000_000}
    assert rate.update(0.0, disk, {"bytes_written": 0})["time_left_s"] is None
    out = rate.update(2.0, disk, {"bytes_written": 20_000})
    assert out["write_rate_bps"] == 10_000 and out["time_left_s"] == 100


async def test_a_slow_page_gets_the_newest_update_only() -> None:
    sub = Subscriber()
    for i in range(5):
        sub.offer(b"%d" % i)
    assert await sub.next(1.0) == b"4" and sub.replaced == 4
    assert await sub.next(0.05) is None  # nothing new: a keep-alive is due


async def test_many_pages_lower_the_push_rate_to_the_send_budget() -> None:
    b = Broadcaster(LiveView(), dict, push_hz=10, max_subscribers=300)
    subs = [b.subscribe() for _ in range(100)]
    assert all(subs) and b.interval_s() == pytest.approx(1.0)  # 100 pages x 1/s = 100 sends/s
    for s in subs[:95]:
        assert s is not None
        b.unsubscribe(s)
    assert b.interval_s() == pytest.approx(0.1)  # few pages: the full 10 Hz
    b.max_subscribers = 5
    assert b.subscribe() is None and b.refused == 1


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


pytestmark = pytest.mark.anyio


def test_every_recording_event_has_a_name_and_a_sentence_for_the_page() -> None:
    samples: dict[type, RecordingEvent] = {
        FileOpened: FileOpened("main", "/r/a.wrtf", 1, "first"),
        FileClosed: FileClosed("main", "/r/a.wrtf", 10, 4096, False),
        SessionStarted: SessionStarted("main", "first", 1),
        SessionEnded: SessionEnded("main", "stop", 10, 0, 1.5),
        MarkerAdded: MarkerAdded("main", 3, 1, ""),
        SourceStateChanged: SourceStateChanged("gps", "silent", 1, 10.4),
        DiskSpaceChanged: DiskSpaceChanged("/r", True, 150 << 20, 200 << 20, 1),
        LapCompleted: LapCompleted(
            "main", 3, 88.4171, (29.1, 31.87, 27.4471), 10.0, 98.4171, 600, 5904, 1, 2
        ),
        WriteFailed: WriteFailed("main", "/r/a.wrtf", "No space left on device (ENOSPC)", 1.0),
    }
    assert set(samples) == set(typing.get_args(RecordingEvent))  # a new event kind needs a row here
    view = LiveView()
    for event in samples.values():
        view.notify(event)
    docs = view.take()["events"]
    assert [d["kind"] for d in docs] == [EVENT_KINDS[t] for t in samples]
    assert docs[5]["text"] == "source gps: silent for 10.4 s" and docs[5]["warning"] is True
    assert docs[6]["text"] == "disk low: 150 MiB free on /r (below 200 MiB)"
    assert docs[7]["text"] == "lap 3 completed in group main: 1:28.417 (sectors 29.100, 31.870, 27.447)"
    assert (docs[7]["lap"], docs[7]["time_s"], docs[7]["warning"]) == (3, 88.417, False)
    assert (docs[8]["path"], docs[8]["error"], docs[8]["retry_s"], docs[8]["warning"]) == (
        "/r/a.wrtf",
        "No space left on device (ENOSPC)",
        1.0,
        True,
    )
    assert docs[8]["text"].startswith("write failed for group main: /r/a.wrtf: No space left on device")
    assert all(d["text"] for d in docs)


def test_lap_delta_reaches_the_page_nan_as_null() -> None:
    """The lap channels' delta fields go to the page with the lap (NaN, no reference: null); a
    recording whose laps struct predates them gives the lap without them."""
    from wrtfd.tracks.lapchannels import LAP_FIELDS

    definition = yaml.safe_load((SCHEMA_DIR / "forza.wrtf.yaml").read_text())

    def view_of(fields: list[dict[str, object]], values: dict[str, float]) -> dict[str, object]:
        plugin = SimpleNamespace(name="laps", definition={"fields": fields}, footer_fields={})
        schema = Schema.from_dict(compose_definition([("forza", definition)], [plugin]))
        frames = np.zeros(3, dtype=schema.frame_dtype)
        frames["tick"] = np.arange(3)
        frames["laps"]["lap_number"] = 4
        for name, v in values.items():
            frames["laps"][name][-1] = v
        view = LiveView()
        view.active = True
        view.notify(LiveFrames("forza", schema, frames, 1_000_000 + np.arange(3) * 16_667))
        return view.take()["groups"]["forza"]["lap"]

    lap = view_of(LAP_FIELDS, {"delta": -0.25, "predicted": 83.5, "last_delta": np.nan})
    assert lap["number"] == 4
    assert lap["delta_s"] == -0.25 and lap["predicted_s"] == 83.5 and lap["last_delta_s"] is None
    old = view_of([f for f in LAP_FIELDS if f["name"] not in ("delta", "predicted", "last_delta")], {})
    assert old["number"] == 4 and "delta_s" not in old
