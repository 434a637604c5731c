"""The rig's status message (``wrtfd.<rig>.status``): a compact digest of ``/status``.

Pure: the daemon's snapshot and the fleet's own counters in, a JSON-ready dict out. What the
pit wall needs of each rig, no more: health and problems, per recording group the state,
session, frame rate, dropped ticks, file and laps (count, best, last), per source the state
and rate, and the fleet link with its upload backlog. Readers treat it as untrusted input
(``wrtfd watch`` and ``wrtfd fleet status`` read every key defensively).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

__all__ = ["STATUS_VERSION", "status_message"]

STATUS_VERSION = 1


def _map(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def status_message(
    snapshot: Mapping[str, Any],
    *,
    rig: str,
    fleet: Mapping[str, Any],
    last_laps: Mapping[str, tuple[int, int]] | None = None,
    interval_s: float = 2.0,
    now_us: int | None = None,
) -> dict[str, Any]:
    rec = _map(snapshot.get("recorder"))
    groups_in = _map(rec.get("groups")) or {"main": rec}
    groups: dict[str, Any] = {}
    for name, raw in groups_in.items():
        g = _map(raw)
        laps = dict(_map(_map(g.get("derived")).get("laps")))
        last = (last_laps or {}).get(str(name))
        if last is not None:
            laps["last_lap_number"], laps["last_lap_ms"] = last
        file = g.get("file")
        groups[str(name)] = {
            "state": g.get("state"),
            "in_session": bool(g.get("in_session")),
            "session": g.get("session"),
            "session_frames": g.get("session_frames"),
            "frame_rate_hz": round(float(g.get("frame_rate_hz") or 0.0), 2),
            "dropped_ticks": g.get("dropped_ticks"),
            "file": PurePath(str(file)).name if file else None,
            "laps": laps or None,
        }
    sources = {
        str(name): {
            "state": _map(s).get("state"),
            "protocol": _map(s).get("protocol"),
            "rate_hz": _map(s).get("rate_hz"),
        }
        for name, s in _map(snapshot.get("sources")).items()
    }
    in_session = any(g["in_session"] for g in groups.values())
    return {
        "v": STATUS_VERSION,
        "rig": rig,
        "time_us": time.time_ns() // 1000 if now_us is None else now_us,
        "state": "recording" if in_session else "idle",
        "status_interval_s": interval_s,
        "version": snapshot.get("version"),
        "uptime_s": snapshot.get("uptime_s"),
        "healthy": bool(snapshot.get("healthy")),
        "problems": list(snapshot.get("problems") or []),
        "groups": groups,
        "sources": sources,
        "fleet": {
            "state": fleet.get("state"),
            "last_error": fleet.get("last_error"),
            "live": {
                "hz": _map(fleet.get("live")).get("hz"),
                "dropped_total": _map(fleet.get("live")).get("dropped_total"),
            },
            "uploads": _map(fleet.get("uploads")),
        },
    }
