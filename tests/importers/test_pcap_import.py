"""``wrtfd import CAPTURE``: games routed by port or content, each game its own recording."""

from __future__ import annotations

import struct
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.importers.frames import assert_same_frames
from tests.pcap.test_pcap_io import classic_pcap, ipv4_udp
from tests.sources.test_udp_loopback_record import f1_stream, forza_packets
from tests.sources.udp_replay import assert_frames_match
from wrtfd.cli.main import main
from wrtfd.decoders.base import Sample
from wrtfd.decoders.registry import make_decoder
from wrtfd.errors import ImportFormatError
from wrtfd.format import Reader
from wrtfd.importers.pcap import _CaptureImport, import_capture
from wrtfd.pcap import CaptureReader, PcapngWriter, parse_udp
from wrtfd.pcap.links import LINKTYPE_ETHERNET, LINKTYPE_RAW

T0_NS = 1_700_000_000_000_000_000
GAME = ("192.168.1.20", 50000)
RIG = "192.168.1.5"


def paced_forza(shared_data: Path, n: int) -> list[bytes]:
    """Forza datagrams with TimestampMS every 1/60 s (the capture's own are irregular)."""
    out = []
    for i, raw in enumerate(forza_packets(shared_data, n)):
        buf = bytearray(raw)
        struct.pack_into("<iI", buf, 0, 1, 100_000 + round(i * 1000 / 60))
        out.append(bytes(buf))
    return out


def write_capture(path: Path, flows: list[tuple[int, list[bytes], float]]) -> None:
    """Datagrams of each flow (dst port, datagrams, rate) at their own pace, merged in time order."""
    events = []
    for port, datagrams, rate in flows:
        for i, d in enumerate(datagrams):
            events.append((T0_NS + round(i * 1e9 / rate) + port, port, d))
    events.sort()
    with path.open("wb") as f:
        w = PcapngWriter(f)
        iface = w.add_udp_interface("eth0")
        for ts, port, d in events:
            w.write_datagram(iface, ts, GAME, (RIG, port), d)


def decoded(protocol: str, datagrams: list[bytes]) -> list[Sample]:
    dec = make_decoder(protocol)
    out = []
    for d in datagrams:
        r = dec.decode(d)
        if r is not None:
            out.append(Sample.from_decoded(protocol, 0, r))
    return out


def frames_of(path: Path) -> tuple[np.ndarray, dict[str, str]]:
    with Reader(path) as r:
        assert len(r.sessions) == 1
        return np.array(r.frames(0)), dict(r.metadata)


