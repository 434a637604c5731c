"""What every source is and what it reports.

A source runs as one task in the daemon's task group. It opens its socket or device, calls
``task_status.started()`` once it is ready to receive (the daemon sends ``READY=1`` when all
sources have), then loops until cancelled: receive, decode, count, and call the ``sink``.

The sink never blocks: it is the recorder's bounded intake. If it is full it raises
:class:`SinkFull` and the source counts the sample as dropped (``queue_full``); receiving never
waits on disk.

A source may also have a :data:`RawSink` (``raw_sink`` attribute, None by default): the raw tap.
It is called with everything the source received, before any check or decoding, and must not
block either (it appends to a bounded queue; see :mod:`wrtfd.recorder.tap`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from wrtfd.decoders.base import DropCounter, SampleSink, SinkFull

__all__ = ["Address", "RawSink", "SampleSink", "SinkFull", "Source", "SourceState", "SourceStats"]

#: A socket address: ``(host, port)``, or for IPv6 ``(host, port, flowinfo, scope_id)``.
Address = tuple[Any, ...]

#: The raw tap's hook: ``(rx_ns, sender, receiver, data)``, called with every datagram, serial
#: chunk or TCP chunk a source received, with the receive time the source gives its samples
#: (monotonic). ``sender``/``receiver`` are the UDP socket addresses as the socket gives them
#: (None for serial and TCP bytes).
RawSink = Callable[[int, Address | None, Address | None, bytes], None]


class SourceState(StrEnum):
    STARTING = "starting"
    LISTENING = "listening"  # bound / open, nothing received yet
    RECEIVING = "receiving"
    RECONNECTING = "reconnecting"  # device gone or peer lost; retrying with backoff
    FAILED = "failed"
    STOPPED = "stopped"


@dataclass(slots=True)
class SourceStats:
    """Live counters of one source, read by status and metrics (single-threaded: no locks)."""

    state: SourceState = SourceState.STARTING
    state_detail: str = ""
    received: int = 0  # datagrams / lines / frames seen
    samples: int = 0  # samples handed to the sink
    bytes: int = 0
    dropped: DropCounter = field(default_factory=DropCounter)
    last_rx_ns: int | None = None
    restarts: int = 0
    #: What the source could not do but records on regardless (a receiver that refused a
    #: setting); shown in status as problems.
    problems: list[str] = field(default_factory=list)

    def set_state(self, state: SourceState, detail: str = "") -> None:
        self.state = state
        self.state_detail = detail

    def last_sample_age_s(self, now_ns: int | None = None) -> float | None:
        if self.last_rx_ns is None:
            return None
        now = time.monotonic_ns() if now_ns is None else now_ns
        return (now - self.last_rx_ns) / 1e9

    def snapshot(self) -> dict[str, Any]:
        return {
            "state": self.state.value,
            "detail": self.state_detail,
            "received": self.received,
            "samples": self.samples,
            "bytes": self.bytes,
            "dropped": self.dropped.as_dict(),
            "dropped_total": self.dropped.total(),
            "last_sample_age_s": self.last_sample_age_s(),
            "restarts": self.restarts,
            "problems": list(self.problems),
        }


class Source(Protocol):
    """One configured input."""

    name: str
    stats: SourceStats

    async def run(self, sink: SampleSink, *, task_status: Any = ...) -> None:
        """Open, call ``task_status.started()``, then receive until cancelled.

        Raises :class:`wrtfd.errors.SourceError` when the source cannot go on; the daemon
        restarts it with backoff.
        """
        ...
