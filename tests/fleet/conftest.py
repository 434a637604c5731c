"""Fixtures of the fleet tests: a real nats-server, and a recording's real frame schema."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def shipped_schemas(tmp_path: Path) -> dict[str, Schema]:
    """The frame a daemon records for one source of each shipped definition (config/schemas)."""
    out: dict[str, Schema] = {}
    for path in sorted(registry.SCHEMA_DIR.glob("*.wrtf.yaml")):
        name = path.name.removesuffix(".wrtf.yaml")
        definition = yaml.safe_load(path.read_text())
        out[name] = Recorder([SourceSpec(name, definition)], RecorderPolicy(output_dir=tmp_path)).schema
    return out


def _leaf_spans(dt: np.dtype[Any], base: int = 0) -> Iterator[tuple[int, int, bool]]:
    """(offset, size, is_bool) of every primitive leaf of a record type: the bytes that are not
    padding (walked here from numpy's own field table, not by the code under test)."""
    if dt.subdtype is not None:
        sub, shape = dt.subdtype
        count = int(np.prod(shape))
        if sub.names is None:
            yield base, sub.itemsize * count, sub.kind == "b"
        else:
            for i in range(count):
                yield from _leaf_spans(sub, base + i * sub.itemsize)
    elif dt.names is None:
        yield base, dt.itemsize, dt.kind == "b"
    else:
        for name in dt.names:
            fdt, offset = dt.fields[name][:2]  # type: ignore[index]
            yield from _leaf_spans(fdt, base + offset)


def padded_frames(
    schema: Schema, n: int, *, seed: int = 0, padding: int = 0xAA
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` frames of random channel values (ticks 0..n-1) whose padding bytes all hold
    ``padding``, and the same frames as WRTF stores them: a ``(n, frame_bytes)`` uint8 array
    with every padding byte zero (spec 8.7)."""
    dt = schema.frame_dtype
    size = dt.itemsize
    values = np.random.default_rng(seed).integers(0, 256, (n, size), dtype=np.uint8)
    clean = np.zeros((n, size), dtype=np.uint8)
    dirty = np.full((n, size), padding, dtype=np.uint8)
    for offset, length, is_bool in _leaf_spans(dt):
        part = values[:, offset : offset + length]
        clean[:, offset : offset + length] = part & 1 if is_bool else part
    clean[:, :8] = np.arange(n, dtype="<u8").view(np.uint8).reshape(n, 8)
    for offset, length, _ in _leaf_spans(dt):
        dirty[:, offset : offset + length] = clean[:, offset : offset + length]
    assert (dirty != clean).any(), "the definition has no padding byte"
    return np.frombuffer(bytearray(dirty.tobytes()), dtype=dt), clean


def dirty_heap() -> None:
    """Leave freed heap memory full of 0x55, as a daemon's heap is full of old JSON and datagrams:
    a copy that does not write every byte it hands out shows it."""
    junk = [
        np.full(size, 0x55, dtype=np.uint8) for size in (1 << 12, 1 << 14, 1 << 16, 1 << 18) for _ in range(4)
    ]
    del junk