def test_two_games_become_two_files(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    forza = paced_forza(shared_data, 120)
    f1 = f1_stream(shared_data, 90)  # 4 packets per game frame
    cap = tmp_path / "rig.pcapng"
    write_capture(cap, [(5301, forza, 60.0), (20777, f1, 240.0), (9999, [b"noise"] * 3, 10.0)])
    out = tmp_path / "out"
    assert main(["import", str(cap), "-o", str(out)]) == 0
    files = sorted(out.glob("*.wrtf"))
    assert len(files) == 2, files
    by_source = {}
    for f in files:
        frames, meta = frames_of(f)
        by_source[meta["wrtfd.sources"]] = frames
    assert set(by_source) == {"forza", "f1"}
    assert assert_frames_match(by_source["forza"], "forza", decoded("forza", forza)) > 120 * 50
    f1_frames = by_source["f1"]["f1"]
    assert list(f1_frames["frame_identifier"]) == list(range(5000, 5090))
    assert list(f1_frames["speed"]) == list(range(90))
    err = capsys.readouterr().err
    assert "datagrams -> " in err and "unknown_protocol: 3" in err


def test_one_output_name_for_two_games(shared_data: Path, tmp_path: Path) -> None:
    cap = tmp_path / "rig.pcapng"
    write_capture(
        cap, [(5301, paced_forza(shared_data, 30), 60.0), (20777, f1_stream(shared_data, 30), 240.0)]
    )
    assert main(["import", str(cap), "-o", str(tmp_path / "rig.wrtf")]) == 0
    assert sorted(p.name for p in tmp_path.glob("*.wrtf")) == ["rig.f1.wrtf", "rig.forza.wrtf"]
    for name in ("f1", "forza"):
        assert frames_of(tmp_path / f"rig.{name}.wrtf")[1]["wrtfd.sources"] == name


def test_unknown_port_recognised_by_content_and_protocol_option(shared_data: Path, tmp_path: Path) -> None:
    forza = paced_forza(shared_data, 60)
    cap = tmp_path / "odd-port.pcapng"
    write_capture(cap, [(6000, forza, 60.0)])
    out = tmp_path / "sniffed.wrtf"
    assert main(["import", str(cap), "-o", str(out)]) == 0
    frames, meta = frames_of(out)
    assert meta["wrtfd.sources"] == "forza"
    assert assert_frames_match(frames, "forza", decoded("forza", forza)) > 60 * 50
    forced = tmp_path / "forced.wrtf"
    assert main(["import", str(cap), "-o", str(forced), "--protocol", "6000=forza"]) == 0
    assert assert_same_frames(frames_of(forced)[0], frames) > 50


def test_classic_pcap_over_ethernet_by_hand(shared_data: Path, tmp_path: Path) -> None:
    """A classic (µs) pcap built byte by byte, Ethernet frames, Forza on its usual port."""
    forza = paced_forza(shared_data, 30)
    eth = b"\x02" * 12 + b"\x08\x00"
    records = [
        (T0_NS + round(i * 1e9 / 60), eth + ipv4_udp(GAME[0], GAME[1], RIG, 5301, d))
        for i, d in enumerate(forza)
    ]
    cap = tmp_path / "hand.pcap"
    cap.write_bytes(classic_pcap(records, linktype=LINKTYPE_ETHERNET, nano=False))
    out = tmp_path / "hand.wrtf"
    assert main(["import", str(cap), "-o", str(out)]) == 0
    frames, _meta = frames_of(out)
    assert assert_frames_match(frames, "forza", decoded("forza", forza)) > 30 * 50


def test_nothing_importable_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cap = tmp_path / "noise.pcapng"
    write_capture(cap, [(5301, [b"short"] * 5, 10.0)])
    out = tmp_path / "o.wrtf"
    assert main(["import", str(cap), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nothing to import" in err[0] and "forza: wrong_size 5" in err[0]
    assert not out.exists() and not list(tmp_path.glob(".wrtfd-import-*"))


def test_existing_output_is_kept(shared_data: Path, tmp_path: Path) -> None:
    cap = tmp_path / "c.pcapng"
    write_capture(cap, [(5301, paced_forza(shared_data, 20), 60.0)])
    out = tmp_path / "o.wrtf"
    out.write_bytes(b"keep me")
    assert main(["import", str(cap), "-o", str(out)]) == 2
    assert out.read_bytes() == b"keep me"
    assert main(["import", str(cap), "-o", str(out), "--force"]) == 0
    assert out.read_bytes()[:4] != b"keep"


PACKET_REASONS = {
    "truncated_packet",
    "not_ip",
    "not_udp",
    "ip_fragment",
    "bad_header",
    "unsupported_link_type",
    "bad_timestamp",
}
FILE_REASONS = {"truncated_block", "corrupt_block", "bad_interface", "no_timestamp"}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    junk=st.lists(st.binary(max_size=400), max_size=12),
    edits=st.lists(st.tuples(st.integers(0, 20_000), st.binary(min_size=1, max_size=4)), max_size=4),
)
# found by hypothesis: if_tsresol zeroed (whole seconds): the nanosecond stamps land in 55840
@example(junk=[], edits=[(59, b"\x00\x00")])
def test_fuzz_capture_import_counts_everything(
    shared_data: Path, tmp_path: Path, junk: list[bytes], edits: list[tuple[int, bytes]]
) -> None:
    """Forza datagrams, garbage datagrams to its port and raw garbage frames, then bytes of the
    file replaced: only ImportFormatError escapes, and every datagram is a sample or counted."""
    forza = paced_forza(shared_data, 40)
    cap = tmp_path / "fuzz.pcapng"
    with cap.open("wb") as f:
        w = PcapngWriter(f)
        iface = w.add_udp_interface("eth0")
        for i, d in enumerate(forza):
            w.write_datagram(iface, T0_NS + i * 16_666_667, GAME, (RIG, 5301), d)
            if i < len(junk):
                w.write_datagram(iface, T0_NS + i * 16_666_667 + 1, GAME, (RIG, 5301), junk[i])
                w.write_packet(iface, T0_NS + i * 16_666_667 + 2, junk[i])
    raw = bytearray(cap.read_bytes())
    for at, data in edits:
        raw[at % len(raw) : at % len(raw) + len(data)] = data
    cap.write_bytes(bytes(raw))
    try:
        report = import_capture(cap, tmp_path / "out", force=True)
    except ImportFormatError:
        return
    routed = sum(n for reason, n in report.dropped.items() if reason not in PACKET_REASONS | FILE_REASONS)
    assert report.read == report.samples + routed


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    linktype=st.sampled_from([LINKTYPE_RAW, LINKTYPE_ETHERNET]),
    packets=st.lists(
        st.tuples(
            st.lists(st.tuples(st.integers(0, 27), st.integers(0, 255)), max_size=3),  # header edits
            st.one_of(st.just(0), st.integers(0, 60)),  # bytes cut off the end
            st.sampled_from([b"\x08\x00", b"\x08\x00", b"\x86\xdd", b"\x81\x00"]),  # Ethernet type
        ),
        min_size=1,
        max_size=25,
    ),
)
def test_import_reads_every_packet_as_parse_udp_does(
    shared_data: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    linktype: int,
    packets: list[tuple[list[tuple[int, int]], int, bytes]],
) -> None:
    """The import's one-unpack path for plain IPv4/UDP gives exactly parse_udp's datagrams and
    drop reasons, whatever the headers say (lengths, options, fragments, protocol, link type)."""
    forza = paced_forza(shared_data, 1)[0]
    frames = []
    for i, (edits, cut, ethertype) in enumerate(packets):
        frame = bytearray(ipv4_udp(GAME[0], GAME[1], RIG, 5301, forza[: 20 + i]))
        for at, value in edits:
            frame[at % len(frame)] = value
        frame = frame[: max(0, len(frame) - cut)]
        if linktype == LINKTYPE_ETHERNET:
            frame = bytearray(b"\x02" * 12 + ethertype) + frame
        frames.append(bytes(frame))
    first = ipv4_udp(GAME[0], GAME[1], RIG, 5301, forza)  # one good sample: the import succeeds
    if linktype == LINKTYPE_ETHERNET:
        first = b"\x02" * 12 + b"\x08\x00" + first
    frames.insert(0, first)
    cap = tmp_path / "headers.pcap"
    cap.write_bytes(
        classic_pcap([(T0_NS + i * 1000, f) for i, f in enumerate(frames)], linktype=linktype, nano=True)
    )

    delivered: list[tuple[int, bytes, bytes]] = []
    original = _CaptureImport.deliver

    def spy(self: _CaptureImport, route: Any, ts_ns: int, sender: bytes, payload: bytes) -> None:
        delivered.append((ts_ns, sender, payload))
        original(self, route, ts_ns, sender, payload)

    monkeypatch.setattr(_CaptureImport, "deliver", spy)
    report = import_capture(cap, tmp_path / "out", protocols=["forza"], force=True)
    expected = [parse_udp(linktype, f, T0_NS + i * 1000) for i, f in enumerate(frames)]
    assert delivered == [(d.ts_ns, d.src, d.payload) for d in expected if not isinstance(d, str)]
    reasons = Counter(d for d in expected if isinstance(d, str))
    assert {r: report.dropped[r] for r in PACKET_REASONS if report.dropped[r]} == dict(reasons)
    assert report.read == len(delivered)


def _blocks(raw: bytes) -> list[tuple[int, int]]:
    """(offset, length) of each pcapng block (little-endian, as PcapngWriter writes)."""
    out, pos = [], 0
    while pos < len(raw):
        length = struct.unpack_from("<I", raw, pos + 4)[0]
        out.append((pos, length))
        pos += length
    return out


def _two_interface_capture(shared_data: Path, path: Path, options: list[tuple[int, bytes]]) -> int:
    """Forza datagrams on eth1 and on eth0 (eth1's first), eth1's Interface Description then
    given the timestamp ``options`` (the way hypothesis edited bytes): returns eth0's count."""
    import dpkt.pcapng as pcapng

    forza = paced_forza(shared_data, 30)
    with path.open("wb") as f:
        w = PcapngWriter(f)
        good, bad = w.add_udp_interface("eth0"), w.add_udp_interface("eth1")
        for i, d in enumerate(forza):
            w.write_datagram(bad, T0_NS + i * 16_666_667, GAME, (RIG, 5301), d)
            w.write_datagram(good, T0_NS + i * 16_666_667 + 5, GAME, (RIG, 5301), d)
    raw = path.read_bytes()
    at, length = _blocks(raw)[2]  # section header, eth0, eth1
    opts = [pcapng.PcapngOptionLE(code=c, data=v) for c, v in options]
    idb = pcapng.InterfaceDescriptionBlockLE(
        linktype=LINKTYPE_RAW, snaplen=0x40000, opts=[*opts, pcapng.PcapngOptionLE(code=0, data=b"")]
    )
    path.write_bytes(raw[:at] + bytes(idb) + raw[at + length :])
    return len(forza)


@pytest.mark.parametrize(
    ("options", "what"),
    [
        ([(9, b"\x06")], "if_tsresol microseconds: the nanosecond stamps land in the year 55840"),
        ([(9, b"\x09"), (14, struct.pack("<q", -2 * T0_NS // 10**9))], "if_tsoffset: before 1970"),
    ],
)
def test_packets_stamped_outside_any_sane_time_are_dropped(
    shared_data: Path, tmp_path: Path, options: list[tuple[int, bytes]], what: str
) -> None:
    """Found by hypothesis (test_fuzz_capture_import_counts_everything): an edited timestamp
    resolution made file naming raise ValueError (year 55840) or the writer raise FormatError
    (a negative start time). Such packets are counted as ``bad_timestamp``; the rest import."""
    cap = tmp_path / "stamps.pcapng"
    n = _two_interface_capture(shared_data, cap, options)
    with CaptureReader(cap) as reader:  # the oracle: the reader's own stamps, per interface
        stamps = [(index, ts) for ts, index, _ in reader.packets()]
    assert {i for i, _ in stamps} == {0, 1}
    bad = [ts for i, ts in stamps if i == 1]
    assert all(ts < 0 or ts > 10**21 for ts in bad), what
    report = import_capture(cap, tmp_path / "out", force=True)
    assert report.dropped["bad_timestamp"] == n
    assert report.samples == n
    assert len(report.outputs) == 1
    with Reader(report.outputs[0]) as r:
        # eth0's first datagram, less at most half a tick (the recorder's tick 0 starts there)
        assert 0 <= (T0_NS + 5) // 1000 - r.start_timestamp_us <= -(-500_000 // r.rate_hz)
