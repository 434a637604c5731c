"""Link-layer, IPv4/IPv6 and UDP headers of captured packets: parse (import) and build (tap).

Only what telemetry needs: a captured packet either yields one UDP datagram with its addresses,
ports and payload, or a drop reason (a short slug, counted by the caller):

``unsupported_link_type``, ``not_ip`` (ARP, LLDP...), ``not_udp`` (TCP, ICMP...),
``ip_fragment`` (a fragment of a datagram: games send datagrams under the MTU, so fragments are
counted rather than reassembled), ``truncated_packet`` (the capture's snap length, or a header
that runs past the captured bytes), ``bad_header`` (lengths that contradict each other).

Header layouts: RFC 791 (IPv4), RFC 8200 (IPv6 and its extension headers), RFC 768 (UDP);
link types and their headers from the tcpdump.org LINKTYPE list. The parser is hand-written with
precompiled :class:`struct.Struct`s: dpkt's own decoders cost 4-6.5 us a packet here against
0.3 us, and the import's whole cost is about 16 us a datagram (see ``docs/import.md``).
"""

from __future__ import annotations

import socket
import struct
from typing import NamedTuple

from dpkt.dpkt import in_cksum

__all__ = [
    "IPV4_UDP",
    "LINKTYPE_ETHERNET",
    "LINKTYPE_IPV4",
    "LINKTYPE_IPV6",
    "LINKTYPE_LINUX_SLL",
    "LINKTYPE_LINUX_SLL2",
    "LINKTYPE_LOOP",
    "LINKTYPE_NULL",
    "LINKTYPE_RAW",
    "LINKTYPE_USER0",
    "SUPPORTED_LINK_TYPES",
    "Datagram",
    "address_text",
    "build_udp_header",
    "build_udp_packet",
    "ipv4_udp_offset",
    "parse_udp",
]

LINKTYPE_NULL = 0  # BSD loopback: 4-byte address family in the writer's byte order
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101  # raw IPv4 or IPv6, told apart by the version nibble
LINKTYPE_LOOP = 108  # OpenBSD loopback: 4-byte address family, big-endian
LINKTYPE_LINUX_SLL = 113  # Linux "cooked" capture (tcpdump -i any)
LINKTYPE_IPV4 = 228
LINKTYPE_IPV6 = 229
LINKTYPE_LINUX_SLL2 = 276
#: First of the 16 link types reserved for private use: the tap's raw serial lines and chunks.
LINKTYPE_USER0 = 147
#: ``DLT_RAW`` as some writers put it in files (12 on most systems, 14 on OpenBSD).
_DLT_RAW_VALUES = (12, 14)

_ETHERTYPE_IPV4 = 0x0800
_ETHERTYPE_IPV6 = 0x86DD
_ETHERTYPE_VLAN = frozenset({0x8100, 0x88A8, 0x9100})
#: AF_INET6 as BSDs, macOS and Linux write it in a NULL/LOOP header.
_AF_INET6 = frozenset({10, 24, 28, 30})
_IPPROTO_UDP = 17
#: IPv6 extension headers skipped on the way to UDP (hop-by-hop, routing, destination options).
_IPV6_SKIPPED = frozenset({0, 43, 60})
_IPV6_FRAGMENT = 44
#: An IPv6 chain longer than this is hostile, not a real packet.
_MAX_IPV6_EXTENSIONS = 8

_U16_BE = struct.Struct("!H")
_U32_BE = struct.Struct("!I")
_U32_LE = struct.Struct("<I")
_IPV4 = struct.Struct(
    "!BBHHHBBH4s4s"
)  # ver/ihl, tos, total length, id, flags/frag, ttl, proto, sum, src, dst
_IPV6 = struct.Struct("!IHBB16s16s")  # ver/class/flow, payload length, next header, hops, src, dst
_UDP = struct.Struct("!HHHH")  # source port, destination port, length, checksum

