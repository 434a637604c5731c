"""The real Project CARS 2 capture (``../shared/data/udp/pcars2``, datagrams to port 10666):
``wrtfd import`` names the file and the session after the track of its race-definition packets,
read here with plain ``struct`` at the documented offsets (``pcars2_ams2.md``: a 12-byte
PacketBase, nine f32, then the track location and variation, 64 bytes each)."""

from __future__ import annotations

import gzip
import shutil
import struct
from pathlib import Path

import dpkt
import numpy as np
import pytest

from wrtfd.cli.main import main
from wrtfd.format import Reader

CAPTURE = Path("udp") / "pcars2" / "formula1-telemetry-kafka__pc2_v2.pcap.gz"
PORT = 10666


def text(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode()


def datagrams(path: Path) -> list[bytes]:
    """UDP payloads to the port, read with dpkt (not wrtfd's capture reader)."""
    out = []
    with path.open("rb") as f:
        for _ts, buf in dpkt.pcap.Reader(f):
            ip = dpkt.ethernet.Ethernet(buf).data
            udp = ip.data
            if isinstance(udp, dpkt.udp.UDP) and udp.dport == PORT:
                out.append(bytes(udp.data))
    return out


@pytest.fixture(scope="module")
def imported(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[bytes]]:
    tmp = tmp_path_factory.mktemp("pc2")
    cap = tmp / "pc2.pcap"
    with gzip.open(shared_data / CAPTURE, "rb") as src, cap.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    out = tmp / "out"
    assert main(["import", str(cap), "--protocol", f"{PORT}=pcars2", "-o", str(out)]) == 0
    (path,) = sorted(out.glob("*.wrtf"))
    return path, datagrams(cap)


def test_the_track_of_the_race_definition_names_file_session_and_metadata(
    imported: tuple[Path, list[bytes]],
) -> None:
    path, packets = imported
    races = [d for d in packets if len(d) == 308 and d[10] == 1]
    assert races
    tracks = {(text(d[48:112]), text(d[112:176])) for d in races}
    assert len(tracks) == 1
    ((location, variation),) = tracks
    assert (location, variation) == ("Nurburgring", "GP")  # the data README's words
    track = f"{location} {variation}"
    assert path.name.endswith(f"_pcars2_{location}-{variation}.wrtf")
    with Reader(path) as r:
        assert r.metadata["Track"] == track
        (session,) = r.sessions
        header = session.header
        assert bytes(np.asarray(header["track"], dtype=np.uint8)).rstrip(b"\0").decode() == track


def test_every_recorded_speed_and_rpm_is_a_telemetry_packets_in_order(
    imported: tuple[Path, list[bytes]],
) -> None:
    """Speed (f32 @36) and rpm (u16 @40) of the 559-byte telemetry packets, read with struct: the
    file's frames hold them in the packets' order (a frame repeats the last one until the next);
    the frames before the first telemetry packet have no speed yet (NaN)."""
    path, packets = imported
    sent = [
        struct.unpack_from("<f", d, 36) + struct.unpack_from("<H", d, 40) for d in packets if len(d) == 559
    ]
    assert len(sent) == 2637  # the data README's count
    with Reader(path) as r:
        block = r.frames(0)["pcars2"]
    speed, rpm = block["speed"].astype(np.float64), block["rpm"].astype(np.int64)
    first = int(np.flatnonzero(~np.isnan(speed))[0])
    assert np.all(np.isnan(speed[:first])) and np.all(rpm[:first] == 0)
    at = 0
    for pair in zip(speed[first:].tolist(), rpm[first:].tolist(), strict=True):
        while sent[at] != pair:  # the next packet's, or a later one's (two in a tick: the last)
            at += 1
            assert at < len(sent), f"{pair} is no telemetry packet's (in order)"
    assert at >= len(sent) - 2  # up to the last packets
