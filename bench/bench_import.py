"""pcapng import rate, and the tap writer's cost per packet, with baselines in the same run.

    python bench/bench_import.py [--quick] [--datagrams N]

A capture of Forza (60 Hz) and F1 (60 game frames/s of motion, lap data, car telemetry and car
status) datagrams built from the real captures in ``../shared/data/udp`` (synthetic datagrams
of the same layouts when absent) is written with :class:`wrtfd.pcap.PcapngWriter`; then, on
the same file:

* ``dpkt reader``: dpkt's own pcapng reader iterating it (the library alone);
* ``read + parse``: wrtfd's reader and the link/IP/UDP parsing, nothing else;
* ``decode only``: the same datagrams decoded from memory (no file, no recorder);
* ``wrtfd import``: the whole import (read, route, decode, schedule, record two WRTF files);
  ``dict path``: the same with the decoders' per-field dicts instead of the raw path (before).

The writer's rows time one ``write_datagram`` per packet into memory, next to a bare
``struct.pack`` of the same Enhanced Packet Block (the floor) and python-pcapng when installed.
Goal: the import at or above 50,000 datagrams/s; the tap's writer cheap enough that 420
datagrams/s (a 360 Hz F1 + 60 Hz Forza rig) cost at most 0.3% of one core.
"""

from __future__ import annotations

import argparse
import gc
import io
import os
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from wrtfd.decoders.registry import make_decoder  # noqa: E402
from wrtfd.importers.pcap import import_capture  # noqa: E402
from wrtfd.pcap import CaptureReader, PcapngWriter, parse_udp  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "udp"
T0_NS = 1_700_000_000_000_000_000
GAME = ("192.168.1.20", 50000)
RIG = "192.168.1.5"


def _forza(n: int) -> list[bytes]:
    path = DATA / "forza_fm2023" / "fm2023_dash_331B_x1793.bin"
    raw = path.read_bytes() if path.exists() else bytes(331) * 60
    base = [raw[i : i + 331] for i in range(0, len(raw) - 330, 331)]
    out = []
    for i in range(n):
        buf = bytearray(base[i % len(base)])
        struct.pack_into("<iI", buf, 0, 1, 1000 + round(i * 1000 / 60))
        out.append(bytes(buf))
    return out


def _f1(frames: int) -> list[bytes]:
    from tests.decoders.f1_capture import records

    wanted = ("motion", "lapData", "carTelemetry", "carStatus")
    by_kind: dict[str, bytes] = {}
    for name, raw, _parsed in records(ROOT.parent / "shared" / "data", 2023):
        if name in wanted and name not in by_kind:
            by_kind[name] = raw
    out = []
    for f in range(frames):
        for name in wanted:
            buf = bytearray(by_kind[name])
            struct.pack_into("<Q", buf, 7, 0x1234)
            struct.pack_into("<fII", buf, 15, 100.0 + f / 60.0, 5000 + f, 5000 + f)
            out.append(bytes(buf))
    return out


