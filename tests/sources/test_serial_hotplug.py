"""Unplug, replug, silence and hostile bytes on a real pty: the source recovers and says so.

The device path is a symlink in a temp dir standing in for ``/dev/serial/by-id/...``: after an
"unplug" (closing the pty's master side, which makes the reader's next read fail with EIO) a
new pty is created and the link is pointed at it, as udev does when the adapter comes back as
another ``ttyUSBn``. Recording continues in the same session: the source resets its framer and
decoder and keeps handing samples to the same sink (see ``wrtfd/sources/serial.py``).
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from pathlib import Path

import anyio
import pytest

from tests.sources.serial_pty import PtyDevice, Responder, wait_until
from wrtfd.decoders.base import Sample
from wrtfd.decoders.nmea import NmeaDecoder, nmea_checksum
from wrtfd.decoders.slcan import SlcanDecoder
from wrtfd.errors import SourceError
from wrtfd.sources.base import SinkFull, SourceState
from wrtfd.sources.serial import SerialLineSource, SerialLink, SerialSettings
from wrtfd.sources.slcan import SlcanSource

DBC = """VERSION ""
BS_:
BU_: ECU
BO_ 256 ENGINE: 3 ECU
 SG_ RPM : 0|16@1+ (1,0) [0|16000] "rpm" ECU
 SG_ TPS : 16|8@1+ (0.5,0) [0|100] "%" ECU
