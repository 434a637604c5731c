"""Sending over a real loopback UDP socket; pacing checked with an injected clock (no sleeping)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from wrtfd.simulate import Simulation, TrackInfo, make_encoder, parse_address, send_session
from wrtfd.tracks import LanePath, load_track

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "tracks"


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_pacing_follows_rate_and_scale_and_everything_arrives() -> None:
    track = load_track(SHIPPED / "kart.trk")
    path = LanePath(track)
    sim = Simulation(path, laps=1, rate_hz=50.0, seed=0)
    enc = make_encoder("forza", TrackInfo(track.name, path.length_m, (0.0,), 1))
    clock = FakeClock()
    with (
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx,
    ):
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 * 1024 * 1024)
        rx.bind(("127.0.0.1", 0))
        rx.settimeout(2.0)
        stats = send_session(
            sim.states(),
            enc,
            tx,
            rx.getsockname(),
            rate_hz=50.0,
            speed_scale=4.0,
            clock=clock,
            sleep=clock.sleep,
        )
        got = []
        rx.settimeout(0.5)
        try:
            while True:
                got.append(rx.recv(2048))
        except TimeoutError:
            pass
    assert stats.ticks > 100 and stats.datagrams == stats.ticks  # forza: one datagram per tick
    assert len(got) == stats.datagrams and all(len(d) == 331 for d in got)
    # the last tick is due (ticks - 1) periods after the first, in real (scaled) time
    assert clock.now - 100.0 == pytest.approx((stats.ticks - 1) / (50.0 * 4.0), abs=1e-9)
    assert stats.late_ticks == 0 and stats.max_late_s == 0.0


def test_late_ticks_are_sent_at_once() -> None:
    track = load_track(SHIPPED / "kart.trk")
    path = LanePath(track)
    sim = Simulation(path, laps=1, rate_hz=60.0)
    enc = make_encoder("outgauge", TrackInfo(track.name, path.length_m, (0.0,), 1))
    clock = FakeClock()

    def slow_clock() -> float:
        clock.now += 0.05  # every look at the clock costs 50 ms: always behind
        return clock.now

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        stats = send_session(
            sim.states(), enc, tx, ("127.0.0.1", 9), rate_hz=60.0, clock=slow_clock, sleep=clock.sleep
        )
    assert clock.slept == [] and stats.late_ticks > stats.ticks - 5
    # each tick is 50 ms later than the one before it: the last is the latest
    late_by = 0.05 * stats.ticks - (stats.ticks - 1) / 60.0
    assert stats.max_late_s == pytest.approx(late_by, rel=0.05)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:5301", ("127.0.0.1", 5301)),
        ("[::1]:20777", ("::1", 20777)),
        ("localhost:1", ("localhost", 1)),
    ],
)
def test_parse_address(text: str, expected: tuple[str, int]) -> None:
    assert parse_address(text) == expected


@pytest.mark.parametrize("text", ["127.0.0.1", ":5301", "host:0", "host:70000", "host:x"])
def test_parse_address_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_address(text)
