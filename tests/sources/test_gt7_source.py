"""Gt7Source against the simulated console (``wrtfd.simulate.gt7``) on loopback: the console
streams only after a heartbeat it understands, in the variant that heartbeat asked for; the
source settles on the richest variant answered, asks again when the stream stops, drops what
does not come from the console, and counts everything."""

from __future__ import annotations

import functools
import itertools
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from wrtfd.decoders.base import Sample
from wrtfd.errors import ConfigError, SourceError
from wrtfd.simulate import Simulation, TrackInfo
from wrtfd.simulate.car import CarState
from wrtfd.simulate.gt7 import Gt7Console, Gt7Encoder
from wrtfd.sources.base import SourceState
from wrtfd.sources.gt7 import Gt7Source
from wrtfd.tracks import LanePath, load_track, timing_sectors

OVAL = Path(__file__).resolve().parents[2] / "config" / "tracks" / "oval.trk"


def drive() -> tuple[TrackInfo, Iterator[CarState]]:
    track = load_track(OVAL)
    path = LanePath(track)
    sectors = timing_sectors(track, path)
    sim = Simulation(path, laps=1, rate_hz=60.0, seed=2, sectors_m=sectors, pre_start_s=0.2)
    return TrackInfo(track.name, path.length_m, sectors, 1), sim.states()


def console_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    return sock


async def until(predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
    with anyio.fail_after(timeout_s):
        while not predicate():  # noqa: ASYNC110 - the source exposes counters, not events
            await anyio.sleep(0.01)


def fast_source(port: int, **kw: object) -> Gt7Source:
    options: dict[str, object] = {"heartbeat_interval_s": 0.1, "probe_s": 0.3, "stream_timeout_s": 0.5}
    options.update(kw)
    return Gt7Source(console="127.0.0.1", console_port=port, host="127.0.0.1", port=0, **options)  # type: ignore[arg-type]


async def stream(console: Gt7Console, states: Iterator[CarState], ticks: int) -> None:
    assert await anyio.to_thread.run_sync(console.wait_first, 10.0)
    serve = functools.partial(console.serve, itertools.islice(states, ticks), rate_hz=60.0)
    await anyio.to_thread.run_sync(serve)


async def test_settles_on_the_richest_variant_the_console_answers() -> None:
    info, states = drive()
    with console_socket() as sock:
        console = Gt7Console(Gt7Encoder(info), sock, understands="AB")  # an older firmware: no ~, no C
        samples: list[Sample] = []
        source = fast_source(sock.getsockname()[1])
        async with anyio.create_task_group() as tg:
            await tg.start(source.run, samples.append)
            await stream(console, states, 90)
            await until(lambda: source.stats.received == console.stats.datagrams)
            await until(lambda: source.answered is not None)
            tg.cancel_scope.cancel()
    assert console.stats.streams == ["B"]  # C and ~ were tried first and ignored
    assert console.stats.ignored_heartbeats >= 2 and source.probes >= 2
    assert (source.asked, source.answered) == ("B", "B")
    assert len(samples) == console.stats.datagrams == 90
    assert {s.values["packet_size"] for s in samples} == {316}
    assert source.stats.dropped.as_dict() == {}
    ids = [s.values["packet_id"] for s in samples]
    assert ids == list(range(ids[0], ids[0] + 90))  # every tick, in order
    assert source.stats.state is SourceState.STOPPED


async def test_a_fixed_variant_is_the_only_letter_sent() -> None:
    info, states = drive()
    with console_socket() as sock:
        console = Gt7Console(Gt7Encoder(info), sock)
        source = fast_source(sock.getsockname()[1], variant="~")
        samples: list[Sample] = []
        async with anyio.create_task_group() as tg:
            await tg.start(source.run, samples.append)
            await stream(console, states, 30)
            await until(lambda: len(samples) == 30)
            tg.cancel_scope.cancel()
    assert console.stats.streams == ["~"] and console.stats.ignored_heartbeats == 0
    assert {s.values["packet_size"] for s in samples} == {344} and source.probes == 0


async def test_the_stream_stops_and_is_asked_for_again() -> None:
    info, states = drive()
    with console_socket() as sock:
        console = Gt7Console(Gt7Encoder(info), sock)
        source = fast_source(sock.getsockname()[1])
        samples: list[Sample] = []
        async with anyio.create_task_group() as tg:
            await tg.start(source.run, samples.append)
            await stream(console, states, 30)
            await until(lambda: source.stats.state is SourceState.RECONNECTING)
            assert source.restreams == 1 and "stream stopped" in source.stats.state_detail
            serve = functools.partial(console.serve, itertools.islice(states, 30), rate_hz=60.0)
            await anyio.to_thread.run_sync(serve)  # the console still hears heartbeats: it streams
            await until(lambda: len(samples) == 60)
            await until(lambda: source.stats.state is SourceState.RECEIVING)
            tg.cancel_scope.cancel()
    assert source.answered == "C" and source.stats.dropped.as_dict() == {}
    assert source.heartbeats_sent >= console.stats.heartbeats - 1 > 5


async def test_nothing_but_the_console_is_recorded_and_letters_cycle_without_an_answer() -> None:
    with console_socket() as mute:  # a console that never answers: just count the letters
        source = fast_source(mute.getsockname()[1], probe_s=0.15, heartbeat_interval_s=0.05)
        samples: list[Sample] = []
        async with anyio.create_task_group() as tg:
            await tg.start(source.run, samples.append)
            address = source.local_address
            assert address is not None
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as stranger:
                stranger.bind(("127.0.0.2", 0))  # not the console's address
                stranger.sendto(bytes(296), address)
            await until(lambda: source.stats.dropped.as_dict().get("sender_not_allowed") == 1)
            await until(lambda: source.probes >= 5)
            tg.cancel_scope.cancel()
        letters = []
        while True:
            try:
                letters.append(mute.recv(16).decode())
            except BlockingIOError:
                break
    order = [k for k, _ in itertools.groupby(letters)]
    assert order[:5] == ["C", "~", "B", "A", "C"]
    assert samples == [] and source.answered is None
    assert source.stats.state is SourceState.STOPPED


async def test_a_port_in_use_is_a_source_error() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", 0))
        source = Gt7Source(console="127.0.0.1", host="127.0.0.1", port=taken.getsockname()[1])
        with pytest.raises(SourceError, match="cannot bind"):
            await source.run(lambda sample: None)
    assert source.stats.state is SourceState.FAILED and source.heartbeats_sent == 0


def test_bad_options() -> None:
    with pytest.raises(ConfigError, match="not an IP address"):
        Gt7Source(console="playstation.local")
    with pytest.raises(ConfigError, match="variant"):
        Gt7Source(console="192.168.1.30", variant="D")
    with pytest.raises(ConfigError, match="positive"):
        Gt7Source(console="192.168.1.30", probe_s=0)