"""


def nmea(body: str) -> bytes:
    return b"$%s*%02X\r\n" % (body.encode(), nmea_checksum(body.encode()))


def rmc(hhmmss: str, lat: str) -> bytes:
    return nmea(f"GPRMC,{hhmmss}.00,A,{lat},N,00730.0000,E,10.0,90.0,210325,,,A")


def point(link: Path, device: PtyDevice) -> None:
    """Atomically (re)point the by-id style link at a device node."""
    tmp = link.with_suffix(".new")
    os.symlink(device.path, tmp)
    os.replace(tmp, link)


async def test_unplug_replug_follows_symlink(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="wrtfd.sources.serial")
    link = tmp_path / "usb-u-blox_GNSS_receiver-if00"
    first = PtyDevice()
    point(link, first)
    settings = SerialSettings(path=str(link), baudrate=9600, reopen_min_s=0.05, reopen_max_s=0.2)
    source = SerialLineSource("gps", settings, NmeaDecoder())
    samples: list[Sample] = []
    second: PtyDevice | None = None
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(source.run, samples.append)
            await wait_until(lambda: source.stats.state is SourceState.LISTENING, timeout_s=5, what="open")
            first.write_paced(rmc("120000", "4700.0000") + rmc("120001", "4700.0010")[:30], baud=9600)
            await wait_until(lambda: len(samples) == 1, timeout_s=5, what="first fix")

            first.close()  # unplugged mid-sentence
            await wait_until(
                lambda: source.stats.state is SourceState.RECONNECTING, timeout_s=5, what="loss noticed"
            )
            second = PtyDevice()
            point(link, second)
            await wait_until(lambda: source.stats.state is SourceState.LISTENING, timeout_s=5, what="reopen")
            second.write_paced(rmc("120005", "4700.0050"), baud=9600)
            await wait_until(lambda: len(samples) == 2, timeout_s=5, what="fix after replug")
            tg.cancel_scope.cancel()
    finally:
        first.close()
        if second is not None:
            second.close()

    assert [round(s.values["lat_deg"], 6) for s in samples] == [47.0, round(47 + 0.005 / 60, 6)]
    # The half sentence before the unplug did not leak into the new stream.
    assert source.stats.dropped.total() == 0
    assert source.stats.restarts == 1
    assert source.stats.state is SourceState.STOPPED
    messages = [r.getMessage() for r in caplog.records if r.name == "wrtfd.sources.serial"]
    states = [m.split(": ")[1].split(" ")[0] for m in messages]
    assert states == ["listening", "receiving", "reconnecting", "listening", "receiving", "stopped"]
    assert any("device lost" in m for m in messages)
    # Nothing escaped into the event loop's exception handler (asyncio logs those as errors).
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_missing_device_is_retried_until_it_appears(tmp_path: Path) -> None:
    link = tmp_path / "gps"
    settings = SerialSettings(path=str(link), reopen_min_s=0.02, reopen_max_s=0.1)
    source = SerialLineSource("gps", settings, NmeaDecoder())
    samples: list[Sample] = []
    device = PtyDevice()
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(source.run, samples.append)  # starts although the device is absent
            assert source.stats.state is SourceState.RECONNECTING
            assert "no such device" in source.stats.state_detail
            point(link, device)
            await wait_until(lambda: source.stats.state is SourceState.LISTENING, timeout_s=5, what="open")
            device.write_all(rmc("080000", "4500.0000"))
            await wait_until(lambda: len(samples) == 1, timeout_s=5, what="a fix")
            tg.cancel_scope.cancel()
    finally:
        device.close()
    assert source.stats.restarts == 0  # retries of a failed open are not restarts of a session


async def test_silent_device_is_reopened_after_idle_timeout(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="wrtfd.sources.serial")
    device = PtyDevice()
    settings = SerialSettings(path=device.path, idle_timeout_s=0.3, reopen_min_s=0.02)
    source = SerialLineSource("gps", settings, NmeaDecoder())
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(source.run, lambda s: None)
            device.write_all(rmc("080000", "4500.0000"))
            await wait_until(lambda: source.stats.restarts >= 1, timeout_s=5, what="idle timeout")
            tg.cancel_scope.cancel()
    finally:
        device.close()
    assert source.stats.samples == 1
    assert any("device lost (no data for 0.3 s)" in r.getMessage() for r in caplog.records)


async def test_slcan_replug_sends_open_sequence_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dbc = tmp_path / "engine.dbc"
    dbc.write_text(DBC)
    link = tmp_path / "usb-CANable-if00"
    devices = [PtyDevice(), PtyDevice()]
    responders = [Responder(d, lambda c: b"\r") for d in devices]
    for r in responders:
        r.start()
    point(link, devices[0])
    source = SlcanSource(
        "can",
        SerialSettings(path=str(link), reopen_min_s=0.05),
        SlcanDecoder(dbc=dbc),
        bitrate=1_000_000,
        listen_only=True,
        command_gap_s=0.005,
    )
    samples: list[Sample] = []
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(source.run, samples.append)
            await wait_until(lambda: b"L" in responders[0].commands, timeout_s=5, what="open #1")
            devices[0].write_all(b"t1003D007C8\r")  # RPM 2000, TPS 100 %
            await wait_until(lambda: len(samples) == 1, timeout_s=5, what="frame #1")
            devices[0].close()
            point(link, devices[1])
            await wait_until(lambda: b"L" in responders[1].commands, timeout_s=5, what="open #2")
            devices[1].write_all(b"t1003B80B00\r")  # RPM 3000, TPS 0 %
            await wait_until(lambda: len(samples) == 2, timeout_s=5, what="frame #2")
            tg.cancel_scope.cancel()
        # A deliberate stop closes the CAN channel.
        await wait_until(lambda: responders[1].commands[-1:] == [b"C"], timeout_s=5, what="C on stop")
    finally:
        for d, r in zip(devices, responders, strict=True):
            r.stop.set()
            d.close()
            r.join()
    sequence = [b"", b"", b"", b"C", b"S8", b"L"]
    assert responders[0].commands == sequence  # closed by the unplug: no C could be sent
    assert responders[1].commands[: len(sequence)] == sequence
    assert [dict(s.values) for s in samples] == [{"rpm": 2000, "tps": 100.0}, {"rpm": 3000, "tps": 0.0}]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_hostile_bytes_are_counted_by_reason() -> None:
    device = PtyDevice()
    settings = SerialSettings(path=device.path, max_line_bytes=120)
    source = SerialLineSource("gps", settings, NmeaDecoder())
    samples: list[Sample] = []
    good = rmc("101010", "4800.0000")
    bad_checksum = good.replace(b"*", b"0*", 1)
    stream = (
        b"\x00\xff\xfe garbage\r\n"  # not NMEA
        + b"$GPRMC,"
        + b"9" * 5000
        + b"\r\n"  # over-long: dropped whole, framer resyncs
        + bad_checksum
        + nmea("GPTXT,01,01,02,ANTENNA OK")  # valid but unused
        + b"$GP\xc3\xa9RMC*00\r\n"
        + good
    )
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(source.run, samples.append)
            device.write_paced(stream, baud=115200)
            await wait_until(lambda: source.stats.bytes >= len(stream), timeout_s=5, what="all bytes")
            tg.cancel_scope.cancel()
    finally:
        device.close()
    assert source.stats.dropped.as_dict() == {
        "not_nmea": 1,
        "line_too_long": 1,
        "bad_checksum": 2,
        "unknown_sentence": 1,
    }
    assert len(samples) == 1 and not math.isnan(samples[0].values["lat_deg"])
    assert source.framer.pending_bytes == 0


async def test_full_sink_is_counted_and_a_broken_sink_fails_loudly() -> None:
    device = PtyDevice()
    source = SerialLineSource("gps", SerialSettings(path=device.path), NmeaDecoder())

    def full_sink(sample: Sample) -> None:
        raise SinkFull

    try:
        async with anyio.create_task_group() as tg:
            await tg.start(source.run, full_sink)
            device.write_all(rmc("101010", "4800.0000") * 3)
            await wait_until(lambda: source.stats.received == 3, timeout_s=5, what="3 lines")
            tg.cancel_scope.cancel()
    finally:
        device.close()
    assert source.stats.dropped.as_dict() == {"queue_full": 3}
    assert source.stats.samples == 0

    device = PtyDevice()
    source = SerialLineSource("gps", SerialSettings(path=device.path), NmeaDecoder())

    def broken_sink(sample: Sample) -> None:
        raise RuntimeError("recorder bug")

    def plug_in_later() -> None:
        while source.stats.state is not SourceState.LISTENING:
            time.sleep(0.01)
        device.write_all(rmc("101010", "4800.0000"))

    feeder = threading.Thread(target=plug_in_later, daemon=True)
    feeder.start()
    try:
        with anyio.fail_after(10), pytest.raises(SourceError, match="recorder bug"):
            await source.run(broken_sink)
    finally:
        feeder.join()
        device.close()
    assert source.stats.state is SourceState.FAILED


async def test_close_aborts_when_the_device_takes_no_more_bytes() -> None:
    """A wedged device (nobody drains the pty) must not keep the handle open on close."""
    device = PtyDevice()
    received: list[bytes] = []
    try:
        link = await SerialLink.open(SerialSettings(path=device.path), received.append)
        link.write(b"x" * 1_000_000)  # far more than the pty buffer: the rest waits in the transport
        assert not link.closed
        await link.aclose(flush_timeout_s=0.2)
        assert link.closed
    finally:
        device.close()
