"""Writing pcapng files that Wireshark, tshark and tcpdump open: what the raw tap keeps.

* UDP datagrams are stored as IPv4/UDP (or IPv6/UDP) packets with their real addresses and
  ports, on an interface of link type ``LINKTYPE_RAW`` (:meth:`PcapngWriter.add_udp_interface`).
* Serial lines, CAN frames, TCP chunks: the bytes as received, on an interface of the first
  private-use link type (``LINKTYPE_USER0``, shown as raw data), with the source named in the
  interface's name and description (:meth:`PcapngWriter.add_raw_interface`).
* Timestamps are integer nanoseconds (``if_tsresol`` = 9), so a replayed tap places every
  sample at exactly the time the live source gave it.

Blocks are dpkt's: the Section Header and Interface Descriptions (with their options) are dpkt
block objects; each packet's Enhanced Packet Block is packed with one :class:`struct.Struct`
compiled from dpkt's own field table for that block (``__hdr__``), because building a dpkt
block object per packet costs 2-3 times as much, and python-pcapng ten times
(``bench/bench_import.py`` prints the per-packet costs side by side).

A file is a sequence of whole blocks: each :meth:`PcapngWriter.write_datagram` writes one block
with one ``write()`` into the file's buffer, so a crash leaves a readable prefix (at most the
last block torn, which :class:`~wrtfd.pcap.reader.CaptureReader` counts as ``truncated_block``).
Interfaces must be added before the first packet.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, BinaryIO

from dpkt import pcapng as dpkt_pcapng

from wrtfd.pcap.links import LINKTYPE_RAW, LINKTYPE_USER0, build_udp_header

__all__ = ["PcapngWriter"]

#: ``if_tsresol`` = 9: timestamps in nanoseconds.
_TSRESOL_NS = b"\x09"
_SNAPLEN = 0x40000
#: IPv4/UDP headers kept for reuse (per addresses, ports and length: a game's datagrams repeat them).
_HEADER_CACHE_ENTRIES = 256
_PAD = (b"", b"\0", b"\0\0", b"\0\0\0")


def _option(code: int, data: bytes) -> dpkt_pcapng.PcapngOptionLE:
    return dpkt_pcapng.PcapngOptionLE(code=code, data=data)


class PcapngWriter:
    """A little-endian pcapng section on ``stream`` (a binary file opened for writing).

    The stream is not closed by :meth:`close` unless ``owns_stream``.
    """

    def __init__(self, stream: BinaryIO, *, application: str = "wrtfd", owns_stream: bool = False) -> None:
        self._stream = stream
        self._owns = owns_stream
        self._interfaces: list[int] = []  # link type per interface number
        self._started = False
        shb = dpkt_pcapng.SectionHeaderBlockLE(
            opts=[
                _option(dpkt_pcapng.PCAPNG_OPT_SHB_USERAPPL, application.encode("utf-8")),
                _option(dpkt_pcapng.PCAPNG_OPT_ENDOFOPT, b""),
            ]
        )
        stream.write(bytes(shb))
        self._headers: dict[tuple[tuple[str, int], tuple[str, int], int], bytes] = {}
        fields = dpkt_pcapng.EnhancedPacketBlockLE.__hdr__
        self._epb = struct.Struct(
            "<" + "".join(f[1] for f in fields[:-1])
        )  # the total length follows the data
        self._epb_type = dpkt_pcapng.PCAPNG_BT_EPB

    @property
    def interface_count(self) -> int:
        return len(self._interfaces)

    def _add_interface(self, linktype: int, name: str, description: str) -> int:
        if self._started:
            raise ValueError("interfaces must be added before the first packet")
        opts = [_option(dpkt_pcapng.PCAPNG_OPT_IF_TSRESOL, _TSRESOL_NS)]
        if name:
            opts.append(_option(dpkt_pcapng.PCAPNG_OPT_IF_NAME, name.encode("utf-8")))
        if description:
            opts.append(_option(dpkt_pcapng.PCAPNG_OPT_IF_DESCRIPTION, description.encode("utf-8")))
        opts.append(_option(dpkt_pcapng.PCAPNG_OPT_ENDOFOPT, b""))
        idb = dpkt_pcapng.InterfaceDescriptionBlockLE(linktype=linktype, snaplen=_SNAPLEN, opts=opts)
        self._stream.write(bytes(idb))
        self._interfaces.append(linktype)
        return len(self._interfaces) - 1

    def add_udp_interface(self, name: str, description: str = "") -> int:
        """An interface for UDP datagrams (raw IP packets); returns its number."""
        return self._add_interface(LINKTYPE_RAW, name, description)

    def add_raw_interface(self, name: str, description: str) -> int:
        """An interface for raw bytes (serial lines, chunks) of the source ``description`` names."""
        return self._add_interface(LINKTYPE_USER0, name, description)

    def write_packet(self, interface: int, ts_ns: int, data: bytes) -> None:
        """One packet (a frame of the interface's link type) at ``ts_ns`` (ns since the epoch).

        :raises ValueError: an unknown interface or a negative time.
        """
        if not 0 <= interface < len(self._interfaces):
            raise ValueError(f"interface {interface} was not added ({len(self._interfaces)} are)")
        if ts_ns < 0:
            raise ValueError(f"negative timestamp {ts_ns}")
        self._started = True
        size = len(data)
        pad = -size % 4
        total = self._epb.size + size + pad + 4
        head = self._epb.pack(
            self._epb_type, total, interface, (ts_ns >> 32) & 0xFFFFFFFF, ts_ns & 0xFFFFFFFF, size, size
        )
        self._stream.write(b"".join((head, data, _PAD[pad], total.to_bytes(4, "little"))))

    def write_datagram(
        self, interface: int, ts_ns: int, src: tuple[str, int], dst: tuple[str, int], payload: bytes
    ) -> None:
        """One UDP datagram from ``src`` to ``dst`` (``(ip, port)``) on a UDP interface.

        :raises ValueError: as :meth:`write_packet`, or a bad address, port or payload size.
        """
        if 0 <= interface < len(self._interfaces) and self._interfaces[interface] != LINKTYPE_RAW:
            raise ValueError(f"interface {interface} is not a UDP interface")
        key = (src, dst, len(payload))
        header = self._headers.get(key)
        if header is None:
            header = build_udp_header(src, dst, payload)
            if len(header) == 28:  # IPv4: no payload checksum in it; IPv6's depends on the payload
                if len(self._headers) >= _HEADER_CACHE_ENTRIES:
                    self._headers.clear()
                self._headers[key] = header
        self.write_packet(interface, ts_ns, header + payload)

    def block_maker(self, interface: int) -> Callable[[int, Any, Any, bytes], bytes]:
        """A function ``(ts_ns, src, dst, data) -> bytes`` making the Enhanced Packet Blocks of
        ``interface`` without writing them (``src``/``dst``: the datagram's addresses on a UDP
        interface, ignored on a raw one): for a writer of many packets at a time, who writes
        the blocks with :meth:`write_blocks` (what :meth:`write_datagram` does, in fewer steps).

        :raises ValueError: an unknown interface; from the maker: as :meth:`write_datagram`.
        """
        if not 0 <= interface < len(self._interfaces):
            raise ValueError(f"interface {interface} was not added ({len(self._interfaces)} are)")
        self._started = True
        pack = self._epb.pack
        head_size = self._epb.size + 4
        epb = self._epb_type
        join = b"".join
        pad = _PAD
        udp = self._interfaces[interface] == LINKTYPE_RAW
        headers = self._headers

        def make(ts_ns: int, src: Any, dst: Any, data: bytes) -> bytes:
            if udp:
                key = (src, dst, len(data))
                header = headers.get(key)
                if header is None:
                    header = build_udp_header(src, dst, data)
                    if len(header) == 28:  # IPv4: reusable (see write_datagram)
                        if len(headers) >= _HEADER_CACHE_ENTRIES:
                            headers.clear()
                        headers[key] = header
                data = header + data
            if ts_ns < 0:
                raise ValueError(f"negative timestamp {ts_ns}")
            size = len(data)
            n = -size % 4
            total = head_size + size + n
            head = pack(epb, total, interface, (ts_ns >> 32) & 0xFFFFFFFF, ts_ns & 0xFFFFFFFF, size, size)
            return join((head, data, pad[n], total.to_bytes(4, "little")))

        return make

    def write_blocks(self, blocks: list[bytes]) -> None:
        """Blocks made by :meth:`block_maker`, in one write (each block whole)."""
        if blocks:
            self._stream.write(b"".join(blocks))

    def flush(self) -> None:
        self._stream.flush()

    def close(self) -> None:
        if self._owns:
            self._stream.close()
        else:
            self._stream.flush()