SUPPORTED_LINK_TYPES = frozenset(
    {
        LINKTYPE_NULL,
        LINKTYPE_ETHERNET,
        LINKTYPE_RAW,
        LINKTYPE_LOOP,
        LINKTYPE_LINUX_SLL,
        LINKTYPE_LINUX_SLL2,
        LINKTYPE_IPV4,
        LINKTYPE_IPV6,
        *_DLT_RAW_VALUES,
    }
)


class Datagram(NamedTuple):
    """One UDP datagram out of a capture. Addresses are raw (4 or 16 bytes): see :func:`address_text`.

    (A NamedTuple: built once per packet, where a frozen dataclass costs three times as much.)
    """

    ts_ns: int
    src: bytes
    src_port: int
    dst: bytes
    dst_port: int
    payload: bytes


def address_text(raw: bytes) -> str:
    """``b"\\x7f\\0\\0\\1"`` -> ``"127.0.0.1"`` (IPv4 or IPv6)."""
    return socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw)


def _ip_offset(linktype: int, data: bytes) -> int | str:
    """Offset of the IP header in a frame of ``linktype``, or a drop reason."""
    n = len(data)
    if linktype == LINKTYPE_ETHERNET:
        if n < 14:
            return "truncated_packet"
        pos = 12
        (ethertype,) = _U16_BE.unpack_from(data, pos)
        for _ in range(2):  # 802.1Q / QinQ tags
            if ethertype not in _ETHERTYPE_VLAN:
                break
            pos += 4
            if n < pos + 2:
                return "truncated_packet"
            (ethertype,) = _U16_BE.unpack_from(data, pos)
        if ethertype not in (_ETHERTYPE_IPV4, _ETHERTYPE_IPV6):
            return "not_ip"
        return pos + 2
    if linktype == LINKTYPE_RAW or linktype in (LINKTYPE_IPV4, LINKTYPE_IPV6) or linktype in _DLT_RAW_VALUES:
        return 0
    if linktype == LINKTYPE_LINUX_SLL:
        if n < 16:
            return "truncated_packet"
        (proto,) = _U16_BE.unpack_from(data, 14)
        return 16 if proto in (_ETHERTYPE_IPV4, _ETHERTYPE_IPV6) else "not_ip"
    if linktype == LINKTYPE_LINUX_SLL2:
        if n < 20:
            return "truncated_packet"
        (proto,) = _U16_BE.unpack_from(data, 0)
        return 20 if proto in (_ETHERTYPE_IPV4, _ETHERTYPE_IPV6) else "not_ip"
    if linktype in (LINKTYPE_NULL, LINKTYPE_LOOP):
        if n < 4:
            return "truncated_packet"
        family = _U32_BE.unpack_from(data)[0]
        if linktype == LINKTYPE_NULL and family > 0xFFFF:  # written in the other byte order
            family = _U32_LE.unpack_from(data)[0]
        return 4 if family == 2 or family in _AF_INET6 else "not_ip"
    return "unsupported_link_type"


#: The common case in one unpack: an IPv4 header of 20 bytes (no options), then UDP.
#: total length, flags/fragment, protocol, source, destination; source port, destination port, length.
IPV4_UDP = struct.Struct("!2xH2xHxB2x4s4sHHH2x")


def ipv4_udp_offset(linktype: int) -> int | None:
    """Where the IPv4 header starts in a frame of ``linktype`` when the link header is fixed
    (raw IP: 0, Ethernet without VLAN tags: 14, after checking its type is IPv4); None for the
    others, which always take :func:`parse_udp`."""
    if linktype in (LINKTYPE_RAW, LINKTYPE_IPV4) or linktype in _DLT_RAW_VALUES:
        return 0
    if linktype == LINKTYPE_ETHERNET:
        return 14
    return None


