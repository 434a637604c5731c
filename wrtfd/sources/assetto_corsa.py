"""Assetto Corsa remote telemetry source: the one UDP source that talks first.

Protocol (``shared/spec/protocols/assetto_corsa.md``): we send a 12-byte HANDSHAKE to the game
(port 9996), it answers with a 408-byte response naming car, driver and track, we SUBSCRIBE to
the RTCarInfo stream, and the game streams 328-byte packets back to our socket. AC only answers
while a session is loaded, so the handshake is retried every ``handshake_interval_s`` until it
does; when the stream goes quiet for ``stale_after_s`` (session change, game quit) we handshake
again; on shutdown we send DISMISS so the game stops sending.

Lifecycle: ``STARTING -> (bound) LISTENING "handshaking" -> (response) RECEIVING ->
(stream stops) RECONNECTING -> (response) RECEIVING ... cancelled -> DISMISS -> STOPPED``.
Datagrams from any host but the game's are dropped as ``sender_not_allowed``.
"""

from __future__ import annotations

import logging
import socket
import time
from typing import Any

import anyio

from wrtfd.decoders.assetto_corsa import (
    HANDSHAKE_RESPONSE_SIZE,
    OP_DISMISS,
    OP_HANDSHAKE,
    OP_SUBSCRIBE_UPDATE,
    AssettoCorsaDecoder,
    decode_handshake,
    encode_request,
)
from wrtfd.decoders.base import Sample
from wrtfd.errors import ConfigError, DecodeError, SourceError
from wrtfd.sources.base import SampleSink, SinkFull, SourceState, SourceStats
from wrtfd.sources.udp import DatagramSocket

__all__ = ["AssettoCorsaSource"]

log = logging.getLogger("wrtfd.sources.assetto_corsa")


