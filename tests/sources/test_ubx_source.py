"""The u-blox source against a simulated receiver on a real pty (the simulator in a thread).

The simulator plays the UART by the line's termios rate, so the baud probe, the switch to a
higher rate and the configured measurement rate are all real: the samples' receiver clock shows
the rate reached, the simulator's own log shows what it was asked and what it answered.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import numpy as np
import pytest

from tests.sources.serial_pty import PtyDevice, wait_until
from wrtfd.decoders.base import Sample
from wrtfd.decoders.ubx import UbxDecoder
from wrtfd.simulate.gnss import Drive, GnssErrors, UbxReceiver, nav_pvt_frame
from wrtfd.simulate.gnss_pty import GnssPty
from wrtfd.sources.serial import SerialSettings
from wrtfd.sources.ubx import UbxSource
from wrtfd.tracks import LanePath, load_track
from wrtfd.tracks.geodesy import track_plane

ROAD = Path(__file__).resolve().parents[2] / "config" / "tracks" / "road.trk"
UTC0 = 1_780_000_000 * 1_000_000_000


@pytest.fixture(scope="module")
def drive() -> Drive:
    track = load_track(ROAD)
    plane = track_plane(track.extensions)
    assert plane is not None
    return Drive(LanePath(track, 0), plane, laps=1, seed=3)


class Simulated:
    def __init__(self, drive: Drive, generation: str, refuse: frozenset[str] = frozenset()) -> None:
        self.receiver = UbxReceiver(generation=generation, baud=9600, refuse=refuse)
        self.pty = GnssPty(
            drive, GnssErrors(seed=1), receiver=self.receiver, utc_start_ns=UTC0, speed_scale=1.0, hold_s=0.0
        )
        self.thread = threading.Thread(target=self.pty.run, kwargs={"wait_s": 60.0}, daemon=True)

    def __enter__(self) -> Simulated:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.pty.stop()
        self.thread.join(timeout=10)
        self.pty.close()


def _source(path: str, **options: object) -> UbxSource:
    """The source under test; its waits for an answer are 3 s unless a test sets them: the
    simulated receiver answers from a thread of the test's process, which a machine busy with
    the rest of the suite can hold up longer than the defaults' 1 s (seen: no answer to MON-VER)."""
    settings = SerialSettings(path=path, baudrate=38400, reopen_min_s=0.05, reopen_max_s=0.2)
    options = {"probe_timeout_s": 3.0, "ack_timeout_s": 3.0, **options}
    return UbxSource("gps", settings, UbxDecoder(), **options)  # type: ignore[arg-type]


async def _record(source: UbxSource, until: int, what: str) -> list[Sample]:
    """Samples until ``until`` have come after the set-up ended."""
    got: list[Sample] = []
    async with anyio.create_task_group() as tg:
        await tg.start(source.run, got.append)
        await wait_until(lambda: source.set_up, timeout_s=30, what="the set-up to end")
        after = len(got)
        await wait_until(lambda: len(got) >= after + until, timeout_s=30, what=what)
        tg.cancel_scope.cancel()
    return got


def _periods_ms(samples: list[Sample], last: int) -> set[float]:
    times = np.array([s.source_time_ns for s in samples[-last:]], dtype=np.int64)
    return {round(float(d) / 1e6, 3) for d in np.diff(times)}


async def test_m10_set_up_with_valset_at_25_hz_and_a_faster_uart(drive: Drive) -> None:
    with Simulated(drive, "m10") as sim:
        source = _source(sim.pty.path, rate_hz=25, baud=115200, nmea_off=True)
        got = await _record(source, 60, "25 Hz NAV-PVT")
    assert source.receiver is not None and source.receiver.module == "MAX-M10S"
    assert [result for _, result in source.steps] == ["ack"] * 6
    assert sim.pty.stats.baud_changes == [115200]
    assert source.current_baud == 115200
    assert sim.receiver.baud == 115200
    assert (sim.receiver.meas_ms, sim.receiver.nav_pvt, sim.receiver.nmea, sim.receiver.dyn_model) == (
        40,
        True,
        False,
        4,
    )
    # the simulator was asked in CFG-VALSET only, and took each key
    assert {what.split()[0] for what, _ in sim.pty.stats.commands} == {"CFG-VALSET"}
    assert _periods_ms(got, 30) == {40.0}
    assert source.stats.problems == []
    assert source.stats.dropped.total() == 0  # the noise read at 38400 baud while probing is not counted


