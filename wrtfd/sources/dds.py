"""The "DDS-like socket" source: ``.zddsrec`` streams over TCP.

Each connection sends one ``.zddsrec`` header (its own participants and topics tables) and then
frames (:mod:`wrtfd.zddsrec.format`). In ``listen`` mode the source accepts up to
``max_connections`` peers at once; in ``connect`` mode it dials one peer and redials with
exponential backoff whenever the connection fails or ends.

Every mapped DDS sample becomes one :class:`~wrtfd.decoders.base.Sample` whose
``source_time_ns`` is the stream's ``time_base_unix_ns + timestamp_delta_ns`` (the scheduler's
source clock) and whose ``rx_ns`` is the monotonic receive time of the bytes. A disposed or
unregistered instance gives a sample with no values and its channels in ``stale``.

A peer that breaks the format (bad magic, unknown sample kind, index out of range, oversized
length) or stays silent past ``idle_timeout_s`` is disconnected with the reason logged and
counted; the frames it sent before the fault are kept, and other connections carry on.

Lifecycle of :meth:`DdsSource.run`::

    listen:   STARTING -> (bound) LISTENING -> (first frame) RECEIVING ... cancelled -> STOPPED
    connect:  STARTING -> (dial fails / stream ends) RECONNECTING --backoff--> dial again
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import SocketAttribute, SocketStream

from wrtfd.decoders.base import Sample
from wrtfd.errors import DecodeError, SourceError
from wrtfd.sources.base import RawSink, SampleSink, SinkFull, SourceState, SourceStats
from wrtfd.zddsrec.format import Frame, Limits, StreamDecoder, ZddsrecError
from wrtfd.zddsrec.mapper import FrameMapper
from wrtfd.zddsrec.mapping import MappingConfig

__all__ = ["ConnectionInfo", "DdsLimits", "DdsSource"]

log = logging.getLogger("wrtfd.sources.dds")


@dataclass(frozen=True, slots=True)
class DdsLimits:
    """Bounds on what peers can make the source hold or wait for.

    ``max_payload_bytes``/``max_string_bytes`` default (None) to the mapping's ``[limits]``.
    """

    max_connections: int = 8
    idle_timeout_s: float | None = 10.0
    max_payload_bytes: int | None = None
    max_string_bytes: int | None = None
    recv_chunk_bytes: int = 64 * 1024
    reconnect_min_s: float = 0.25
    reconnect_max_s: float = 5.0

    def __post_init__(self) -> None:
        if self.max_connections < 1:
            raise ValueError("max_connections must be >= 1")
        if self.idle_timeout_s is not None and self.idle_timeout_s <= 0:
            raise ValueError("idle_timeout_s must be > 0 or None")
        if not 0 < self.reconnect_min_s <= self.reconnect_max_s:
            raise ValueError("need 0 < reconnect_min_s <= reconnect_max_s")
        if self.recv_chunk_bytes < 1:
            raise ValueError("recv_chunk_bytes must be >= 1")


@dataclass(slots=True)
class ConnectionInfo:
    """What status shows about one live connection."""

    peer: str
    connected_ns: int
    bytes: int = 0
    frames: int = 0
    participants: int | None = None
    topics: int | None = None


@dataclass(slots=True)
class _Counters:
    connections_total: int = 0
    rejected_connections: int = 0
    disconnect_reasons: Counter[str] = field(default_factory=Counter)


class DdsSource:
    """TCP source of ``.zddsrec`` streams.

    :param name: source name (channels are recorded as ``<name>.<channel>``).
    :param mapping: topic-to-channel mapping (:func:`wrtfd.zddsrec.mapping.load_mapping`).
    :param host: address to bind (listen) or to dial (connect).
    :param port: TCP port; 0 in listen mode picks a free one (see :attr:`bound_port`).
    :param mode: ``"listen"`` or ``"connect"``.
    :param limits: connection count, idle timeout, size caps, reconnect backoff.
    """

    def __init__(
        self,
        name: str,
        *,
        mapping: MappingConfig,
        host: str = "127.0.0.1",
        port: int = 7410,
        mode: str = "listen",
        limits: DdsLimits | None = None,
    ) -> None:
        if mode not in ("listen", "connect"):
            raise ValueError(f"mode must be 'listen' or 'connect', got {mode!r}")
        if not 0 <= port <= 65535:
            raise ValueError(f"port must be in 0..65535, got {port}")
        self.name = name
        self.mapping = mapping
        self.host = host
        self.port = port
        self.mode = mode
        self.limits = limits or DdsLimits()
        self.stats = SourceStats()
        self.bound_port: int | None = None
        self.connections: dict[int, ConnectionInfo] = {}
        #: DDS topic name -> samples received that no mapping takes
        self.unmapped: Counter[str] = Counter()
        self.counters = _Counters()
        self._next_id = 0
        #: The raw tap: every TCP chunk received, of every connection (set before :meth:`run`).
        self.raw_sink: RawSink | None = None
        lim = mapping.limits
        self._format_limits = Limits(
            max_payload_bytes=self.limits.max_payload_bytes or lim.max_payload_bytes,
            max_string_bytes=self.limits.max_string_bytes or lim.max_string_bytes,
        )

    def snapshot(self) -> dict[str, Any]:
        snap = self.stats.snapshot()
        snap["connections"] = [
            {"peer": c.peer, "bytes": c.bytes, "frames": c.frames, "topics": c.topics}
            for c in self.connections.values()
        ]
        snap["connections_total"] = self.counters.connections_total
        snap["rejected_connections"] = self.counters.rejected_connections
        snap["disconnect_reasons"] = dict(self.counters.disconnect_reasons)
        snap["unmapped_topics"] = dict(self.unmapped)
        return snap

    async def run(self, sink: SampleSink, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled. :raises SourceError: listen mode cannot bind its port."""
        try:
            if self.mode == "listen":
                await self._listen(sink, task_status)
            else:
                await self._dial(sink, task_status)
        finally:
            self.stats.set_state(SourceState.STOPPED)

    # ------------------------------------------------------------------ modes

    async def _listen(self, sink: SampleSink, task_status: Any) -> None:
        try:
            listener = await anyio.create_tcp_listener(
                local_host=self.host, local_port=self.port, reuse_port=False
            )
        except OSError as exc:
            self.stats.set_state(SourceState.FAILED, f"cannot listen on {self.host}:{self.port}: {exc}")
            raise SourceError(f"{self.name}: cannot listen on {self.host}:{self.port}: {exc}") from exc
        async with listener:
            self.bound_port = int(listener.listeners[0].extra(SocketAttribute.local_port))
            self.stats.set_state(SourceState.LISTENING, f"{self.host}:{self.bound_port}")
            task_status.started(self.bound_port)

            async def handle(stream: SocketStream) -> None:
                if len(self.connections) >= self.limits.max_connections:
                    self.counters.rejected_connections += 1
                    self.stats.dropped.add("too_many_connections")
                    log.warning(
                        "%s: refused %s: %d connections open (max_connections)",
                        self.name,
                        _peer(stream),
                        len(self.connections),
                    )
                    await stream.aclose()
                    return
                try:
                    await self._serve(stream, sink)
                except Exception:  # one peer's trouble must not stop the listener or other peers
                    self.stats.dropped.add("connection_error")
                    log.exception("%s: connection handler failed", self.name)

            await listener.serve(handle)

    async def _dial(self, sink: SampleSink, task_status: Any) -> None:
        task_status.started(None)
        delay = self.limits.reconnect_min_s
        while True:
            try:
                stream = await anyio.connect_tcp(self.host, self.port)
            except OSError as exc:
                self.stats.set_state(SourceState.RECONNECTING, f"connect {self.host}:{self.port}: {exc}")
                self.stats.restarts += 1
                await anyio.sleep(delay)
                delay = min(delay * 2, self.limits.reconnect_max_s)
                continue
            frames = await self._serve(stream, sink)
            if frames:
                delay = self.limits.reconnect_min_s  # the peer worked: start backing off afresh
            self.stats.set_state(SourceState.RECONNECTING, f"{self.host}:{self.port}: connection ended")
            self.stats.restarts += 1
            await anyio.sleep(delay)
            delay = min(delay * 2, self.limits.reconnect_max_s)

    # ------------------------------------------------------------------ one connection

    async def _serve(self, stream: SocketStream, sink: SampleSink) -> int:
        """Read one connection to its end; return the number of frames it delivered."""
        conn_id = self._next_id
        self._next_id += 1
        info = ConnectionInfo(peer=_peer(stream), connected_ns=time.monotonic_ns())
        self.connections[conn_id] = info
        self.counters.connections_total += 1
        decoder = StreamDecoder(self._format_limits)
        mapper: FrameMapper | None = None
        idle = self.limits.idle_timeout_s
        chunk = self.limits.recv_chunk_bytes
        reason = "closed"
        try:
            async with stream:
                while True:
                    with anyio.move_on_after(math.inf if idle is None else idle) as scope:
                        try:
                            data = await stream.receive(chunk)
                        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                            reason = "closed"
                            break
                    if scope.cancelled_caught:
                        reason = "idle_timeout"
                        log.warning("%s: %s silent for %.1f s: disconnected", self.name, info.peer, idle)
                        break
                    rx_ns = time.monotonic_ns()
                    if self.raw_sink is not None:  # the tap: every chunk, as received
                        self.raw_sink(rx_ns, None, None, data)
                    info.bytes += len(data)
                    self.stats.bytes += len(data)
                    error: ZddsrecError | None = None
                    try:
                        frames = decoder.feed(data)
                    except ZddsrecError as exc:
                        frames = exc.frames_before
                        error = exc
                    if mapper is None and decoder.header is not None:
                        mapper = FrameMapper(self.mapping, decoder.header, unmapped=self.unmapped)
                        info.participants = len(decoder.header.participants)
                        info.topics = len(decoder.header.topics)
                    if frames and mapper is not None:
                        info.frames += len(frames)
                        self._deliver(frames, mapper, rx_ns, sink)
                    if error is not None:
                        reason = error.reason
                        self.stats.dropped.add(error.reason)
                        log.warning(
                            "%s: %s sent a malformed stream, disconnected: %s", self.name, info.peer, error
                        )
                        break
        finally:
            self.counters.disconnect_reasons[reason] += 1
            del self.connections[conn_id]
            if not self.connections and self.mode == "listen" and self.stats.state is not SourceState.STOPPED:
                self.stats.set_state(SourceState.LISTENING, f"{self.host}:{self.bound_port}")
        return info.frames

    def _deliver(self, frames: list[Frame], mapper: FrameMapper, rx_ns: int, sink: SampleSink) -> None:
        stats = self.stats
        stats.received += len(frames)
        stats.last_rx_ns = rx_ns
        if stats.state is not SourceState.RECEIVING:
            stats.set_state(SourceState.RECEIVING)
        name = self.name
        for frame in frames:
            try:
                mapped = mapper.map(frame)
            except DecodeError as exc:
                stats.dropped.add(exc.reason)
                continue
            if mapped is None:
                stats.dropped.add("unmapped")
                continue
            sample = Sample(
                source=name,
                rx_ns=rx_ns,
                values=mapped.values,
                source_time_ns=mapped.time_ns,
                stale=mapped.stale,
            )
            try:
                sink(sample)
            except SinkFull:
                stats.dropped.add("queue_full")
                continue
            stats.samples += 1


def _peer(stream: SocketStream) -> str:
    try:
        addr: Any = stream.extra(SocketAttribute.remote_address)
    except Exception:  # the socket may already be gone; the peer name is only for logs
        return "?"
    if isinstance(addr, tuple) and len(addr) >= 2:
        return f"{addr[0]}:{addr[1]}"
    return str(addr)