def build(n: int) -> list[tuple[int, int, bytes]]:
    """(ts_ns, dst port, payload): a fifth Forza, the rest F1, merged in time order."""
    n_forza = n // 5
    n_f1_frames = (n - n_forza) // 4
    events = [(T0_NS + round(i * 1e9 / 60), 5301, d) for i, d in enumerate(_forza(n_forza))]
    f1 = _f1(n_f1_frames)
    events += [(T0_NS + round((i // 4) * 1e9 / 60) + (i % 4) * 1000 + 7, 20777, d) for i, d in enumerate(f1)]
    events.sort(key=lambda e: e[0])
    return events


def timed(fn: Callable[[], int]) -> tuple[float, int]:
    secs, _cpu, n = timed_cpu(fn)
    return secs, n


def timed_cpu(fn: Callable[[], int]) -> tuple[float, float, int]:
    """(wall seconds, this process's CPU seconds, count): on a shared machine the CPU time says
    what the code costs, the wall time what the user waits."""
    gc.collect()
    t, c = time.perf_counter(), time.process_time()
    n = fn()
    return time.perf_counter() - t, time.process_time() - c, n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="100,000 datagrams instead of 1,000,000")
    parser.add_argument("--datagrams", type=int)
    args = parser.parse_args()
    n = args.datagrams or (100_000 if args.quick else 1_000_000)
    events = build(n)
    n = len(events)
    with tempfile.TemporaryDirectory() as tmp:
        cap = Path(tmp) / "rig.pcapng"

        def write_file() -> int:
            with cap.open("wb") as f:
                w = PcapngWriter(f)
                iface = w.add_udp_interface("eth0")
                for ts, port, d in events:
                    w.write_datagram(iface, ts, GAME, (RIG, port), d)
            return n

        t_file, _ = timed(write_file)

        def dpkt_read() -> int:
            import dpkt.pcapng

            with cap.open("rb") as f:
                return sum(1 for _ in dpkt.pcapng.Reader(f))

        def read_parse() -> int:
            count = 0
            with CaptureReader(cap) as r:
                interfaces = r.interfaces  # filled as the description blocks are read
                for ts, i, data in r.packets():
                    d = parse_udp(interfaces[i].linktype or 0, data, ts)
                    count += not isinstance(d, str)
            return count

        def decode_only() -> int:
            decoders = {5301: make_decoder("forza").decode, 20777: make_decoder("f1").decode}
            for _ts, port, d in events:
                decoders[port](d)
            return n

        def full_import() -> int:
            out = Path(tmp) / "out"
            report = import_capture(cap, out, force=True)
            for p in report.outputs:
                p.unlink()
            return report.read

        def dict_import() -> int:
            """The import with the decoders' dict path (what it did before the raw path)."""
            from wrtfd.decoders.f1 import F1Decoder
            from wrtfd.decoders.forza import ForzaDecoder

            ForzaDecoder.raw_values = F1Decoder.raw_values = False
            try:
                return full_import()
            finally:
                ForzaDecoder.raw_values = F1Decoder.raw_values = True

        secs, cpu, count = timed_cpu(decode_only)
        rows = [("decode only (from memory)", count, secs, cpu)]
        # The rest runs without the million payloads in memory: a heap that size makes every
        # garbage collection of the import walk it (the command itself never holds one).
        writer_rows = tap_writer_rows(events[: min(n, 200_000)])
        events.clear()
        gc.collect()
        for label, fn in (
            ("dpkt reader (library alone)", dpkt_read),
            ("read + parse (wrtfd.pcap)", read_parse),
            ("wrtfd import, dict path (before)", dict_import),
            ("wrtfd import (2 files)", full_import),
        ):
            secs, cpu, count = timed_cpu(fn)
            rows.append((label, count, secs, cpu))
        rows.insert(0, rows.pop(1))  # the library alone first: the baseline
        size_mb = cap.stat().st_size / 1e6

    print(f"pcapng import: {n:,} datagrams ({size_mb:.0f} MB; Forza 60 Hz + F1 4 packets/frame)")
    print(
        f"{'what':32} {'datagrams':>10} {'seconds':>8} {'datagrams/s':>12} {'vs dpkt reader':>15}"
        f" {'cpu s':>6} {'per cpu s':>10}"
    )
    base = rows[0][1] / rows[0][2]
    for label, count, secs, cpu in rows:
        rate = count / secs
        print(
            f"{label:32} {count:>10,} {secs:>8.2f} {rate:>12,.0f} {rate / base:>14.2f}x"
            f" {cpu:>6.2f} {count / max(cpu, 1e-9):>10,.0f}"
        )
    imp = rows[-1][1] / rows[-1][2]
    imp_cpu = rows[-1][1] / max(rows[-1][3], 1e-9)
    print(
        f"goal: import >= 50,000 datagrams/s -> {'met' if imp >= 50_000 else 'NOT met'} ({imp:,.0f}/s;"
        f" {imp_cpu:,.0f} per CPU second; load {os.getloadavg()[0]:.1f})"
    )

    m = min(n, 200_000)
    print(f"\ntap writer: {m:,} datagrams into memory")
    print(f"{'writer':32} {'us/packet':>10} {'% core at 420/s':>16}")
    for label, us, _ in writer_rows:
        print(f"{label:32} {us:>10.2f} {us * 420 / 1e4:>15.3f}%")
    print(f"(writing the {size_mb:.0f} MB capture file itself: {t_file / n * 1e6:.2f} us/packet)")


def tap_writer_rows(sample: list[tuple[int, int, bytes]]) -> list[tuple[str, float, None]]:
    """(writer, us per packet) of the tap's writer, the floor, and python-pcapng when installed."""
    m = len(sample)

    def wrtfd_writer() -> int:
        w = PcapngWriter(io.BytesIO())
        iface = w.add_udp_interface("eth0")
        for ts, port, d in sample:
            w.write_datagram(iface, ts, GAME, (RIG, port), d)
        return m

    epb = struct.Struct("<7I")
    headers = {port: bytes(28) for port in (5301, 20777)}

    def bare_struct() -> int:
        f = io.BytesIO()
        for ts, port, d in sample:
            pkt = headers[port] + d
            size = len(pkt)
            pad = -size % 4
            total = 32 + size + pad
            head = epb.pack(6, total, 0, ts >> 32, ts & 0xFFFFFFFF, size, size)
            f.write(head + pkt + bytes(pad) + total.to_bytes(4, "little"))
        return m

    writers = [("wrtfd PcapngWriter (dpkt blocks)", wrtfd_writer), ("bare struct.pack (floor)", bare_struct)]
    try:
        import pcapng
        from pcapng import blocks

        def python_pcapng() -> int:
            shb = blocks.SectionHeader()
            shb.new_member(blocks.InterfaceDescription, link_type=101, options={"if_tsresol": b"\x09"})
            w = pcapng.FileWriter(io.BytesIO(), shb)
            for ts, port, d in sample:
                epb_ = shb.new_member(blocks.EnhancedPacket)
                epb_.timestamp_high, epb_.timestamp_low = ts >> 32, ts & 0xFFFFFFFF
                epb_.packet_data = headers[port] + d
                w.write_block(epb_)
            return m

        writers.append(("python-pcapng", python_pcapng))
    except ImportError:
        pass
    rows = []
    for label, fn in writers:
        secs, count = timed(fn)
        rows.append((label, secs / count * 1e6, None))
    return rows


if __name__ == "__main__":
    main()
