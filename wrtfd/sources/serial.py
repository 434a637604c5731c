"""Serial-port sources (pyserial-asyncio): open, read, survive unplugging, reopen with backoff.

Lifecycle of :meth:`SerialSourceBase.run`::

    STARTING -> (open ok) LISTENING -> (first byte) RECEIVING
                 (open fails)  RECONNECTING --backoff--> open again
    RECEIVING/LISTENING -> (EIO, EOF, silence past idle_timeout_s) RECONNECTING --> open again
    cancelled -> STOPPED

The configured path is resolved again on every open, so a ``/dev/serial/by-id/...`` symlink
that points at a new ``ttyUSBn`` after a replug is followed. A lost device's handle is closed
before anything else happens: no stale handle is kept. ``task_status.started()`` is called at
the first open attempt whether or not the device is there, so a missing GPS never holds up the
daemon; status shows RECONNECTING with the reason.

Recording across a reconnect: the source resets its framer and decoder (nothing of the dead
stream leaks into the new one) and does not flag a new session; whether the gap starts a new
session is the recorder's idle policy.

Bytes are handled in the transport's ``data_received`` callback: framer -> decoder -> sink,
with no task switch per line. The sink never blocks (SinkFull is counted as ``queue_full``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import anyio
import serial
import serial_asyncio

from wrtfd.decoders.base import Decoder, Sample
from wrtfd.decoders.lines import LineFeed
from wrtfd.errors import SourceError
from wrtfd.sources.base import RawSink, SampleSink, SinkFull, SourceState, SourceStats

__all__ = [
    "FeedSourceBase",
    "SerialLineSource",
    "SerialLink",
    "SerialSettings",
    "SerialSourceBase",
    "resolve_device",
]

log = logging.getLogger("wrtfd.sources.serial")

#: The most bytes one read of a port takes (what a wake-up of the event loop hands on at once).
SERIAL_READ_BYTES = 65536
_PARITIES = {"N": serial.PARITY_NONE, "E": serial.PARITY_EVEN, "O": serial.PARITY_ODD}


@dataclass(frozen=True, slots=True)
class SerialSettings:
    """How to open one serial device.

    ``path``: prefer ``/dev/serial/by-id/...`` (stable across replugs). ``idle_timeout_s``: no
    byte for this long counts as a lost device (a GPS talks every second; None disables it).
    """

    path: str
    baudrate: int = 9600
    bytesize: int = 8
    parity: str = "N"
    stopbits: float = 1
    rtscts: bool = False
    xonxoff: bool = False
    reopen_min_s: float = 0.25
    reopen_max_s: float = 5.0
    idle_timeout_s: float | None = None
    max_line_bytes: int = 256

    def __post_init__(self) -> None:
        if self.parity not in _PARITIES:
            raise ValueError(f"parity must be one of {sorted(_PARITIES)}, got {self.parity!r}")
        if not 0 < self.reopen_min_s <= self.reopen_max_s:
            raise ValueError("need 0 < reopen_min_s <= reopen_max_s")


def resolve_device(path: str) -> str:
    """The device node ``path`` points at now (symlinks followed).

    :raises SourceError: it does not exist.
    """
    real = os.path.realpath(path)
    if not os.path.exists(real):
        raise SourceError(f"{path}: no such device" + (f" (link to {real})" if real != path else ""))
    return real


class _Protocol(asyncio.Protocol):
    """Hands bytes to ``on_data``; records how the connection ended."""

    def __init__(self, on_data: Callable[[bytes], None]) -> None:
        self.on_data = on_data
        self.lost: asyncio.Future[BaseException | None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.on_data(data)

    def connection_lost(self, exc: BaseException | None) -> None:
        if not self.lost.done():
            self.lost.set_result(exc)


class SerialLink:
    """One open device: write commands, wait for the end. Closing is idempotent."""

    def __init__(self, transport: asyncio.BaseTransport, protocol: _Protocol, device: str) -> None:
        self._transport: Any = transport
        self.protocol = protocol
        self.device = device
        self.last_rx_ns = time.monotonic_ns()

    @classmethod
    async def open(cls, settings: SerialSettings, on_data: Callable[[bytes], None]) -> SerialLink:
        """Open the device the settings' path resolves to now.

        :raises SourceError: missing device, permission, busy, bad settings.
        """
        # realpath() reads symlinks (a /dev/serial/by-id link): a file system call, off the loop.
        device = await anyio.to_thread.run_sync(resolve_device, settings.path)

        def _open() -> serial.Serial:
            return serial.Serial(
                port=device,
                baudrate=settings.baudrate,
                bytesize=settings.bytesize,
                parity=_PARITIES[settings.parity],
                stopbits=settings.stopbits,
                rtscts=settings.rtscts,
                xonxoff=settings.xonxoff,
                exclusive=True,
                timeout=0,
            )

        try:
            # open() can block on some USB adapters; keep it off the event loop.
            ser = await anyio.to_thread.run_sync(_open)
        except (serial.SerialException, OSError, ValueError) as exc:
            raise SourceError(f"{settings.path}: cannot open {device}: {exc}") from exc
        link: SerialLink | None = None

        def _data(data: bytes) -> None:
            if link is not None:
                link.last_rx_ns = time.monotonic_ns()
            on_data(data)

        protocol = _Protocol(_data)
        loop = asyncio.get_running_loop()
        transport, _ = await serial_asyncio.connection_for_serial(loop, lambda: protocol, ser)
        # pyserial-asyncio reads 1 KiB a wake-up. After a stall of the daemon the port holds
        # more (the kernel's tty buffer, 4 KiB): read it in one go, so that the engine's next
        # step has all of it (docs/timing.md, "A stalled daemon"). A bounded read all the same.
        if hasattr(transport, "_max_read_size"):
            transport._max_read_size = SERIAL_READ_BYTES
        link = cls(transport, protocol, device)
        return link

    @property
    def closed(self) -> bool:
        return self.protocol.lost.done()

    def write(self, data: bytes) -> None:
        if not self._transport.is_closing():
            self._transport.write(data)

    def set_baudrate(self, baud: int) -> None:
        """Change the line's rate in place (a receiver told to switch; on a pty, a termios
        setting the other side can read)."""
        self._transport.serial.baudrate = baud

    def close(self) -> None:
        if not self._transport.is_closing():
            self._transport.close()

    async def aclose(self, flush_timeout_s: float = 1.0) -> None:
        """Close and wait until pyserial has released the fd.

        A graceful close first writes out pending bytes; a device that takes none (wedged
        adapter, flow control stuck) is aborted after ``flush_timeout_s`` so no handle lingers.
        """
        self.close()
        with anyio.move_on_after(flush_timeout_s):
            await asyncio.shield(self.protocol.lost)
        if not self.protocol.lost.done():
            self._transport.abort()
            with anyio.move_on_after(flush_timeout_s):
                await asyncio.shield(self.protocol.lost)

    async def wait_lost(self, idle_timeout_s: float | None) -> str:
        """Wait until the device goes away; return why."""
        lost = self.protocol.lost
        if idle_timeout_s is None:
            exc = await asyncio.shield(lost)
            return _why(exc)
        while True:
            idle_s = (time.monotonic_ns() - self.last_rx_ns) / 1e9
            left_s = idle_timeout_s - idle_s
            if left_s <= 0:
                return f"no data for {idle_timeout_s:g} s"
            with anyio.move_on_after(left_s):
                exc = await asyncio.shield(lost)
                return _why(exc)


def _no_sink(sample: Sample) -> None:
    raise SinkFull("source is not running")


def _why(exc: BaseException | None) -> str:
    return "end of file" if exc is None else str(exc)


class SerialSourceBase:
    """Reconnect loop shared by the serial sources; subclasses implement :meth:`_session`."""

    protocol_name = "serial"

    def __init__(self, name: str, settings: SerialSettings) -> None:
        self.name = name
        self.settings = settings
        self.stats = SourceStats()
        self._failure: BaseException | None = None
        self._link: SerialLink | None = None
        self._sink: SampleSink = _no_sink
        #: The raw tap: every chunk read, at its receive time (set before :meth:`run`).
        self.raw_sink: RawSink | None = None

    # -- state ---------------------------------------------------------------------------

    def _set_state(self, state: SourceState, detail: str = "") -> None:
        if state is self.stats.state and detail == self.stats.state_detail:
            return
        self.stats.set_state(state, detail)
        level = logging.WARNING if state in (SourceState.RECONNECTING, SourceState.FAILED) else logging.INFO
        # Retries of an absent device repeat with a changing detail ("retry in 2 s"): one key
        # per source lets the daemon's rate limit pass one line per logging.repeat_interval_s.
        extra = {"rate_key": f"reconnect:{self.name}"} if state is SourceState.RECONNECTING else None
        log.log(level, "%s (%s): %s %s", self.name, self.settings.path, state.value, detail, extra=extra)

    # -- hooks -----------------------------------------------------------------------------

    def _reset(self) -> None:
        """Forget stream state before a new device handle (framer tail, decoder state)."""

    def _on_data(self, data: bytes) -> None:
        raise NotImplementedError

    async def _session(self, link: SerialLink, sink: SampleSink) -> str:
        """Talk to an open device until it is lost; return the reason."""
        return await link.wait_lost(self.settings.idle_timeout_s)

    # -- main loop -------------------------------------------------------------------------

    async def run(self, sink: SampleSink, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Open, call ``task_status.started()``, receive and reconnect until cancelled.

        :raises SourceError: only for a failure that reopening cannot cure (a bug in the sink).
        """
        started = False
        backoff_s = self.settings.reopen_min_s
        self._sink = sink
        try:
            while True:
                self._reset()
                try:
                    link = await SerialLink.open(self.settings, self._guarded_on_data)
                except SourceError as exc:
                    self._set_state(SourceState.RECONNECTING, f"{exc}; retry in {backoff_s:g} s")
                    if not started:
                        started = True
                        task_status.started()
                    await anyio.sleep(backoff_s)
                    backoff_s = min(backoff_s * 2, self.settings.reopen_max_s)
                    continue
                backoff_s = self.settings.reopen_min_s
                self._set_state(SourceState.LISTENING, f"opened {link.device}")
                if not started:
                    started = True
                    task_status.started()
                try:
                    reason = await self._session(link, sink)
                except (SourceError, serial.SerialException, OSError) as exc:
                    reason = str(exc)
                finally:
                    with anyio.CancelScope(shield=True):
                        await link.aclose()
                if self._failure is not None:
                    failure, self._failure = self._failure, None
                    self._set_state(SourceState.FAILED, repr(failure))
                    raise SourceError(f"{self.name}: sink failed: {failure!r}") from failure
                self.stats.restarts += 1
                self._set_state(SourceState.RECONNECTING, f"device lost ({reason}); closed {link.device}")
                await anyio.sleep(backoff_s)
        finally:
            if self.stats.state is not SourceState.FAILED:
                self._set_state(SourceState.STOPPED)

    def _guarded_on_data(self, data: bytes) -> None:
        """The transport callback: an exception here would vanish into the loop's handler."""
        if self._failure is not None:
            return
        try:
            self._on_data(data)
        except Exception as exc:
            # Not a device problem: remember it, drop the link, let run() raise it.
            self._failure = exc
            self._close_link_soon()

    def _close_link_soon(self) -> None:
        if self._link is not None:
            self._link.close()