async def test_m8_refuses_25_hz_one_line_and_recording_goes_on(
    drive: Drive, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="wrtfd.sources.ubx")
    with Simulated(drive, "m8") as sim:
        source = _source(sim.pty.path, rate_hz=25)
        got = await _record(source, 4, "NAV-PVT at the receiver's own rate")
    assert source.receiver is not None and not source.receiver.valset
    assert source.steps == [
        ("CFG-RATE 25 Hz", "nak"),
        ("CFG-MSG NAV-PVT on", "ack"),
        ("CFG-NAV5 automotive", "ack"),
    ]
    assert [c for c, _ in sim.pty.stats.commands] == ["CFG-RATE", "CFG-MSG", "CFG-NAV5"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "refused CFG-RATE 25 Hz (NAK)" in warnings[0]
    assert source.stats.problems == ["M8 or older refused CFG-RATE 25 Hz (NAK); recording what it sends"]
    assert source.stats.snapshot()["problems"] == source.stats.problems
    assert _periods_ms(got, 3) == {1000.0}  # the out-of-box rate
    assert all(s.values["fix_mode"] == 3 for s in got)


async def test_m8_legacy_set_up_with_a_baud_change(drive: Drive) -> None:
    with Simulated(drive, "m8") as sim:
        source = _source(sim.pty.path, rate_hz=10, baud=230400, nmea_off=True)
        got = await _record(source, 25, "10 Hz NAV-PVT")
    assert [r for _, r in source.steps] == ["ack"] * 4
    assert source.steps[-1][0] == "CFG-PRT NMEA off 230400 baud"
    assert sim.pty.stats.baud_changes == [230400] and source.current_baud == 230400
    assert _periods_ms(got, 15) == {100.0}


async def test_m10_refusal_of_a_key_is_one_problem(drive: Drive) -> None:
    with Simulated(drive, "m10", refuse=frozenset({"CFG_NAVSPG_DYNMODEL"})) as sim:
        # 20 Hz of NAV-PVT (100 B each) does not fit 9600 baud (960 B/s): the UART goes faster
        source = _source(sim.pty.path, rate_hz=20, baud=115200)
        got = await _record(source, 30, "20 Hz NAV-PVT")
    assert ("CFG-VALSET CFG_NAVSPG_DYNMODEL=4", "nak") in source.steps
    assert sum(1 for _, r in source.steps if r == "nak") == 1
    assert len(source.stats.problems) == 1
    assert sim.receiver.dyn_model == 0
    assert _periods_ms(got, 15) == {50.0}
    assert source.rate_reached_hz is not None and source.rate_reached_hz > 16


@pytest.fixture
def deaf() -> Iterator[PtyDevice]:
    device = PtyDevice()
    yield device
    device.close()


async def test_a_receiver_that_never_answers_is_recorded_anyway(drive: Drive, deaf: PtyDevice) -> None:
    errors = GnssErrors(seed=2)
    frames = [nav_pvt_frame(errors.fix(drive, i * 0.2, UTC0 + i * 200_000_000)) for i in range(200)]
    source = _source(deaf.path, probe_bauds=(9600,), probe_timeout_s=0.2)
    stop = threading.Event()

    def talk() -> None:  # sends at 38400 (the source's first rate), answers nothing
        for frame in frames:
            if stop.is_set():
                return
            deaf.write_all(frame)
            stop.wait(0.02)

    writer = threading.Thread(target=talk, daemon=True)
    writer.start()
    try:
        got = await _record(source, 10, "NAV-PVT from a receiver that does not answer")
    finally:
        stop.set()
        writer.join(timeout=5)
    assert source.receiver is None and source.steps == []
    assert len(source.stats.problems) == 1
    assert source.stats.problems[0].startswith("no answer to MON-VER at 38400, 9600 baud")
    assert source.current_baud == 38400
    assert len(got) >= 10


async def test_a_rate_the_uart_cannot_carry_is_a_problem(drive: Drive) -> None:
    with Simulated(drive, "m10") as sim:
        # 20 Hz of NAV-PVT (2,000 B/s) and NMEA at 9600 baud (960 B/s): the receiver drops epochs
        source = _source(sim.pty.path, rate_hz=20, rate_check_s=2.0)
        await _record(source, 3, "NAV-PVT")
    assert [r for _, r in source.steps] == ["ack"] * 4
    assert sim.pty.stats.overflow_epochs > 0
    assert source.rate_reached_hz is not None and source.rate_reached_hz < 16
    (problem,) = source.stats.problems
    assert problem.startswith(f"NAV-PVT at {source.rate_reached_hz:.1f} Hz, 20 Hz asked (9600 baud carries")


class _Deaf(UbxReceiver):
    """A receiver that sends NAV-PVT but ignores every command (UBX input switched off)."""

    def handle(self, frame: bytes) -> bytes:
        return b""


async def test_no_answer_records_at_the_rate_the_receiver_talks(drive: Drive) -> None:
    receiver = _Deaf(generation="m10", baud=9600, nav_pvt=True, nmea=False)
    pty = GnssPty(drive, GnssErrors(seed=1), receiver=receiver, utc_start_ns=UTC0, hold_s=0.0)
    thread = threading.Thread(target=pty.run, kwargs={"wait_s": 60.0}, daemon=True)
    thread.start()
    try:
        source = _source(pty.path, probe_bauds=(115200, 9600, 230400), probe_timeout_s=1.2)
        got = await _record(source, 2, "NAV-PVT at 9600 baud")
    finally:
        pty.stop()
        thread.join(timeout=10)
        pty.close()
    assert source.receiver is None
    assert source.current_baud == 9600  # not 38400, the first rate tried: only 9600 made sense
    (problem,) = source.stats.problems
    assert problem == (
        "no answer to MON-VER at 38400, 115200, 9600, 230400 baud:"
        " not set up, recording what it sends at 9600 baud"
    )
    assert all(s.values["message"] == 1 for s in got)


class _Stubborn(UbxReceiver):
    """ACKs a baud change and stays at its rate (a baud change taken but lost)."""

    def handle(self, frame: bytes) -> bytes:
        reply = UbxReceiver.handle(self, frame)
        self.pending_baud = None
        return reply


async def test_a_baud_change_the_receiver_does_not_make_is_one_problem(drive: Drive) -> None:
    receiver = _Stubborn(generation="m10", baud=9600)
    pty = GnssPty(drive, GnssErrors(seed=1), receiver=receiver, utc_start_ns=UTC0, hold_s=0.0)
    thread = threading.Thread(target=pty.run, kwargs={"wait_s": 60.0}, daemon=True)
    thread.start()
    try:
        source = _source(pty.path, rate_hz=5, baud=115200, nmea_off=True, probe_timeout_s=0.5)
        got = await _record(source, 10, "NAV-PVT at 9600 baud after the refused switch")
    finally:
        pty.stop()
        thread.join(timeout=10)
        pty.close()
    assert source.steps[-1] == ("CFG-VALSET CFG_UART1_BAUDRATE=115200", "stayed")
    assert source.current_baud == 9600 and pty.stats.baud_changes == []
    assert source.stats.problems == [
        "MAX-M10S is not at 115200 baud after CFG-VALSET CFG_UART1_BAUDRATE=115200: still at 9600 baud"
    ]
    assert _periods_ms(got, 8) == {200.0}
