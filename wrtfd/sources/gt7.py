"""Gran Turismo 7 source: the UDP listener that asks the console to stream.

The console (PS4/PS5) sends nothing until it gets a heartbeat: one byte, the letter of the
packet variant wanted (``A``, ``B``, ``~`` or ``C``), sent to its port 33739. It then streams
that variant at 60 Hz to the heartbeat's sender, port 33740, and stops a few seconds after the
heartbeats stop. So this source binds 33740 (through :class:`~wrtfd.sources.udp.UdpSource`:
batched reads, drop accounting, only the console's address accepted), sends the heartbeat from
that same socket every ``heartbeat_interval_s``, and decodes with :class:`Gt7Decoder`.

Which variant: a fixed ``variant`` is asked for and nothing else. Without one the source settles
on the richest variant the console answers: it asks for ``C``, and when no packet decodes within
``probe_s`` it asks for ``~``, then ``B``, then ``A``, and round again; the first letter that
brings packets is kept. When the stream stops for ``stream_timeout_s`` (the game closed, the
console asleep) the search starts again from ``C``. The console keeps the variant of the
heartbeat that started its stream (another app may have started it), so what arrives may differ
from what was asked; the decoder tells variants by length, and ``answered`` says which it is.

Lifecycle: ``STARTING -> LISTENING "heartbeat C to ..." -> RECEIVING -> (stream stops)
RECONNECTING -> RECEIVING ... cancelled -> STOPPED``. A failed heartbeat send (no route to the
console) is counted as ``send_error``.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from typing import Any

import anyio

from wrtfd.decoders.base import Sample
from wrtfd.decoders.gt7 import HEARTBEAT_PORT, RECEIVE_PORT, VARIANTS, Gt7Decoder
from wrtfd.errors import ConfigError, SourceError
from wrtfd.sources.base import SampleSink, SourceState
from wrtfd.sources.udp import DEFAULT_READ_INTERVAL_S, UdpSource

__all__ = ["PROBE_ORDER", "Gt7Source"]

log = logging.getLogger("wrtfd.sources.gt7")

#: Heartbeat letters tried without a fixed variant, richest first.
PROBE_ORDER: tuple[str, ...] = ("C", "~", "B", "A")


class Gt7Source(UdpSource):
    """Heartbeats ``console`` and records what it streams back (see the module docstring).

    ``asked`` is the letter sent, ``answered`` the variant of the last packet decoded (None
    before one); ``heartbeats_sent``, ``probes`` (letters given up on) and ``restreams`` (the
    stream stopped and was asked for again) are exposed for status and tests.
    """

    def __init__(
        self,
        name: str = "gt7",
        decoder: Gt7Decoder | None = None,
        *,
        console: str,
        console_port: int = HEARTBEAT_PORT,
        host: str = "0.0.0.0",
        port: int = RECEIVE_PORT,
        variant: str | None = None,
        heartbeat_interval_s: float = 1.5,
        probe_s: float = 3.0,
        stream_timeout_s: float = 3.0,
        max_datagram_bytes: int = 1024,
        rcvbuf_bytes: int | None = 1 << 20,
        read_interval_s: float = DEFAULT_READ_INTERVAL_S,
    ) -> None:
        try:
            ipaddress.ip_address(console)
        except ValueError:
            raise ConfigError(f"{name}: console {console!r} is not an IP address") from None
        if variant is not None and variant not in VARIANTS:
            raise ConfigError(f"{name}: variant {variant!r} is not one of {', '.join(VARIANTS)}")
        if min(heartbeat_interval_s, probe_s, stream_timeout_s) <= 0:
            raise ConfigError(f"{name}: heartbeat_interval_s, probe_s and stream_timeout_s must be positive")
        super().__init__(
            name,
            decoder if decoder is not None else Gt7Decoder(),
            host=host,
            port=port,
            allow_from=[console],
            max_datagram_bytes=max_datagram_bytes,
            rcvbuf_bytes=rcvbuf_bytes,
            read_interval_s=read_interval_s,
        )
        self.gt7_decoder = self.decoder if isinstance(self.decoder, Gt7Decoder) else None
        self.console = (console, console_port)
        self.letters: tuple[str, ...] = (variant,) if variant is not None else PROBE_ORDER
        self.heartbeat_interval_s = heartbeat_interval_s
        self.probe_s = probe_s
        self.stream_timeout_s = stream_timeout_s
        self.asked = self.letters[0]
        self.answered: str | None = None
        self.heartbeats_sent = 0
        self.probes = 0
        self.restreams = 0
        self._last_good: float | None = None  # monotonic time a packet last decoded

    async def run(self, sink: SampleSink, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Bind, report started, then heartbeat and receive until cancelled.

        :raises SourceError: the local address cannot be bound.
        """
        try:
            async with anyio.create_task_group() as tg:
                await tg.start(super().run, self._noting(sink))
                tg.start_soon(self._heartbeats)
                task_status.started()
        except ExceptionGroup as group:  # the listener failed: its own error, not a group of one
            if len(group.exceptions) == 1 and isinstance(group.exceptions[0], SourceError):
                raise group.exceptions[0] from None
            raise

    def _noting(self, sink: SampleSink) -> SampleSink:
        """The sink, noting when a packet last decoded (the stream is alive)."""

        def note(sample: Sample) -> None:
            self._last_good = time.monotonic()
            sink(sample)

        return note

    def _send(self, letter: str) -> None:
        sock = self._socket
        if sock is None:
            return
        try:
            sock.send_to(letter.encode("ascii"), self.console)
        except OSError as e:
            self.stats.dropped.add("send_error")
            log.debug("%s: heartbeat to %s:%d failed: %s", self.name, *self.console, e)
            return
        self.heartbeats_sent += 1

    def _alive(self, now: float) -> bool:
        last = self._last_good
        return last is not None and now - last <= self.stream_timeout_s

    async def _heartbeats(self) -> None:
        stats = self.stats
        host, port = self.console
        index = 0
        streaming = False
        probe_until = time.monotonic() + self.probe_s
        next_beat = 0.0
        stats.set_state(SourceState.LISTENING, f"heartbeat {self.asked!r} to {host}:{port}")
        while True:
            now = time.monotonic()
            alive = self._alive(now)
            if alive and not streaming:
                streaming = True
                decoder = self.gt7_decoder
                self.answered = decoder.variant.letter if decoder and decoder.variant else None
                stats.set_state(
                    SourceState.RECEIVING,
                    f"heartbeat {self.asked!r} to {host}:{port}; the console sends {self.answered!r}",
                )
                log.info("%s: %s streams variant %r (asked %r)", self.name, host, self.answered, self.asked)
            elif streaming and not alive:
                streaming = False
                self.restreams += 1
                index = 0
                self.asked = self.letters[0]
                probe_until = now + self.probe_s
                next_beat = now
                stats.set_state(
                    SourceState.RECONNECTING, f"stream stopped; heartbeat {self.asked!r} to {host}"
                )
                log.info("%s: stream from %s stopped; asking again", self.name, host)
            elif not streaming and now >= probe_until:
                probe_until = now + self.probe_s
                if len(self.letters) > 1:
                    self.probes += 1
                    index = (index + 1) % len(self.letters)
                    self.asked = self.letters[index]
                    next_beat = now
                    stats.set_state(stats.state, f"heartbeat {self.asked!r} to {host}:{port}")
            if now >= next_beat:
                self._send(self.asked)
                next_beat = now + self.heartbeat_interval_s
            if streaming and self._last_good is not None:
                wake = min(next_beat, self._last_good + self.stream_timeout_s + 0.001)
            else:
                wake = min(next_beat, probe_until)
            await anyio.sleep(max(0.0, wake - time.monotonic()))
