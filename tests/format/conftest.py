"""Helpers for format tests: small definitions built in code, and files written from them."""

from __future__ import annotations

import resource
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from wrtfd.format import Schema

START_US = 1_700_000_000_000_000


def fld(name: str, type_: str, dims: int = 0, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, "dimensions": dims, "description": f"{name} field", **extra}


def definition(
    frame: list[dict[str, Any]],
    *,
    header: list[dict[str, Any]] | None = None,
    footer: list[dict[str, Any]] | None = None,
    types: dict[str, Any] | None = None,
) -> dict[str, Any]:
    d: dict[str, Any] = {
        "version": "1.0",
        "metadata": {"title": "test", "description": "test definition"},
        "session": {
            "description": "test session",
            "header": {"description": "h", "fields": header or [fld("driver_id", "uint32")]},
        },
        "frame": {"description": "test frame", "fields": frame},
    }
    if types:
        d["types"] = types
    if footer is not None:
        d["session"]["footer"] = {"description": "f", "fields": footer}
    return d


def make_schema(frame: list[dict[str, Any]], **kw: Any) -> Schema:
    return Schema.from_dict(definition(frame, **kw))


@pytest.fixture
def car_schema() -> Schema:
    """Speed, gear, 4 wheels (struct array), an enum, a text name in the header, a footer."""
    return make_schema(
        [
            fld("speed", "float32", unit="m/s"),
            fld("gear", "int8"),
            fld("wheels", "wheel", 4),
            fld("state", "state"),
            fld("on_track", "bool"),
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
                    {"name": "finished", "value": 5, "description": "finished"},
                ],
            },
        },
    )


@pytest.fixture
def tmp_file(tmp_path: Path) -> Callable[..., Path]:
    def make(name: str = "t.wrtf") -> Path:
        return tmp_path / name

    return make


@pytest.fixture
def file_size_limit() -> Iterator[Callable[[int], None]]:
    """Make writes past a size fail for real (EFBIG via RLIMIT_FSIZE), like a full disk."""
    old_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    def set_limit(n: int) -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (n, old_limit[1]))

    try:
        yield set_limit
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old_limit)
        signal.signal(signal.SIGXFSZ, old_handler)
