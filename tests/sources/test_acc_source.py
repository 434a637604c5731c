"""AccSource against the simulator's broadcasting server on loopback: registration with the
password, entry list and track data, refusal and backoff, re-registration when the game
restarts (a new session), unregistration on shutdown, strangers dropped."""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable

import anyio
import pytest

from tests.sources.acc_server import LoopbackAcc
from wrtfd.decoders.base import Sample
from wrtfd.errors import ConfigError
from wrtfd.simulate.acc import WRONG_PASSWORD
from wrtfd.sources.acc import AccSource
from wrtfd.sources.base import SourceState


async def until(predicate: Callable[[], bool], timeout_s: float = 15.0) -> None:
    with anyio.fail_after(timeout_s):
        while not predicate():  # noqa: ASYNC110 - the source exposes counters, not events
            await anyio.sleep(0.005)


def source_for(game: LoopbackAcc, password: str, **kw: object) -> AccSource:
    return AccSource(
        host="127.0.0.1",
        port=game.address[1],
        local_host="127.0.0.1",
        password=password,
        **kw,  # type: ignore[arg-type]
    )


async def test_registers_records_a_session_and_unregisters() -> None:
    game = LoopbackAcc(password="secret", speed=10.0)
    samples: list[Sample] = []
    source = source_for(game, "secret", update_interval_ms=50)
    async with anyio.create_task_group() as game_tg:
        await game_tg.start(game.serve)
        async with anyio.create_task_group() as tg:
            await tg.start(source.run, samples.append)
            await until(lambda: game.finished)
            await until(lambda: any(s.values.get("event_type") == 2 for s in samples))  # session over
            assert source.stats.state is SourceState.RECEIVING
            assert "registered (with commands)" in source.stats.state_detail
            tg.cancel_scope.cancel()
        await until(lambda: game.received[-1][0] == 9)
        game_tg.cancel_scope.cancel()
    # registration, then what the SDK asks for: the entry list and the track data
    kinds = [d[0] for d in game.received]
    assert kinds[0] == 1 and 10 in kinds and 11 in kinds and kinds[-1] == 9, kinds
    assert struct.unpack_from("<i", game.received[-1], 1)[0] == 1  # unregistered its connection
    assert not game.server.clients
    assert source.registrations_sent == source.registrations_accepted == 1
    assert source.stats.dropped.as_dict() == {}
    assert source.stats.state is SourceState.STOPPED
    info = {k: v for s in samples if s.session_info for k, v in s.session_info.items()}
    assert info == {"track": "Small oval track", "session_type": "race", "car": "Audi R8 LMS GT3 Evo II #88",
                    "driver": "Sim Driver"}  # fmt: skip
    cars = [s.values["all_car_index"] for s in samples if "all_car_index" in s.values]
    assert set(cars[-1][:4]) == {7, 12, 3, 25}
    focused = [s.values for s in samples if "last_lap_ms" in s.values]
    assert focused[-1]["laps"] == 1 and focused[-1]["last_lap_ms"] > 0
    events = [s.values for s in samples if "event_count" in s.values]
    assert events[-1]["event_counts"][5] >= 1  # lap completed
    assert events[-1]["event_count"] == len(game.server.events)
    assert not any(s.new_session for s in samples)
    times = [s.source_time_ns for s in samples if s.source_time_ns is not None]
    assert times == sorted(times)  # the session clock goes forward


async def test_a_wrong_password_is_refused_and_retried_with_backoff() -> None:
    game = LoopbackAcc(password="secret")
    source = source_for(game, "guess", register_interval_s=0.05, register_interval_max_s=0.2)
    async with anyio.create_task_group() as tg:
        await tg.start(game.serve)
        await tg.start(source.run, lambda s: None)
        await until(lambda: source.registrations_refused >= 5)
        assert source.stats.state is SourceState.LISTENING
        detail = source.stats.state_detail
        assert WRONG_PASSWORD in detail and "check the password" in detail
        tg.cancel_scope.cancel()
    assert source.last_refusal == WRONG_PASSWORD
    assert source.stats.dropped.as_dict()["registration_refused"] == source.registrations_refused
    assert source.registrations_accepted == 0 and source.stats.samples == 0
    assert 9 not in [d[0] for d in game.received]  # never registered: nothing to unregister
    gaps = [b - a for a, b in zip(game.register_times, game.register_times[1:], strict=False)]
    for i, gap in enumerate(gaps[:4]):  # 0.05, 0.1, 0.2, 0.2 s at least (load only adds)
        assert gap >= 0.9 * min(0.05 * 2**i, 0.2), gaps


async def test_reregisters_when_the_game_restarts_and_starts_a_new_session() -> None:
    first = LoopbackAcc(password="pw", speed=4.0, laps=3)
    samples: list[Sample] = []
    source = source_for(first, "pw", reregister_after_s=0.3, register_interval_s=0.05)
    port = first.address[1]
    async with anyio.create_task_group() as tg:
        async with anyio.create_task_group() as game_tg:
            await game_tg.start(first.serve)
            await tg.start(source.run, samples.append)
            await until(lambda: len(samples) > 50)
            game_tg.cancel_scope.cancel()  # the game quits
        await until(lambda: source.stats.state is SourceState.RECONNECTING)
        assert source.reregistrations == 1
        second = LoopbackAcc(password="pw", port=port, speed=4.0, first_connection_id=100)
        before = len(samples)
        await tg.start(second.serve)
        await until(lambda: len(samples) > before + 20)
        tg.cancel_scope.cancel()
    assert source.registrations_accepted == 2
    after = samples[before:]
    assert after[0].new_session and not any(s.new_session for s in after[1:])
    assert not any(s.new_session for s in samples[:before])
    assert source.decoder.connection_id == 100  # the restarted game's connection


async def test_unknown_cars_ask_for_the_entry_list_and_strangers_are_dropped() -> None:
    game = LoopbackAcc(password="", speed=1.0)
    samples: list[Sample] = []
    source = source_for(game, "")
    async with anyio.create_task_group() as tg:
        await tg.start(game.serve)
        await tg.start(source.run, samples.append)
        await until(lambda: source.decoder.has_track and len(samples) > 5)
        requests = source.entry_list_requests
        client = next(iter(game.server.clients))
        stranger = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        stranger.bind(("127.0.0.2", 0))
        stranger.sendto(b"\x07\x05\x00hello" + bytes(8), client)
        stranger.close()
        unknown = game.server.car_update(game.server.cars[1], 2)
        game.send(unknown[:1] + struct.pack("<H", 999) + unknown[3:], client)  # car 999: not in the list
        await until(lambda: source.entry_list_requests > requests)
        await until(lambda: not source.decoder.entry_list_wanted)  # the list came back
        tg.cancel_scope.cancel()
    assert source.stats.dropped.as_dict() == {"sender_not_allowed": 1}


def test_bad_options() -> None:
    with pytest.raises(ConfigError):
        AccSource(password="x" * 256)
    with pytest.raises(ConfigError):
        AccSource(display_name="")
    with pytest.raises(ConfigError):
        AccSource(update_interval_ms=0)
    with pytest.raises(ConfigError):
        AccSource(register_interval_s=2.0, register_interval_max_s=1.0)