class AssettoCorsaSource:
    """Handshakes with Assetto Corsa at ``host:port`` and records its RTCarInfo stream.

    ``handshakes_sent``, ``handshakes_answered`` and ``rehandshakes`` (the stream stopped and the
    handshake started again) are exposed for status and tests; ``stats.restarts`` stays the
    daemon's (restarts after a failure).
    """

    def __init__(
        self,
        name: str = "assetto_corsa",
        decoder: AssettoCorsaDecoder | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 9996,
        local_host: str = "0.0.0.0",
        local_port: int = 0,
        handshake_interval_s: float = 2.0,
        stale_after_s: float = 3.0,
        max_datagram_bytes: int = 1024,
        rcvbuf_bytes: int | None = 1 << 20,
    ) -> None:
        if handshake_interval_s <= 0 or stale_after_s <= 0:
            raise ConfigError(f"{name}: handshake_interval_s and stale_after_s must be positive")
        self.name = name
        self.decoder = decoder if decoder is not None else AssettoCorsaDecoder()
        self.host = host
        self.port = port
        self.local_host = local_host
        self.local_port = local_port
        self.handshake_interval_s = handshake_interval_s
        self.stale_after_s = stale_after_s
        self.max_datagram_bytes = max_datagram_bytes
        self.rcvbuf_bytes = rcvbuf_bytes
        self.stats = SourceStats()
        self.handshakes_sent = 0
        self.handshakes_answered = 0
        self.rehandshakes = 0  # handshakes started again because the stream stopped
        self._socket: DatagramSocket | None = None

    @property
    def local_address(self) -> tuple[str, int] | None:
        return self._socket.local_address if self._socket is not None else None

    async def run(self, sink: SampleSink, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Bind, report started, handshake and receive until cancelled; DISMISS on the way out.

        :raises SourceError: the local address cannot be bound or the game's host not resolved.
        """
        self.stats.set_state(SourceState.STARTING)
        try:
            infos = await anyio.getaddrinfo(
                self.host, self.port, family=socket.AF_INET, type=socket.SOCK_DGRAM
            )
        except OSError as e:
            self.stats.set_state(SourceState.FAILED, str(e))
            raise SourceError(f"{self.name}: cannot resolve {self.host}: {e}") from e
        server = (str(infos[0][4][0]), self.port)
        try:
            sock = DatagramSocket(self.local_host, self.local_port, rcvbuf_bytes=self.rcvbuf_bytes)
        except SourceError as e:
            self.stats.set_state(SourceState.FAILED, str(e))
            raise
        self._socket = sock
        self.stats.set_state(SourceState.LISTENING, f"handshaking with {server[0]}:{server[1]}")
        try:
            task_status.started()
            await self._loop(sock, server, sink)
        finally:
            if self.handshakes_answered:
                try:
                    sock.send_to(encode_request(OP_DISMISS), server)
                except OSError as e:  # the game may be gone already; nothing else to do
                    log.debug("%s: dismiss not sent: %s", self.name, e)
            sock.close()
            self.stats.set_state(SourceState.STOPPED)

    def _send(self, sock: DatagramSocket, operation: int, server: tuple[str, int]) -> None:
        try:
            sock.send_to(encode_request(operation), server)
        except OSError as e:
            self.stats.dropped.add("send_error")
            log.debug("%s: send to %s failed: %s", self.name, server, e)

    async def _loop(self, sock: DatagramSocket, server: tuple[str, int], sink: SampleSink) -> None:
        stats = self.stats
        dropped = stats.dropped
        decoder = self.decoder
        streaming = False
        next_handshake = 0.0
        last_rx = 0.0
        read_size = self.max_datagram_bytes + 1
        while True:
            now = time.monotonic()
            if streaming and now - last_rx > self.stale_after_s:
                streaming = False
                next_handshake = now
                self.rehandshakes += 1
                stats.set_state(SourceState.RECONNECTING, "stream stopped; handshaking again")
                log.info("%s: stream stopped; handshaking again", self.name)
            if not streaming and now >= next_handshake:
                self._send(sock, OP_HANDSHAKE, server)
                self.handshakes_sent += 1
                next_handshake = now + self.handshake_interval_s
            deadline = last_rx + self.stale_after_s if streaming else next_handshake
            with anyio.move_on_after(max(0.0, deadline - now) + 0.001):
                await sock.wait_readable()
            while True:
                try:
                    got = sock.receive(read_size)
                except OSError:
                    dropped.add("socket_error")
                    continue
                if got is None:
                    break
                data, addr, _flags, kernel_dropped, rx_ns = got
                if kernel_dropped:
                    dropped.add("kernel_overflow", kernel_dropped)
                stats.received += 1
                stats.bytes += len(data)
                stats.last_rx_ns = rx_ns
                if addr[0] != server[0]:
                    dropped.add("sender_not_allowed")
                    continue
                if len(data) > self.max_datagram_bytes:
                    dropped.add("too_large")
                    continue
                if len(data) == HANDSHAKE_RESPONSE_SIZE:
                    try:
                        response = decode_handshake(data)
                    except DecodeError as e:
                        dropped.add(e.reason)
                        continue
                    decoder.set_handshake(response)
                    self.handshakes_answered += 1
                    self._send(sock, OP_SUBSCRIBE_UPDATE, server)
                    streaming = True
                    last_rx = time.monotonic()
                    stats.set_state(SourceState.RECEIVING, f"{response.car_name} at {response.track_name}")
                    log.info("%s: subscribed: %s at %s", self.name, response.car_name, response.track_name)
                    continue
                try:
                    decoded = decoder.decode(data)
                except DecodeError as e:
                    dropped.add(e.reason)
                    continue
                except Exception:  # a decoder bug must not stop recording: count it, log it
                    dropped.add("decoder_error")
                    log.exception("%s: decoder failed on a %d-byte datagram", self.name, len(data))
                    continue
                if streaming:
                    last_rx = time.monotonic()
                if decoded is None:
                    continue
                try:
                    sink(Sample.from_decoded(self.name, rx_ns, decoded))
                except SinkFull:
                    dropped.add("queue_full")
                    continue
                stats.samples += 1
