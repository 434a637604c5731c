"""ACC broadcasting source: registers with the game as a broadcasting client and records what it sends.

Protocol (``shared/spec/protocols/wave2-games.md``, section 2; :mod:`wrtfd.decoders.acc`): we send
REGISTER_COMMAND_APPLICATION (display name, the connection password of the game's
``broadcasting.json``, the update interval, the command password) to the game's
``updListenerPort``; it answers REGISTRATION_RESULT (connection id, success, error text) and then
streams realtime updates, car updates, entry lists, track data and events back to our socket. On
success we request the entry list and the track data (again, a few times, until they arrive).

Registration is retried while unanswered, with a delay doubling from ``register_interval_s`` up
to ``register_interval_max_s`` (the game may not run yet, or refuse: a wrong password is shown
in the state detail and logged). We register again when the stream stops for
``reregister_after_s`` (the game restarted or the session was left) and take a result with a new
connection id as a new game (a new recording session). On shutdown we send
UNREGISTER_COMMAND_APPLICATION.

Lifecycle: ``STARTING -> (bound) LISTENING "registering" -> (accepted) RECEIVING -> (stream
stops) RECONNECTING -> (accepted) RECEIVING ... cancelled -> UNREGISTER -> STOPPED``. Datagrams
from any host but the game's are dropped as ``sender_not_allowed``; larger than
``max_datagram_bytes`` as ``too_large``; refused registrations are counted as
``registration_refused``.
"""

from __future__ import annotations

import logging
import time

import anyio

from wrtfd.decoders.acc import (
    MSG_REGISTRATION_RESULT,
    OUT_REQUEST_ENTRY_LIST,
    OUT_REQUEST_TRACK_DATA,
    OUT_UNREGISTER,
    AccDecoder,
    decode_registration,
    encode_register,
    encode_request,
)
from wrtfd.errors import ConfigError, DecodeError
from wrtfd.sources.base import SampleSink, SourceState, SourceStats
from wrtfd.sources.peer import PeerSource, decode_counted, hand_over, peer_datagrams
from wrtfd.sources.udp import DatagramSocket

__all__ = ["AccSource"]

log = logging.getLogger("wrtfd.sources.acc")

#: Strings the game receives in the registration (UTF-8 bytes); the config checks them too.
MAX_TEXT_BYTES = 255
#: Entry list / track data requests: at most one per this many seconds, a few times each.
_REQUEST_INTERVAL_S = 1.0
_TRACK_REQUESTS = 5
_REGISTRATION_TYPE = bytes((MSG_REGISTRATION_RESULT,))


