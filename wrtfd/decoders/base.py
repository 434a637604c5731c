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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "Decoded",
    "Decoder",
    "DropCounter",
    "RawField",
    "RawLayout",
    "RawValues",
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
class RawField:
    """A channel whose value is exactly what ``struct`` unpacks from the packet at ``offset``.

    ``code`` is the struct code on the wire (little-endian); ``count`` elements ``stride``
    bytes apart (0: adjacent), row element ``i`` taken from wire element ``order[i]``, then
    ``pad`` zero elements; ``array``: the value is a tuple (else the one element).
    """

    name: str
    offset: int
    code: str
    count: int = 1
    stride: int = 0
    order: tuple[int, ...] | None = None
    pad: int = 0
    array: bool = False


class RawLayout:
    """One fixed-layout packet kind, compiled once by its decoder (docs/timing.md, the raw path).

    ``fields`` are read straight from the packet; ``extra`` names the channels the decoder
    computes (unit conversions, a chosen car) and hands over in a small dict; ``build(data,
    extra)`` makes the channel dict exactly as the decoder's per-field path does (what every
    reader of :class:`RawValues` other than the frame row's compiled store gets).
    Compared by identity: the frame row compiles one store per layout object.
    """

    __slots__ = ("build", "extra", "fields")

    def __init__(
        self,
        fields: tuple[RawField, ...],
        extra: tuple[str, ...],
        build: Callable[[bytes, Mapping[str, Any]], dict[str, Any]],
    ) -> None:
        self.fields = fields
        self.extra = extra
        self.build = build


class RawValues(Mapping[str, Any]):
    """A sample's channel values kept as the packet's bytes plus a few computed ones.

    The frame row stores them with one compiled store per :class:`RawLayout` (byte copies, no
    dict); anything else that reads them as a mapping gets the decoder's dict, made once.
    """

    __slots__ = ("_values", "data", "extra", "layout")

    def __init__(self, layout: RawLayout, data: bytes, extra: Mapping[str, Any]) -> None:
        self.layout = layout
        self.data = data
        self.extra = extra
        self._values: dict[str, Any] | None = None

    def materialize(self) -> dict[str, Any]:
        values = self._values
        if values is None:
            values = self._values = self.layout.build(self.data, self.extra)
        return values

    def __getitem__(self, key: str) -> Any:
        return self.materialize()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.materialize())

    def __len__(self) -> int:
        return len(self.materialize())


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
    stale: frozenset[str] = frozenset()  # one shared empty set (immutable): no call per sample

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
