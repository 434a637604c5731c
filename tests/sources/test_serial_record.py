"""GPS over a pty into a real WRTF file, with an unplug/replug in the middle.

A 10 Hz receiver is played at its own pace: 20 epochs (RMC + GGA), the device is unplugged
after epoch 10 and comes back as a new pty behind the same by-id style symlink. The live
recorder writes the file; reading it back shows every epoch's position in one session: the
serial source keeps feeding the same sink across the reconnect, and the outage (well under the
recorder's ``session_idle_s``) does not split the session.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import anyio
import numpy as np

from tests.sources.serial_pty import PtyDevice, wait_until
from wrtfd.decoders.nmea import NmeaDecoder, nmea_checksum
from wrtfd.format import Reader
from wrtfd.recorder import LiveRecorder, RecorderPolicy, SourceSpec
from wrtfd.sources.base import SourceState
from wrtfd.sources.serial import SerialLineSource, SerialSettings


def nmea(body: str) -> bytes:
    return b"$%s*%02X\r\n" % (body.encode(), nmea_checksum(body.encode()))


def epoch(i: int) -> tuple[float, bytes]:
    """Epoch i at 10 Hz: 12:00:00.0 + i/10 s, latitude 47 deg + i milli-minutes."""
    tenths = i
    clock = f"1200{tenths // 10:02d}.{tenths % 10}0"
    lat = f"4700.{i:03d}0"
    data = nmea(f"GNRMC,{clock},A,{lat},N,00800.0000,E,20.0,45.0,210325,,,A") + nmea(
        f"GNGGA,{clock},{lat},N,00800.0000,E,1,12,0.8,420.0,M,47.0,M,,"
    )
    return i * 0.1, data


def lat_of(i: int) -> float:
    return 47 + i / 1000 / 60


def point(link: Path, device: PtyDevice) -> None:
    tmp = link.with_suffix(".new")
    os.symlink(device.path, tmp)
    os.replace(tmp, link)


async def test_record_gps_across_a_replug(tmp_path: Path) -> None:
    decoder = NmeaDecoder()
    link = tmp_path / "usb-GPS-if00"
    devices = [PtyDevice()]
    point(link, devices[0])
    source = SerialLineSource(
        "gps", SerialSettings(path=str(link), baudrate=115200, reopen_min_s=0.05, reopen_max_s=0.1), decoder
    )
    live = LiveRecorder(
        [SourceSpec(name="gps", definition=decoder.definition)],
        RecorderPolicy(output_dir=tmp_path / "out", rate_hz=20, session_idle_s=5.0),
    )
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(live.run)
            await tg.start(source.run, live.sink)
            await wait_until(lambda: source.stats.state is SourceState.LISTENING, timeout_s=5, what="open")
            first_half = [epoch(i) for i in range(10)]
            await anyio.to_thread.run_sync(lambda: devices[0].write_timed(first_half))
            await wait_until(lambda: source.stats.samples == 20, timeout_s=5, what="first half")
            devices[0].close()
            devices.append(PtyDevice())
            point(link, devices[1])
            await wait_until(lambda: source.stats.state is SourceState.LISTENING, timeout_s=5, what="reopen")
            second_half = [(t - 1.0, data) for t, data in (epoch(i) for i in range(10, 20))]
            await anyio.to_thread.run_sync(lambda: devices[1].write_timed(second_half))
            await wait_until(lambda: source.stats.samples == 40, timeout_s=5, what="second half")
            await live.stop()
            tg.cancel_scope.cancel()
    finally:
        for device in devices:
            device.close()

    assert source.stats.restarts == 1
    (path,) = (tmp_path / "out").rglob("*.wrtf")
    with Reader(path) as reader:
        assert len(reader.sessions) == 1
        frames = reader.frames(0)
        gps = frames["gps"]
        lats = gps["lat_deg"]
        recorded = {round(float(x), 9) for x in lats if not math.isnan(x)}
        assert recorded == {round(lat_of(i), 9) for i in range(20)}
        times_us = gps["fix_time_utc_us"]
        assert np.all(np.diff(times_us.astype(np.int64)) >= 0)
        assert int(times_us[-1]) == 1742558400_000000 + 1_900_000  # 2025-03-21 12:00:01.9 UTC
        assert set(gps["fix_mode"].tolist()) == {3}
