"""Sample recordings for format and CLI tests (written by the library, never copied in)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.format.conftest import START_US, definition, fld
from wrtfd.format import Schema, Writer

CAR_DEFINITION: dict[str, Any] = definition(
    [
        fld("speed", "float32", unit="m/s"),
        fld("gear", "int8"),
        fld("wheels", "wheel", 4),
        fld("state", "state"),
        fld("on_track", "bool"),
        fld("driver", "uint8", 12, tags=["text"]),
    ],
    header=[fld("start_timestamp", "uint64", unit="us"), fld("track", "uint8", 24, tags=["text"])],
    footer=[fld("laps", "uint32"), fld("best_lap_s", "float64")],
    types={
        "wheel": {
            "type": "struct",
            "description": "one wheel",
            "fields": [fld("temperature", "float32"), fld("pressure", "float32")],
        },
        "state": {
            "type": "enum",
            "description": "car state",
            "values": [
                {"name": "pits", "value": 0, "description": "in pits"},
                {"name": "racing", "value": 1, "description": "racing"},
            ],
        },
    },
)


def car_schema() -> Schema:
    return Schema.from_dict(CAR_DEFINITION)


def write_car_file(path: Path, *, embed_schema: bool = True, sessions: int = 2, frames: int = 5) -> Schema:
    """Sessions with gaps, NaN/inf values, an unnamed enum value and UTF-8 text."""
    schema = car_schema()
    with Writer(
        path,
        schema,
        rate_hz=50,
        start_timestamp_us=START_US,
        embed_schema=embed_schema,
        metadata={"Track": "iracing:track/日本"},
        fsync_on_close=False,
    ) as w:
        for k in range(sessions):
            w.begin_session(
                {"start_timestamp": START_US + 1_000_000 * k, "track": "鈴鹿" if k == 0 else "Monza"}
            )
            for i in range(frames):
                tick = i * 2 if k == 0 else i
                w.write_frame(
                    tick,
                    {
                        "speed": [0.1, float("nan"), float("inf"), -0.0, 3.4028235e38][i % 5],
                        "gear": i - 1,
                        "wheels": [{"temperature": 80.25 + j, "pressure": 1.9} for j in range(4)],
                        "state": [0, 1, 7][i % 3],
                        "on_track": i % 2 == 0,
                        "driver": "Ayrton",
                    },
                )
            w.end_session({"laps": 10 + k, "best_lap_s": 91.125})
    return schema


def write_definition(path: Path) -> Path:
    path.write_text(car_schema().yaml_text, encoding="utf-8")
    return path


def rewrite_args(definition: Path) -> list[str]:
    """``wrtfd write`` and the options that rewrite a car file (50 Hz from START_US) from its dump."""
    return ["write", "--schema", str(definition), "--rate", "50", "--start-timestamp", str(START_US)]
