"""UdpSource on real loopback sockets: decoding, every drop reason, accounting, bounds."""

from __future__ import annotations

import itertools
import socket
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from tests.decoders.f1_capture import records
from wrtfd.decoders.base import Decoded, Sample
from wrtfd.decoders.f1 import F1Decoder
from wrtfd.decoders.forza import ForzaDecoder
from wrtfd.errors import ConfigError, SourceError
from wrtfd.sources.base import SinkFull, SourceState
from wrtfd.sources.udp import SenderAllowlist, UdpSource


@asynccontextmanager
async def running(source: UdpSource, sink: Callable[[Sample], None]) -> AsyncIterator[tuple[str, int]]:
    async with anyio.create_task_group() as tg:
        await tg.start(source.run, sink)
        addr = source.local_address
        assert addr is not None
        yield addr
        tg.cancel_scope.cancel()


async def until(predicate: Callable[[], bool], timeout_s: float = 5.0) -> None:
    """Wait for the source task to catch up with datagrams already sent (I/O, not timing)."""
    with anyio.fail_after(timeout_s):
        while not predicate():  # noqa: ASYNC110 - the source exposes counters, not events
            await anyio.sleep(0.005)


def sender(host: str = "127.0.0.1") -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((host, 0))
    return s


def accounted(source: UdpSource, none_results: int = 0) -> int:
    s = source.stats
    return s.samples + s.dropped.total() + none_results


async def test_f1_captures_over_udp(shared_data: Path) -> None:
    datagrams = [raw for year in range(2018, 2026) for _n, raw, _p in records(shared_data, year)]
    reference = F1Decoder()
    expected = [reference.decode(d) for d in datagrams]
    samples: list[Sample] = []
    source = UdpSource("f1", F1Decoder(), host="127.0.0.1", port=0, max_datagram_bytes=2048)
    async with running(source, samples.append) as addr:
        assert source.stats.state is SourceState.LISTENING
        tx = sender()
        for d in datagrams:
            tx.sendto(d, addr)
            await anyio.lowlevel.checkpoint()  # let the receiver keep up on a small loopback buffer
        await until(lambda: source.stats.received == len(datagrams))
        tx.close()
    assert source.stats.state is SourceState.STOPPED
    wanted = [e for e in expected if e is not None]
    assert len(samples) == len(wanted) == source.stats.samples
    assert [s.values for s in samples] == [e.values for e in wanted]
    assert [s.source_time_ns for s in samples] == [e.source_time_ns for e in wanted]
    assert all(s.source == "f1" for s in samples)
    # a sessionUID change starts a new session (the captures hold several sessions per year)
    keys = [e.session_key for e in wanted]
    flags = [i > 0 and keys[i] != keys[i - 1] for i in range(len(keys))]
    assert [s.new_session for s in samples] == flags
    assert sum(flags) >= 8
    rx = [s.rx_ns for s in samples]
    assert rx == sorted(rx)
    assert source.stats.dropped.total() == 0
    assert source.stats.bytes == sum(len(d) for d in datagrams)


async def test_every_drop_has_a_reason() -> None:
    samples: list[Sample] = []
    source = UdpSource("forza", ForzaDecoder(), host="127.0.0.1", port=0, allow_from=["127.0.0.1"],
                       max_datagram_bytes=400)  # fmt: skip
    good = bytes(331)
    async with running(source, samples.append) as addr:
        ok, stranger = sender("127.0.0.1"), sender("127.0.0.2")
        ok.sendto(good, addr)
        ok.sendto(b"\x01" * 17, addr)  # wrong size
        ok.sendto(bytes(401), addr)  # over max_datagram_bytes
        ok.sendto(bytes(9000), addr)  # far over: truncated by recv
        ok.sendto(b"", addr)  # empty datagram
        stranger.sendto(good, addr)
        await until(lambda: source.stats.received == 6)
        ok.close()
        stranger.close()
    assert len(samples) == 1
    assert source.stats.dropped.as_dict() == {"sender_not_allowed": 1, "too_large": 2, "wrong_size": 2}
    assert accounted(source) == source.stats.received


