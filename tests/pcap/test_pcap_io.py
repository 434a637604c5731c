"""pcap/pcapng reading and the tap's pcapng writing: exact times, real addresses, counted problems.

Classic pcap files are built here byte by byte from the format's layout (independently of the
reader's dpkt-derived structs); pcapng files with the project's writer, and checked with tshark.
"""

from __future__ import annotations

import shutil
import socket
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wrtfd.errors import ImportFormatError
from wrtfd.pcap import CaptureReader, PcapngWriter, build_udp_packet, capture_kind, parse_udp
from wrtfd.pcap.links import (
    LINKTYPE_ETHERNET,
    LINKTYPE_LINUX_SLL,
    LINKTYPE_LINUX_SLL2,
    LINKTYPE_NULL,
    LINKTYPE_RAW,
    LINKTYPE_USER0,
    Datagram,
    address_text,
)

T0_NS = 1_700_000_000_123_456_789


def ipv4_udp(src: str, sport: int, dst: str, dport: int, payload: bytes, *, frag: int = 0x4000) -> bytes:
    """IPv4 + UDP by hand (RFC 791 / 768), checksums left 0."""
    ip = struct.pack(
        "!BBHHHBBH4s4s", 0x45, 0, 28 + len(payload), 7, frag, 64, 17, 0,
        socket.inet_aton(src), socket.inet_aton(dst),
    )  # fmt: skip
    return ip + struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload


def classic_pcap(
    records: list[tuple[int, bytes]], *, linktype: int, nano: bool, order: str = "<", cut: int = 0
) -> bytes:
    """A classic pcap file: 24-byte header, then (sec, frac, caplen, len) + data per record."""
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    out = struct.pack(order + "IHHiIII", magic, 2, 4, 0, 0, 65535, linktype)
    for ts_ns, data in records:
        sec, rest = divmod(ts_ns, 1_000_000_000)
        frac = rest if nano else rest // 1000
        out += struct.pack(order + "IIII", sec, frac, len(data), len(data)) + data
    return out[: len(out) - cut] if cut else out


def read_all(path: Path) -> tuple[list[tuple[int, int, bytes]], CaptureReader]:
    with CaptureReader(path) as reader:
        return list(reader.packets()), reader


