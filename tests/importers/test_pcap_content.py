"""Recognising games by content: on ports nobody named, whatever ``--protocol PORT=NAME`` names
(issue 23 items 10 and 11), and the real Project CARS 2 capture sent to a port that is not the
game's."""

from __future__ import annotations

import gzip
import math
import struct
from pathlib import Path

import dpkt
import numpy as np
import pytest

from tests.importers.frames import assert_same_frames
from tests.importers.test_pcap_import import write_capture
from tests.sources.test_udp_loopback_record import f1_stream
from wrtfd.cli.main import main
from wrtfd.format import Reader
from wrtfd.importers.pcap import import_capture
from wrtfd.simulate import Simulation, TrackInfo, make_encoder
from wrtfd.simulate.sender import with_last
from wrtfd.tracks import LanePath, load_track, timing_sectors

ROAD = Path(__file__).resolve().parents[2] / "config" / "tracks" / "road.trk"
PC2_CAPTURE = Path("udp") / "pcars2" / "formula1-telemetry-kafka__pc2_v2.pcap.gz"

# Project CARS 2 UDP v2 (patch 5): the 12-byte header, then the telemetry packet (type 0, 559 B)
# with speed as float32 at 36 and rpm as uint16 at 40.
PC2_HEADER = struct.Struct("<IIBBBB")  # packet number, category number, partial index/count, type, version
PC2_SPEED_RPM = struct.Struct("<fH")  # at 36: speed (float32, m/s), then rpm (uint16) at 40


def simulated_datagrams(protocol: str, seconds: float = 4.0) -> list[bytes]:
    """A simulated car's datagrams of ``protocol``, in order, from the game-feed simulator."""
    track = load_track(ROAD)
    path = LanePath(track)
    sectors = timing_sectors(track, path)
    sim = Simulation(path, laps=1, rate_hz=60.0, seed=2, sectors_m=sectors)
    encoder = make_encoder(protocol, TrackInfo(track.name, path.length_m, sectors, 1))
    out: list[bytes] = []
    for i, (state, last) in enumerate(with_last(sim.states())):
        if state.t_s > seconds:
            break
        out.extend(encoder.encode(state, first=i == 0, last=last))
    return out


def sources_of(path: Path) -> str:
    with Reader(path) as r:
        return r.metadata["wrtfd.sources"]


def all_frames(path: Path) -> np.ndarray:
    with Reader(path) as r:
        return np.concatenate([np.array(r.frames(i)) for i in range(len(r.sessions))])


def test_port_option_keeps_content_detection_for_other_ports(shared_data: Path, tmp_path: Path) -> None:
    """Item 10: ``--protocol 5606=pcars`` names one port; F1 on an unnamed port is still found
    by its content (before the fix every F1 datagram was dropped as ``no_source``)."""
    f1 = f1_stream(shared_data, 120)
    pcars = simulated_datagrams("pcars")
    cap = tmp_path / "two-games.pcapng"
    write_capture(cap, [(6000, f1, 240.0), (5606, pcars, 60.0)])
    out = tmp_path / "named"
    report = import_capture(cap, out, protocols=["5606=pcars"])
    assert "no_source" not in report.dropped, report.dropped
    assert "port 6000: recognised as f1 by its content" in report.notes
    files = {sources_of(p): p for p in out.glob("*.wrtf")}
    assert sorted(files) == ["f1", "pcars"]
    # the same F1 frames as when both ports are named
    both = tmp_path / "both"
    import_capture(cap, both, protocols=["5606=pcars", "6000=f1"])
    (f1_both,) = [p for p in both.glob("*.wrtf") if sources_of(p) == "f1"]
    assert assert_same_frames(all_frames(files["f1"]), all_frames(f1_both)) > 100


