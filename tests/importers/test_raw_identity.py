"""The raw path (fixed-layout packets stored from their bytes) writes the same files as the dict path.

Forza and F1 decoders hand the recorder :class:`RawValues` (the packet's bytes, a compiled
layout) instead of a dict; ``raw_values = False`` on the decoder class is the per-field dict
path the project had before (the reference). For every shipped UDP protocol with a simulator
(its datagrams stamped with jitter, a bunch, a pause, a duplicate and one from the past, so
the scheduler's rules all come into play) and for the real captures in ``../shared/data/udp``
(every F1 year with its recorded times, the Forza capture), both paths import the same
pcapng: the files must be equal byte for byte (headers, frames, footers with their counters,
checks) and the reports (samples, drops by reason) equal. Packets with a signalling NaN or an
infinity in a float channel, and datagrams of every other size, must come out the same too.
"""

from __future__ import annotations

import json
import struct
from datetime import datetime
from pathlib import Path

import pytest

from tests.test_protocols import simulated_datagrams
from wrtfd.decoders.base import RawValues
from wrtfd.decoders.f1 import F1Decoder
from wrtfd.decoders.forza import ForzaDecoder
from wrtfd.format import Reader
from wrtfd.importers.pcap import import_capture
from wrtfd.importers.report import ImportReport
from wrtfd.pcap import PcapngWriter
from wrtfd.protocols import Simulator, all_protocols

T0_NS = 1_700_000_000_000_000_000
GAME = ("192.168.1.20", 50000)
RIG = "192.168.1.5"
SIMULATED = sorted(n for n, info in all_protocols().items() if isinstance(info.simulator, Simulator))
RAW_DECODERS = (ForzaDecoder, F1Decoder)


def write_pcapng(path: Path, events: list[tuple[int, int, bytes]]) -> None:
    with path.open("wb") as f:
        w = PcapngWriter(f)
        iface = w.add_udp_interface("eth0")
        for ts, port, d in events:
            w.write_datagram(iface, ts, GAME, (RIG, port), d)


def roughened(datagrams: list[bytes], per_frame: int = 1) -> list[tuple[int, bytes]]:
    """60 Hz with jitter up to 9 ms, a bunch (five at once), a 2.05 s pause, one datagram sent
    twice and one stamped 150 ms in the past (held at its source's time by the import)."""
    out: list[tuple[int, bytes]] = []
    for i, d in enumerate(datagrams):
        frame = i // per_frame
        t = T0_NS + round(frame * 1e9 / 60) + (frame * 7919 % 10) * 900_000 + i % per_frame * 1000
        if 300 <= frame < 305:
            t = T0_NS + round(305 * 1e9 / 60)
        if frame >= 400:
            t += 2_050_000_000
        out.append((t, d))
        if i == 250:
            out.append((t + 500_000, d))
        if i == 350:
            out.append((t - 150_000_000, d))
    return out


def both_paths(
    cap: Path, tmp: Path, protocols: list[str], monkeypatch: pytest.MonkeyPatch
) -> tuple[list[Path], ImportReport]:
    """Import ``cap`` by the dict path and the raw path; assert the same bytes and reports."""
    outputs: dict[bool, tuple[list[Path], ImportReport]] = {}
    for raw in (False, True):
        for cls in RAW_DECODERS:
            monkeypatch.setattr(cls, "raw_values", raw)
        report = import_capture(cap, tmp / ("raw" if raw else "dict"), protocols=protocols)
        outputs[raw] = (sorted(report.outputs), report)
    (old, ro), (new, rn) = outputs[False], outputs[True]
    assert [p.name for p in new] == [p.name for p in old]
    for a, b in zip(old, new, strict=True):
        assert a.read_bytes() == b.read_bytes(), f"{b.name} differs from the dict path's"
    assert (rn.read, rn.samples, dict(rn.dropped), rn.notes) == (
        ro.read,
        ro.samples,
        dict(ro.dropped),
        ro.notes,
    )
    return new, ro


def frames_in(paths: list[Path]) -> int:
    total = 0
    for p in paths:
        with Reader(p) as r:
            total += sum(len(r.frames(i)) for i in range(len(r.sessions)))
    return total


