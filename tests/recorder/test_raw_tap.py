"""The raw tap: what the sources received, in pcapng files that follow the recording's files.

The tap is driven as the daemon drives it: sinks called with receive times, file events as the
recorder's FileSink publishes them, the writer thread running. Files are read back with the
project's capture reader and, where installed, tshark.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from wrtfd.pcap import CaptureReader, PcapngWriter
from wrtfd.pcap.links import LINKTYPE_RAW, LINKTYPE_USER0, parse_udp
from wrtfd.recorder.observe import FileClosed, FileOpened, SessionStarted
from wrtfd.recorder.tap import TAP_APPLICATION, RawTap, TapInterface, is_tap_file

OFFSET_NS = 1_700_000_000_000_000_000
GAME = ("192.168.1.20", 40000)
US = ("127.0.0.1", 5301)
IFACES = [
    TapInterface("forza", "rig", "udp", "wrtfd source forza: udp 0.0.0.0:5301, protocol forza"),
    TapInterface("gps", "rig", "raw", "wrtfd source gps: serial /dev/ttyUSB0 9600 baud, protocol nmea"),
    TapInterface("f1", "f1", "udp", "wrtfd source f1: udp 0.0.0.0:20777, protocol f1"),
]


def make_tap(out: Path, **kwargs: Any) -> RawTap:
    kwargs.setdefault("max_bytes", 64 << 20)
    kwargs.setdefault("wall_offset_ns", OFFSET_NS)
    return RawTap(IFACES, output_dir=out, **kwargs)


def wait_until(predicate: Callable[[], Any], what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def packets_of(path: Path) -> tuple[list[tuple[int, str, str, bytes]], dict[str, int]]:
    """``(ts_ns, interface name, link, payload)`` of each packet, and the reader's drops."""
    out = []
    with CaptureReader(path) as reader:
        for ts_ns, index, data in reader.packets():
            iface = reader.interfaces[index]
            if iface.linktype == LINKTYPE_RAW:
                datagram = parse_udp(LINKTYPE_RAW, data, ts_ns)
                assert not isinstance(datagram, str), datagram
                out.append((ts_ns, iface.name, "udp", datagram.payload))
            else:
                assert iface.linktype == LINKTYPE_USER0
                out.append((ts_ns, iface.name, "raw", data))
        return out, reader.drops.as_dict()


def test_inputs_are_kept_with_their_times_addresses_and_sources(tmp_path: Path) -> None:
    tap = make_tap(tmp_path)
    forza, gps, f1 = tap.sink_for("forza"), tap.sink_for("gps"), tap.sink_for("f1")
    tap.start()
    try:
        sent = []
        for i in range(50):
            payload = bytes([i]) * (300 + i)
            forza(1_000 + i * 16_666_667, GAME, US, payload)
            sent.append((OFFSET_NS + 1_000 + i * 16_666_667, "forza", "udp", payload))
            if i % 10 == 0:
                line = b"$GPRMC,1,2,3*00\r\n"[: 5 + i // 10]  # chunks, as a serial read returns them
                gps(2_000 + i * 16_666_667, None, None, line)
                sent.append((OFFSET_NS + 2_000 + i * 16_666_667, "gps", "raw", line))
        f1(5_000, ("10.0.0.7", 50000), ("10.0.0.2", 20777), b"f1 datagram the decoder will drop")
        tap.notify(SessionStarted("rig", "first", 1))  # not a file event: ignored
    finally:
        assert tap.close()
    files = sorted(tmp_path.glob("*.pcapng"))
    assert len(files) == 2  # one per group, named DATE_TIME_GROUP (no WRTF file was opened)
    rig = next(p for p in files if p.name.endswith("_rig.pcapng"))
    got, drops = packets_of(rig)
    assert drops == {}
    assert got == sent  # every input, in order, with its receive time moved by the one offset
    with CaptureReader(rig) as reader:
        _, _, first = next(reader.packets())
        assert [(i.name, i.description) for i in reader.interfaces] == [
            ("forza", IFACES[0].description),
            ("gps", IFACES[1].description),
        ]
        d = parse_udp(LINKTYPE_RAW, first, 0)
        assert not isinstance(d, str)
        assert (d.src_port, d.dst_port) == (40000, 5301)  # the real ports ...
    f1_file = next(p for p in files if p.name.endswith("_f1.pcapng"))
    with CaptureReader(f1_file) as reader:
        ts_ns, _, data = next(reader.packets())
        d = parse_udp(LINKTYPE_RAW, data, ts_ns)
        assert not isinstance(d, str)
        assert ts_ns == OFFSET_NS + 5_000
        # ... and addresses, as the kernel reported them
        assert (d.src, d.dst) == (bytes([10, 0, 0, 7]), bytes([10, 0, 0, 2]))
    assert tap.snapshot()["packets"] == len(sent) + 1
    assert tap.snapshot()["dropped_total"] == 0
    assert is_tap_file(rig) and TAP_APPLICATION == "wrtfd raw tap"


def test_tap_files_follow_the_recordings_files(tmp_path: Path) -> None:
    """Input before the WRTF file opens starts a file that takes the recording's name; a
    rotation (close, open) starts the next one; names match: X.wrtf -> X.pcapng."""
    tap = make_tap(tmp_path)
    forza = tap.sink_for("forza")
    tap.start()
    a, b = tmp_path / "20250101_120000_forza_road.wrtf", tmp_path / "20250101_121000_forza_road.wrtf"
    try:
        for i in range(10):
            forza(i, GAME, US, b"before the file opened %d" % i)
        tap.notify(FileOpened("rig", str(a), 1))
        tap.notify(FileOpened("other group", str(b), 1))  # not a tapped group: ignored
        for i in range(10, 20):
            forza(i, GAME, US, b"in file a %d" % i)
        tap.notify(FileClosed("rig", str(a), 10, 1000, True))
        tap.notify(FileOpened("rig", str(b), 2))
        for i in range(20, 25):
            forza(i, GAME, US, b"in file b %d" % i)
        wait_until(lambda: tap.snapshot()["packets"] == 25, "the writer thread")
        assert tap.snapshot()["current"] == {"rig": str(b.with_suffix(".pcapng"))}
        tap.notify(FileClosed("rig", str(b), 5, 1000, True))
    finally:
        assert tap.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        a.with_suffix(".pcapng").name,
        b.with_suffix(".pcapng").name,
    ]
    first, _ = packets_of(a.with_suffix(".pcapng"))
    second, _ = packets_of(b.with_suffix(".pcapng"))
    assert [p[0] - OFFSET_NS for p in first] == list(range(20))
    assert [p[0] - OFFSET_NS for p in second] == list(range(20, 25))
    assert tap.snapshot()["files"] == 2