@pytest.mark.parametrize("order", ["<", ">"])
@pytest.mark.parametrize("nano", [False, True])
def test_classic_pcap_by_hand(tmp_path: Path, order: str, nano: bool) -> None:
    frames = [ipv4_udp("10.0.0.2", 40000 + i, "10.0.0.9", 5301, bytes([i]) * (10 + i)) for i in range(5)]
    stamps = [T0_NS + i * 16_666_667 for i in range(5)]
    path = tmp_path / "c.pcap"
    path.write_bytes(
        classic_pcap(list(zip(stamps, frames, strict=True)), linktype=LINKTYPE_RAW, nano=nano, order=order)
    )
    assert capture_kind(path.read_bytes()[:12]) == "pcap"
    packets, reader = read_all(path)
    want = stamps if nano else [t // 1000 * 1000 for t in stamps]
    assert [p[0] for p in packets] == want
    assert [p[2] for p in packets] == frames
    assert reader.drops.as_dict() == {}
    parsed = [parse_udp(LINKTYPE_RAW, data, ts) for ts, _i, data in packets]
    dgrams = [d for d in parsed if isinstance(d, Datagram)]
    assert len(dgrams) == len(parsed)
    assert [(address_text(d.src), d.src_port, address_text(d.dst), d.dst_port) for d in dgrams] == [
        ("10.0.0.2", 40000 + i, "10.0.0.9", 5301) for i in range(5)
    ]
    assert [d.payload for d in dgrams] == [bytes([i]) * (10 + i) for i in range(5)]


def test_truncated_classic_capture_is_counted(tmp_path: Path) -> None:
    frames = [(T0_NS + i, ipv4_udp("10.0.0.2", 1, "10.0.0.9", 2, b"x" * 40)) for i in range(4)]
    path = tmp_path / "cut.pcap"
    path.write_bytes(classic_pcap(frames, linktype=LINKTYPE_RAW, nano=True, cut=10))
    packets, reader = read_all(path)
    assert len(packets) == 3
    assert reader.drops.as_dict() == {"truncated_block": 1}


LINK_HEADERS = {
    LINKTYPE_ETHERNET: b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00",
    LINKTYPE_LINUX_SLL: struct.pack("!HHH8sH", 0, 1, 6, b"\x02" * 8, 0x0800),
    LINKTYPE_LINUX_SLL2: struct.pack("!HHIHBB8s", 0x0800, 0, 1, 1, 0, 6, b"\x02" * 8),
    LINKTYPE_NULL: struct.pack("<I", 2),
}


@pytest.mark.parametrize("linktype", sorted(LINK_HEADERS))
def test_link_types(linktype: int) -> None:
    frame = LINK_HEADERS[linktype] + ipv4_udp("192.168.1.20", 50000, "192.168.1.5", 20777, b"abc")
    d = parse_udp(linktype, frame, 5)
    assert not isinstance(d, str)
    assert (d.ts_ns, address_text(d.dst), d.dst_port, d.payload) == (5, "192.168.1.5", 20777, b"abc")


def test_vlan_ipv6_and_extension_headers() -> None:
    payload = b"f1 data"
    pkt = build_udp_packet(("fe80::1", 1234), ("fe80::2", 20777), payload)
    # insert a hop-by-hop header (8 bytes) between IPv6 and UDP
    ip6 = bytearray(pkt[:40])
    ip6[6] = 0  # next header: hop-by-hop
    struct.pack_into("!H", ip6, 4, len(pkt) - 40 + 8)
    hop = bytes([17, 0]) + b"\x01\x04\0\0\0\0"
    eth = b"\x02" * 12 + b"\x81\x00\x00\x05" + b"\x86\xdd"
    d = parse_udp(LINKTYPE_ETHERNET, eth + bytes(ip6) + hop + pkt[40:], 9)
    assert not isinstance(d, str)
    assert (address_text(d.src), d.src_port, d.dst_port, d.payload) == ("fe80::1", 1234, 20777, payload)


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        (ipv4_udp("1.1.1.1", 1, "2.2.2.2", 2, b"x" * 20, frag=0x2000), "ip_fragment"),  # more fragments
        (ipv4_udp("1.1.1.1", 1, "2.2.2.2", 2, b"x" * 20, frag=0x0010), "ip_fragment"),  # an offset
        (ipv4_udp("1.1.1.1", 1, "2.2.2.2", 2, b"x" * 20)[:30], "truncated_packet"),
        (b"\x45" + bytes(19), "bad_header"),  # total length 0 < header length
        (b"\x60" + bytes(5) + b"\x2c\x40" + bytes(32), "ip_fragment"),  # IPv6 fragment header
        (b"\x50" + bytes(30), "not_ip"),
    ],
)
def test_counted_packet_problems(frame: bytes, reason: str) -> None:
    assert parse_udp(LINKTYPE_RAW, frame, 0) == reason


def test_tcp_and_arp_are_not_udp() -> None:
    tcp = bytearray(ipv4_udp("1.1.1.1", 1, "2.2.2.2", 2, b"x"))
    tcp[9] = 6
    assert parse_udp(LINKTYPE_RAW, bytes(tcp), 0) == "not_udp"
    assert parse_udp(LINKTYPE_ETHERNET, b"\x02" * 12 + b"\x08\x06" + bytes(28), 0) == "not_ip"
    assert parse_udp(999, b"whatever", 0) == "unsupported_link_type"


