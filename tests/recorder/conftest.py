"""Definitions and sample streams shared by the recorder tests."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from wrtfd.decoders.base import Sample

T0_NS = 7_000_000_000_000
START_US = 1_700_000_000_000_000
PERIOD_60_NS = 1e9 / 60


def session_section() -> dict[str, Any]:
    """The session part every recorder test definition shares (a start timestamp header)."""
    return {
        "description": "d",
        "header": {
            "description": "h",
            "fields": [{"name": "start_timestamp", "type": "uint64", "description": "t"}],
        },
    }


GAME_DEF: dict[str, Any] = {
    "version": "1.0",
    "session": session_section(),
    "frame": {
        "description": "game",
        "fields": [
            {"name": "speed", "type": "float32", "unit": "m/s", "description": "speed"},
            {"name": "gear", "type": "int8", "description": "gear"},
            {"name": "n", "type": "uint32", "description": "sample index"},
        ],
    },
}

GPS_DEF: dict[str, Any] = {
    "version": "1.0",
    "types": {
        "fix_mode": {
            "type": "enum",
            "description": "fix",
            "values": [
                {"name": "none", "value": 0, "description": "no fix"},
                {"name": "fix_3d", "value": 3, "description": "3D"},
            ],
        }
    },
    "session": session_section(),
    "frame": {
        "description": "gps",
        "fields": [
            {"name": "lat_deg", "type": "float64", "description": "lat"},
            {"name": "fix", "type": "fix_mode", "description": "fix mode"},
        ],
    },
}


def game_stream(
    n: int,
    *,
    start: int = 0,
    t0_ns: int = T0_NS,
    track: str | None = "Monza",
    jitter_ns: int = 0,
    seed: int = 1,
    new_session_at: int | None = None,
    new_track: str = "Spa",
) -> list[Sample]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(start, start + n):
        jitter = int(rng.integers(-jitter_ns, jitter_ns + 1)) if jitter_ns else 0
        rx = t0_ns + round(i * PERIOD_60_NS) + jitter
        info = {"track": track, "car": "A8 LMS", "session_type": "practice"} if track and i == start else None
        new = new_session_at is not None and i == new_session_at
        if new:
            info = {"track": new_track, "car": "A8 LMS", "session_type": "race"}
        out.append(
            Sample(
                "game",
                rx,
                {"speed": float(i % 300), "gear": i % 7, "n": i},
                new_session=new,
                session_info=info,
            )
        )
    return out


def text(field: np.ndarray) -> str:
    return bytes(np.asarray(field, dtype=np.uint8)).split(b"\0", 1)[0].decode("utf-8")


@pytest.fixture()
def out_dir(tmp_path):  # type: ignore[no-untyped-def]
    d = tmp_path / "rec"
    d.mkdir()
    return d