def test_size_is_bounded_oldest_first_and_long_files_continue_in_parts(tmp_path: Path) -> None:
    """All tap files (this run's, and an earlier run's) stay under max_bytes; a file reaching
    half of it continues in a part; a user's own capture in the directory is never touched."""
    earlier = tmp_path / "20240101_000000_old.pcapng"
    with earlier.open("wb") as f:
        w = PcapngWriter(f, application=TAP_APPLICATION)
        w.add_raw_interface("gps", "earlier run")
        w.write_packet(0, 1, bytes(300_000))
    mine = tmp_path / "my-own-capture.pcapng"
    with mine.open("wb") as f:
        PcapngWriter(f, application="Wireshark").add_raw_interface("eth0", "")
    os.utime(earlier, (1, 1))
    os.utime(mine, (1, 1))
    wrtf = tmp_path / "20250101_120000_forza_road.wrtf"
    tap = make_tap(tmp_path, max_bytes=1 << 20)
    forza = tap.sink_for("forza")
    tap.start()
    try:
        tap.notify(FileOpened("rig", str(wrtf), 1))
        for i in range(120):  # 120 x 10 KB: more than the bound
            forza(i, GAME, US, bytes(10_000))
        wait_until(lambda: tap.snapshot()["packets"] == 120, "the writer thread")
    finally:
        assert tap.close()
    taps = sorted(p for p in tmp_path.glob("*.pcapng") if is_tap_file(p))
    assert not earlier.exists()  # the oldest went first
    assert mine.exists()  # not a tap file: not counted, not removed
    assert sum(p.stat().st_size for p in taps) <= 1 << 20
    assert all(p.stat().st_size <= (1 << 19) + 11_000 for p in taps)  # parts of half the bound
    names = [p.name for p in taps]
    assert "20250101_120000_forza_road.part3.pcapng" in names  # the newest input is kept
    assert tap.snapshot()["removed_files"] >= 2
    kept = [ts - OFFSET_NS for p in taps for ts, *_ in packets_of(p)[0]]
    assert kept == list(range(120 - len(kept), 120))  # whole parts removed, oldest first


def test_a_full_queue_drops_and_counts_and_close_writes_the_rest(tmp_path: Path) -> None:
    tap = make_tap(tmp_path, queue_packets=5)
    forza = tap.sink_for("forza")
    for i in range(8):  # the thread is not running: nothing is taken off the queue
        forza(i, GAME, US, b"x")
    assert tap.snapshot()["dropped"] == {"queue_full": 3}
    assert tap.snapshot()["queued"] == 5
    assert tap.close()  # without a thread: written and closed by the caller
    (path,) = tmp_path.glob("*.pcapng")
    assert len(packets_of(path)[0]) == 5


def test_write_errors_are_counted_never_raised(tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the tap wants a directory")
    tap = make_tap(blocked / "rec")
    forza = tap.sink_for("forza")
    tap.start()
    try:
        for i in range(3):
            forza(i, GAME, US, b"x")
        wait_until(lambda: tap.snapshot()["dropped_total"] == 3, "the drops")
    finally:
        assert tap.close()
    snap = tap.snapshot()
    assert snap["dropped"] == {"write_error": 3}
    assert snap["errors"] >= 1 and "not-a-directory" in snap["last_error"]


def test_fsync_follows_the_recorders_interval(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Data written is fsynced within fsync_interval_s, without more input to wake the thread."""
    synced: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    tap = make_tap(tmp_path, fsync_interval_s=0.2)
    forza = tap.sink_for("forza")
    tap.start()
    try:
        forza(1, GAME, US, b"one datagram")
        wait_until(lambda: synced, "an fsync")
        assert tap.snapshot()["packets"] == 1
    finally:
        assert tap.close()


def test_a_cut_file_keeps_a_readable_prefix(tmp_path: Path) -> None:
    """A power cut leaves the last block torn: our reader and tshark read every whole one."""
    tap = make_tap(tmp_path)
    forza = tap.sink_for("forza")
    for i in range(40):
        forza(i * 1000, GAME, US, bytes([i]) * 200)
    assert tap.close()
    (path,) = tmp_path.glob("*.pcapng")
    raw = path.read_bytes()
    path.write_bytes(raw[:-100])  # into the last block (200 bytes of payload + headers)
    got, drops = packets_of(path)
    assert len(got) == 39 and drops == {"truncated_block": 1}
    if shutil.which("tshark") is None:
        pytest.skip("tshark is not installed (.ci/run installs it)")
    out = subprocess.run(
        ["tshark", "-r", str(path), "-T", "fields", "-e", "frame.number"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert len(out.stdout.split()) == 39  # (and a warning that the file was cut short)
    assert "cut short" in out.stderr