def write_tap(path: Path, n: int) -> list[tuple[int, tuple[str, int], tuple[str, int], bytes]]:
    sent = [
        (T0_NS + i * 2_777_777 + (i % 3), ("192.168.1.20", 50000 + i % 2), ("192.168.1.5", 5301 + i % 2),
         bytes([i % 256]) * (1 + i % 300))
        for i in range(n)
    ]  # fmt: skip
    with path.open("wb") as f:
        w = PcapngWriter(f)
        udp = w.add_udp_interface("games", "wrtfd udp sources")
        serial = w.add_raw_interface("gps", "wrtfd serial gps nmea /dev/ttyUSB0")
        v6 = w.add_udp_interface("v6", "")
        for ts, src, dst, payload in sent:
            w.write_datagram(udp, ts, src, dst, payload)
        w.write_packet(serial, T0_NS, b"$GPRMC,,V,,,,,,,,,,N*53\r\n")
        w.write_datagram(v6, T0_NS + 1, ("::1", 7), ("::1", 20777), b"six")
        w.close()
    return sent


def test_pcapng_writer_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "tap.pcapng"
    sent = write_tap(path, 500)
    packets, reader = read_all(path)
    assert reader.kind == "pcapng" and reader.drops.as_dict() == {}
    assert [(i.linktype, i.name, i.description) for i in reader.interfaces] == [
        (LINKTYPE_RAW, "games", "wrtfd udp sources"),
        (LINKTYPE_USER0, "gps", "wrtfd serial gps nmea /dev/ttyUSB0"),
        (LINKTYPE_RAW, "v6", ""),
    ]
    udp = [p for p in packets if p[1] == 0]
    assert len(udp) == len(sent)
    for (ts, _i, data), (want_ts, src, dst, payload) in zip(udp, sent, strict=True):
        d = parse_udp(LINKTYPE_RAW, data, ts)
        assert not isinstance(d, str)
        assert d.ts_ns == want_ts  # nanoseconds, exactly
        assert ((address_text(d.src), d.src_port), (address_text(d.dst), d.dst_port), d.payload) == (
            src,
            dst,
            payload,
        )
    assert packets[-2] == (T0_NS, 1, b"$GPRMC,,V,,,,,,,,,,N*53\r\n")
    six = parse_udp(LINKTYPE_RAW, packets[-1][2], 0)
    assert not isinstance(six, str) and (six.dst_port, six.payload) == (20777, b"six")


def test_torn_tap_reads_as_a_prefix(tmp_path: Path) -> None:
    """A crash mid-write leaves whole blocks then a torn one: the prefix reads, the tear is counted."""
    path = tmp_path / "tap.pcapng"
    write_tap(path, 50)
    raw = path.read_bytes()
    path.write_bytes(raw[:-70])
    packets, reader = read_all(path)
    assert 0 < len(packets) < 52
    assert reader.drops.as_dict() == {"truncated_block": 1}


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed (.ci/run installs it)")
def test_tshark_reads_the_tap(tmp_path: Path) -> None:
    path = tmp_path / "tap.pcapng"
    sent = write_tap(path, 200)
    out = subprocess.run(
        ["tshark", "-r", str(path), "-o", "ip.check_checksum:TRUE", "-o", "udp.check_checksum:TRUE",
         "-T", "fields", "-e", "frame.time_epoch", "-e", "udp.dstport", "-e", "ip.checksum.status",
         "-e", "udp.checksum.status", "-e", "frame.interface_description"],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout.splitlines()  # fmt: skip
    assert len(out) == len(sent) + 2
    first = out[0].split("\t")
    assert first[0] == f"{sent[0][0] // 10**9}.{sent[0][0] % 10**9:09d}"
    assert first[1] == "5301" and first[2] == "1"  # IPv4 header checksum good
    assert out[-1].split("\t")[3] == "1"  # IPv6 UDP checksum good
    assert out[-2].split("\t")[4] == "wrtfd serial gps nmea /dev/ttyUSB0"


def test_not_a_capture(tmp_path: Path) -> None:
    path = tmp_path / "x.pcap"
    path.write_bytes(b"hello world, not a capture")
    with pytest.raises(ImportFormatError, match="not a pcap or pcapng"):
        CaptureReader(path)
    path.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 3, 0, 0, 0, 65535, 1))
    with pytest.raises(ImportFormatError, match="pcap version 3"):
        CaptureReader(path)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=600), cut=st.integers(0, 400), flip=st.integers(0, 10**6))
