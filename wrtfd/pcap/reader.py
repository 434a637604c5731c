"""Reading pcap and pcapng capture files: packets with exact timestamps, every problem counted.

Both formats are recognised by their magic numbers (:func:`capture_kind`), never by trying a
parser. Block and record layouts are dpkt's (its ``__hdr__`` field tables are compiled once
into :class:`struct.Struct`s here; dpkt's own readers turn every timestamp into a float, which
loses the nanoseconds a tap replay needs, and keep only the first interface of a pcapng file).

What the reader takes from a file, all of it bounded:

* pcap: microsecond and nanosecond magics in either byte order, and the "modified" (Kuznetzov)
  record header; one interface with the file's link type.
* pcapng: every section (a new Section Header restarts the interfaces and may change the byte
  order), every Interface Description (link type, ``if_tsresol``, ``if_tsoffset``, name and
  description), Enhanced and obsolete Packet Blocks. Other blocks (statistics, name
  resolution, secrets) are skipped: they carry no packets. Simple Packet Blocks have no
  timestamp and are counted as ``no_timestamp``.

Problems are counted in :attr:`CaptureReader.drops` by reason: ``truncated_block`` (the file ends
inside a block or record: a capture cut short), ``corrupt_block`` (a length that contradicts
the format; the rest of the file cannot be framed and is not read), ``bad_interface`` (a packet
of an interface that was not described or whose description is unreadable), ``no_timestamp``.
A file that is not a capture at all raises :class:`~wrtfd.errors.ImportFormatError`.
"""

from __future__ import annotations

import gzip
import mmap
import struct
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import dpkt
from dpkt import pcap as dpkt_pcap
from dpkt import pcapng as dpkt_pcapng

from wrtfd.decoders.base import DropCounter
from wrtfd.errors import ImportFormatError

__all__ = [
    "GZIP_MAGIC",
    "MAX_BLOCK_BYTES",
    "MAX_GUNZIP_BYTES",
    "CaptureReader",
    "Interface",
    "capture_kind",
    "gunzip_head",
]

#: Largest block or record accepted: a 64 KiB datagram plus headers and options, with room.
#: Anything bigger is a corrupt length, not a packet.
MAX_BLOCK_BYTES = 1 << 20
#: Interfaces per section: a real capture has a handful.
MAX_INTERFACES = 4096

_PCAP_MAGICS: dict[bytes, tuple[str, int, bool]] = {
    # first four bytes -> (byte order, nanoseconds per sub-second unit, modified record header)
    struct.pack("<I", dpkt_pcap.TCPDUMP_MAGIC): ("<", 1000, False),
    struct.pack(">I", dpkt_pcap.TCPDUMP_MAGIC): (">", 1000, False),
    struct.pack("<I", dpkt_pcap.TCPDUMP_MAGIC_NANO): ("<", 1, False),
    struct.pack(">I", dpkt_pcap.TCPDUMP_MAGIC_NANO): (">", 1, False),
    struct.pack("<I", dpkt_pcap.MODPCAP_MAGIC): ("<", 1000, True),
    struct.pack(">I", dpkt_pcap.MODPCAP_MAGIC): (">", 1000, True),
}
_SHB_TYPE = struct.pack("<I", dpkt_pcapng.PCAPNG_BT_SHB)  # a palindrome: the same in both orders
_BOM_LE = struct.pack("<I", dpkt_pcapng.BYTE_ORDER_MAGIC)
_BOM_BE = struct.pack(">I", dpkt_pcapng.BYTE_ORDER_MAGIC)


def _layout(packet_class: Any, order: str, *, drop_last: bool = False) -> struct.Struct:
    """A :class:`struct.Struct` of a dpkt header class's fields (``drop_last``: the trailing
    total-length copy of a pcapng block, which follows the body rather than the header)."""
    fields = packet_class.__hdr__[:-1] if drop_last else packet_class.__hdr__
    return struct.Struct(order + "".join(f[1] for f in fields))


#: A gzip'd capture (``.pcap.gz``) starts with these bytes.
GZIP_MAGIC = b"\x1f\x8b"
#: A gzip'd capture is decompressed into a temporary file (the reader maps the file): at most this
#: much, so that a small hostile file cannot fill the disk.
MAX_GUNZIP_BYTES = 16 << 30


def gunzip_head(head: bytes, size: int = 64) -> bytes:
    """The first ``size`` decompressed bytes of a gzip stream's first bytes (b"" if unreadable)."""
    try:
        return zlib.decompressobj(wbits=31).decompress(head, size)
    except zlib.error:
        return b""


def _gunzip(raw: Any, path: Path, limit: int) -> Any:
    """The decompressed content of the open gzip file ``raw`` in an anonymous temporary file.

    :raises ImportFormatError: a corrupt or cut gzip stream, or more than ``limit`` bytes.
    """
    out = tempfile.TemporaryFile()  # noqa: SIM115 - returned; the reader closes it
    try:
        with gzip.GzipFile(fileobj=raw) as src:
            while chunk := src.read(1 << 20):
                if out.tell() + len(chunk) > limit:
                    raise ImportFormatError(f"{path}: decompresses to more than {limit} bytes")
                out.write(chunk)
        out.flush()
        return out
    except (OSError, EOFError, zlib.error) as exc:
        out.close()
        raise ImportFormatError(f"{path}: not a readable gzip file ({exc})") from None
    except BaseException:
        out.close()
        raise


