"""The real GT7 captures in ``../shared/data/udp/gt7`` (see its README) and packets built from the
protocol document (``shared/spec/protocols/gt7.md``), independently of wrtfd's code."""

from __future__ import annotations

import csv
import struct
from dataclasses import dataclass
from pathlib import Path

from Crypto.Cipher import Salsa20

PACKET = 296
#: The document's key, and the IV XOR constant per heartbeat letter.
KEY = b"Simulator Interface Packet GT7 ver 0.0"[:32]
XOR = {"A": 0xDEADBEAF, "B": 0xDEADBEEF, "~": 0x55FABB4F, "C": 0xDEADBEEF}
SIZE = {"A": 296, "B": 316, "~": 344, "C": 368}


@dataclass(frozen=True)
class IndexRow:
    seq: int
    offset: int
    length: int
    packet_id: int
    lap_count: int
    laps_in_race: int
    best_lap_ms: int
    last_lap_ms: int


@dataclass(frozen=True)
class Capture:
    name: str
    packets: list[bytes]
    index: list[IndexRow]


def captures(shared_data: Path) -> list[Capture]:
    out = []
    for path in sorted((shared_data / "udp" / "gt7").glob("*.gt7raw")):
        raw = path.read_bytes()
        with (path.parent / (path.name + ".index.tsv")).open(newline="") as fh:
            rows = [IndexRow(*(int(v) for v in row.values())) for row in csv.DictReader(fh, delimiter="\t")]
        packets = [raw[r.offset : r.offset + r.length] for r in rows]
        out.append(Capture(path.name.removesuffix(".gt7raw"), packets, rows))
    return out


def nonce(iv1: int, letter: str) -> bytes:
    return struct.pack("<II", (iv1 ^ XOR[letter]) & 0xFFFFFFFF, iv1)


def open_packet(data: bytes, letter: str = "A", key: bytes = KEY) -> bytes:
    """Decrypt as the document says (the IV read from the encrypted bytes 0x40..0x43)."""
    (iv1,) = struct.unpack_from("<I", data, 0x40)
    return Salsa20.new(key=key, nonce=nonce(iv1, letter)).decrypt(data)


def close_packet(plain: bytes, letter: str, iv1: int, key: bytes = KEY) -> bytes:
    """Encrypt as the console does: whole packet, then the IV written over bytes 0x40..0x43."""
    sealed = bytearray(Salsa20.new(key=key, nonce=nonce(iv1, letter)).encrypt(plain))
    struct.pack_into("<I", sealed, 0x40, iv1)
    return bytes(sealed)