class AccSource(PeerSource):
    """Registers with ACC at ``host:port`` and records its broadcasting stream.

    Counters for status and tests: ``registrations_sent``, ``registrations_accepted``,
    ``registrations_refused``, ``reregistrations`` (the stream stopped and registration started
    again) and ``entry_list_requests``; ``stats.restarts`` stays the daemon's.
    """

    def __init__(
        self,
        name: str = "acc",
        decoder: AccDecoder | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 9000,
        password: str = "",
        command_password: str = "",
        display_name: str = "wrtfd",
        update_interval_ms: int = 100,
        local_host: str = "0.0.0.0",
        local_port: int = 0,
        register_interval_s: float = 1.0,
        register_interval_max_s: float = 30.0,
        reregister_after_s: float | None = None,
        max_datagram_bytes: int = 8192,
        rcvbuf_bytes: int | None = 1 << 20,
    ) -> None:
        for what, text in (("password", password), ("command_password", command_password),
                           ("display_name", display_name)):  # fmt: skip
            if len(text.encode("utf-8")) > MAX_TEXT_BYTES:
                raise ConfigError(f"{name}: {what} is longer than {MAX_TEXT_BYTES} bytes")
        if not display_name:
            raise ConfigError(f"{name}: display_name must not be empty")
        if not 1 <= update_interval_ms <= 60_000:
            raise ConfigError(f"{name}: update_interval_ms {update_interval_ms} is not in 1..60000")
        if register_interval_s <= 0 or register_interval_max_s < register_interval_s:
            raise ConfigError(f"{name}: register_interval_s must be positive and <= register_interval_max_s")
        self.name = name
        self.decoder = decoder if decoder is not None else AccDecoder()
        self.host = host
        self.port = port
        self.password = password
        self.command_password = command_password
        self.display_name = display_name
        self.update_interval_ms = update_interval_ms
        self.local_host = local_host
        self.local_port = local_port
        self.register_interval_s = register_interval_s
        self.register_interval_max_s = register_interval_max_s
        #: Silence that counts as a lost registration: ten updates, at least 3 s.
        self.reregister_after_s = (
            reregister_after_s if reregister_after_s is not None else max(3.0, update_interval_ms / 100.0)
        )
        if self.reregister_after_s <= 0:
            raise ConfigError(f"{name}: reregister_after_s must be positive")
        self.max_datagram_bytes = max_datagram_bytes
        self.rcvbuf_bytes = rcvbuf_bytes
        self.stats = SourceStats()
        self.registrations_sent = 0
        self.registrations_accepted = 0
        self.registrations_refused = 0
        self.reregistrations = 0
        self.entry_list_requests = 0
        self.last_refusal = ""
        self._session = _Session()

    def _listening(self, server: tuple[str, int]) -> str:
        return f"registering with {server[0]}:{server[1]}"

    def _goodbye(self) -> bytes | None:
        conn = self._session.connection_id
        return None if conn is None else encode_request(OUT_UNREGISTER, conn)

    def _register(self, sock: DatagramSocket, server: tuple[str, int], session: _Session, now: float) -> None:
        self._send(
            sock,
            encode_register(self.display_name, self.password, self.update_interval_ms, self.command_password),
            server,
        )
        self.registrations_sent += 1
        session.next_register = now + session.backoff_s
        session.backoff_s = min(session.backoff_s * 2, self.register_interval_max_s)

    def _requests(self, sock: DatagramSocket, server: tuple[str, int], session: _Session, now: float) -> None:
        """Entry list when the decoder met an unknown car; track data until it arrived."""
        conn = session.connection_id
        if conn is None or now < session.next_request:
            return
        session.next_request = now + _REQUEST_INTERVAL_S
        if self.decoder.entry_list_wanted:
            self._send(sock, encode_request(OUT_REQUEST_ENTRY_LIST, conn), server)
            self.entry_list_requests += 1
        if not self.decoder.has_track and session.track_requests < _TRACK_REQUESTS:
            self._send(sock, encode_request(OUT_REQUEST_TRACK_DATA, conn), server)
            session.track_requests += 1

    def _accepted(
        self, sock: DatagramSocket, server: tuple[str, int], session: _Session, data: bytes
    ) -> None:
        try:
            result = decode_registration(data)
        except DecodeError as e:
            self.stats.dropped.add(e.reason)
            return
        now = time.monotonic()
        if not result.success:
            self.registrations_refused += 1
            self.stats.dropped.add("registration_refused")
            if result.error != self.last_refusal:
                log.warning(
                    "%s: the game refused the registration: %s", self.name, result.error or "no reason"
                )
            self.last_refusal = result.error
            self.stats.set_state(
                SourceState.LISTENING if session.connection_id is None else SourceState.RECONNECTING,
                f"registration refused: {result.error or 'no reason'} (check the password)",
            )
            return
        self.registrations_accepted += 1
        new_game = self.decoder.set_registration(result)
        session.connection_id = result.connection_id
        session.last_rx = now
        session.backoff_s = self.register_interval_s
        session.track_requests = 0
        session.next_request = now
        # what the SDK does on a registration: ask for the entry list and the track at once
        self._send(sock, encode_request(OUT_REQUEST_ENTRY_LIST, result.connection_id), server)
        self.entry_list_requests += 1
        mode = "read-only" if result.read_only else "with commands"
        self.stats.set_state(SourceState.RECEIVING, f"registered ({mode}), connection {result.connection_id}")
        log.info("%s: registered with %s:%d (connection %d%s)", self.name, server[0], server[1],
                 result.connection_id, ", a new game" if new_game else "")  # fmt: skip

    async def _loop(self, sock: DatagramSocket, server: tuple[str, int], sink: SampleSink) -> None:
        session = self._session = _Session()
        stats = self.stats
        decoder = self.decoder
        session.backoff_s = self.register_interval_s
        while True:
            now = time.monotonic()
            if session.connection_id is not None and now - session.last_rx > self.reregister_after_s:
                session.connection_id = None
                session.next_register = now
                session.backoff_s = self.register_interval_s
                self.reregistrations += 1
                stats.set_state(SourceState.RECONNECTING, "stream stopped; registering again")
                log.info("%s: stream stopped; registering again", self.name)
            if session.connection_id is None and now >= session.next_register:
                self._register(sock, server, session, now)
            self._requests(sock, server, session, now)
            if session.connection_id is not None:
                deadline = min(session.last_rx + self.reregister_after_s, session.next_request)
            else:
                deadline = session.next_register
            with anyio.move_on_after(max(0.0, deadline - now) + 0.001):
                await sock.wait_readable()
            for data, rx_ns in peer_datagrams(sock, server, stats, self.max_datagram_bytes, self.raw_sink):
                if data[:1] == _REGISTRATION_TYPE:
                    self._accepted(sock, server, session, data)
                    continue
                ok, decoded = decode_counted(decoder, data, stats, log, self.name)
                if ok and session.connection_id is not None:
                    session.last_rx = time.monotonic()
                if decoded is not None:
                    hand_over(sink, self.name, rx_ns, decoded, stats)


class _Session:
    """The registration state of one run."""

    __slots__ = ("backoff_s", "connection_id", "last_rx", "next_register", "next_request", "track_requests")

    def __init__(self) -> None:
        self.connection_id: int | None = None
        self.next_register = 0.0
        self.next_request = 0.0
        self.backoff_s = 1.0
        self.last_rx = 0.0
        self.track_requests = 0
