"""The simulated GT7 console on loopback sockets, on a fake clock: it streams only after a
heartbeat it understands, to that heartbeat's sender, in the variant of the first heartbeat of
the stream, and stops when heartbeats stop. Its packets decrypt with wrtfd's decoder (written
independently from the same protocol notes) to the simulated car."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from wrtfd.decoders.gt7 import Gt7Decoder
from wrtfd.simulate import Simulation, TrackInfo
from wrtfd.simulate.gt7 import GT7_LETTERS, Gt7Console, Gt7Encoder, seal
from wrtfd.tracks import LanePath, load_track, timing_sectors

OVAL = Path(__file__).resolve().parents[2] / "config" / "tracks" / "oval.trk"


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


@pytest.fixture
def sim() -> tuple[TrackInfo, Simulation]:
    track = load_track(OVAL)
    path = LanePath(track)
    sectors = timing_sectors(track, path)
    return TrackInfo(track.name, path.length_m, sectors, 1), Simulation(
        path, laps=1, seed=4, sectors_m=sectors
    )


def pair() -> tuple[socket.socket, socket.socket]:
    console = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    console.bind(("127.0.0.1", 0))
    console.setblocking(False)
    client = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    client.bind(("127.0.0.1", 0))
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    client.setblocking(False)
    return console, client


def received(client: socket.socket) -> list[bytes]:
    out = []
    while True:
        try:
            out.append(client.recv(2048))
        except BlockingIOError:
            return out


def test_first_heartbeat_sets_the_variant_and_the_stream_stops_without_heartbeats(
    sim: tuple[TrackInfo, Simulation],
) -> None:
    info, simulation = sim
    t = FakeTime()
    console_sock, client = pair()
    with console_sock, client:
        address = console_sock.getsockname()
        console = Gt7Console(
            Gt7Encoder(info), console_sock, understands="AB", timeout_s=1.0, clock=t.clock, sleep=t.sleep
        )
        assert not console.wait_first(0.5)  # nobody asked
        client.sendto(b"C", address)  # not understood by this console
        client.sendto(b"B", address)
        client.sendto(b"A", address)  # too late: the stream is B
        assert console.wait_first(0.5)
        assert console.client == client.getsockname()  # streams to the heartbeat's sender
        states = list(simulation.states())[:300]  # 5 s at 60 Hz, no heartbeat after the first ones
        stats = console.serve(states, rate_hz=60.0)
        packets = received(client)
    assert console.client is None  # the heartbeats stopped: so did the stream
    assert stats.streams == ["B"] and stats.heartbeats == 3 and stats.ignored_heartbeats == 1
    assert stats.ticks == 300
    assert 55 <= stats.datagrams <= 62  # about 1 s of ticks until the timeout
    assert stats.unsent_ticks == 300 - stats.datagrams
    assert len(packets) == stats.datagrams and {len(p) for p in packets} == {GT7_LETTERS["B"][0]}
    dec = Gt7Decoder()
    decoded = [dec.decode(p).values for p in packets]
    ids = [v["packet_id"] for v in decoded]
    assert ids == list(range(ids[0], ids[0] + len(ids)))


def test_packets_decode_to_the_simulated_car(sim: tuple[TrackInfo, Simulation]) -> None:
    info, simulation = sim
    for letter in GT7_LETTERS:
        enc = Gt7Encoder(info, letter=letter, seed=1)
        dec = Gt7Decoder()
        for i, state in enumerate(simulation.states()):
            if i % 50:
                continue
            (packet,) = enc.encode(state, first=False, last=False)
            d = dec.decode(packet)
            v = d.values
            assert v["on_track"] == state.racing and d.source_time_ns == v["packet_id"] * 10**9 // 60
            assert v["packet_size"] == GT7_LETTERS[letter][0] == len(packet)
            if state.racing:
                assert (v["position_x"], v["position_z"]) == pytest.approx((state.x, state.z), abs=1e-3)
                assert v["speed"] == pytest.approx(state.speed_mps, rel=1e-6)
                assert v["gear"] == state.gear and v["lap_count"] == state.lap
                assert v["throttle"] == round(state.throttle * 255)
                best = round(state.best_lap_s * 1000) if state.best_lap_s else -1
                assert v["best_lap_ms"] == best
            else:
                assert v["position_x"] == 0.0 and v["speed"] == 0.0


def test_seal_refuses_a_wrong_size() -> None:
    with pytest.raises(ValueError, match="296"):
        seal(bytes(300), "A", 1)
