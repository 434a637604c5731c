"""The contract between decoders, sources and the scheduler.

A decoder turns one datagram, line or record into a :class:`Decoded` (or ``None`` when the
input is valid but carries no channel values, e.g. an F1 event packet that only signals).
It raises :class:`wrtfd.errors.DecodeError` with a ``reason`` slug for anything malformed.

A source adds the receive time and its own name and hands a :class:`Sample` to the recorder
through a :data:`SampleSink`, which raises :class:`SinkFull` instead of waiting (both live here,
with :class:`Sample`, so that sources and the recorder share them without importing each other).

Channel values: keys are the top-level frame field names of the protocol's WRTF definition
(``config/schemas/<protocol>.wrtf.yaml``); values are Python scalars (int, float, bool),
sequences for fields with ``dimensions > 0``, or mappings for struct-typed fields.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "Decoded",
    "Decoder",
    "DropCounter",
    "Sample",
    "SampleSink",
    "SessionDescription",
    "SinkFull",
    "awaited_info",
    "generated_definition",
]

#: What a source knows about the session: ``track``, ``car``, ``session_type`` ... (strings).
SessionDescription = Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Decoded:
    """One decoded input unit.

    ``source_time_ns`` is the protocol's own clock (Forza TimestampMS, F1 sessionTime, GPS UTC,
    zddsrec time) in nanoseconds on an arbitrary epoch, or None when the protocol has none.
    ``session_key`` identifies the sim session (F1 sessionUID, ...); a change means a new
    session. ``new_session`` is an explicit signal (Forza IsRaceOn 0->1, DiRT run_time reset).
    """

    values: Mapping[str, Any]
    source_time_ns: int | None = None
    session_key: object | None = None
    new_session: bool = False
    session_info: SessionDescription | None = None


@dataclass(frozen=True, slots=True)
class Sample:
    """A decoded unit stamped by its source: what the scheduler consumes.

    ``rx_ns`` is the monotonic receive time (or the recorded time when replaying).
    """

    source: str
    rx_ns: int
    values: Mapping[str, Any]
    source_time_ns: int | None = None
    new_session: bool = False
    session_info: SessionDescription | None = None
    stale: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_decoded(cls, source: str, rx_ns: int, decoded: Decoded, *, new_session: bool = False) -> Sample:
        return cls(
            source=source,
            rx_ns=rx_ns,
            values=decoded.values,
            source_time_ns=decoded.source_time_ns,
            new_session=new_session or decoded.new_session,
            session_info=decoded.session_info,
        )


class SinkFull(Exception):
    """The recorder's intake is full; the sample was not taken."""


#: Non-blocking hand-off to the recorder; raises SinkFull when the intake is full.
SampleSink = Callable[[Sample], None]


class Decoder(Protocol):
    """A stateful-or-not pure decoder for one protocol."""

    def decode(self, data: bytes) -> Decoded | None:
        """Decode one unit; raise DecodeError(reason=...) when it is malformed."""
        ...


class DropCounter:
    """Counts dropped inputs by reason; the numbers shown in status and metrics."""

    __slots__ = ("_counts",)

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()

    def add(self, reason: str, n: int = 1) -> None:
        self._counts[reason] += n

    def total(self) -> int:
        return sum(self._counts.values())

    def as_dict(self) -> dict[str, int]:
        return dict(sorted(self._counts.items()))


def generated_definition(
    *,
    title: str,
    description: str,
    session_description: str,
    frame_description: str,
    fields: list[dict[str, Any]],
) -> dict[str, Any]:
    """A WRTF definition for channels known only at run time (a DBC file, a configured layout).

    The session header carries only the N9 time base; the recorder adds what it needs.
    """
    return {
        "version": "1.0",
        "metadata": {"title": title, "description": description},
        "session": {
            "description": session_description,
            "header": {
                "description": "Session start",
                "fields": [
                    {
                        "name": "start_timestamp",
                        "type": "uint64",
                        "description": "Session time base (N9)",
                        "unit": "us",
                    }
                ],
            },
        },
        "frame": {"description": frame_description, "fields": fields},
    }


def awaited_info(decoder: object) -> tuple[str, ...]:
    """The session info keys ``decoder`` promises shortly after a session starts (its optional
    ``awaits_session_info``, e.g. a game that names its track in a packet of its own): what a
    new session's header waits for (``recorder.info_wait_s``). None by default."""
    keys = getattr(decoder, "awaits_session_info", ())
    return tuple(k for k in keys if isinstance(k, str)) if isinstance(keys, tuple) else ()
