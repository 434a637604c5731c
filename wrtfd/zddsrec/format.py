"""The ``.zddsrec`` 1.0 wire format: a header written once, then frames.

Layout (zerodds-recorder 1.0, ``format.rs``; seed ``003_a3cad90e701407cf.txt``), all integers
little endian::

    header  "ZDDS" | u32 version=1 | i64 time_base_unix_ns | u32 n_participants | u32 n_topics
            | n_participants x (16-byte GUID, string name)
            | n_topics x (string type_name, string name)        # type name FIRST, as format.rs writes
    frame   'F' | i64 timestamp_delta_ns | u32 participant_idx | u32 topic_idx | u8 sample_kind
            | u32 payload_len | payload (CDR, with its 4-byte encapsulation header)
    string  u32 byte length | UTF-8 bytes (no NUL)

The same bytes arrive over a TCP connection (the "DDS-like socket") or sit in a file, so the
parser is incremental (:class:`StreamDecoder`): feed it chunks, get complete frames back. It never
buffers more than one header or one frame (both capped by :class:`Limits`) plus one chunk, and it
rejects anything it cannot trust with a :class:`ZddsrecError` that names the stream offset.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import IntEnum, unique
from pathlib import Path
from typing import BinaryIO

from wrtfd.errors import DecodeError, ImportFormatError

__all__ = [
    "FRAME_HEADER_SIZE",
    "FRAME_MAGIC",
    "ZDDSREC_MAGIC",
    "ZDDSREC_VERSION",
    "Frame",
    "Header",
    "Limits",
    "ParticipantEntry",
    "SampleKind",
    "StreamDecoder",
    "TopicEntry",
    "TornTail",
    "ZddsrecError",
    "ZddsrecReader",
    "ZddsrecWriter",
    "encode_frame",
    "encode_header",
]

ZDDSREC_MAGIC = b"ZDDS"
FRAME_MAGIC = 0x46  # b"F"
ZDDSREC_VERSION = 1
GUID_SIZE = 16

# magic(4s) version(u32) time_base_unix_ns(i64) n_participants(u32) n_topics(u32)
_HEADER_FIXED = struct.Struct("<4sIqII")
# magic(u8 'F') timestamp_delta_ns(i64) participant_idx(u32) topic_idx(u32) sample_kind(u8) payload_len(u32)
_FRAME = struct.Struct("<BqIIBI")
_U32 = struct.Struct("<I")
FRAME_HEADER_SIZE = _FRAME.size  # 22

_U32_MAX = 0xFFFF_FFFF


@unique
class SampleKind(IntEnum):
    """DDS sample kind as the recorder writes it (u8 wire values of ``SampleKind`` in format.rs)."""

    ALIVE = 0
    NOT_ALIVE_DISPOSED = 1
    NOT_ALIVE_UNREGISTERED = 2


_KINDS: tuple[SampleKind, ...] = tuple(SampleKind)


@dataclass(frozen=True, slots=True)
class Limits:
    """Caps on what a peer or a file may make us allocate.

    The 1 MiB payload default follows the original recorder's reader; strings get the same cap.
    ``max_header_bytes`` bounds the whole header (participants and topics tables).
    """

    max_payload_bytes: int = 1 << 20
    max_string_bytes: int = 1 << 20
    max_participants: int = 4096
    max_topics: int = 4096
    max_header_bytes: int = 4 << 20

    def __post_init__(self) -> None:
        for name in (
            "max_payload_bytes",
            "max_string_bytes",
            "max_participants",
            "max_topics",
            "max_header_bytes",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"Limits.{name} must be a non-negative int, got {value!r}")


@dataclass(frozen=True, slots=True)
class ParticipantEntry:
    guid: bytes  # 16 bytes: RTPS GUID prefix + entity id
    name: str


@dataclass(frozen=True, slots=True)
class TopicEntry:
    name: str
    type_name: str


@dataclass(frozen=True, slots=True)
class Header:
    time_base_unix_ns: int
    participants: tuple[ParticipantEntry, ...] = ()
    topics: tuple[TopicEntry, ...] = ()
    size: int = field(default=0, compare=False)  # bytes it took on the wire (0 when built in memory)


@dataclass(frozen=True, slots=True)
class Frame:
    """One sample record. ``offset`` is where its ``'F'`` byte sits in the stream or file."""

    timestamp_delta_ns: int
    participant_idx: int
    topic_idx: int
    kind: SampleKind
    payload: bytes
    offset: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class TornTail:
    """Bytes at the end of a file that do not make a complete frame (a recorder killed mid-write)."""

    offset: int
    size: int


class ZddsrecError(DecodeError):
    """A ``.zddsrec`` stream broke a rule; ``offset`` is the stream offset of the culprit."""

    def __init__(self, message: str, *, reason: str, offset: int) -> None:
        super().__init__(f"{message} (at byte {offset})", reason=reason)
        self.offset = offset
        #: complete frames that came before the error in the same feed (still good to use)
        self.frames_before: list[Frame] = []


# --------------------------------------------------------------------------- encoding


def _encode_string(out: bytearray, text: str) -> None:
    data = text.encode("utf-8")
    if len(data) > _U32_MAX:
        raise ValueError(f"string of {len(data)} bytes does not fit a u32 length")
    out += _U32.pack(len(data))
    out += data


def encode_header(header: Header) -> bytes:
    """The header bytes, magic and version included (``Header::write``)."""
    out = bytearray(
        _HEADER_FIXED.pack(
            ZDDSREC_MAGIC,
            ZDDSREC_VERSION,
            header.time_base_unix_ns,
            len(header.participants),
            len(header.topics),
        )
    )
    for p in header.participants:
        if len(p.guid) != GUID_SIZE:
            raise ValueError(f"participant {p.name!r}: GUID must be {GUID_SIZE} bytes, got {len(p.guid)}")
        out += p.guid
        _encode_string(out, p.name)
    for t in header.topics:
        _encode_string(out, t.type_name)
        _encode_string(out, t.name)
    return bytes(out)


def encode_frame(
    timestamp_delta_ns: int, participant_idx: int, topic_idx: int, kind: SampleKind | int, payload: bytes
) -> bytes:
    """One frame's bytes (``Frame::write``). Values are not checked against a header here."""
    if len(payload) > _U32_MAX:
        raise ValueError(f"payload of {len(payload)} bytes does not fit a u32 length")
    return _FRAME.pack(
        FRAME_MAGIC, timestamp_delta_ns, participant_idx, topic_idx, int(kind), len(payload)
    ) + bytes(payload)


