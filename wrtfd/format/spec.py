"""The WRTF 1.0 wire contract: magic numbers, fixed structs, alignment. Nothing else.

Layouts follow ``wrtf-spec-v1.md`` as read in ``docs/wrtf-notes.md`` (N1-N12).
"""

from __future__ import annotations

import struct

__all__ = [
    "ALIGN",
    "DOC_END_MAGIC",
    "DOC_FOOTER_TAIL",
    "DOC_START_MAGIC",
    "FILE_HEADER",
    "FILE_HEADER_SIZE",
    "FILE_MAGIC",
    "FORMAT_VERSION",
    "MAGIC_WORDS",
    "METADATA_LEN",
    "SCHEMA_METADATA_KEY",
    "SESSION_ENTRY",
    "SESSION_FOOTER_HEAD",
    "SESSION_FOOTER_MAGIC",
    "SESSION_MAGIC",
    "U64",
    "pad8",
]

FILE_MAGIC = b"WRTF0001"
SESSION_MAGIC = b"WRSE0001"
SESSION_FOOTER_MAGIC = b"WRSF0001"
DOC_START_MAGIC = b"WRDF0001"
DOC_END_MAGIC = b"WRDE0001"
FORMAT_VERSION = 1
ALIGN = 8

#: The metadata key holding the definition text (N5, N12).
SCHEMA_METADATA_KEY = "wrtf.schema"

#: File header: magic, version, sample rate (Hz), start timestamp (us since epoch),
#: metadata entry count, reserved.
FILE_HEADER = struct.Struct("<8sQQQII")
FILE_HEADER_SIZE = FILE_HEADER.size  # 40

#: Length prefix of a metadata key or value (N1).
METADATA_LEN = struct.Struct("<I")

#: Session footer head: magic, then two u64 whose order is the spec's (count, last tick) or the
#: reference implementation's (last tick, count), see N2.
SESSION_FOOTER_HEAD = struct.Struct("<8sQQ")

#: Document footer session entry: session offset, session footer offset, frame count.
SESSION_ENTRY = struct.Struct("<QQQ")

#: Last 16 bytes of a document footer: session count, end marker.
DOC_FOOTER_TAIL = struct.Struct("<Q8s")

U64 = struct.Struct("<Q")

#: The magic words as little-endian u64, to spot them among frame ticks while scanning (N11).
MAGIC_WORDS: frozenset[int] = frozenset(
    U64.unpack(m)[0] for m in (SESSION_MAGIC, SESSION_FOOTER_MAGIC, DOC_START_MAGIC, DOC_END_MAGIC)
)


def pad8(n: int) -> int:
    """``n`` rounded up to the next multiple of 8."""
    return (n + 7) & ~7
