"""AssettoCorsaSource against a fake AC server on loopback that only streams after a correct
handshake and subscribe: retries, session info, re-handshake after the stream stops, dismiss."""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.abc
import pytest

from wrtfd.decoders.assetto_corsa import AssettoCorsaDecoder
from wrtfd.decoders.base import Sample
from wrtfd.errors import ConfigError
from wrtfd.sources.assetto_corsa import AssettoCorsaSource
from wrtfd.sources.base import SourceState


def _utf16(text: str) -> bytes:
    return (text + "\x00junk").encode("utf-16-le").ljust(100, b"\x00")[:100]


def response(car: str, track: str) -> bytes:
    return struct.pack(
        "<100s100sii100s100s", _utf16(car), _utf16("Test Driver"), 4242, 1, _utf16(track), _utf16("")
    )


@dataclass
class FakeAC:
    """Answers the handshake after ``ignore_first`` attempts; streams ``bursts`` of packets, one
    burst per subscription, then goes quiet (like a session ending)."""

    bursts: list[list[bytes]]
    tracks: list[str]
    ignore_first: int = 2
    ops: list[int] = field(default_factory=list)
    bad_requests: int = 0
    sock: socket.socket = field(default_factory=lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))

    def drain(self) -> None:
        """Read what the client sent while the server task was being cancelled."""
        while True:
            try:
                data = self.sock.recv(64)
            except BlockingIOError:
                return
            self.ops.append(struct.unpack("<iii", data)[2])

    def __post_init__(self) -> None:
        self.sock.bind(("127.0.0.1", 0))
        self.sock.setblocking(False)

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    async def serve(self, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        handshakes = 0
        shaken: set[tuple[str, int]] = set()
        while True:
            await anyio.wait_readable(self.sock)
            data, client = self.sock.recvfrom(64)
            if len(data) != 12:
                self.bad_requests += 1
                continue
            _ident, version, op = struct.unpack("<iii", data)
            self.ops.append(op)
            if version != 1:
                self.bad_requests += 1
            elif op == 0:
                handshakes += 1
                if handshakes > self.ignore_first:
                    track = self.tracks[min(self.ops.count(1), len(self.tracks) - 1)]
                    self.sock.sendto(response("ks_audi_r8_lms", track), client)
                    shaken.add(client)
            elif op == 1 and client in shaken:
                shaken.discard(client)  # a new handshake is needed for the next subscription
                if self.bursts:
                    burst = self.bursts.pop(0)
                    for packet in burst:
                        self.sock.sendto(packet, client)
                        await anyio.lowlevel.checkpoint()


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
    assert source.stats.restarts >= 1
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
    assert source.stats.dropped.as_dict() == {"sender_not_allowed": 1}


def test_bad_timing_options() -> None:
    with pytest.raises(ConfigError):
        AssettoCorsaSource(handshake_interval_s=0)
