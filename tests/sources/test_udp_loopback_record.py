"""Per protocol: a capture replayed over real loopback UDP (accelerated, or at real pace for
the source-clock path), through UdpSource, the scheduler and the recorder into a WRTF file
whose frame count and values match what was sent."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.decoders.f1_capture import records
from tests.sources.udp_replay import assert_frames_match, read_single_session, record, send_paced, text
from wrtfd.decoders.base import Sample
from wrtfd.decoders.registry import make_decoder
from wrtfd.sources.udp import UdpSource

PACE_HZ = 240  # 4x the games' 60 Hz


async def capture_over_udp(protocol: str, datagrams: list[bytes], pace_hz: float, per_tick: int = 1,
                           **options: Any) -> tuple[list[Sample], UdpSource]:  # fmt: skip
    samples: list[Sample] = []
    source = UdpSource(protocol, make_decoder(protocol, **options), host="127.0.0.1", port=0)
    async with anyio.create_task_group() as tg:
        await tg.start(source.run, samples.append)
        addr = source.local_address
        assert addr is not None
        await send_paced(datagrams, addr, pace_hz, per_tick)
        with anyio.fail_after(5):
            while source.stats.received < len(datagrams):  # noqa: ASYNC110 - counters, not events
                await anyio.sleep(0.005)
        tg.cancel_scope.cancel()
    assert source.stats.dropped.total() == 0, source.stats.dropped.as_dict()
    return samples, source


def forza_packets(shared_data: Path, n: int) -> list[bytes]:
    raw = (shared_data / "udp" / "forza_fm2023" / "fm2023_dash_331B_x1793.bin").read_bytes()
    return [raw[i : i + 331] for i in range(0, 331 * n, 331)]


async def test_forza_accelerated(shared_data: Path, tmp_path: Path) -> None:
    packets = forza_packets(shared_data, 600)
    samples, _source = await capture_over_udp("forza", packets, PACE_HZ)
    assert len(samples) == 600
    decoder = make_decoder("forza")
    paths = record(samples, "forza", decoder.definition, tmp_path, PACE_HZ, use_source_clock=False)
    assert len(paths) == 1
    frames, session = read_single_session(paths[0])
    assert session.frame_count == 600 and session.dropped_ticks == 0
    assert assert_frames_match(frames, "forza", samples) == 600 * len(samples[0].values)
    assert text(session.header["track"]) == "track ordinal 1640"
    assert text(session.header["car"]) == "car ordinal 445"


async def test_forza_real_pace_on_its_own_clock(shared_data: Path, tmp_path: Path) -> None:
    """At the game's 60 Hz, TimestampMS places the samples: one frame per packet, no gap."""
    packets = forza_packets(shared_data, 120)
    samples, _source = await capture_over_udp("forza", packets, 60)
    decoder = make_decoder("forza")
    paths = record(samples, "forza", decoder.definition, tmp_path, 60, use_source_clock=True)
    frames, session = read_single_session(paths[0])
    assert session.frame_count == 120
    assert_frames_match(frames, "forza", samples)


def f1_stream(shared_data: Path, frames: int) -> list[bytes]:
    """An F1 2023 stream built from the capture's packets of one session: every frame sends
    Motion, Lap Data, Car Telemetry, Car Status with that frame's sessionTime/frameIdentifier."""
    wanted = ("motion", "lapData", "carTelemetry", "carStatus")
    by_kind: dict[str, bytes] = {}
    for name, raw, _parsed in records(shared_data, 2023):
        if name in wanted and name not in by_kind:
            by_kind[name] = raw
    out: list[bytes] = []
    for f in range(frames):
        for name in wanted:
            buf = bytearray(by_kind[name])
            struct.pack_into("<Q", buf, 7, 0x1234)  # one sessionUID for the stream
            struct.pack_into("<fII", buf, 15, 100.0 + f / 60.0, 5000 + f, 5000 + f)
            struct.pack_into("<H", buf, 29 + 19 * 60, f)  # vary car 19's telemetry speed per frame
            out.append(bytes(buf))
    return out


