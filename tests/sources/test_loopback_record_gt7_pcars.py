"""GT7, Project CARS 2 and Project CARS 1 over real loopback UDP at the game's pace, through the
source, the scheduler and the recorder into a WRTF file whose frames hold what was sent.

GT7 goes through its real source and the simulated console (heartbeat, encryption) and is
placed by its packet-id clock. Project CARS has no usable clock: its packets are placed by
arrival, and the several packet types of one game tick must still land in one frame."""

from __future__ import annotations

import functools
import itertools
import socket
from pathlib import Path

import anyio
import anyio.to_thread
import numpy as np

from tests.sources.test_udp_loopback_record import capture_over_udp, check_ticks_follow_clock
from tests.sources.udp_replay import assert_frames_match, read_single_session, record, text
from wrtfd.decoders.base import Sample
from wrtfd.decoders.registry import make_decoder
from wrtfd.simulate import Simulation, TrackInfo, make_encoder
from wrtfd.simulate.gt7 import Gt7Console, Gt7Encoder
from wrtfd.sources.gt7 import Gt7Source
from wrtfd.tracks import LanePath, load_track, timing_sectors

OVAL = Path(__file__).resolve().parents[2] / "config" / "tracks" / "oval.trk"
TICKS = 150
TICK_S = 1 / 60  # placed by arrival: a sender later than a tick bunches two ticks


def simulation() -> tuple[TrackInfo, Simulation]:
    track = load_track(OVAL)
    path = LanePath(track)
    sectors = timing_sectors(track, path)
    sim = Simulation(path, laps=1, rate_hz=60.0, seed=8, sectors_m=sectors, pre_start_s=0.0)
    return TrackInfo(track.name, path.length_m, sectors, 1), sim


def game_ticks(protocol: str) -> tuple[list[bytes], list[float]]:
    """The datagrams of TICKS game ticks and when each is sent (all of a tick at once)."""
    info, sim = simulation()
    enc = make_encoder(protocol, info)
    packets: list[bytes] = []
    offsets: list[float] = []
    for i, state in enumerate(itertools.islice(sim.states(), TICKS)):
        for p in enc.encode(state, first=i == 0, last=False):
            packets.append(p)
            offsets.append(i / 60.0)
    return packets, offsets


async def test_gt7_through_the_heartbeat_source(tmp_path: Path) -> None:
    info, sim = simulation()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.setblocking(False)
        console = Gt7Console(Gt7Encoder(info, seed=5), sock)
        source = Gt7Source(console="127.0.0.1", console_port=sock.getsockname()[1], host="127.0.0.1", port=0)
        samples: list[Sample] = []
        async with anyio.create_task_group() as tg:
            await tg.start(source.run, samples.append)
            assert await anyio.to_thread.run_sync(console.wait_first, 10.0)
            serve = functools.partial(console.serve, itertools.islice(sim.states(), TICKS), rate_hz=60.0)
            await anyio.to_thread.run_sync(serve)
            with anyio.fail_after(10):
                while source.stats.received < console.stats.datagrams:  # noqa: ASYNC110 - counters
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()
    assert len(samples) == console.stats.datagrams == TICKS and source.stats.dropped.total() == 0
    assert console.stats.streams == ["C"]  # the richest variant, asked for first
    decoder = make_decoder("gt7")
    paths = record(samples, "gt7", decoder.definition, tmp_path, 60, use_source_clock=True)
    frames, session = read_single_session(paths[0])
    assert session.frame_count == TICKS and session.dropped_ticks == 0
    assert assert_frames_match(frames, "gt7", samples) == TICKS * len(samples[0].values)
    check_ticks_follow_clock(frames, [s.values["packet_id"] / 60.0 for s in samples], 60)
    assert text(session.header["car"]) == "car code 3311"
    assert {text(row) for row in frames["gt7"]["car_category"]} == {"GR3"}


async def test_pcars2_packet_types_of_a_tick_merge_into_one_frame(tmp_path: Path) -> None:
    packets, offsets = game_ticks("pcars2")
    samples = await capture_over_udp("pcars2", packets, offsets, paced_within_s=TICK_S)
    decoder = make_decoder("pcars2")
    # one sample per tick (telemetry + timings) and one per other packet, but names packets
    # before the first telemetry (no viewed car yet), which carry no channel
    others = sum(1 for p in packets if p[10] not in (0, 3, 8))
    assert len(samples) == sum(decoder.decode(p) is not None for p in packets) == TICKS + others
    paths = record(samples, "pcars2", decoder.definition, tmp_path, 60, use_source_clock=False)
    frames, session = read_single_session(paths[0])
    assert session.dropped_ticks == 0 and TICKS <= session.frame_count <= TICKS + 1
    block = frames["pcars2"]
    telemetry = {s.values["tick_count"]: s.values for s in samples if "speed" in s.values}
    timings = {s.values["tick_count"]: s.values for s in samples if "all_race_position" in s.values}
    assert len(telemetry) == len(timings) == TICKS
    merged = 0
    for row in block:
        tick = int(row["tick_count"])
        if tick == 0:
            continue  # the first tick's game state, before any telemetry
        # the telemetry and the timings of one game tick sit in the same frame
        assert row["speed"] == np.float32(telemetry[tick]["speed"])
        assert row["full_position_x"] == np.float32(telemetry[tick]["full_position_x"])
        assert row["current_time"] == np.float32(timings[tick]["current_time"])
        assert row["all_current_lap_distance"].tolist() == list(timings[tick]["all_current_lap_distance"])
        merged += 1
    assert merged == TICKS
    assert text(session.header["track"]) == "Small oval track"
    assert text(session.header["car"]) == "Simulated GT"
    assert set(np.unique(block["game_state"]).tolist()) == {2}


async def test_pcars1(tmp_path: Path) -> None:
    packets, offsets = game_ticks("pcars")
    samples = await capture_over_udp("pcars", packets, offsets, paced_within_s=TICK_S)
    telemetry = [s for s in samples if s.values]
    assert len(telemetry) == TICKS  # the strings packet gives session info only
    decoder = make_decoder("pcars")
    paths = record(samples, "pcars", decoder.definition, tmp_path, 60, use_source_clock=False)
    frames, session = read_single_session(paths[0])
    assert session.frame_count == TICKS and session.dropped_ticks == 0
    assert assert_frames_match(frames, "pcars", samples) == TICKS * len(telemetry[0].values)
    assert text(session.header["car"]) == "Simulated GT"
