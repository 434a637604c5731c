"""Helpers of the loopback record tests: paced UDP replay, recording, frame comparison."""

from __future__ import annotations

import pickle
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from wrtfd.decoders.base import Sample
from wrtfd.format import Reader
from wrtfd.recorder import RecorderPolicy, SourceSpec, replay

REPO = Path(__file__).resolve().parents[2]
START_US = 1_700_000_000_000_000


def _send_schedule(address: tuple[str, int], schedule: Sequence[tuple[float, bytes]]) -> float:
    """Send each ``(offset_s, datagram)`` at its offset; returns how late the latest one went out (s)."""
    latest = 0.0
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        t0 = time.monotonic()
        for at, d in schedule:
            delay = t0 + at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            tx.sendto(d, address)
            latest = max(latest, time.monotonic() - t0 - at)
    return latest


async def send_at(datagrams: Sequence[bytes], address: tuple[str, int], offsets_s: Sequence[float]) -> float:
    """Send datagram i at ``offsets_s[i]`` after the start (a capture's own pace), from a process
    of its own: a thread of the test's shares the GIL with the receiving event loop (a clean-clone
    run once recorded 101 frames of a 150-tick feed placed by arrival: bunched arrivals, from a
    stall of one or the other, not found). The receiver stamps datagrams with the kernel's
    arrival time, so its own pauses do not bunch them. Returns how late the sender was at worst
    (s): a busy machine can still starve the sender itself."""
    host, port = address
    proc = await anyio.run_process(
        [sys.executable, "-m", "tests.sources.udp_replay", host, str(port)],
        input=pickle.dumps(list(zip(offsets_s, datagrams, strict=True))),  # to our own child
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return float(proc.stdout)


async def send_paced(
    datagrams: Sequence[bytes], address: tuple[str, int], pace_hz: float, per_tick: int = 1
) -> None:
    """Send ``per_tick`` datagrams every 1/pace_hz s on an absolute schedule (no drift)."""
    offsets = [(i // per_tick) / pace_hz for i in range(len(datagrams))]
    await send_at(datagrams, address, offsets)


def record(
    samples: Sequence[Sample],
    name: str,
    definition: dict[str, Any],
    out_dir: Path,
    rate_hz: int,
    *,
    use_source_clock: bool,
) -> list[Path]:
    """Record as the daemon would, with windows wide enough for a machine shared by many jobs
    (a sender thread late by up to 2 s must not look like a pause or jump of the game's clock)."""
    policy = RecorderPolicy(output_dir=out_dir, rate_hz=rate_hz, jitter_s=2.0, bunch_s=0.25)
    spec = SourceSpec(name, definition, use_source_clock=use_source_clock)
    return replay(samples, [spec], policy, start_timestamp_us=START_US)


def text(field: np.ndarray) -> str:
    return bytes(field).split(b"\x00", 1)[0].decode("utf-8")


def assert_frames_match(frames: np.ndarray, name: str, samples: Sequence[Sample]) -> int:
    """Frame i holds sample i's values (as the field's dtype stores them); returns values compared."""
    assert len(frames) == len(samples)
    block = frames[name]
    compared = 0
    for i, sample in enumerate(samples):
        row = block[i]
        for key, value in sample.values.items():
            got = row[key]
            if isinstance(value, str):
                assert text(got) == value, (i, key)
            else:
                np.testing.assert_array_equal(
                    got, np.asarray(value).astype(got.dtype), err_msg=f"frame {i} {key}"
                )
            compared += 1
    return compared


def read_single_session(path: Path) -> tuple[np.ndarray, Any]:
    with Reader(path) as r:
        assert len(r.sessions) == 1
        return np.array(r.frames(0)), r.sessions[0]


if __name__ == "__main__":  # the sender process of send_at: HOST PORT, the schedule on stdin
    print(_send_schedule((sys.argv[1], int(sys.argv[2])), pickle.loads(sys.stdin.buffer.read())))
