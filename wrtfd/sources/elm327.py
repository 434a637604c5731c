"""OBD-II through an ELM327 adapter: initialise, then poll mode-01 PIDs as fast as it answers.

After every (re)open: ``ATZ`` (reset; the answer names the chip), ``ATE0`` (no echo), ``ATL0``
(no linefeeds), ``ATS0`` (no spaces), ``ATH0`` (no headers), ``ATSP<p>`` (protocol, 0 = auto).
Then a round-robin over the configured PIDs: one request, wait for the ``>`` prompt, decode,
next. The first request after ``ATSP0`` may take seconds (``SEARCHING...``), so it gets
``search_timeout_s``.

Failures: an answer the adapter marks as failed (``NO DATA``, ``?``, ``CAN ERROR``, ...) is
counted by reason and polling goes on; a request without any answer is counted as ``timeout``,
and ``max_timeouts`` in a row mean the adapter is gone or wedged: the link is closed and
reopened (which re-runs the initialisation). A late answer to an earlier request is recognised
by its PID and dropped as ``stale_answer``.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Sequence

import anyio
import anyio.lowlevel

from wrtfd.decoders.base import Sample
from wrtfd.decoders.framing import LineFramer
from wrtfd.decoders.obd import ObdDecoder, parse_response
from wrtfd.errors import DecodeError
from wrtfd.sources.base import SampleSink, SinkFull, SourceState
from wrtfd.sources.serial import SerialLink, SerialSettings, SerialSourceBase, log

__all__ = ["ELM327_INIT", "Elm327Source"]

ELM327_INIT: tuple[bytes, ...] = (b"ATE0", b"ATL0", b"ATS0", b"ATH0")
#: An ELM327 answer is a few lines; anything longer before a prompt is noise.
MAX_RESPONSE_BYTES = 1024


class Elm327Source(SerialSourceBase):
    protocol_name = "obd"

    def __init__(
        self,
        name: str,
        settings: SerialSettings,
        decoder: ObdDecoder,
        *,
        obd_protocol: str = "0",
        response_timeout_s: float = 1.0,
        reset_timeout_s: float = 3.0,
        search_timeout_s: float = 10.0,
        max_timeouts: int = 5,
    ) -> None:
        super().__init__(name, settings)
        if not obd_protocol.isalnum() or len(obd_protocol) > 2:
            raise ValueError(f"ELM327 protocol {obd_protocol!r} is not a protocol number")
        self.decoder = decoder
        self.obd_protocol = obd_protocol
        self.response_timeout_s = response_timeout_s
        self.reset_timeout_s = reset_timeout_s
        self.search_timeout_s = search_timeout_s
        self.max_timeouts = max_timeouts
        self.adapter_version = ""
        self.framer = LineFramer(delimiters=b">", max_line_bytes=MAX_RESPONSE_BYTES, drops=self.stats.dropped)
        self._responses: collections.deque[bytes] = collections.deque(maxlen=4)
        self._arrived = asyncio.Event()

    def _reset(self) -> None:
        self.framer.reset()
        self._responses.clear()

    def _on_data(self, data: bytes) -> None:
        raw = self.raw_sink
        if raw is not None:
            raw(time.monotonic_ns(), None, None, data)
        self.stats.bytes += len(data)
        for response in self.framer.feed(data):
            if len(self._responses) == self._responses.maxlen:
                self.stats.dropped.add("unsolicited")
            self._responses.append(response)
            self._arrived.set()

    async def _command(self, link: SerialLink, command: bytes, timeout_s: float) -> bytes | None:
        """Send one command; the response text before the prompt, or None on timeout/loss."""
        self._responses.clear()
        self._arrived.clear()
        link.write(command + b"\r")
        deadline = time.monotonic() + timeout_s
        while not self._responses:
            left_s = deadline - time.monotonic()
            if left_s <= 0 or link.closed:
                return None
            waiter: asyncio.Future[object] = asyncio.ensure_future(self._arrived.wait())
            lost: asyncio.Future[object] = link.protocol.lost  # type: ignore[assignment]
            try:
                await asyncio.wait({waiter, lost}, timeout=left_s, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
            self._arrived.clear()
        return self._responses.popleft()

    async def _initialise(self, link: SerialLink) -> str | None:
        """Run the init sequence; None when done, else why it failed."""
        answer = await self._command(link, b"ATZ", self.reset_timeout_s)
        if answer is None or b"ELM" not in answer.upper():
            return f"no ELM327 answer to ATZ (got {answer!r})"
        self.adapter_version = answer.replace(b"ATZ", b"").strip().decode("ascii", "replace")
        log.info("%s: adapter %s", self.name, self.adapter_version)
        for command in (*ELM327_INIT, b"ATSP" + self.obd_protocol.encode()):
            answer = await self._command(link, command, self.response_timeout_s)
            if answer is None or b"OK" not in answer.upper():
                return f"{command.decode()} answered {answer!r}"
        return None

    async def _session(self, link: SerialLink, sink: SampleSink) -> str:
        self._link = link
        try:
            failure = await self._initialise(link)
            if failure is not None:
                self.stats.dropped.add("init_failed")
                return failure
            return await self._poll(link, sink)
        finally:
            self._link = None

    async def _poll(self, link: SerialLink, sink: SampleSink) -> str:
        stats = self.stats
        pids: Sequence[int] = self.decoder.pids
        timeout_s = self.search_timeout_s
        timeouts = 0
        while True:
            for pid in pids:
                if link.closed:
                    return "device lost"
                response = await self._command(link, b"01%02X" % pid, timeout_s)
                if response is None:
                    if link.closed:
                        return "device lost"
                    stats.dropped.add("timeout")
                    timeouts += 1
                    if timeouts >= self.max_timeouts:
                        return f"{timeouts} requests without answer"
                    continue
                timeouts = 0
                timeout_s = self.response_timeout_s
                now_ns = time.monotonic_ns()
                stats.received += 1
                stats.last_rx_ns = now_ns
                if stats.state is not SourceState.RECEIVING:
                    self._set_state(SourceState.RECEIVING)
                try:
                    answer = parse_response(response)
                    if answer.pid != pid:
                        raise DecodeError(
                            f"answer for PID {answer.pid:02X}, asked {pid:02X}", reason="stale_answer"
                        )
                    values = self.decoder.decode_answer(answer)
                except DecodeError as exc:
                    stats.dropped.add(exc.reason)
                    continue
                try:
                    sink(Sample(source=self.name, rx_ns=now_ns, values=values))
                except SinkFull:
                    stats.dropped.add("queue_full")
                    continue
                stats.samples += 1
            # Let other tasks run even when the adapter answers instantly.
            await anyio.lowlevel.checkpoint()
