"""Frames of one ``.zddsrec`` stream -> channel values, through a :class:`MappingConfig`.

A stream's header numbers its participants and topics; :class:`FrameMapper` binds those numbers
to the configured topic mappings once, so each frame costs a tuple lookup plus the CDR decode.
Pure: no I/O, no clock. Used by the live TCP source and by the importer alike, so both record
the same values from the same bytes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wrtfd.errors import DecodeError
from wrtfd.zddsrec.format import Frame, Header, SampleKind
from wrtfd.zddsrec.mapping import MappingConfig, TopicMapping

__all__ = ["FrameMapper", "MappedSample"]


@dataclass(frozen=True, slots=True)
class MappedSample:
    """Channel values of one DDS sample. ``time_ns`` = header time base + frame delta (Unix ns)."""

    time_ns: int
    values: Mapping[str, object]
    stale: frozenset[str] = frozenset()


class FrameMapper:
    """Maps frames of one stream; counts samples of unmapped topics and unselected instances."""

    __slots__ = ("_by_topic_idx", "_participants", "header", "not_selected", "unmapped")

    def __init__(
        self, mapping: MappingConfig, header: Header, *, unmapped: Counter[str] | None = None
    ) -> None:
        self.header = header
        by_name = mapping.by_topic()
        self._by_topic_idx: tuple[tuple[TopicMapping, ...], ...] = tuple(
            by_name.get(t.name, ()) for t in header.topics
        )
        self._participants = tuple(p.name for p in header.participants)
        #: topic name -> samples seen that no mapping takes
        self.unmapped: Counter[str] = Counter() if unmapped is None else unmapped
        #: samples of mapped topics left out by a participant or instance filter
        self.not_selected = 0

    def map(self, frame: Frame) -> MappedSample | None:
        """The channel values (or stale channels) of ``frame``; None when nothing is mapped.

        :raises DecodeError: the CDR payload does not decode as the configured type.
        """
        mappings = self._by_topic_idx[frame.topic_idx]
        time_ns = self.header.time_base_unix_ns + frame.timestamp_delta_ns
        if not mappings:
            self.unmapped[self.header.topics[frame.topic_idx].name] += 1
            return None
        participant = self._participants[frame.participant_idx]
        chosen = [m for m in mappings if m.participant is None or m.participant == participant]
        if not chosen:
            self.not_selected += 1
            return None
        if frame.kind is SampleKind.ALIVE:
            return self._alive(frame, chosen, time_ns)
        return self._gone(frame, chosen, time_ns)

    def _alive(self, frame: Frame, chosen: list[TopicMapping], time_ns: int) -> MappedSample | None:
        values: dict[str, object] = {}
        decoded: dict[int, dict[str, Any]] = {}
        for m in chosen:
            key = id(m.decoder)
            value = decoded.get(key)
            if value is None:
                value = m.decoder.decode(frame.payload)
                decoded[key] = value
            if m.instance and not m.matches_instance(value):
                continue
            for c in m.channels:
                values[c.name] = c.extract(value)
        if not values:
            self.not_selected += 1
            return None
        return MappedSample(time_ns, values)

    def _gone(self, frame: Frame, chosen: list[TopicMapping], time_ns: int) -> MappedSample | None:
        """Disposed or unregistered: the instance's channels become stale.

        The payload may be a full sample, the key members only, or empty; when it cannot tell
        which instance went away, every chosen mapping of the topic is marked stale.
        """
        stale: set[str] = set()
        for m in chosen:
            if not m.instance:
                stale |= m.channel_names
                continue
            value = _try_decode(m, frame.payload)
            if value is None or m.matches_instance(value):
                stale |= m.channel_names
        if not stale:
            self.not_selected += 1
            return None
        return MappedSample(time_ns, {}, frozenset(stale))


def _try_decode(m: TopicMapping, payload: bytes) -> dict[str, Any] | None:
    for decoder in (m.decoder, m.key_decoder):
        if decoder is None:
            continue
        try:
            return decoder.decode(payload)
        except DecodeError:
            continue
    return None
