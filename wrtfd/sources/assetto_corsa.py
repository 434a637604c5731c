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
import time

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
from wrtfd.errors import ConfigError, DecodeError
from wrtfd.sources.base import SampleSink, SourceState, SourceStats
from wrtfd.sources.peer import PeerSource, decode_counted, hand_over, peer_datagrams
from wrtfd.sources.udp import DatagramSocket

__all__ = ["AssettoCorsaSource"]

log = logging.getLogger("wrtfd.sources.assetto_corsa")


class AssettoCorsaSource(PeerSource):
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

    def _listening(self, server: tuple[str, int]) -> str:
        return f"handshaking with {server[0]}:{server[1]}"

    def _goodbye(self) -> bytes | None:
        return encode_request(OP_DISMISS) if self.handshakes_answered else None

    async def _loop(self, sock: DatagramSocket, server: tuple[str, int], sink: SampleSink) -> None:
        stats = self.stats
        dropped = stats.dropped
        decoder = self.decoder
        streaming = False
        next_handshake = 0.0
        last_rx = 0.0
        while True:
            now = time.monotonic()
            if streaming and now - last_rx > self.stale_after_s:
                streaming = False
                next_handshake = now
                self.rehandshakes += 1
                stats.set_state(SourceState.RECONNECTING, "stream stopped; handshaking again")
                log.info("%s: stream stopped; handshaking again", self.name)
            if not streaming and now >= next_handshake:
                self._send(sock, encode_request(OP_HANDSHAKE), server)
                self.handshakes_sent += 1
                next_handshake = now + self.handshake_interval_s
            deadline = last_rx + self.stale_after_s if streaming else next_handshake
            with anyio.move_on_after(max(0.0, deadline - now) + 0.001):
                await sock.wait_readable()
            for data, rx_ns in peer_datagrams(sock, server, stats, self.max_datagram_bytes, self.raw_sink):
                if len(data) == HANDSHAKE_RESPONSE_SIZE:
                    try:
                        response = decode_handshake(data)
                    except DecodeError as e:
                        dropped.add(e.reason)
                        continue
                    decoder.set_handshake(response)
                    self.handshakes_answered += 1
                    self._send(sock, encode_request(OP_SUBSCRIBE_UPDATE), server)
                    streaming = True
                    last_rx = time.monotonic()
                    stats.set_state(SourceState.RECEIVING, f"{response.car_name} at {response.track_name}")
                    log.info("%s: subscribed: %s at %s", self.name, response.car_name, response.track_name)
                    continue
                ok, decoded = decode_counted(decoder, data, stats, log, self.name)
                if ok and streaming:
                    last_rx = time.monotonic()
                if decoded is not None:
                    hand_over(sink, self.name, rx_ns, decoded, stats)