async def test_a_failing_sink_is_counted_not_fatal() -> None:
    calls = [0]

    def broken(_sample: Sample) -> None:
        calls[0] += 1
        raise RuntimeError("mapping bug")

    source = UdpSource("forza", ForzaDecoder(), host="127.0.0.1", port=0)
    async with running(source, broken) as addr:
        tx = sender()
        for _ in range(3):
            tx.sendto(bytes(331), addr)
        await until(lambda: source.stats.received == 3)
        tx.close()
    assert calls[0] == 3
    assert source.stats.dropped.as_dict() == {"sink_error": 3}


async def test_queue_full_and_decoder_bugs_are_counted() -> None:
    class Buggy:
        def decode(self, data: bytes) -> Decoded:
            if data == b"bug":
                raise IndexError("decoder bug")
            return Decoded(values={"n": len(data)})

    def full(_sample: Sample) -> None:
        raise SinkFull

    source = UdpSource("x", Buggy(), host="127.0.0.1", port=0)
    async with running(source, full) as addr:
        tx = sender()
        for payload in (b"bug", b"one", b"two"):
            tx.sendto(payload, addr)
        await until(lambda: source.stats.received == 3)
        tx.close()
    assert source.stats.dropped.as_dict() == {"decoder_error": 1, "queue_full": 2}
    assert source.stats.samples == 0


async def test_kernel_overflow_is_counted_not_silent() -> None:
    """Block the loop while a burst fills a tiny socket buffer: the kernel drops, we count them.

    Linux attaches the drop count to the next datagram queued after the drops, so markers are
    sent until everything sent is accounted for.
    """
    samples: list[Sample] = []
    source = UdpSource("forza", ForzaDecoder(), host="127.0.0.1", port=0, rcvbuf_bytes=4096)
    sent = 2000

    def overflow() -> int:
        return source.stats.dropped.as_dict().get("kernel_overflow", 0)

    async with running(source, samples.append) as addr:
        tx = sender()
        for _ in range(sent):  # no await: the source cannot read during the burst
            tx.sendto(bytes(331), addr)
        with anyio.fail_after(5):
            while source.stats.received + overflow() < sent:
                tx.sendto(bytes(331), addr)
                sent += 1
                await anyio.sleep(0.01)
        tx.close()
    assert overflow() > 0
    assert source.stats.received + overflow() == sent
    assert len(samples) == source.stats.received


async def test_port_in_use_is_a_source_error() -> None:
    blocker = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    blocker.bind(("127.0.0.1", 0))
    port = blocker.getsockname()[1]
    source = UdpSource("f1", F1Decoder(), host="127.0.0.1", port=port)
    with pytest.raises(SourceError, match=str(port)):
        await source.run(lambda s: None)
    assert source.stats.state is SourceState.FAILED
    blocker.close()


def test_allowlist_and_options() -> None:
    allow = SenderAllowlist(["10.0.0.5", "192.168.1.0/24", "::1"])
    assert allow.allows("10.0.0.5") and allow.allows("192.168.1.77") and allow.allows("::1")
    assert not allow.allows("10.0.0.6") and not allow.allows("192.168.2.1") and not allow.allows("junk")
    with pytest.raises(ConfigError):
        SenderAllowlist(["not-an-ip"])
    with pytest.raises(ConfigError):
        UdpSource("x", F1Decoder(), port=0, max_datagram_bytes=70000)


