"""The DDS-like TCP source on real loopback sockets."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from wrtfd.decoders.base import Sample
from wrtfd.sources.base import SinkFull, SourceState
from wrtfd.sources.dds import DdsLimits, DdsSource
from wrtfd.zddsrec.format import Header, ParticipantEntry, SampleKind, TopicEntry, encode_frame, encode_header
from wrtfd.zddsrec.mapping import MappingConfig, mapping_from_dict

MAPPING = {
    "rate": {"hz": 100},
    "source": {"name": "dds"},
    "topics": [
        {
            "topic": "rt/pose",
            "type": {"members": [{"name": "seq", "type": "uint32"}, {"name": "x", "type": "double"}]},
            "channels": {"seq": "pose_seq", "x": "pose_x"},
        }
    ],
}
HEADER = Header(
    1_700_000_000_000_000_000,
    (ParticipantEntry(bytes(16), "sim"),),
    (TopicEntry("rt/pose", "Pose"), TopicEntry("rt/unmapped", "Other")),
)


def mapping() -> MappingConfig:
    return mapping_from_dict(MAPPING, base_dir=Path("."))


def pose(seq: int, x: float) -> bytes:
    return b"\x00\x01\x00\x00" + struct.pack("<I4xd", seq, x)


def frames(n: int, start: int = 0) -> bytes:
    return b"".join(
        encode_frame((start + i) * 1_000_000, 0, 0, SampleKind.ALIVE, pose(start + i, i * 0.5))
        for i in range(n)
    )


async def wait_for(pred: Callable[[], bool], timeout_s: float = 10.0) -> None:
    with anyio.fail_after(timeout_s):
        while not pred():  # noqa: ASYNC110 - polls the source's counters; they have no event to wait on
            await anyio.sleep(0.005)


async def test_listen_maps_samples_stale_and_unmapped() -> None:
    got: list[Sample] = []
    src = DdsSource("dds", mapping=mapping(), port=0)
    async with anyio.create_task_group() as tg:
        port = await tg.start(src.run, got.append)
        assert src.stats.state is SourceState.LISTENING
        async with await anyio.connect_tcp("127.0.0.1", port) as s:
            data = encode_header(HEADER) + frames(5)
            data += encode_frame(7_000_000, 0, 1, 0, b"whatever")  # unmapped topic
            data += encode_frame(8_000_000, 0, 0, SampleKind.NOT_ALIVE_DISPOSED, b"")
            data += encode_frame(9_000_000, 0, 0, SampleKind.ALIVE, b"\x00\x01\x00\x00\x01")  # truncated CDR
            for i in range(0, len(data), 13):  # arbitrary TCP segmentation
                await s.send(data[i : i + 13])
            await wait_for(lambda: src.stats.received == 8)
        tg.cancel_scope.cancel()
    assert [s.values["pose_seq"] for s in got[:5]] == [0, 1, 2, 3, 4]
    assert [s.values["pose_x"] for s in got[:5]] == [0.0, 0.5, 1.0, 1.5, 2.0]
    assert [s.source_time_ns for s in got[:5]] == [HEADER.time_base_unix_ns + i * 1_000_000 for i in range(5)]
    assert all(s.source == "dds" for s in got)
    assert got[5].stale == {"pose_seq", "pose_x"} and not got[5].values
    assert got[5].source_time_ns == HEADER.time_base_unix_ns + 8_000_000
    assert len(got) == 6
    assert dict(src.unmapped) == {"rt/unmapped": 1}
    assert src.stats.dropped.as_dict() == {"cdr_truncated": 1, "unmapped": 1}
    assert src.stats.samples == 6
    assert src.stats.state is SourceState.STOPPED


async def test_garbage_peer_is_dropped_and_others_carry_on(caplog: pytest.LogCaptureFixture) -> None:
    got: list[Sample] = []
    src = DdsSource("dds", mapping=mapping(), port=0)
    async with anyio.create_task_group() as tg:
        port = await tg.start(src.run, got.append)
        good = await anyio.connect_tcp("127.0.0.1", port)
        await good.send(encode_header(HEADER) + frames(3))
        await wait_for(lambda: src.stats.received == 3)
        bad1 = await anyio.connect_tcp("127.0.0.1", port)
        await bad1.send(b"NOPE" + bytes(40))  # not a .zddsrec stream
        bad2 = await anyio.connect_tcp("127.0.0.1", port)
        await bad2.send(
            encode_header(HEADER)
            + frames(2, start=100)
            + struct.pack("<BqIIBI", 0x46, 0, 0, 0, 0, 0xFFFFFFF0)
        )
        await wait_for(lambda: src.counters.disconnect_reasons["payload_too_large"] == 1)
        await wait_for(lambda: src.counters.disconnect_reasons["bad_magic"] == 1)
        for peer in (bad1, bad2):  # the server closed them
            with pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
                with anyio.fail_after(5):
                    await peer.receive()
            await peer.aclose()
        await good.send(frames(3, start=3))
        await wait_for(lambda: src.stats.received == 8)
        assert len(src.connections) == 1
        await good.aclose()
        tg.cancel_scope.cancel()
    seqs = [s.values["pose_seq"] for s in got]
    assert sorted(seqs) == [0, 1, 2, 3, 4, 5, 100, 101]  # bad2's frames before its fault are kept
    assert [s for s in seqs if s < 100] == [0, 1, 2, 3, 4, 5]
    assert "malformed stream" in caplog.text and "payload length 4294967280 exceeds" in caplog.text
    assert src.stats.dropped.as_dict() == {"bad_magic": 1, "payload_too_large": 1}


async def test_max_connections_and_idle_timeout() -> None:
    src = DdsSource("dds", mapping=mapping(), port=0, limits=DdsLimits(max_connections=1, idle_timeout_s=0.3))
    async with anyio.create_task_group() as tg:
        port = await tg.start(src.run, lambda s: None)
        first = await anyio.connect_tcp("127.0.0.1", port)
        await first.send(encode_header(HEADER))
        await wait_for(lambda: len(src.connections) == 1)
        second = await anyio.connect_tcp("127.0.0.1", port)
        with pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)), anyio.fail_after(5):
            await second.receive()
        assert src.counters.rejected_connections == 1
        # the first one says nothing more: the idle timeout closes it
        with pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)), anyio.fail_after(5):
            await first.receive()
        await wait_for(lambda: not src.connections)
        assert src.counters.disconnect_reasons["idle_timeout"] == 1
        await first.aclose()
        await second.aclose()
        tg.cancel_scope.cancel()


async def test_sink_full_is_counted() -> None:
    def full(_: Sample) -> None:
        raise SinkFull

    src = DdsSource("dds", mapping=mapping(), port=0)
    async with anyio.create_task_group() as tg:
        port = await tg.start(src.run, full)
        async with await anyio.connect_tcp("127.0.0.1", port) as s:
            await s.send(encode_header(HEADER) + frames(4))
            await wait_for(lambda: src.stats.received == 4)
        tg.cancel_scope.cancel()
    assert src.stats.dropped.as_dict() == {"queue_full": 4}
    assert src.stats.samples == 0


async def test_connect_mode_redials_after_the_peer_goes() -> None:
    """Client mode: the first dial fails (nobody listens), then a server appears and serves
    two connections one after the other; samples of both arrive with their own time bases."""
    got: list[Sample] = []
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    await listener.aclose()  # the port is free: the first dials fail
    src = DdsSource(
        "dds",
        mapping=mapping(),
        port=port,
        mode="connect",
        limits=DdsLimits(reconnect_min_s=0.05, reconnect_max_s=0.2),
    )
    async with anyio.create_task_group() as tg:
        await tg.start(src.run, got.append)
        await wait_for(lambda: src.stats.state is SourceState.RECONNECTING)
        served = 0
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port)
        async with listener:
            for base in (1_000, 2_000):
                inner = listener.listeners[0]
                assert isinstance(inner, anyio.abc.SocketListener)
                stream = await inner.accept()
                async with stream:
                    await stream.send(
                        encode_header(Header(base, HEADER.participants, HEADER.topics)) + frames(2)
                    )
                served += 1
                await wait_for(lambda n=served: len(got) == 2 * n)  # type: ignore[misc]
        tg.cancel_scope.cancel()
    assert [s.source_time_ns for s in got] == [1_000, 1_001_000, 2_000, 1_002_000]
    assert src.stats.restarts >= 2
    assert src.counters.connections_total == 2


async def test_listen_on_a_taken_port_fails_clearly() -> None:
    from wrtfd.errors import SourceError

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    try:
        src = DdsSource("dds", mapping=mapping(), port=port)
        with pytest.raises(SourceError, match=f"cannot listen on 127.0.0.1:{port}"):
            await src.run(lambda s: None)
        assert src.stats.state is SourceState.STOPPED
    finally:
        await listener.aclose()