def capture_kind(head: bytes) -> str | None:
    """``"pcap"``, ``"pcapng"`` or None, from a file's first bytes (at least 12 for pcapng)."""
    if head[:4] in _PCAP_MAGICS:
        return "pcap"
    if head[:4] == _SHB_TYPE and head[8:12] in (_BOM_LE, _BOM_BE):
        return "pcapng"
    return None


@dataclass(frozen=True, slots=True)
class Interface:
    """One capture interface: what its packets are (link type) and how their times read."""

    linktype: int | None  # None: the description was unreadable (its packets are dropped)
    snaplen: int = 0
    name: str = ""
    description: str = ""
    ts_mul: int = 1000  # ns = raw * ts_mul // ts_div + ts_offset_ns
    ts_div: int = 1
    ts_offset_ns: int = 0


class CaptureReader:
    """A pcap or pcapng file, memory-mapped; :meth:`packets` yields ``(ts_ns, interface, data)``.

    ``interface`` indexes :attr:`interfaces` (across every section of a pcapng file). A gzip'd
    capture is decompressed first, into an anonymous temporary file (at most
    :data:`MAX_GUNZIP_BYTES`); :attr:`size` and :attr:`position` are then the decompressed ones.

    :raises ImportFormatError: the file is not a pcap or pcapng capture, or its header is.
    :raises OSError: the file cannot be opened.
    """

    def __init__(self, path: str | Path, *, max_block_bytes: int = MAX_BLOCK_BYTES) -> None:
        self.path = Path(path)
        self.max_block_bytes = max_block_bytes
        self.drops = DropCounter()
        self.interfaces: list[Interface] = []
        #: Blocks skipped because they carry no packets (statistics, name resolution...).
        self.other_blocks = 0
        self.position = 0
        self._file: Any = open(self.path, "rb")  # noqa: SIM115 - closed by close()
        try:
            if self._file.read(2) == GZIP_MAGIC:
                self._file.seek(0)
                raw, self._file = self._file, None
                try:
                    self._file = _gunzip(raw, self.path, MAX_GUNZIP_BYTES)
                finally:
                    raw.close()
            self.size = self._file.seek(0, 2)
            self._map: Any = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if self.size else b""
            kind = capture_kind(bytes(self._map[:12]))
            if kind is None:
                raise ImportFormatError(f"{self.path}: not a pcap or pcapng capture (unknown magic number)")
            self.kind = kind
            if kind == "pcap":
                self._pcap_header()
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> CaptureReader:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if isinstance(getattr(self, "_map", None), mmap.mmap):
            self._map.close()
        if self._file is not None:
            self._file.close()

    def packets(self) -> Iterator[tuple[int, int, bytes]]:
        """Every packet in file order: ``(ts_ns, interface index, captured bytes)``."""
        if self.kind == "pcap":
            return self._pcap_packets()
        return self._pcapng_packets()

    # -- pcap ------------------------------------------------------------------------------------

    def _pcap_header(self) -> None:
        order, self._pcap_unit_ns, modified = _PCAP_MAGICS[bytes(self._map[:4])]
        header = _layout(dpkt_pcap.FileHdr, order)
        if self.size < header.size:
            raise ImportFormatError(f"{self.path}: pcap file header cut short ({self.size} bytes)")
        _magic, v_major, _v_minor, _tz, _sigfigs, snaplen, linktype = header.unpack_from(self._map)
        if v_major != dpkt_pcap.PCAP_VERSION_MAJOR:
            raise ImportFormatError(f"{self.path}: pcap version {v_major} (expected 2)")
        record = dpkt_pcap.PktModHdr if modified else dpkt_pcap.PktHdr
        self._pcap_record = _layout(record, order)
        self._pcap_start = header.size
        self.interfaces.append(Interface(linktype & 0xFFFF, snaplen, ts_mul=self._pcap_unit_ns))

    def _pcap_packets(self) -> Iterator[tuple[int, int, bytes]]:
        m, size, limit = self._map, self.size, self.max_block_bytes
        record = self._pcap_record
        unpack, rsize = record.unpack_from, record.size
        unit = self._pcap_unit_ns
        pos = self._pcap_start
        while pos < size:
            if pos + rsize > size:
                self.drops.add("truncated_block")
                break
            fields = unpack(m, pos)
            sec, frac, caplen = fields[0], fields[1], fields[2]
            if caplen > limit:
                self.drops.add("corrupt_block")
                break
            start = pos + rsize
            end = start + caplen
            if end > size:
                self.drops.add("truncated_block")
                break
            pos = self.position = end
            yield sec * 1_000_000_000 + frac * unit, 0, m[start:end]
        self.position = size

    # -- pcapng ----------------------------------------------------------------------------------

    def _pcapng_packets(self) -> Iterator[tuple[int, int, bytes]]:
        m, size, limit = self._map, self.size, self.max_block_bytes
        pos = 0
        local: list[int] = []  # this section's interface numbers -> indexes in self.interfaces
        order = "<"
        head = epb = pb = tail = struct.Struct("<II")  # replaced at the first section header
        while pos < size:
            if pos + 12 > size:
                self.drops.add("truncated_block")
                break
            if m[pos : pos + 4] == _SHB_TYPE:
                bom = m[pos + 8 : pos + 12]
                if bom not in (_BOM_LE, _BOM_BE):
                    self.drops.add("corrupt_block")
                    break
                order = "<" if bom == _BOM_LE else ">"
                head, tail = struct.Struct(order + "II"), struct.Struct(order + "I")
                epb = _layout(dpkt_pcapng.EnhancedPacketBlock, order, drop_last=True)
                pb = _layout(dpkt_pcapng.PacketBlock, order, drop_last=True)
                local = []
            btype, blen = head.unpack_from(m, pos)
            if blen < 12 or blen % 4 or blen > limit:
                self.drops.add("corrupt_block")
                break
            end = pos + blen
            if end > size:
                self.drops.add("truncated_block")
                break
            if tail.unpack_from(m, end - 4)[0] != blen:
                self.drops.add("corrupt_block")
                break
            if btype == dpkt_pcapng.PCAPNG_BT_EPB or btype == dpkt_pcapng.PCAPNG_BT_PB:
                layout = epb if btype == dpkt_pcapng.PCAPNG_BT_EPB else pb
                if blen < layout.size + 4:
                    self.drops.add("corrupt_block")
                    pos = end
                    continue
                fields = layout.unpack_from(m, pos)
                number, ts_high, ts_low, caplen = fields[2], fields[3], fields[4], fields[5]
                if btype == dpkt_pcapng.PCAPNG_BT_PB:
                    number &= 0xFFFF  # the obsolete block has a 16-bit interface id, then drops
                start = pos + layout.size
                if start + caplen > end - 4:
                    self.drops.add("corrupt_block")
                    pos = end
                    continue
                pos = self.position = end
                if number >= len(local):
                    self.drops.add("bad_interface")
                    continue
                index = local[number]
                iface = self.interfaces[index]
                ts_ns = ((ts_high << 32) | ts_low) * iface.ts_mul // iface.ts_div + iface.ts_offset_ns
                yield ts_ns, index, m[start : start + caplen]
                continue
            if btype == dpkt_pcapng.PCAPNG_BT_IDB:
                if len(local) >= MAX_INTERFACES:
                    self.drops.add("corrupt_block")
                    break
                local.append(len(self.interfaces))
                self.interfaces.append(_interface(bytes(m[pos:end]), order))
            elif btype == dpkt_pcapng.PCAPNG_BT_SPB:
                self.drops.add("no_timestamp")
            elif btype == dpkt_pcapng.PCAPNG_BT_SHB:
                pass  # handled above; its options are not needed
            else:
                self.other_blocks += 1
            pos = self.position = end
        self.position = size