def test_fuzz_reader_counts_or_refuses(tmp_path: Path, data: bytes, cut: int, flip: int) -> None:
    """Hostile captures: a good tap with bytes replaced or cut, or random bytes after a magic.
    Only ImportFormatError escapes; every packet comes out whole or is counted."""
    base = tmp_path / "base.pcapng"
    if not base.exists():
        write_tap(base, 20)
    raw = bytearray(base.read_bytes())
    pos = flip % len(raw)
    raw[pos : pos + len(data[:16])] = data[:16]
    variants = [
        bytes(raw[: len(raw) - cut]),
        bytes(raw[:8]) + data,
        classic_pcap([], linktype=1, nano=False) + data,
    ]
    for i, blob in enumerate(variants):
        path = tmp_path / f"f{i}.cap"
        path.write_bytes(blob)
        try:
            reader = CaptureReader(path)
        except ImportFormatError:
            continue
        with reader:
            for ts, index, frame in reader.packets():
                assert isinstance(ts, int) and isinstance(frame, bytes)
                linktype = reader.interfaces[index].linktype
                result = parse_udp(linktype if linktype is not None else -1, frame, ts)
                assert isinstance(result, str) or result.payload is not None
            assert set(reader.drops.as_dict()) <= {
                "truncated_block",
                "corrupt_block",
                "bad_interface",
                "no_timestamp",
            }


@settings(max_examples=500, deadline=None)
@given(st.sampled_from([*sorted(LINK_HEADERS), LINKTYPE_RAW]), st.binary(max_size=200))
def test_fuzz_packet_parser(linktype: int, frame: bytes) -> None:
    result = parse_udp(linktype, frame, 1)
    if isinstance(result, str):
        assert result in {"truncated_packet", "not_ip", "not_udp", "ip_fragment", "bad_header"}
    else:
        assert len(result.payload) <= len(frame) - 8


def test_block_maker_makes_the_blocks_write_datagram_writes() -> None:
    """The tap's batch path (blocks made, then one write) gives the same bytes as one write per packet."""
    import io

    one, batch = io.BytesIO(), io.BytesIO()
    w1, w2 = PcapngWriter(one), PcapngWriter(batch)
    for w in (w1, w2):
        w.add_udp_interface("forza", "udp")
        w.add_raw_interface("gps", "serial")
    w1.write_datagram(0, T0_NS, ("10.0.0.7", 40000), ("10.0.0.2", 5301), b"x" * 331)
    w1.write_datagram(0, T0_NS + 1, ("::1", 40000), ("::1", 5301), b"y" * 5)
    w1.write_packet(1, T0_NS + 2, b"$GPRMC,1*00\r\n")
    udp, raw = w2.block_maker(0), w2.block_maker(1)
    w2.write_blocks(
        [
            udp(T0_NS, ("10.0.0.7", 40000), ("10.0.0.2", 5301), b"x" * 331),
            udp(T0_NS + 1, ("::1", 40000), ("::1", 5301), b"y" * 5),
            raw(T0_NS + 2, None, None, b"$GPRMC,1*00\r\n"),
        ]
    )
    assert batch.getvalue() == one.getvalue()
    with pytest.raises(ValueError, match="interface 2 was not added"):
        w2.block_maker(2)
    with pytest.raises(ValueError, match="cannot mix IPv4 and IPv6"):
        udp(T0_NS, ("10.0.0.7", 1), ("::1", 2), b"")