async def test_f1_real_pace_packets_of_a_frame_merge(shared_data: Path, tmp_path: Path) -> None:
    stream = f1_stream(shared_data, 120)
    samples, source = await capture_over_udp("f1", stream, 60, per_tick=4)
    assert len(samples) == 480 and source.stats.samples == 480
    decoder = make_decoder("f1")
    paths = record(samples, "f1", decoder.definition, tmp_path, 60, use_source_clock=True)
    frames, session = read_single_session(paths[0])
    assert session.frame_count == 120
    block = frames["f1"]
    assert list(block["frame_identifier"]) == list(range(5000, 5120))
    # each frame merges the four packet types of its game frame (sample-and-hold per channel)
    for i in range(120):
        per_frame = samples[4 * i : 4 * i + 4]
        merged: dict[str, Any] = {}
        for s in per_frame:
            merged.update(s.values)
        assert block["speed"][i] == merged["speed"]
        assert block["all_lap_distance"][i].tolist() == pytest.approx(list(merged["all_lap_distance"]))
        assert block["world_position_x"][i] == pytest.approx(merged["world_position_x"])
        assert block["ers_store_energy"][i] == pytest.approx(merged["ers_store_energy"])


def dirt_packets(shared_data: Path, n: int) -> list[bytes]:
    raw = (shared_data / "udp" / "dirt_rally" / "DirtRallye.bin.raw").read_bytes()
    return [raw[i : i + 264] for i in range(0, 264 * n, 264)]


def outgauge_packets(n: int) -> list[bytes]:
    out = []
    for i in range(n):
        buf = bytearray(96)
        struct.pack_into("<I4sHBB7f", buf, 0, 1000 + 16 * i, b"XRT\x00", 0xE000, 3, 1, 10.0 + i * 0.1,
                         2000.0 + i, 0.5, 90.0, 0.8, 4.0, 95.0)  # fmt: skip
        buf[60:70] = b"Fuel 99.9%"
        struct.pack_into("<i", buf, 92, 7)
        out.append(bytes(buf))
    return out


def outsim_packets(n: int) -> list[bytes]:
    return [
        struct.pack("<I12f3i", 1000 + 16 * i, *(float(i + k) for k in range(12)), i * 65536, -i, 3)
        for i in range(n)
    ]


def outsim2_packets(n: int) -> list[bytes]:
    out = []
    for i in range(n):
        body = struct.pack("<iI12f3i5fB3xffff", 5, 16 * i, *(0.5 * i,) * 12, i, i, i, 0.9, 0.0, 0.1, 0.0, 0.0,
                           3, 500.0 + i, 300.0, 10.0 * i, 20.0 * i)  # fmt: skip
        wheels = b"".join(
            struct.pack("<7f4B2f", *(float(w + i),) * 7, 50 + w, 10, 1, 0, 0.1, 0.2) for w in range(4)
        )
        out.append(b"LFST" + body + wheels + struct.pack("<ff", 1.5 * i, 0.0))
    return out


STRUCT_OPTIONS: dict[str, Any] = {
    "fields": [
        {"name": "t_ms", "type": "uint32"},
        {"name": "rpm", "type": "uint16", "scale": 0.25, "unit": "rpm"},
        {"name": "accel", "type": "int16", "count": 3},
        {"name": "label", "type": "char", "count": 8},
    ],
    "magic": "MCU1",
    "magic_offset": 20,
    "length": 24,
    "time_field": "t_ms",
}


def struct_packets(n: int) -> list[bytes]:
    return [
        struct.pack("<IH3h8s4s", 10 * i, 4 * i, i, -i, 2 * i, b"car%03d" % (i % 7), b"MCU1") for i in range(n)
    ]


CASES: dict[str, tuple[Callable[[Path], list[bytes]], dict[str, Any]]] = {
    "codemasters": (lambda d: dirt_packets(d, 400), {}),
    "outgauge": (lambda d: outgauge_packets(300), {}),
    "outsim": (lambda d: outsim_packets(300), {}),
    "outsim2": (lambda d: outsim2_packets(300), {"opts": "1ff"}),
    "struct": (lambda d: struct_packets(300), STRUCT_OPTIONS),
}


@pytest.mark.parametrize("protocol", sorted(CASES))
async def test_protocol_accelerated(shared_data: Path, tmp_path: Path, protocol: str) -> None:
    make_packets, options = CASES[protocol]
    packets = make_packets(shared_data)
    samples, _source = await capture_over_udp(protocol, packets, PACE_HZ, **options)
    assert len(samples) == len(packets)
    decoder = make_decoder(protocol, **options)
    paths = record(samples, protocol, decoder.definition, tmp_path, PACE_HZ, use_source_clock=False)
    frames, session = read_single_session(paths[0])
    assert session.frame_count == len(packets) and session.dropped_ticks == 0
    assert assert_frames_match(frames, protocol, samples) >= len(packets) * 4