def _option_text(data: bytes) -> str:
    return data.split(b"\0", 1)[0].decode("utf-8", errors="replace")


def _interface(block: bytes, order: str) -> Interface:
    """An Interface Description Block, parsed by dpkt (options included); unreadable -> unusable."""
    cls = dpkt_pcapng.InterfaceDescriptionBlockLE if order == "<" else dpkt_pcapng.InterfaceDescriptionBlock
    try:
        idb = cls(block)
        options = {opt.code: bytes(opt.data) for opt in idb.opts}
    except (dpkt.Error, struct.error, ValueError, UnicodeDecodeError):
        return Interface(None)
    ts_mul, ts_div, offset_ns = 1000, 1, 0  # the default resolution: microseconds
    resol = options.get(dpkt_pcapng.PCAPNG_OPT_IF_TSRESOL)
    if resol:
        exp = resol[0] & 0x7F
        if resol[0] & 0x80:
            ts_mul, ts_div = 1_000_000_000, 1 << exp
        elif exp <= 9:
            ts_mul, ts_div = 10 ** (9 - exp), 1
        else:
            ts_mul, ts_div = 1, 10 ** min(exp - 9, 100)
    tsoffset = options.get(dpkt_pcapng.PCAPNG_OPT_IF_TSOFFSET)
    if tsoffset is not None and len(tsoffset) == 8:
        offset_ns = struct.unpack(order + "q", tsoffset)[0] * 1_000_000_000
    return Interface(
        linktype=idb.linktype,
        snaplen=idb.snaplen,
        name=_option_text(options.get(dpkt_pcapng.PCAPNG_OPT_IF_NAME, b"")),
        description=_option_text(options.get(dpkt_pcapng.PCAPNG_OPT_IF_DESCRIPTION, b"")),
        ts_mul=ts_mul,
        ts_div=ts_div,
        ts_offset_ns=offset_ns,
    )
