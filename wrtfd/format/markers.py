"""Markers ("look at this moment later") carried inside the frames of a recording.

A marker is a tick, the wall-clock time it was asked for and a short note. wrtfd keeps it in the
frames themselves, so a marker is exactly as durable as the frames around it (a crash keeps every
complete frame, and so every marker whose frames were written): the metadata is written once when
a file opens and a session footer only when the session ends, so neither would survive a crash.

Layout (``docs/markers.md``): every frame has a 12-byte struct field ``marker`` (type
``wrtfd__marker``, all bytes, so no padding):

=============  ==========  ==================================================================
``id``         uint8       0: this frame carries no marker bytes; else the marker's number in
                           the session (1, 2, ... 255, then 1 again)
``offset``     uint8       where ``chunk`` goes in the marker's record
``chunk``      uint8[10]   10 bytes of the record (zero past its end)
=============  ==========  ==================================================================

A record is ``u64 wall_us | u16 delay_ticks | u8 note_len | note`` (little-endian; the note is
UTF-8, at most :data:`NOTE_BYTES` bytes) and is spread over consecutive frames, ``offset`` 0 first.
The marker's tick is the tick of the frame holding offset 0 minus ``delay_ticks`` (0 unless
another marker's record was still being written). A reader needs nothing but the frames.

Pure numpy; any WRTF reader sees three plain fields.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "CHUNK_BYTES",
    "MARKER_FIELD",
    "MARKER_TYPE",
    "NOTE_BYTES",
    "Marker",
    "clean_note",
    "encode_record",
    "has_markers",
    "marker_rows",
    "marker_type_definition",
    "markers_in",
    "read_markers",
    "session_marker_rows",
]

#: Frame field and custom type of the marker struct.
MARKER_FIELD = "marker"
MARKER_TYPE = "wrtfd__marker"
#: Record bytes per frame.
CHUNK_BYTES = 10
#: Longest note, in UTF-8 bytes (longer notes are cut on a character boundary).
NOTE_BYTES = 64

#: wall_us (u64), delay_ticks (u16), note_len (u8).
_RECORD_HEAD = struct.Struct("<QHB")
MAX_DELAY_TICKS = 0xFFFF


@dataclass(frozen=True, slots=True)
class Marker:
    """One marker as read back: its session tick, when it was asked for, and its note.

    ``complete`` is False when the note was cut short (the frames holding its end are missing:
    a torn end of a crashed file, or a session cut in two by file rotation right there).
    """

    tick: int
    wall_us: int
    note: str
    complete: bool = True


def marker_type_definition() -> dict[str, Any]:
    """The ``wrtfd__marker`` struct as a WRTF definition type."""
    return {
        "type": "struct",
        "description": "Marker bytes: a record spread over consecutive frames (docs/markers.md)",
        "fields": [
            {"name": "id", "type": "uint8", "description": "0: none in this frame; else the marker's number"},
            {"name": "offset", "type": "uint8", "description": "byte offset of chunk in the marker record"},
            {
                "name": "chunk",
                "type": "uint8",
                "dimensions": CHUNK_BYTES,
                "description": "record bytes: u64 wall_us, u16 delay_ticks, u8 note_len, UTF-8 note",
            },
        ],
    }


def clean_note(note: object) -> str:
    """``note`` as stored: control characters as spaces, at most NOTE_BYTES of UTF-8."""
    text = "".join(" " if ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0 else ch for ch in str(note)).strip()
    raw = text.encode("utf-8", "replace")[:NOTE_BYTES]
    return raw.decode("utf-8", errors="ignore")


def encode_record(wall_us: int, delay_ticks: int, note: str) -> bytes:
    """The record bytes of one marker (``note`` cleaned and cut as :func:`clean_note` does)."""
    raw = clean_note(note).encode("utf-8")
    delay = max(0, min(int(delay_ticks), MAX_DELAY_TICKS))
    return _RECORD_HEAD.pack(max(0, int(wall_us)) & 0xFFFFFFFFFFFFFFFF, delay, len(raw)) + raw


def has_markers(frame_dtype: np.dtype[Any]) -> bool:
    """True when frames of this dtype carry the marker field (wrtfd files since markers exist)."""
    names = frame_dtype.names or ()
    if MARKER_FIELD not in names:
        return False
    sub = frame_dtype[MARKER_FIELD]
    return set(sub.names or ()) >= {"id", "offset", "chunk"}


def _decode(tick0: int, first: bool, record: bytes) -> Marker | None:
    """None for the tail of a record whose start is in another file (reported there)."""
    if not first or len(record) < _RECORD_HEAD.size:
        return None
    wall_us, delay, note_len = _RECORD_HEAD.unpack_from(record)
    note_raw = record[_RECORD_HEAD.size : _RECORD_HEAD.size + note_len]
    complete = len(note_raw) == note_len
    note = note_raw.decode("utf-8", errors="replace")
    return Marker(tick0 - delay, wall_us, note, complete=complete)


def markers_in(frames: np.ndarray) -> list[Marker]:
    """Every marker whose bytes are in ``frames`` (one session's frames, in tick order).

    Only the frames that carry marker bytes are looked at one by one. Frames without the marker
    field (files of other writers, older wrtfd files) have none: ``[]``.
    """
    if frames.dtype.names is None or not has_markers(frames.dtype) or len(frames) == 0:
        return []
    field = frames[MARKER_FIELD]
    ids = np.asarray(field["id"])
    rows = np.flatnonzero(ids)
    if len(rows) == 0:
        return []
    offsets = np.asarray(field["offset"])
    chunks = np.asarray(field["chunk"])
    ticks = np.asarray(frames["tick"])
    out: list[Marker] = []
    current_id = -1
    record = bytearray()
    tick0 = 0
    first = False
    last_row = -2
    for row in rows.tolist():
        mid = int(ids[row])
        off = int(offsets[row])
        # A new record: another id, offset 0 again, or a run of marker frames broken off.
        if mid != current_id or off == 0 or row != last_row + 1:
            if current_id != -1:
                found = _decode(tick0, first, bytes(record))
                if found is not None:
                    out.append(found)
            current_id, record, tick0, first = mid, bytearray(), int(ticks[row]), off == 0
            if off:
                record.extend(b"\0" * off)  # the start is missing: keep offsets aligned
        if len(record) < off:
            record.extend(b"\0" * (off - len(record)))
        record[off : off + CHUNK_BYTES] = chunks[row].tobytes()
        last_row = row
    found = _decode(tick0, first, bytes(record))
    if found is not None:
        out.append(found)
    return out


def read_markers(reader: Any, session: int) -> list[Marker]:
    """The markers of ``session`` of an open :class:`~wrtfd.format.Reader` (``[]`` if none)."""
    return markers_in(reader.frames(session))


def session_marker_rows(reader: Any, session: int) -> list[dict[str, Any]]:
    """The markers of a session as plain dicts (JSON output of ``info``, ``dump``, ``laps``)."""
    return marker_rows(read_markers(reader, session), reader.sessions[session].time_base_us, reader.rate_hz)


def marker_rows(markers: list[Marker], time_base_us: int, rate_hz: int) -> list[dict[str, Any]]:
    """Plain dicts for JSON output: tick, frame time (N9), wall time and note."""
    return [
        {
            "tick": m.tick,
            "time_us": time_base_us + (m.tick * 1_000_000 + rate_hz // 2) // rate_hz,
            "wall_us": m.wall_us,
            "note": m.note,
            "complete": m.complete,
        }
        for m in markers
    ]