class ZddsrecWriter:
    """Writes a header, then frames, to a binary stream; checks indices against the header."""

    def __init__(self, stream: BinaryIO, header: Header) -> None:
        self._stream = stream
        self.header = header
        stream.write(encode_header(header))
        self.frames_written = 0

    def write_frame(
        self,
        timestamp_delta_ns: int,
        participant_idx: int,
        topic_idx: int,
        kind: SampleKind | int,
        payload: bytes,
    ) -> None:
        if not 0 <= participant_idx < len(self.header.participants):
            raise ValueError(
                f"participant index {participant_idx} outside 0..{len(self.header.participants) - 1}"
            )
        if not 0 <= topic_idx < len(self.header.topics):
            raise ValueError(f"topic index {topic_idx} outside 0..{len(self.header.topics) - 1}")
        self._stream.write(
            encode_frame(timestamp_delta_ns, participant_idx, topic_idx, SampleKind(kind), payload)
        )
        self.frames_written += 1


# --------------------------------------------------------------------------- decoding


class _NeedMore(Exception):
    """Internal: the buffer ends inside the header."""


def _parse_header(buf: bytearray, limits: Limits) -> Header:
    """Parse a header from the start of ``buf``; raise _NeedMore when it is not all there yet."""
    n = len(buf)
    if n >= 4 and bytes(buf[:4]) != ZDDSREC_MAGIC:
        raise ZddsrecError(
            f"bad magic {bytes(buf[:4])!r}, expected {ZDDSREC_MAGIC!r}", reason="bad_magic", offset=0
        )
    if n < _HEADER_FIXED.size:
        raise _NeedMore
    _magic, version, time_base, n_part, n_topics = _HEADER_FIXED.unpack_from(buf, 0)
    if version != ZDDSREC_VERSION:
        raise ZddsrecError(
            f"unsupported .zddsrec version {version}, expected {ZDDSREC_VERSION}",
            reason="bad_version",
            offset=4,
        )
    if n_part > limits.max_participants:
        raise ZddsrecError(
            f"{n_part} participants exceed the limit of {limits.max_participants}",
            reason="too_many_participants",
            offset=16,
        )
    if n_topics > limits.max_topics:
        raise ZddsrecError(
            f"{n_topics} topics exceed the limit of {limits.max_topics}", reason="too_many_topics", offset=20
        )
    pos = _HEADER_FIXED.size

    def string(what: str) -> str:
        nonlocal pos
        if pos + 4 > n:
            raise _NeedMore
        (length,) = _U32.unpack_from(buf, pos)
        if length > limits.max_string_bytes:
            raise ZddsrecError(
                f"{what}: string length {length} exceeds the limit of {limits.max_string_bytes}",
                reason="string_too_long",
                offset=pos,
            )
        if pos + 4 + length > limits.max_header_bytes:
            raise ZddsrecError(
                f"header exceeds the limit of {limits.max_header_bytes} bytes",
                reason="header_too_large",
                offset=pos,
            )
        if pos + 4 + length > n:
            raise _NeedMore
        raw = bytes(buf[pos + 4 : pos + 4 + length])
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ZddsrecError(f"{what}: string is not UTF-8", reason="bad_string", offset=pos) from None
        pos += 4 + length
        return text

    participants = []
    for i in range(n_part):
        if pos + GUID_SIZE > n:
            raise _NeedMore
        guid = bytes(buf[pos : pos + GUID_SIZE])
        pos += GUID_SIZE
        participants.append(ParticipantEntry(guid=guid, name=string(f"participant {i} name")))
    topics = []
    for i in range(n_topics):
        type_name = string(f"topic {i} type name")
        name = string(f"topic {i} name")
        topics.append(TopicEntry(name=name, type_name=type_name))
    return Header(time_base, tuple(participants), tuple(topics), size=pos)


