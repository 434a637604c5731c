"""The terminal view of /status: formatting, and hostile or partial snapshots never crash it."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from wrtfd.daemon.status_view import format_age, format_bytes, format_duration, format_lap, render_status


def text_of(snapshot: Any, *, unicode: bool = True) -> str:
    console = Console(width=200, color_system=None, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(render_status(snapshot, url="http://127.0.0.1:8787/status", unicode=unicode))
    console.file.close()
    return console.export_text()


def test_formats() -> None:
    assert format_lap(83456) == "1:23.456"
    assert format_lap(1166) == "0:01.166"
    assert format_lap(0) == "-" and format_lap(None) == "-" and format_lap(True) == "-"
    assert format_bytes(0) == "0 B" and format_bytes(1536) == "1.5 KiB"
    assert format_bytes(3 << 30) == "3.0 GiB" and format_bytes(-1) == "-" and format_bytes("x") == "-"
    assert format_duration(59.9) == "59 s" and format_duration(3725) == "1 h 02 min"
    assert format_duration(90061) == "1 d 01 h" and format_duration(None) == "-"
    assert (
        format_age(None) == "never"
        and format_age(0.04) == "0.0 s ago"
        and format_age(125) == "2 min 05 s ago"
    )


SNAPSHOT: dict[str, Any] = {
    "version": "0.1.0",
    "pid": 4242,
    "config": "/etc/wrtfd/wrtfd.toml",
    "uptime_s": 3725.2,
    "sources": {
        "forza": {
            "state": "receiving",
            "detail": "from 192.168.1.20:50000",
            "samples": 12345,
            "dropped": {"wrong_size": 3},
            "dropped_total": 3,
            "last_sample_age_s": 0.02,
            "restarts": 0,
            "kind": "udp",
            "protocol": "forza",
            "required": True,
            "rate_hz": 60.0,
        },
        "gps": {
            "state": "reconnecting",
            "detail": "device lost (EIO); retry in 2 s",
            "samples": 0,
            "dropped": {},
            "dropped_total": 0,
            "last_sample_age_s": None,
            "restarts": 4,
            "kind": "serial",
            "protocol": "nmea",
            "rate_hz": 0.0,
        },
    },
    "recorder": {
        "groups": {
            "main": {
                "state": "ok",
                "file": "/var/lib/wrtfd/20260501_101500_forza_road.wrtf",
                "bytes": 3 << 20,
                "in_session": True,
                "session": 2,
                "session_frames": 7200,
                "frames": 9000,
                "frame_rate_hz": 60.0,
                "dropped_ticks": 12,
                "derived": {"laps": {"lap_count": 4, "best_lap_ms": 83456, "best_lap_number": 3}},
            }
        }
    },
    "disk": {
        "path": "/var/lib/wrtfd",
        "free_bytes": 5 << 30,
        "total_bytes": 30 << 30,
        "min_free_bytes": 200 << 20,
    },
    "healthy": False,
    "problems": ["source gps silent for 63.0 s (limit 5 s)"],
}


def rows(text: str, first: str) -> list[list[str]]:
    return [ln.split() for ln in text.splitlines() if ln.startswith(first + " ")]


def test_every_part_of_the_snapshot_is_shown() -> None:
    text = text_of(SNAPSHOT)
    lines = text.splitlines()
    assert lines[0] == "● wrtfd 0.1.0: unhealthy (1 problem(s))"
    assert "  config  /etc/wrtfd/wrtfd.toml" in text
    assert "pid 4242, up 1 h 02 min, status http://127.0.0.1:8787/status" in text
    assert "/var/lib/wrtfd: 5.0 GiB free of 30.0 GiB (minimum 200.0 MiB)" in text
    (main,) = rows(text, "main")
    assert main[:3] == ["main", "ok", "20260501_101500_forza_road.wrtf"]
    assert main[3:] == ["3.0", "MiB", "#2", "7,200", "60/s", "12", "4", "1:23.456", "(lap", "3)"]
    (forza,) = rows(text, "forza")
    assert forza[:8] == ["forza", "udp/forza", "receiving", "60.0", "Hz", "12,345", "3", "(wrong_size:"]
    assert "required; from 192.168.1.20:50000" in text
    (gps,) = rows(text, "gps")
    assert gps[:7] == ["gps", "serial/nmea", "reconnecting", "0.0", "Hz", "0", "0"]
    assert gps[7:] == ["never", "device", "lost", "(EIO);", "retry", "in", "2", "s;", "4", "restart(s)"]
    assert lines[-2:] == ["PROBLEMS", "✗ source gps silent for 63.0 s (limit 5 s)"]


def test_ascii_console_gets_no_unicode_marks() -> None:
    text = text_of(SNAPSHOT, unicode=False)
    assert text.startswith("* wrtfd 0.1.0") and "x source gps silent" in text
    assert not any(ord(ch) > 127 for ch in text)


def test_healthy_and_idle() -> None:
    snap = {**SNAPSHOT, "healthy": True, "problems": []}
    snap["recorder"] = {"state": "ok", "file": None, "in_session": False, "frames": 0}
    text = text_of(snap)
    assert text.splitlines()[0] == "● wrtfd 0.1.0: healthy"
    assert rows(text, "main") == [["main", "ok", "-", "-", "-", "0", "-", "-", "-", "-"]]
    assert "PROBLEMS" not in text


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(
    st.dictionaries(
        st.sampled_from(["version", "sources", "recorder", "disk", "healthy", "problems", "uptime_s", "pid"]),
        json_values,
    )
)
def test_any_json_object_renders(snapshot: dict[str, Any]) -> None:
    if not isinstance(snapshot.get("problems"), list):
        snapshot.pop("problems", None)
    assert "wrtfd" in text_of(snapshot).splitlines()[0]


def test_a_fleet_reference_is_one_line() -> None:
    fleet = {"url": "nats://pit:4222", "rig": "rig-b", "state": "connected", "live": {}, "uploads": {}}
    waiting = {"source": "forza", "reference": "fleet:best", "state": "waiting", "lap_time_s": None}
    fetched = {
        **waiting,
        "state": "fetched",
        "lap_time_s": 31.2041,
        "rig": "rig-a",
        "driver": "Ada",
        "lap": 3,
    }
    text = text_of({**SNAPSHOT, "fleet": {**fleet, "references": [waiting]}})
    assert "reference  forza fleet:best: the session's best lap until the team's is fetched" in text
    text = text_of({**SNAPSHOT, "fleet": {**fleet, "references": [fetched, "junk"]}})
    assert "reference  forza fleet:best: Ada on rig-a lap 3, 31.204 s (fetched)" in text
    assert text.count("reference  ") == 1


def test_a_drivers_name_from_another_rig_is_shown_as_written() -> None:
    """The team's best lap names its driver as another rig wrote it: ``[/]`` was rich markup
    (MarkupError) and ``[bold]`` vanished."""
    fleet = {"url": "nats://pit:4222", "rig": "rig-b", "state": "connected", "live": {}, "uploads": {}}
    ref = {"source": "forza", "reference": "fleet:best", "state": "fetched", "lap_time_s": 31.2, "lap": 3}
    for driver in ("[/]", "[bold]Ada"):
        text = text_of(
            {**SNAPSHOT, "fleet": {**fleet, "references": [{**ref, "rig": "rig-a", "driver": driver}]}}
        )
        assert f"reference  forza fleet:best: {driver} on rig-a lap 3" in text
