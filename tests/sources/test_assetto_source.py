"""AssettoCorsaSource against a fake AC server on loopback that only streams after a correct
handshake and subscribe: retries, session info, re-handshake after the stream stops, dismiss."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.abc
import pytest

from tests.sources.fake_ac import FakeAC
from wrtfd.decoders.assetto_corsa import AssettoCorsaDecoder
from wrtfd.decoders.base import Sample
from wrtfd.errors import ConfigError
from wrtfd.sources.assetto_corsa import AssettoCorsaSource
from wrtfd.sources.base import SourceState


def capture(shared_data: Path) -> list[bytes]:
    raw = (shared_data / "udp" / "assetto_corsa" / "AssettoCorsa_monza_A8LMS.raw").read_bytes()
    return [raw[i : i + 328] for i in range(0, len(raw), 328)]


async def until(predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
    with anyio.fail_after(timeout_s):
        while not predicate():  # noqa: ASYNC110 - the source exposes counters, not events
            await anyio.sleep(0.005)


async def test_handshake_stream_rehandshake_and_dismiss(shared_data: Path) -> None:
    packets = capture(shared_data)
    first, second = packets[:400], packets[400:700]
    server = FakeAC(bursts=[first, second], tracks=["monza", "spa"])
    samples: list[Sample] = []
    source = AssettoCorsaSource(
        host="127.0.0.1",
        port=server.port,
        local_host="127.0.0.1",
        handshake_interval_s=0.05,
        stale_after_s=0.3,
    )
    async with anyio.create_task_group() as tg:
        await tg.start(server.serve)
        await tg.start(source.run, samples.append)
        await until(lambda: len(samples) == len(first) + len(second))
        assert source.stats.state is SourceState.RECEIVING
        tg.cancel_scope.cancel()
    server.drain()
    assert server.ops[-1] == 3, "the source must dismiss on shutdown"
    assert server.bad_requests == 0
    assert source.handshakes_sent >= 4  # 2 ignored + 1 answered, then again after the stream stopped
    assert source.handshakes_answered == 2
    assert server.ops.count(1) == 2  # one subscription per answered handshake
    assert source.rehandshakes >= 1 and source.stats.restarts == 0
    reference = AssettoCorsaDecoder()
    assert [s.values for s in samples] == [reference.decode(p).values for p in first + second]  # type: ignore[union-attr]
    assert samples[0].session_info == {"car": "ks_audi_r8_lms", "track": "monza", "driver": "Test Driver"}
    assert not samples[0].new_session
    switched = samples[len(first)]
    assert (
        switched.new_session and switched.session_info is not None and switched.session_info["track"] == "spa"
    )
    assert not any(s.new_session for s in samples[len(first) + 1 :])
    assert source.stats.dropped.total() == 0
    assert source.stats.state is SourceState.STOPPED


async def test_nothing_streams_without_a_game() -> None:
    """No answer: the source keeps handshaking, sends no subscribe and no dismiss."""
    server = FakeAC(bursts=[], tracks=["monza"], ignore_first=10**6)
    source = AssettoCorsaSource(
        host="127.0.0.1", port=server.port, local_host="127.0.0.1", handshake_interval_s=0.02
    )
    async with anyio.create_task_group() as tg:
        await tg.start(server.serve)
        await tg.start(source.run, lambda s: None)
        await until(lambda: len(server.ops) >= 3)
        assert source.stats.state is SourceState.LISTENING
        tg.cancel_scope.cancel()
    server.drain()
    assert set(server.ops) == {0}
    assert source.stats.samples == 0


async def test_strangers_are_dropped(shared_data: Path) -> None:
    server = FakeAC(bursts=[], tracks=["monza"], ignore_first=10**6)
    source = AssettoCorsaSource(host="127.0.0.1", port=server.port, local_host="127.0.0.1")
    async with anyio.create_task_group() as tg:
        await tg.start(source.run, lambda s: None)
        addr = source.local_address
        assert addr is not None
        stranger = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        stranger.bind(("127.0.0.2", 0))
        stranger.sendto(capture(shared_data)[0], addr)
        await until(lambda: source.stats.received == 1)
        stranger.close()
        tg.cancel_scope.cancel()
    server.close()
    assert source.stats.dropped.as_dict() == {"sender_not_allowed": 1}


def test_bad_timing_options() -> None:
    with pytest.raises(ConfigError):
        AssettoCorsaSource(handshake_interval_s=0)