def parse_udp(linktype: int, data: bytes, ts_ns: int) -> Datagram | str:
    """The UDP datagram in one captured frame, or the reason it has none (see module docstring)."""
    pos = _ip_offset(linktype, data)
    if isinstance(pos, str):
        return pos
    n = len(data)
    if n < pos + 1:
        return "truncated_packet"
    version = data[pos] >> 4
    if version == 4:
        if n < pos + 20:
            return "truncated_packet"
        vihl, _tos, total, _id, frag, _ttl, proto, _sum, src, dst = _IPV4.unpack_from(data, pos)
        ihl = (vihl & 0x0F) * 4
        if ihl < 20 or total < ihl:
            return "bad_header"
        if frag & 0x3FFF:  # more fragments, or a fragment offset
            return "ip_fragment"
        if proto != _IPPROTO_UDP:
            return "not_udp"
        if pos + total > n:
            return "truncated_packet"
        end = pos + total
        pos += ihl
    elif version == 6:
        if n < pos + 40:
            return "truncated_packet"
        _vcf, payload_len, nxt, _hops, src, dst = _IPV6.unpack_from(data, pos)
        end = pos + 40 + payload_len
        if end > n:
            return "truncated_packet"
        pos += 40
        for _ in range(_MAX_IPV6_EXTENSIONS):
            if nxt not in _IPV6_SKIPPED:
                break
            if pos + 2 > end:
                return "truncated_packet"
            nxt, ext_len = data[pos], data[pos + 1]
            pos += (ext_len + 1) * 8
        if nxt == _IPV6_FRAGMENT:
            return "ip_fragment"
        if nxt != _IPPROTO_UDP:
            return "not_udp"
    else:
        return "not_ip"
    if pos + 8 > end:
        return "truncated_packet"
    sport, dport, length, _csum = _UDP.unpack_from(data, pos)
    if length < 8:
        return "bad_header"
    if pos + length > end:
        return "truncated_packet"
    return Datagram(ts_ns, src, sport, dst, dport, data[pos + 8 : pos + length])


def _pack_address(host: str) -> bytes:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.inet_pton(family, host.split("%", 1)[0])


def build_udp_packet(src: tuple[str, int], dst: tuple[str, int], payload: bytes) -> bytes:
    """:func:`build_udp_header` + ``payload``."""
    return build_udp_header(src, dst, payload) + payload


def build_udp_header(src: tuple[str, int], dst: tuple[str, int], payload: bytes) -> bytes:
    """The IPv4 (or IPv6, when both addresses are) and UDP headers of a packet carrying ``payload``.

    IPv4 gets its header checksum and no UDP checksum (0: allowed over IPv4); IPv6 gets the UDP
    checksum it requires. ``LINKTYPE_RAW`` frames, as the tap writes them.

    :raises ValueError: an address that is not an IP address, a port out of range, a payload
        too large for one datagram, or one IPv4 and one IPv6 address.
    """
    src_raw, dst_raw = _pack_address(src[0]), _pack_address(dst[0])
    if len(src_raw) != len(dst_raw):
        raise ValueError(f"cannot mix IPv4 and IPv6 addresses ({src[0]} -> {dst[0]})")
    udp_len = 8 + len(payload)
    if len(src_raw) == 4:
        if udp_len + 20 > 0xFFFF:
            raise ValueError(f"a {len(payload)}-byte payload does not fit an IPv4 datagram")
        header = bytearray(
            _IPV4.pack(0x45, 0, 20 + udp_len, 0, 0x4000, 64, _IPPROTO_UDP, 0, src_raw, dst_raw)
        )
        struct.pack_into("!H", header, 10, in_cksum(bytes(header)))
        return bytes(header) + _UDP.pack(src[1], dst[1], udp_len, 0)
    if udp_len > 0xFFFF:
        raise ValueError(f"a {len(payload)}-byte payload does not fit a UDP datagram")
    pseudo = src_raw + dst_raw + struct.pack("!I3xB", udp_len, _IPPROTO_UDP)
    udp = _UDP.pack(src[1], dst[1], udp_len, 0) + payload
    checksum = in_cksum(pseudo + udp) or 0xFFFF
    ipv6 = _IPV6.pack(6 << 28, udp_len, _IPPROTO_UDP, 64, src_raw, dst_raw)
    return ipv6 + udp[:6] + _U16_BE.pack(checksum)
