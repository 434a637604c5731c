"""What the UDP sources that talk to the game first share (Assetto Corsa's handshake, ACC's
broadcasting registration): the game's resolved address, one bound socket, and a receive path
that counts every datagram and keeps only the game's.

With a ``raw_sink`` (the raw tap), every datagram the socket received is handed to it first,
the game's and any other sender's, with its receive time.

Drop reasons: ``socket_error``, ``kernel_overflow``, ``sender_not_allowed`` (not from the game's
address), ``too_large`` (over ``max_datagram_bytes``), the decoder's reasons, ``decoder_error``
(a decoder bug: logged) and ``queue_full``.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from typing import Any

import anyio

from wrtfd.decoders.base import Decoded, Decoder, Sample
from wrtfd.errors import DecodeError, SourceError
from wrtfd.sources.base import RawSink, SampleSink, SinkFull, SourceState, SourceStats
from wrtfd.sources.udp import DatagramSocket

__all__ = ["PeerSource", "decode_counted", "hand_over", "open_peer_socket", "peer_datagrams"]


async def open_peer_socket(
    name: str,
    stats: SourceStats,
    *,
    host: str,
    port: int,
    local_host: str,
    local_port: int,
    rcvbuf_bytes: int | None,
) -> tuple[DatagramSocket, tuple[str, int]]:
    """Resolve the game's ``host`` and bind our socket; the state says FAILED on an error.

    :raises SourceError: the host cannot be resolved or the local address bound.
    """
    stats.set_state(SourceState.STARTING)
    try:
        infos = await anyio.getaddrinfo(host, port, family=socket.AF_INET, type=socket.SOCK_DGRAM)
    except OSError as e:
        stats.set_state(SourceState.FAILED, str(e))
        raise SourceError(f"{name}: cannot resolve {host}: {e}") from e
    server = (str(infos[0][4][0]), port)
    try:
        sock = DatagramSocket(local_host, local_port, rcvbuf_bytes=rcvbuf_bytes)
    except SourceError as e:
        stats.set_state(SourceState.FAILED, str(e))
        raise
    return sock, server


def peer_datagrams(
    sock: DatagramSocket,
    server: tuple[str, int],
    stats: SourceStats,
    max_datagram_bytes: int,
    raw: RawSink | None = None,
) -> Iterator[tuple[bytes, int]]:
    """Every datagram waiting on ``sock`` from the game, with its receive time; others counted
    (all of them handed to ``raw`` first, the tap)."""
    dropped = stats.dropped
    read_size = max_datagram_bytes + 1  # one more byte tells "too large" apart
    local = sock.local_address
    while True:
        try:
            got = sock.receive(read_size)
        except OSError:
            dropped.add("socket_error")
            continue
        if got is None:
            return
        data, addr, _flags, kernel_dropped, rx_ns = got
        if raw is not None:
            raw(rx_ns, addr, local, data)
        if kernel_dropped:
            dropped.add("kernel_overflow", kernel_dropped)
        stats.received += 1
        stats.bytes += len(data)
        stats.last_rx_ns = rx_ns
        if addr[0] != server[0]:
            dropped.add("sender_not_allowed")
            continue
        if len(data) > max_datagram_bytes:
            dropped.add("too_large")
            continue
        yield data, rx_ns


def decode_counted(
    decoder: Decoder, data: bytes, stats: SourceStats, log: logging.Logger, name: str
) -> tuple[bool, Decoded | None]:
    """``(decoded well, what it gave)``; a malformed datagram or a decoder bug is counted."""
    try:
        return True, decoder.decode(data)
    except DecodeError as e:
        stats.dropped.add(e.reason)
    except Exception:  # a decoder bug must not stop recording: count it, log it
        stats.dropped.add("decoder_error")
        log.exception("%s: decoder failed on a %d-byte datagram", name, len(data))
    return False, None


def hand_over(sink: SampleSink, name: str, rx_ns: int, decoded: Decoded, stats: SourceStats) -> None:
    """One sample to the recorder's intake; a full intake is a counted drop."""
    try:
        sink(Sample.from_decoded(name, rx_ns, decoded))
    except SinkFull:
        stats.dropped.add("queue_full")
        return
    stats.samples += 1


class PeerSource:
    """Template of a source that talks to the game first (python-can's ``BusABC`` pattern):
    :meth:`run` resolves the game, binds, reports started, runs :meth:`_loop` until cancelled,
    then sends :meth:`_goodbye` (if any) and closes. Subclasses set the attributes below in
    their ``__init__`` and implement ``_loop``, ``_goodbye`` and ``_listening``.
    """

    name: str
    stats: SourceStats
    host: str
    port: int
    local_host: str
    local_port: int
    rcvbuf_bytes: int | None
    max_datagram_bytes: int
    #: The raw tap (every datagram received, before any check); set before :meth:`run`.
    raw_sink: RawSink | None = None
    _socket: DatagramSocket | None = None
    _log = logging.getLogger("wrtfd.sources.peer")

    @property
    def local_address(self) -> tuple[str, int] | None:
        return self._socket.local_address if self._socket is not None else None

    async def run(self, sink: SampleSink, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Bind, report started, talk to the game and receive until cancelled; say goodbye.

        :raises SourceError: the local address cannot be bound or the game's host not resolved.
        """
        sock, server = await open_peer_socket(
            self.name,
            self.stats,
            host=self.host,
            port=self.port,
            local_host=self.local_host,
            local_port=self.local_port,
            rcvbuf_bytes=self.rcvbuf_bytes,
        )
        self._socket = sock
        self.stats.set_state(SourceState.LISTENING, self._listening(server))
        try:
            task_status.started()
            await self._loop(sock, server, sink)
        finally:
            goodbye = self._goodbye()
            if goodbye is not None:
                try:
                    sock.send_to(goodbye, server)
                except OSError as e:  # the game may be gone already; nothing else to do
                    self._log.debug("%s: goodbye not sent: %s", self.name, e)
            sock.close()
            self.stats.set_state(SourceState.STOPPED)

    def _send(self, sock: DatagramSocket, data: bytes, server: tuple[str, int]) -> None:
        """Best effort (UDP): a failed send is counted as ``send_error``."""
        try:
            sock.send_to(data, server)
        except OSError as e:
            self.stats.dropped.add("send_error")
            self._log.debug("%s: send to %s failed: %s", self.name, server, e)

    def _listening(self, server: tuple[str, int]) -> str:
        """The state detail while the game has not answered yet."""
        raise NotImplementedError

    def _goodbye(self) -> bytes | None:
        """What to send the game on the way out (None: nothing)."""
        raise NotImplementedError

    async def _loop(self, sock: DatagramSocket, server: tuple[str, int], sink: SampleSink) -> None:
        raise NotImplementedError
