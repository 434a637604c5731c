"""Send a simulated session over UDP at the game's rate, optionally in accelerated time.

Tick *i* is sent at ``start + i / (rate_hz * speed_scale)`` on the monotonic clock (absolute
deadlines, so pacing does not drift); a tick that is late is sent at once. The packets carry
*simulated* time in their own clocks (Forza TimestampMS, F1 sessionTime, LFS Time), so a
recorder that follows the source clock records the same lap times at any speed scale.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from wrtfd.simulate.car import CarState

if TYPE_CHECKING:
    from wrtfd.simulate.encoding import Encoder

__all__ = ["SendStats", "parse_address", "send_session", "with_last"]


@dataclass(slots=True)
class SendStats:
    ticks: int = 0
    datagrams: int = 0
    bytes: int = 0
    late_ticks: int = 0  # ticks sent after their deadline (the machine could not keep up)
    send_errors: int = 0
    #: The longest a tick was sent after its deadline (seconds of real time): a stall of the
    #: sender, which a recorder sees as a pause of the game.
    max_late_s: float = 0.0


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) -> (host, port); raises ValueError."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def with_last(items: Iterable[CarState]) -> Iterator[tuple[CarState, bool]]:
    """Each item with a flag telling whether it is the last one."""
    it = iter(items)
    try:
        prev = next(it)
    except StopIteration:
        return
    for item in it:
        yield prev, False
        prev = item
    yield prev, True


def send_session(
    states: Iterable[CarState],
    encoder: Encoder,
    sock: socket.socket,
    address: tuple[str, int],
    *,
    rate_hz: float,
    speed_scale: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    on_tick: Callable[[CarState], None] | None = None,
) -> SendStats:
    """Encode and send every state; returns what was sent."""
    if speed_scale <= 0:
        raise ValueError("speed_scale must be positive")
    period = 1.0 / (rate_hz * speed_scale)
    stats = SendStats()
    start = clock()
    first = True
    for i, (state, last) in enumerate(with_last(states)):
        deadline = start + i * period
        now = clock()
        if deadline > now:
            sleep(deadline - now)
        elif now - deadline > period:
            stats.late_ticks += 1
            stats.max_late_s = max(stats.max_late_s, now - deadline)
        for datagram in encoder.encode(state, first=first, last=last):
            try:
                sock.sendto(datagram, address)
            except OSError:
                stats.send_errors += 1  # e.g. ICMP port unreachable reported on loopback
                continue
            stats.datagrams += 1
            stats.bytes += len(datagram)
        first = False
        stats.ticks += 1
        if on_tick is not None:
            on_tick(state)
    return stats
