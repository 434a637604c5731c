"""Real serial plumbing for tests: a pseudo-terminal whose master side plays the device.

The source under test opens the slave path through pyserial-asyncio exactly as it would open
``/dev/ttyUSB0``. The device side writes from a thread, paced at a baud rate (10 bits per byte
for 8N1) or by per-chunk timestamps, so the reader sees bytes arrive over time, in arbitrary
chunks, as from a UART.
"""

from __future__ import annotations

import os
import select
import threading
import time
import tty
from collections.abc import Callable, Iterable

import anyio

from tests.priority import usual_priority


class PtyDevice:
    """One pseudo-terminal pair; ``path`` is what the source opens."""

    def __init__(self) -> None:
        self.master, self.slave = os.openpty()
        tty.setraw(self.slave)  # no echo, no line discipline: a plain byte pipe like a UART
        tty.setraw(self.master)
        self.path = os.ttyname(self.slave)
        self.closed = False
        self.received = bytearray()  # what the source wrote to the device
        #: (offset, how late) of each chunk :meth:`write_timed` wrote: a starved test process
        #: writes late, which a receiver never does
        self.lateness: list[tuple[float, float]] = []
        self._lock = threading.Lock()

    def write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.master, view)
            view = view[n:]

    def write_paced(self, data: bytes, *, baud: int, chunk: int = 64) -> None:
        """Write at most ``baud / 10`` bytes per second, ``chunk`` bytes at a time."""
        bytes_per_s = baud / 10.0
        start = time.monotonic()
        for pos in range(0, len(data), chunk):
            due = start + pos / bytes_per_s
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            self.write_all(data[pos : pos + chunk])

    def write_timed(self, chunks: Iterable[tuple[float, bytes]], *, speed: float = 1.0) -> None:
        """Write each chunk at its offset (seconds from now, divided by ``speed``)."""
        with usual_priority():
            start = time.monotonic()
            for offset_s, data in chunks:
                due = start + offset_s / speed
                delay = due - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                self.lateness.append((offset_s, time.monotonic() - due))
                self.write_all(data)

    def read_available(self, timeout_s: float = 0.0) -> bytes:
        """Bytes the source wrote (commands), without blocking longer than ``timeout_s``."""
        try:
            ready, _, _ = select.select([self.master], [], [], timeout_s)
            if not ready:
                return b""
            data = os.read(self.master, 4096)
        except (OSError, ValueError):  # closed under us: the test unplugged the device
            return b""
        with self._lock:
            self.received += data
        return data

    def close(self) -> None:
        """Unplug: the reader's next read fails with EIO."""
        if not self.closed:
            self.closed = True
            os.close(self.master)
            os.close(self.slave)


class Responder(threading.Thread):
    """Device-side thread answering each ``\\r``-terminated command via ``answer(cmd)``."""

    def __init__(self, device: PtyDevice, answer: Callable[[bytes], bytes | None]) -> None:
        super().__init__(daemon=True)
        self.device = device
        self.answer = answer
        self.commands: list[bytes] = []
        self.stop = threading.Event()

    def run(self) -> None:
        pending = b""
        while not self.stop.is_set() and not self.device.closed:
            data = self.device.read_available(0.02)
            if not data:
                continue
            pending += data
            while b"\r" in pending:
                command, pending = pending.split(b"\r", 1)
                self.commands.append(command)
                reply = self.answer(command)
                if reply is not None and not self.device.closed:
                    try:
                        self.device.write_all(reply)
                    except OSError:
                        return


async def wait_until(condition: Callable[[], bool], *, timeout_s: float, what: str) -> None:
    """Poll an I/O condition (not a timing assertion); fail with ``what`` after ``timeout_s``."""
    with anyio.move_on_after(timeout_s):
        while not condition():  # noqa: ASYNC110 - the condition is set by another thread
            await anyio.sleep(0.01)
        return
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
