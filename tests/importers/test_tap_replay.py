"""A tap replayed gives the same recording: live loopback feed vs its pcapng, through one config.

The live half is the daemon's own receive path: the config's sources built by the daemon's
wiring (real :class:`UdpSource` sockets on loopback), fed Forza and F1 at their pace, their
samples (with the receive times the source gave them, mapping applied as the daemon's sink
does) recorded with the config's recorder policy, one recording per group (as
``test_udp_loopback_record`` records live samples). The tap half writes the same datagrams,
stamped with those receive times moved onto the wall clock by one fixed offset, into a pcapng
with :class:`PcapngWriter`, and ``wrtfd import TAP --config`` replays it. Frames (ticks and
every value) and session headers must be equal.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import anyio
import numpy as np

from tests.importers.frames import assert_same_frames, frame_bytes
from tests.importers.test_pcap_import import paced_forza
from tests.sources.test_udp_loopback_record import f1_stream
from tests.sources.udp_replay import send_at
from wrtfd.cli.main import main
from wrtfd.daemon.config import load_config
from wrtfd.daemon.recorder_port import recorder_policy, source_specs
from wrtfd.daemon.wiring import build_sources
from wrtfd.decoders.base import Sample
from wrtfd.format import Reader
from wrtfd.pcap import PcapngWriter
from wrtfd.recorder import replay

SENDER = ("127.0.0.1", 40000)


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(path: Path, forza_port: int, f1_port: int, out: Path) -> None:
    path.write_text(
        f"""
[[sources]]
kind = "udp"
name = "forza"
protocol = "forza"
host = "127.0.0.1"
port = {forza_port}
group = "forza"

[[sources]]
kind = "udp"
name = "f1"
protocol = "f1"
host = "127.0.0.1"
port = {f1_port}
group = "f1"
mapping.include = ["speed", "frame_identifier", "engine_rpm", "all_lap_distance"]
mapping.rename = {{ engine_rpm = "rpm" }}

[recorder]
output_dir = "{out}"
rate_hz = 60
session_idle_s = 30
"""
    )


def session_headers(path: Path) -> list[bytes]:
    """Every session header's bytes as they are on disk (padding included): between the
    session magic and the session's first frame."""
    with Reader(path) as r:
        spans = [(s.offset, s.frames_offset) for s in r.sessions]
    data = path.read_bytes()
    assert all(data[start : start + 8] == b"WRSE0001" for start, _ in spans)
    return [data[start + 8 : end] for start, end in spans]


def frames_and_headers(path: Path) -> tuple[np.ndarray, list[int], list[bytes]]:
    with Reader(path) as r:
        frames = np.concatenate([np.array(r.frames(i)) for i in range(len(r.sessions))])
        ticks = [int(t) for i in range(len(r.sessions)) for t in r.frames(i)["tick"]]
    return frames, ticks, session_headers(path)


async def test_tap_replay_equals_the_live_recording(shared_data: Path, tmp_path: Path) -> None:
    forza_port, f1_port = free_udp_port(), free_udp_port()
    config = tmp_path / "rig.toml"
    write_config(config, forza_port, f1_port, tmp_path / "unused")
    # Building reads files (the config, definitions): off the loop, as the daemon does before it.
    loaded = await anyio.to_thread.run_sync(load_config, config)
    built = {b.source.name: b for b in await anyio.to_thread.run_sync(build_sources, loaded)}

    forza = paced_forza(shared_data, 240)
    f1 = f1_stream(shared_data, 120)  # 4 packets per game frame at 60 Hz
    received: dict[str, list[Sample]] = {"forza": [], "f1": []}
    async with anyio.create_task_group() as tg:
        for name, b in built.items():
            await tg.start(b.source.run, received[name].append)
        tg.start_soon(send_at, forza, ("127.0.0.1", forza_port), [i / 60 for i in range(len(forza))])
        await send_at(f1, ("127.0.0.1", f1_port), [(i // 4) / 60 for i in range(len(f1))])
        with anyio.fail_after(20):
            while len(received["forza"]) < len(forza) or len(received["f1"]) < len(f1):  # noqa: ASYNC110
                await anyio.sleep(0.01)
        tg.cancel_scope.cancel()
    for name, b in built.items():
        assert b.source.stats.dropped.total() == 0, (name, b.source.stats.dropped.as_dict())

    # the live recording, per group, with the daemon's mapping and recorder policy
    live_dir = tmp_path / "live"
    live_dir.mkdir()
    policy = recorder_policy(loaded, live_dir)
    # wall = monotonic + one offset, for the recordings and the tap alike (as the daemon has it)
    wall_offset_ns = time.time_ns() - time.monotonic_ns()
    live: dict[str, Path] = {}
    for name, b in built.items():
        samples = [b.transform(s) if b.transform else s for s in received[name]]
        start_us = (samples[0].rx_ns + wall_offset_ns) // 1000
        (path,) = replay(
            samples, source_specs([b]), policy, start_timestamp_us=start_us, wall_offset_ns=wall_offset_ns
        )
        live[name] = path

    # the tap: the same datagrams at the receive times the source gave them (+ that offset)
    events = [(s.rx_ns, forza_port, d) for s, d in zip(received["forza"], forza, strict=True)]
    events += [(s.rx_ns, f1_port, d) for s, d in zip(received["f1"], f1, strict=True)]
    events.sort(key=lambda e: e[0])
    tap = tmp_path / "tap.pcapng"
    with tap.open("wb") as f:
        w = PcapngWriter(f)
        iface = w.add_udp_interface("lo", "wrtfd udp sources")
        for rx_ns, port, d in events:
            w.write_datagram(iface, rx_ns + wall_offset_ns, SENDER, ("127.0.0.1", port), d)

    out = tmp_path / "imported"
    argv = ["import", str(tap), "--config", str(config), "-o", str(out)]
    assert await anyio.to_thread.run_sync(main, argv) == 0  # a blocking command: off the loop
    imported = {}
    for path in out.glob("*.wrtf"):
        with Reader(path) as r:
            imported[r.metadata["wrtfd.sources"]] = path
    assert set(imported) == {"forza", "f1"}
    for name in ("forza", "f1"):
        live_frames, live_ticks, live_headers = frames_and_headers(live[name])
        tap_frames, tap_ticks, tap_headers = frames_and_headers(imported[name])
        assert tap_ticks == live_ticks, name
        assert assert_same_frames(tap_frames, live_frames, name) >= 5  # every value, NaNs included
        assert tap_headers == live_headers, name  # byte for byte: start_timestamp, padding
        with Reader(live[name]) as lr, Reader(imported[name]) as ir:  # byte for byte (padding too)
            assert [frame_bytes(ir, i) for i in range(len(ir.sessions))] == [
                frame_bytes(lr, i) for i in range(len(lr.sessions))
            ]
    with Reader(imported["f1"]) as r:
        assert set(r.frames(0)["f1"].dtype.names or ()) >= {"rpm", "speed"}  # the config's mapping