class _Feed(Protocol):
    def reset(self) -> None: ...

    def feed(self, now_ns: int, data: bytes, sink: SampleSink) -> tuple[int, int]: ...


_FeedT = TypeVar("_FeedT", bound=_Feed)


class FeedSourceBase(SerialSourceBase, Generic[_FeedT]):
    """A serial source whose bytes go through one feed (a framer and its decoder): reads are
    tapped, counted and fed the same way for line and binary protocols alike."""

    feed: _FeedT

    def _reset(self) -> None:
        self.feed.reset()

    def _on_data(self, data: bytes) -> None:
        stats = self.stats
        now_ns = time.monotonic_ns()
        raw = self.raw_sink
        if raw is not None:
            raw(now_ns, None, None, data)
        stats.bytes += len(data)
        if stats.state is not SourceState.RECEIVING:
            self._set_state(SourceState.RECEIVING)
        frames, samples = self.feed.feed(now_ns, data, self._sink)
        if frames:
            stats.received += frames
            stats.samples += samples
            stats.last_rx_ns = now_ns


class SerialLineSource(FeedSourceBase[LineFeed]):
    """A line protocol (NMEA, SLCAN): frame lines, decode each, hand samples to the sink
    (:class:`~wrtfd.decoders.lines.LineFeed`, which a replay of the raw tap runs too).

    ``open_commands`` are written after each open, ``command_gap_s`` apart (an SLCAN adapter
    needs its bitrate before ``O``); ``close_commands`` before a deliberate close.
    """

    def __init__(
        self,
        name: str,
        settings: SerialSettings,
        decoder: Decoder,
        *,
        delimiters: bytes = b"\r\n",
        open_commands: Sequence[bytes] = (),
        close_commands: Sequence[bytes] = (),
        command_gap_s: float = 0.05,
        max_line_bytes: int | None = None,
    ) -> None:
        super().__init__(name, settings)
        self.decoder = decoder
        self.feed = LineFeed(
            name,
            decoder,
            delimiters=delimiters,
            max_line_bytes=max_line_bytes or settings.max_line_bytes,
            drops=self.stats.dropped,
        )
        self.framer = self.feed.framer
        self.open_commands = tuple(open_commands)
        self.close_commands = tuple(close_commands)
        self.command_gap_s = command_gap_s

    async def _session(self, link: SerialLink, sink: SampleSink) -> str:
        self._link = link
        try:
            for command in self.open_commands:
                link.write(command)
                await anyio.sleep(self.command_gap_s)
            reason = await link.wait_lost(self.settings.idle_timeout_s)
        except BaseException:
            # Cancelled (shutdown) or failed: tell the device we stop, if it is still there.
            for command in self.close_commands:
                link.write(command)
            raise
        finally:
            self._link = None
        return reason
