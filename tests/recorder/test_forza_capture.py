"""A real Forza capture through the real decoder and definition, into a file (source clock path)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.recorder.conftest import START_US, T0_NS
from wrtfd.decoders.base import Sample
from wrtfd.decoders.forza import ForzaDecoder
from wrtfd.format import EnumDef, Reader, validate_file
from wrtfd.recorder import RecorderPolicy, SourceSpec, replay

SCHEMA = Path(__file__).resolve().parents[2] / "wrtfd" / "schemas" / "forza.wrtf.yaml"


def _samples(shared_data: Path, jitter_ns: int) -> list[Sample]:
    data = (shared_data / "udp" / "forza_fm2023" / "fm2023_dash_331B_x1793.bin").read_bytes()
    dec = ForzaDecoder()
    rng = np.random.default_rng(3)
    out: list[Sample] = []
    first: int | None = None
    last_rx = 0
    for i in range(0, len(data), 331):
        d = dec.decode(data[i : i + 331])
        assert d.source_time_ns is not None
        first = d.source_time_ns if first is None else first
        rx = T0_NS + d.source_time_ns - first + 2_000_000 + int(rng.integers(0, jitter_ns + 1))
        last_rx = max(last_rx, rx)  # a receiver sees datagrams in order
        out.append(Sample.from_decoded("forza", last_rx, d))
    return out


@pytest.mark.parametrize("jitter_ms", [0, 12])
def test_forza_capture_records_every_tick_the_game_clock_says(
    shared_data: Path, tmp_path: Path, jitter_ms: int
) -> None:
    samples = _samples(shared_data, jitter_ms * 1_000_000)
    spec = SourceSpec("forza", yaml.safe_load(SCHEMA.read_text()))
    (path,) = replay(samples, [spec], RecorderPolicy(output_dir=tmp_path), start_timestamp_us=START_US)
    assert validate_file(path) == []
    src_ms = np.array([s.values["timestamp_ms"] for s in samples], dtype=np.int64)
    # by the game clock: tick = floor((t - t_first + P/2) * 60 Hz), the first sample mid-tick
    # (P/2 = 8_333_333 ns; the ms game clock often lands exactly on a tick boundary)
    expected_ticks = np.unique(((src_ms - src_ms[0]) * 1_000_000 + 8_333_333) * 60 // 1_000_000_000)
    with Reader(path) as r:
        (s,) = r.sessions
        f = r.frames(0)
        assert np.array_equal(f["tick"].astype(np.int64), expected_ticks)
        assert s.dropped_ticks == expected_ticks[-1] + 1 - len(expected_ticks) > 0  # the capture has holes
        ts = f["forza"]["timestamp_ms"].astype(np.int64)
        assert np.all(np.diff(ts) > 0)
        assert set(ts) <= set(src_ms)  # every frame holds a real datagram's values
        speed = {int(t): float(v) for t, v in zip(src_ms, (x.values["speed"] for x in samples), strict=True)}
        got = zip(ts, f["forza"]["speed"], strict=True)
        assert all(speed[int(t)] == pytest.approx(float(v)) for t, v in got)
        footer = r.sessions[0].footer
        assert footer is not None
        assert int(footer["sources"]["forza"]["samples"]) == len(samples)
        clock = r.schema.types["wrtfd__clock"]
        assert isinstance(clock, EnumDef)
        assert clock.name_of(int(s.header["sources"]["forza"])) == "source_clock"