class StreamDecoder:
    """Incremental parser for one ``.zddsrec`` stream (a file or one TCP connection).

    Feed it bytes in chunks of any size; it returns the complete frames. The header becomes
    available as :attr:`header` once complete. After a :class:`ZddsrecError` the stream is not
    trusted any more (there is no way to resynchronise): further feeds raise again.
    """

    __slots__ = ("_buf", "_error", "_n_part", "_n_topics", "_start", "header", "limits")

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self.header: Header | None = None
        self._buf = bytearray()
        self._start = 0  # stream offset of _buf[0]
        self._n_part = 0
        self._n_topics = 0
        self._error: ZddsrecError | None = None

    @property
    def offset(self) -> int:
        """Stream offset of the first byte not yet consumed."""
        return self._start

    @property
    def pending_bytes(self) -> int:
        """Bytes held that do not yet make a complete header or frame."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[Frame]:
        """Add bytes; return every frame they complete.

        :raises ZddsrecError: the stream is malformed (reason slug and offset given); its
            ``frames_before`` holds the complete frames of this feed that preceded the fault.
        """
        if self._error is not None:
            raise self._error
        try:
            return self._feed(data)
        except ZddsrecError as exc:
            self._error = exc
            self._buf = bytearray()
            raise

    def _feed(self, data: bytes | bytearray | memoryview) -> list[Frame]:
        buf = self._buf
        buf += data
        if self.header is None:
            try:
                header = _parse_header(buf, self.limits)
            except _NeedMore:
                if len(buf) > self.limits.max_header_bytes:
                    raise ZddsrecError(
                        f"header exceeds the limit of {self.limits.max_header_bytes} bytes",
                        reason="header_too_large",
                        offset=0,
                    ) from None
                return []
            self.header = header
            self._n_part = len(header.participants)
            self._n_topics = len(header.topics)
            del buf[: header.size]
            self._start += header.size
        frames: list[Frame] = []
        pos = 0
        n = len(buf)
        unpack = _FRAME.unpack_from
        max_payload = self.limits.max_payload_bytes
        n_part = self._n_part
        n_topics = self._n_topics
        base = self._start
        try:
            while n - pos >= FRAME_HEADER_SIZE:
                magic, delta, p_idx, t_idx, kind, length = unpack(buf, pos)
                if magic != FRAME_MAGIC:
                    raise ZddsrecError(
                        f"expected frame marker 'F', found byte 0x{magic:02x}",
                        reason="bad_frame_magic",
                        offset=base + pos,
                    )
                if kind > 2:
                    raise ZddsrecError(
                        f"unknown sample kind {kind}", reason="unknown_sample_kind", offset=base + pos
                    )
                if p_idx >= n_part:
                    raise ZddsrecError(
                        f"participant index {p_idx} out of range (header has {n_part})",
                        reason="participant_out_of_range",
                        offset=base + pos,
                    )
                if t_idx >= n_topics:
                    raise ZddsrecError(
                        f"topic index {t_idx} out of range (header has {n_topics})",
                        reason="topic_out_of_range",
                        offset=base + pos,
                    )
                if length > max_payload:
                    raise ZddsrecError(
                        f"payload length {length} exceeds the limit of {max_payload}",
                        reason="payload_too_large",
                        offset=base + pos,
                    )
                end = pos + FRAME_HEADER_SIZE + length
                if end > n:
                    break
                frames.append(
                    Frame(
                        delta,
                        p_idx,
                        t_idx,
                        _KINDS[kind],
                        bytes(buf[pos + FRAME_HEADER_SIZE : end]),
                        base + pos,
                    )
                )
                pos = end
        except ZddsrecError as exc:
            exc.frames_before = frames
            raise
        finally:
            if pos:
                del buf[:pos]
                self._start += pos
        return frames


# --------------------------------------------------------------------------- files


class ZddsrecReader:
    """Reads a ``.zddsrec`` file in bounded chunks.

    The header is parsed on open. :meth:`frames` yields every complete frame; a torn last frame
    (the file ends inside it) ends the iteration and is described by :attr:`torn_tail`.

    :raises ImportFormatError: not a .zddsrec file, a truncated header, or a malformed frame
        (the message gives the byte offset).
    """

    def __init__(self, path: str | Path, *, limits: Limits | None = None, chunk_bytes: int = 1 << 20) -> None:
        self.path = Path(path)
        self._decoder = StreamDecoder(limits)
        self._chunk = max(1, chunk_bytes)
        self._file: BinaryIO = self.path.open("rb")
        self._pending: list[Frame] = []
        self._error: ImportFormatError | None = None
        self._eof = False
        self.torn_tail: TornTail | None = None
        try:
            while self._decoder.header is None and not self._eof:
                self._read_chunk()
            if self._decoder.header is None:
                raise ImportFormatError(
                    f"{self.path}: truncated .zddsrec header "
                    f"({self._decoder.pending_bytes} bytes, file ends early)"
                )
        except BaseException:
            self._file.close()
            raise
        self.header: Header = self._decoder.header

    def _read_chunk(self) -> None:
        data = self._file.read(self._chunk)
        if not data:
            self._eof = True
            return
        try:
            self._pending.extend(self._decoder.feed(data))
        except ZddsrecError as exc:
            if self._decoder.header is None:
                raise ImportFormatError(f"{self.path}: {exc}") from exc
            # Frames before the fault are still delivered; the error comes after them.
            self._pending.extend(exc.frames_before)
            self._error = ImportFormatError(f"{self.path}: {exc}")
            self._eof = True

    def frames(self) -> Iterator[Frame]:
        while True:
            if self._pending:
                batch, self._pending = self._pending, []
                yield from batch
            if self._eof:
                break
            self._read_chunk()
        if self._error is not None:
            raise self._error
        if self._decoder.pending_bytes:
            self.torn_tail = TornTail(self._decoder.offset, self._decoder.pending_bytes)

    def position(self) -> int:
        """Bytes of the file read so far (for progress display)."""
        return self._file.tell()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> ZddsrecReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