async def test_a_steady_feed_is_read_in_batches_with_kernel_receive_times() -> None:
    """A 200 Hz feed: a few socket reads (not one per datagram), every receive time its own."""
    samples: list[Sample] = []
    source = UdpSource("forza", ForzaDecoder(), host="127.0.0.1", port=0)
    async with running(source, samples.append) as addr:
        assert source._socket is not None
        if not source._socket.timestamps_supported:
            pytest.skip("no kernel receive timestamps here: reads stay per datagram")
        tx = sender()
        t0 = time.monotonic()
        for i in range(60):
            tx.sendto(bytes(331), addr)
            await anyio.sleep(max(0.0, t0 + (i + 1) * 0.005 - time.monotonic()))  # the game's pacing
        await until(lambda: len(samples) == 60)
        tx.close()
    assert source.stats.received == 60 and source.stats.dropped.total() == 0
    assert source.reads < 30  # batched: far fewer wake-ups than datagrams
    rx = [s.rx_ns for s in samples]
    gaps = sorted(b - a for a, b in itertools.pairwise(rx))
    assert all(g >= 0 for g in gaps)
    # kernel arrival times: spaced like the sends, not bunched at the batched read
    assert gaps[len(gaps) // 2] > 1_000_000


async def test_stopping_reads_what_still_waits_in_the_kernel() -> None:
    samples: list[Sample] = []
    source = UdpSource("forza", ForzaDecoder(), host="127.0.0.1", port=0)
    async with running(source, samples.append) as addr:
        tx = sender()
        for _ in range(3):
            tx.sendto(bytes(331), addr)
            await anyio.sleep(0.01)
        for _ in range(10):  # no await: the source cannot read these before it is stopped
            tx.sendto(bytes(331), addr)
        tx.close()
    assert len(samples) == 13 and source.stats.received == 13


async def test_read_interval_zero_reads_every_datagram_on_arrival() -> None:
    samples: list[Sample] = []
    source = UdpSource("forza", ForzaDecoder(), host="127.0.0.1", port=0, read_interval_s=0.0)
    async with running(source, samples.append) as addr:
        tx = sender()
        for i in range(20):
            tx.sendto(bytes(331), addr)
            await until(lambda i=i: len(samples) > i)  # type: ignore[misc]  # one at a time
        tx.close()
    assert len(samples) == 20 and source.reads >= 20


@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.1"])
async def test_the_raw_tap_sees_every_datagram_before_any_check(host: str) -> None:
    """The tap's hook gets every datagram (dropped ones too) with the receive time its sample
    gets, the sender, and the address it was sent to (the kernel's, for a socket bound to every
    address: 127.0.0.2 here, not 0.0.0.0)."""
    samples: list[Sample] = []
    raw: list[tuple[int, tuple[str, int] | None, tuple[str, int] | None, bytes]] = []
    source = UdpSource("forza", ForzaDecoder(), host=host, port=0, allow_from=["127.0.0.1"],
                       max_datagram_bytes=400)  # fmt: skip
    source.raw_sink = lambda rx_ns, src, dst, data: raw.append((rx_ns, src, dst, data))
    target = "127.0.0.2" if host == "0.0.0.0" else host
    sent = [bytes(331), b"\x01" * 17, bytes(401), bytes(331)]
    async with running(source, samples.append) as addr:
        ok, stranger = sender("127.0.0.1"), sender("127.0.0.3")
        for d in sent[:3]:
            ok.sendto(d, (target, addr[1]))
        stranger.sendto(sent[3], (target, addr[1]))
        await until(lambda: source.stats.received == 4)
        ok_addr, stranger_addr = ok.getsockname(), stranger.getsockname()
        ok.close()
        stranger.close()
    assert len(samples) == 1 and source.stats.dropped.total() == 3
    assert [r[3] for r in raw] == [sent[0], sent[1], bytes(401), sent[3]]  # 401: one byte past the limit
    assert [r[1] for r in raw] == [ok_addr] * 3 + [stranger_addr]
    assert {r[2] for r in raw} == {(target, addr[1])}
    assert raw[0][0] == samples[0].rx_ns  # the tap's time is the sample's
    assert [r[0] for r in raw] == sorted(r[0] for r in raw)