@pytest.mark.parametrize("protocol", ["pcars", "pcars2"])
def test_project_cars_recognised_by_content(protocol: str, tmp_path: Path) -> None:
    """Item 11: Project CARS 1 and 2 sent to a port that is not 5606 are found by their content."""
    datagrams = simulated_datagrams(protocol)
    cap = tmp_path / "odd-port.pcapng"
    write_capture(cap, [(7777, datagrams, 60.0)])
    out = tmp_path / "out"
    report = import_capture(cap, out)
    assert f"port 7777: recognised as {protocol} by its content" in report.notes
    assert not report.dropped, report.dropped
    (file,) = out.glob("*.wrtf")
    with Reader(file) as r:
        assert r.metadata["wrtfd.sources"] == protocol
        assert sum(s.frame_count for s in r.sessions) > 60 * 3


def pc2_telemetry(capture: bytes) -> list[tuple[float, int]]:
    """(speed, rpm) of every telemetry packet, read with dpkt and a plain struct decode."""
    out = []
    for _ts, buf in dpkt.pcap.Reader(__import__("io").BytesIO(capture)):
        ip = dpkt.ethernet.Ethernet(buf).data
        if not isinstance(ip, dpkt.ip.IP) or not isinstance(ip.data, dpkt.udp.UDP):
            continue
        payload = bytes(ip.data.data)
        if len(payload) == 559 and PC2_HEADER.unpack_from(payload)[4] == 0:
            out.append(PC2_SPEED_RPM.unpack_from(payload, 36))
    return out


def test_real_project_cars_2_capture_imports_by_content(shared_data: Path, tmp_path: Path) -> None:
    """The real PC2 capture (sent to port 10666, not 5606) imports without ``--protocol``, with
    its track (the race-definition packet's; ../shared/data/README.md names it) in the file's
    name and metadata, and every recorded (speed, rpm) is a telemetry packet's, in order."""
    raw = gzip.decompress((shared_data / PC2_CAPTURE).read_bytes())
    cap = tmp_path / "pc2.pcap"
    cap.write_bytes(raw)
    expected = pc2_telemetry(raw)
    assert len(expected) == 2637  # shared/data/README.md
    out = tmp_path / "out"
    report = import_capture(cap, out)
    assert "port 10666: recognised as pcars2 by its content" in report.notes
    (file,) = out.glob("*.wrtf")
    assert file.name.endswith("_pcars2_Nurburgring-GP.wrtf")
    with Reader(file) as r:
        assert r.metadata["Track"] == "Nurburgring GP"
    frames = all_frames(file)["pcars2"]
    pairs = [
        (float(s), int(r)) for s, r in zip(frames["speed"], frames["rpm"], strict=True) if not math.isnan(s)
    ]
    assert len(pairs) > 2500
    assert max(s for s, _ in pairs) > 40.0
    # every recorded pair is a packet's, in order (a tick holds the newest packet before it)
    want = [(float(np.float32(s)), r) for s, r in expected]
    i = 0
    for pair in pairs:
        while i < len(want) and want[i] != pair:
            i += 1
        assert i < len(want), f"recorded {pair} is no telemetry packet's (after the previous one)"


def test_gzipped_capture_imports_as_itself(shared_data: Path, tmp_path: Path) -> None:
    """``wrtfd import capture.pcap.gz``: the same recording as the decompressed capture's."""
    gz = shared_data / PC2_CAPTURE
    plain = tmp_path / "pc2.pcap"
    plain.write_bytes(gzip.decompress(gz.read_bytes()))
    assert main(["import", str(plain), "-o", str(tmp_path / "plain.wrtf")]) == 0
    assert main(["import", str(gz), "-o", str(tmp_path / "gz.wrtf")]) == 0
    frames = all_frames(tmp_path / "gz.wrtf")
    assert len(frames) > 2500
    assert assert_same_frames(frames, all_frames(tmp_path / "plain.wrtf")) > 100  # leaf fields


def test_cut_gzip_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cap = tmp_path / "rig.pcapng"
    write_capture(cap, [(7777, simulated_datagrams("pcars2", 1.0), 60.0)])
    cut = tmp_path / "cut.pcapng.gz"
    cut.write_bytes(gzip.compress(cap.read_bytes())[:-100])
    assert main(["import", str(cut), "-o", str(tmp_path / "out.wrtf")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("wrtfd: error: ") and "not a readable gzip file" in err and err.count("\n") == 1
    assert not (tmp_path / "out.wrtf").exists()