@pytest.mark.parametrize("name", SIMULATED)
def test_simulated_protocol_imports_the_same_by_the_raw_path(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stamped = roughened(simulated_datagrams(name, 9.0))
    assert len(stamped) > 400
    cap = tmp_path / f"{name}.pcapng"
    write_pcapng(cap, [(t, 40123, d) for t, d in stamped])
    paths, report = both_paths(cap, tmp_path, [name], monkeypatch)
    assert report.samples > 0 and frames_in(paths) > 0


def f1_capture(shared_data: Path, year: int) -> list[tuple[int, bytes]]:
    """A year's F1 capture, each datagram at the time the capture recorded it, in time order."""
    stamped = []
    with (shared_data / "udp" / "f1" / f"{year}.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            msg = rec["message"]
            when = datetime.fromisoformat(rec["time"].replace("Z", "+00:00"))
            stamped.append(
                (round(when.timestamp() * 1e6) * 1000, bytes(msg["data"] if isinstance(msg, dict) else msg))
            )
    stamped.sort(key=lambda e: e[0])
    return stamped


def forza_capture(shared_data: Path) -> list[bytes]:
    raw = (shared_data / "udp" / "forza_fm2023" / "fm2023_dash_331B_x1793.bin").read_bytes()
    return [raw[i : i + 331] for i in range(0, len(raw) - 330, 331)]


@pytest.mark.parametrize("year", range(2018, 2026))
def test_real_f1_capture_imports_the_same_by_the_raw_path(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, year: int
) -> None:
    """Every F1 year's capture (every packet format, spectator and player cars as captured)."""
    cap = tmp_path / "f1.pcapng"
    write_pcapng(cap, [(t, 20777, d) for t, d in f1_capture(shared_data, year)])
    paths, report = both_paths(cap, tmp_path, ["f1"], monkeypatch)
    assert report.samples > 0 and frames_in(paths) > 0


def odd_floats(packets: list[bytes], offsets: list[int]) -> list[bytes]:
    """The packets with a signalling NaN, a quiet NaN with a payload, +inf and -inf written
    over the float32 at each offset in turn (one odd value per packet)."""
    odd = [0x7F800001, 0xFFA00000, 0x7FC00123, 0x7F800000, 0xFF800000]
    out = []
    for i, p in enumerate(packets):
        buf = bytearray(p)
        if i % 3 == 0:
            struct.pack_into("<I", buf, offsets[i // 3 % len(offsets)], odd[i // 3 % len(odd)])
        out.append(bytes(buf))
    return out


def test_real_forza_capture_imports_the_same_by_the_raw_path(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The FM2023 capture as sent, the same cut to the other three sizes (Sled, FM7 Dash,
    Horizon), and with odd float32 values (sNaN, inf) in its float channels."""
    forza = forza_capture(shared_data)
    sled = [p[:232] for p in forza[:400]]
    fm7 = [p[:311] for p in forza[:400]]
    horizon = [p[:232] + bytes(12) + p[232:311] + b"\0" for p in forza[:400]]
    floats = (
        [8 + 4 * i for i in range(27)] + [124 + 4 * i for i in range(20)] + [232 + 4 * i for i in range(17)]
    )
    events: list[tuple[int, int, bytes]] = []
    for port, packets in (
        (5300, forza),
        (5301, sled),
        (5302, fm7),
        (5303, horizon),
        (5304, odd_floats(forza, floats)),
    ):
        events += [(t + port, port, d) for t, d in roughened(packets)]
    events.sort(key=lambda e: e[0])
    cap = tmp_path / "forza.pcapng"
    write_pcapng(cap, events)
    protocols = [f"{port}=forza" for port in range(5300, 5305)]
    paths, report = both_paths(cap, tmp_path, protocols, monkeypatch)
    assert len(paths) == 5 and frames_in(paths) > 0
    assert not report.dropped


def test_f1_packets_with_odd_floats_import_the_same_by_the_raw_path(
    shared_data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 2023 capture with sNaN / inf written over the player's floats (motion, car
    telemetry, motion ex) and over other cars' positions (the per-car arrays)."""
    stamped = f1_capture(shared_data, 2023)
    out = []
    for i, (t, d) in enumerate(stamped):
        pid = d[6]
        player = d[27]
        if pid == 0 and i % 2 == 0:  # motion: the player's world position x, car 3's y
            d = odd_floats([d], [29 + 60 * player, 29 + 60 * 3 + 4])[0]
        elif pid == 13 and i % 2 == 0:
            d = odd_floats([d], [29 + 4 * (i % 40)])[0]
        elif pid == 6 and i % 2 == 0:  # car telemetry: the player's throttle
            d = odd_floats([d], [29 + 60 * player + 2])[0]
        out.append((t, 20777, d))
    cap = tmp_path / "f1.pcapng"
    write_pcapng(cap, out)
    paths, report = both_paths(cap, tmp_path, ["f1"], monkeypatch)
    assert report.samples > 0 and frames_in(paths) > 0


def test_raw_values_read_as_the_dict_path_s_values(
    shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What any other reader of a sample's values sees (a channel mapping, a trigger): the raw
    path's values as a mapping equal the dict path's, key order included, packet by packet."""
    raw_f1, raw_forza = F1Decoder(), ForzaDecoder()
    monkeypatch.setattr(F1Decoder, "raw_values", False)
    monkeypatch.setattr(ForzaDecoder, "raw_values", False)
    old_f1, old_forza = F1Decoder(), ForzaDecoder()
    monkeypatch.undo()
    pairs: list[tuple[ForzaDecoder | F1Decoder, ForzaDecoder | F1Decoder, bytes]]
    pairs = [(raw_forza, old_forza, d) for d in forza_capture(shared_data)[:300]]
    pairs += [(raw_f1, old_f1, d) for _t, d in f1_capture(shared_data, 2023)]
    seen_raw = 0
    for raw, old, d in pairs:
        a, b = raw.decode(d), old.decode(d)
        if a is None or b is None:
            assert a is b
            continue
        seen_raw += isinstance(a.values, RawValues)
        assert list(a.values.items()) == list(b.values.items())
        assert (a.source_time_ns, a.session_key, a.new_session, a.session_info) == (
            b.source_time_ns,
            b.session_key,
            b.new_session,
            b.session_info,
        )
    assert seen_raw > 300


def test_a_packet_in_a_reused_buffer_is_kept_as_it_was_decoded(shared_data: Path) -> None:
    """A caller that reads datagrams into one buffer (recv_into) and decodes a view of it: the
    sample must keep the bytes it was decoded from, not whatever the buffer holds later."""
    forza = forza_capture(shared_data)[0]
    f1 = next(d for _t, d in f1_capture(shared_data, 2023) if d[6] == 6)  # car telemetry
    for decoder, packet in ((ForzaDecoder(), forza), (F1Decoder(), f1)):
        buf = bytearray(packet)
        decoded = decoder.decode(memoryview(buf))  # type: ignore[arg-type]
        assert decoded is not None and isinstance(decoded.values, RawValues)
        buf[:] = bytes(len(buf))  # the next datagram read into the same buffer
        again = decoder.decode(packet)
        assert again is not None
        assert dict(decoded.values) == dict(again.values)
