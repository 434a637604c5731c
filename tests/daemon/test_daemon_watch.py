"""Source and disk state changes found by the heartbeat and published on the hub."""

from __future__ import annotations

from wrtfd.daemon.watch import LifecycleWatch
from wrtfd.recorder.observe import DiskSpaceChanged, ObserverHub, RecordingEvent, SourceStateChanged

S = 1_000_000_000


class Seen:
    def __init__(self) -> None:
        self.events: list[RecordingEvent] = []

    def notify(self, item: object) -> None:
        self.events.append(item)  # type: ignore[arg-type]


def _watch(**silent_after_s: float) -> tuple[LifecycleWatch, Seen]:
    hub = ObserverHub()
    seen = Seen()
    hub.add(seen)
    return LifecycleWatch(hub, silent_after_s), seen


def test_first_sample_silent_and_back() -> None:
    watch, seen = _watch(gps=2.0, can=2.0)
    watch.check_sources({"gps": None, "can": None}, 100 * S, 7)
    assert seen.events == []  # never received: not silent, it never started
    watch.check_sources({"gps": 100 * S, "can": None}, 100 * S, 8)
    assert seen.events == [SourceStateChanged("gps", "first_sample", 8)]
    watch.check_sources({"gps": 101 * S, "can": None}, 102 * S, 9)  # 1 s old: fine
    watch.check_sources({"gps": 101 * S, "can": None}, 103 * S + S // 2, 10)  # 2.5 s: silent
    assert seen.events[1:] == [SourceStateChanged("gps", "silent", 10, 2.5)]
    watch.check_sources({"gps": 101 * S, "can": None}, 110 * S, 11)  # still silent: said once
    assert len(seen.events) == 2
    watch.check_sources({"gps": 113 * S, "can": None}, 113 * S, 12)  # a new sample
    assert seen.events[2:] == [SourceStateChanged("gps", "back", 12, 12.0)]
    watch.check_sources({"gps": 113 * S, "can": None}, 116 * S, 13)  # and silent again
    assert [e.state for e in seen.events if isinstance(e, SourceStateChanged)] == [
        "first_sample",
        "silent",
        "back",
        "silent",
    ]


def test_unknown_sources_are_ignored() -> None:
    watch, seen = _watch(gps=1.0)
    watch.check_sources({"other": 5 * S}, 10 * S, 0)
    assert seen.events == []


def test_disk_low_and_ok_again_on_change_only() -> None:
    watch, seen = _watch()
    disk = {"path": "/rec", "free_bytes": 500 << 20, "min_free_bytes": 200 << 20}
    watch.check_disk(disk, 1)
    assert seen.events == []  # fine from the start: nothing to say
    watch.check_disk({**disk, "free_bytes": 150 << 20}, 2)
    watch.check_disk({**disk, "free_bytes": 100 << 20}, 3)
    watch.check_disk({"path": "/rec", "error": "EIO"}, 4)  # unreadable: no change known
    watch.check_disk({**disk, "free_bytes": 300 << 20}, 5)
    assert seen.events == [
        DiskSpaceChanged("/rec", True, 150 << 20, 200 << 20, 2),
        DiskSpaceChanged("/rec", False, 300 << 20, 200 << 20, 5),
    ]
