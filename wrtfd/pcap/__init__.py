"""Capture files (pcap, pcapng): reading packets out of them, and writing the raw tap's.

No decoders and no WRTF here: :mod:`wrtfd.importers.pcap` routes the datagrams to decoders.
"""

from __future__ import annotations

from wrtfd.pcap.links import Datagram as Datagram
from wrtfd.pcap.links import address_text as address_text
from wrtfd.pcap.links import build_udp_header as build_udp_header
from wrtfd.pcap.links import build_udp_packet as build_udp_packet
from wrtfd.pcap.links import parse_udp as parse_udp
from wrtfd.pcap.reader import CaptureReader as CaptureReader
from wrtfd.pcap.reader import Interface as Interface
from wrtfd.pcap.reader import capture_kind as capture_kind
from wrtfd.pcap.writer import PcapngWriter as PcapngWriter

__all__ = [
    "CaptureReader",
    "Datagram",
    "Interface",
    "PcapngWriter",
    "address_text",
    "build_udp_header",
    "build_udp_packet",
    "capture_kind",
    "parse_udp",
]
