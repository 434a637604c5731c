"""Fixtures of the fleet tests: a real nats-server, and a recording's real frame schema."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.fleet.nats_server import NatsServer
from wrtfd.decoders import registry
from wrtfd.format import Schema
from wrtfd.recorder import Recorder, RecorderPolicy, SourceSpec

START_US = 1_795_000_000_000_000


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    server = NatsServer(tmp_path / "nats").start()
    try:
        yield server
    finally:
        server.stop()


def forza_schema(tmp_path: Path) -> Schema:
    """The frame a daemon records for one Forza source (the shipped definition, composed)."""
    definition = yaml.safe_load((registry.SCHEMA_DIR / "forza.wrtf.yaml").read_text())
    rec = Recorder([SourceSpec("forza", definition)], RecorderPolicy(output_dir=tmp_path))
    return rec.schema


def forza_frames(
    schema: Schema, n: int, *, first_tick: int = 0, rate_hz: int = 60
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` frames with distinct values (speed = tick / 10) and their wall times."""
    frames = np.zeros(n, dtype=schema.frame_dtype)
    ticks = np.arange(first_tick, first_tick + n, dtype=np.uint64)
    frames["tick"] = ticks
    frames["forza"]["speed"] = ticks.astype(np.float32) / 10
    frames["forza"]["gear"] = 3
    times = START_US + (ticks.astype(np.int64) * 1_000_000) // rate_hz
    return frames, times
