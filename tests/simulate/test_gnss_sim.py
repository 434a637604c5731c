"""The simulated GNSS receiver: the car on the map, its errors, its messages, its answers.

Oracles: pyubx2 reads the simulator's NAV-PVT and pynmeagps (through the NMEA decoder) its
sentences; pyproj (LocalPlane.to_xy) takes the positions back to the track plane, where they
must lie on the lane the car drives; the car's own Simulation gives the true laps.
"""

from __future__ import annotations

import functools
import json
import math
import operator
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import serial
from pyubx2 import SET, UBXMessage, UBXReader

from wrtfd.decoders.nmea import NmeaDecoder
from wrtfd.decoders.ubx import ACK_ACK, ACK_NAK, UbxFramer
from wrtfd.simulate.car import Simulation
from wrtfd.simulate.gnss import (
    Drive,
    Fix,
    GnssErrors,
    UbxReceiver,
    epochs,
    nav_pvt_frame,
    nmea_epoch,
    truth_laps,
)
from wrtfd.simulate.gnss_pty import GnssPty
from wrtfd.tracks import LanePath, load_track, timing_sectors
from wrtfd.tracks.geodesy import track_plane

REPO = Path(__file__).resolve().parents[2]
ROAD = REPO / "config" / "tracks" / "road.trk"
UTC0 = 1_780_000_000 * 1_000_000_000


@pytest.fixture(scope="module")
def road() -> tuple[LanePath, Drive, tuple[float, ...]]:
    track = load_track(ROAD)
    plane = track_plane(track.extensions)
    assert plane is not None
    path = LanePath(track, 0)
    sectors = timing_sectors(track, path)
    return path, Drive(path, plane, laps=2, seed=7, sectors_m=sectors), sectors


def test_true_laps_are_the_car_simulations(road: tuple[LanePath, Drive, tuple[float, ...]]) -> None:
    path, drive, sectors = road
    sim = Simulation(path, laps=2, rate_hz=200.0, seed=7, sectors_m=sectors, pre_start_s=0.0)
    list(sim.states())
    assert drive.laps == sim.laps
    assert len(drive.laps) == 2
    assert all(len(lap.sector_times_s) == len(sectors) for lap in drive.laps)
    # at each true crossing time the car is on the start line (the lane's point at distance 0)
    x0, _, z0 = path.point_at(0.0)
    for lap in drive.laps:
        for t in (lap.start_s, lap.end_s):
            x, z, *_ = drive.at(t)
            assert math.hypot(x - x0, z - z0) < 0.01


def test_positions_lie_on_the_lane_without_noise(road: tuple[LanePath, Drive, tuple[float, ...]]) -> None:
    path, drive, _ = road
    errors = GnssErrors(seed=1, noise_m=0.0)
    xs, zs = [], []
    for t in np.arange(0.0, drive.end_s, 0.37):
        fix = errors.fix(drive, float(t), UTC0)
        x, z = drive.plane.to_xy(fix.lat_deg, fix.lon_deg)
        xs.append(x)
        zs.append(z)
    _, _, gap = path.project_many(xs, zs)
    assert float(np.max(gap)) < 0.05  # on the lane (the chords of 5 ms ticks on arcs, at most)


def test_velocity_is_that_of_the_positions(road: tuple[LanePath, Drive, tuple[float, ...]]) -> None:
    """A receiver's velocity is the horizontal one: its ground speed over the drive adds up to
    the ground distance between its positions (the car's speed is along its climbing path, 0.03 %
    longer on road.trk; a filter trusting the velocity over tens of seconds would lag by that)."""
    _, drive, _ = road
    errors = GnssErrors(seed=1, noise_m=0.0)
    fixes = [errors.fix(drive, float(t), UTC0) for t in np.arange(0.0, drive.end_s, 0.04)]
    x, z = drive.plane.to_xy(np.array([f.lat_deg for f in fixes]), np.array([f.lon_deg for f in fixes]))
    ground = float(np.sum(np.hypot(np.diff(x), np.diff(z))))
    speed = np.array([f.speed_mps for f in fixes])
    travelled = float(np.sum(0.5 * (speed[1:] + speed[:-1]) * 0.04))
    assert ground > 2000.0
    assert travelled == pytest.approx(ground, rel=1e-4)
    east = np.array([f.vel_e_mps for f in fixes])
    north = np.array([f.vel_n_mps for f in fixes])
    assert np.allclose(np.hypot(east, north), speed)


def test_noise_is_seeded_and_of_the_asked_size() -> None:
    a = GnssErrors(seed=3, noise_m=2.0, tau_s=1.0)
    b = GnssErrors(seed=3, noise_m=2.0, tau_s=1.0)
    steps_a = [a.step(i * 0.1) for i in range(4000)]
    assert steps_a == [b.step(i * 0.1) for i in range(4000)]
    east = np.array([s[0] for s in steps_a])
    north = np.array([s[1] for s in steps_a])
    # 400 s with a 1 s time constant: about 200 independent samples per axis
    assert 1.6 < east.std() < 2.4 and 1.6 < north.std() < 2.4
    assert {s[3] for s in steps_a} == {3}  # no dropouts, no degradation unless asked


def test_dropouts_and_degradation_when_asked() -> None:
    errors = GnssErrors(seed=5, noise_m=1.0, dropouts_per_min=4.0, degraded_per_min=4.0)
    steps = [errors.step(i * 0.1) for i in range(6000)]  # 10 minutes
    kinds = [s[3] for s in steps]
    assert kinds.count(0) > 50 and kinds.count(2) > 100 and kinds.count(3) > 3000
    assert all(s[4] <= 3 for s in steps if s[3] == 0)
    assert all(4 <= s[4] <= 6 for s in steps if s[3] == 2)


def _fix(**over: float) -> Fix:
    values: dict[str, object] = {
        "utc_ns": UTC0 + 123_400_000,
        "fix_type": 3,
        "fix_ok": True,
        "lat_deg": 44.9012345,
        "lon_deg": -2.5012345,
        "height_m": 350.25,
        "alt_msl_m": 302.25,
        "speed_mps": 31.5,
        "course_deg": 271.25,
        "vel_n_mps": 0.69,
        "vel_e_mps": -31.49,
        "vel_d_mps": 0.12,
        "satellites": 14,
        "h_acc_m": 1.1,
        "v_acc_m": 1.8,
        "speed_acc_mps": 0.1,
        "heading_acc_deg": 0.5,
        "pdop": 1.23,
    }
    values.update(over)
    return Fix(**values)  # type: ignore[arg-type]


def test_nav_pvt_is_what_pyubx2_reads() -> None:
    fix = _fix()
    msg = UBXReader.parse(nav_pvt_frame(fix))
    assert msg.identity == "NAV-PVT"
    assert (msg.year, msg.month, msg.day) == (2026, 5, 28)
    assert (msg.validDate, msg.validTime, msg.fixType, msg.gnssFixOk, msg.numSV) == (1, 1, 3, 1, 14)
    stamp = f"{msg.year:04d}-{msg.month:02d}-{msg.day:02d}T{msg.hour:02d}:{msg.min:02d}:{msg.second:02d}"
    utc_s = np.datetime64(stamp).astype("datetime64[s]").astype(np.int64)
    assert int(utc_s) * 1_000_000_000 + msg.nano == fix.utc_ns
    assert msg.lat == pytest.approx(fix.lat_deg, abs=1e-7) and msg.lon == pytest.approx(fix.lon_deg, abs=1e-7)
    assert (msg.height, msg.hMSL, msg.gSpeed, msg.velN, msg.velE, msg.velD) == (
        350250,
        302250,
        31500,
        690,
        -31490,
        120,
    )
    assert msg.headMot == pytest.approx(271.25) and msg.pDOP == pytest.approx(1.23)
    assert (msg.hAcc, msg.vAcc, msg.sAcc) == (1100, 1800, 100)
    # iTOW: GPS time of week (GPS time runs 18 s ahead of UTC; GPS weeks start 1980-01-06)
    gps_ms = (fix.utc_ns // 1_000_000) - 315964800_000 + 18_000
    assert msg.iTOW == gps_ms % (7 * 86400 * 1000)


def test_nmea_epoch_is_what_the_nmea_decoder_reads() -> None:
    fix = _fix()
    decoder = NmeaDecoder()
    data = nmea_epoch(fix)
    lines = [ln for ln in data.split(b"\r\n") if ln]
    assert [ln[3:6] for ln in lines] == [b"RMC", b"GGA"]
    for line in lines:
        decoded = decoder.decode(line)
    assert decoded is not None
    v = decoded.values
    assert decoded.source_time_ns == fix.utc_ns - fix.utc_ns % 10_000_000
    assert v["lat_deg"] == pytest.approx(fix.lat_deg, abs=1e-8)
    assert v["lon_deg"] == pytest.approx(fix.lon_deg, abs=1e-8)
    assert v["speed_mps"] == pytest.approx(fix.speed_mps, abs=1e-3)
    assert v["course_deg"] == pytest.approx(fix.course_deg, abs=0.01)
    assert v["alt_msl_m"] == pytest.approx(fix.alt_msl_m, abs=0.01)
    assert (v["satellites_used"], v["fix_mode"]) == (14, 3)
    lost = decoder.decode(nmea_epoch(_fix(fix_type=0, fix_ok=False)).split(b"\r\n")[0])
    assert lost is not None and math.isnan(lost.values["lat_deg"])


def _ack_of(reply: bytes) -> tuple[tuple[int, int], bytes]:
    (frame,) = UbxFramer().feed(reply)
    return (frame[2], frame[3]), frame[6:8]


def test_m8_naks_valset_and_takes_legacy() -> None:
    rx = UbxReceiver(generation="m8")
    valset = UBXMessage.config_set(1, 0, [("CFG_RATE_MEAS", 100)]).serialize()
    assert _ack_of(rx.handle(valset)) == (ACK_NAK, b"\x06\x8a")
    rate = UBXMessage("CFG", "CFG-RATE", SET, measRate=100, navRate=1, timeRef=1).serialize()
    assert _ack_of(rx.handle(rate)) == (ACK_ACK, b"\x06\x08")
    too_fast = UBXMessage("CFG", "CFG-RATE", SET, measRate=50, navRate=1, timeRef=1).serialize()
    assert _ack_of(rx.handle(too_fast)) == (ACK_NAK, b"\x06\x08")
    assert rx.meas_ms == 100
    prt = UBXMessage(
        "CFG", "CFG-PRT", SET, portID=1, charLen=3, parity=4, baudRate=115200, inUBX=1, outUBX=1, outNMEA=0
    ).serialize()
    assert _ack_of(rx.handle(prt)) == (ACK_ACK, b"\x06\x00")
    assert (rx.pending_baud, rx.nmea) == (115200, False)


def test_m10_naks_legacy_and_ports_it_lacks() -> None:
    rx = UbxReceiver(generation="m10")
    nav5 = UBXMessage("CFG", "CFG-NAV5", SET, dyn=1, dynModel=4).serialize()
    assert _ack_of(rx.handle(nav5)) == (ACK_NAK, b"\x06\x24")
    usb = UBXMessage.config_set(1, 0, [("CFG_MSGOUT_UBX_NAV_PVT_USB", 1)]).serialize()
    assert _ack_of(rx.handle(usb)) == (ACK_NAK, b"\x06\x8a")
    ok = UBXMessage.config_set(1, 0, [("CFG_RATE_MEAS", 40), ("CFG_MSGOUT_UBX_NAV_PVT_UART1", 1)]).serialize()
    assert _ack_of(rx.handle(ok)) == (ACK_ACK, b"\x06\x8a")
    assert (rx.meas_ms, rx.nav_pvt, rx.dyn_model) == (40, True, 0)
    # all or nothing: a refused key leaves the others unset
    mixed = UBXMessage.config_set(1, 0, [("CFG_RATE_MEAS", 100), ("CFG_RATE_MEAS", 20)]).serialize()
    assert _ack_of(rx.handle(mixed)) == (ACK_NAK, b"\x06\x8a")
    assert rx.meas_ms == 40
    assert [result for _, result in rx.log] == ["nak", "nak", "ack", "nak"]


def _wrtfd(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "wrtfd", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_nmea_receiver_on_a_pty_at_10_hz(tmp_path: Path) -> None:
    truth = tmp_path / "truth.json"
    sim = _wrtfd(
        "simulate", "--protocol", "nmea", "--pty", "--track", str(ROAD), "--laps", "1", "--speed-scale", "8",
        "--truth", str(truth), "--seed", "2", "--noise-m", "0.5", "--wait", "30", "--json",
    )  # fmt: skip
    try:
        assert sim.stdout is not None
        path = sim.stdout.readline().strip()
        decoder = NmeaDecoder()
        times: list[int] = []
        with serial.Serial(path, 38400, timeout=0) as port:
            buf = b""
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                select.select([port.fileno()], [], [], 0.2)
                try:
                    buf += port.read(65536)  # all there is: a loaded machine must not fall behind
                except serial.SerialException:  # the simulator closed the pty: the drive is over
                    break
                *lines, buf = buf.split(b"\r\n")
                for line in lines:
                    decoded = decoder.decode(line)
                    if decoded is not None and line[3:6] == b"GGA" and decoded.source_time_ns:
                        times.append(decoded.source_time_ns)
        out, err = sim.communicate(timeout=30)
    finally:
        if sim.poll() is None:
            sim.kill()
    assert sim.returncode == 0, err
    summary = json.loads(out[out.index("{") :])
    assert len(summary["laps"]) == 1
    steps = set(np.diff(np.array(times)).tolist())
    assert steps == {100_000_000}  # 10 Hz, none lost
    written = json.loads(truth.read_text())
    lap = written["laps"][0]
    assert lap["time_s"] == summary["laps"][0]["time_s"]
    assert lap["end_utc_us"] - lap["start_utc_us"] == pytest.approx(lap["time_s"] * 1e6, abs=1)
    assert times[0] // 1000 < lap["start_utc_us"] < lap["end_utc_us"] < times[-1] // 1000


def test_a_full_pty_drops_whole_sentences_and_never_cuts_one(
    road: tuple[LanePath, Drive, tuple[float, ...]],
) -> None:
    """A recorder that stops reading (the pty's buffer fills): a message the pty takes in part
    is finished later, and messages that come meanwhile are dropped whole, as a receiver's
    transmit buffer drops them: every line read afterwards is a whole sentence."""
    _, drive, _ = road
    pty = GnssPty(drive, GnssErrors(seed=1), baud=115200, utc_start_ns=UTC0, speed_scale=50.0, hold_s=0.0)
    thread = threading.Thread(target=pty.run, kwargs={"wait_s": 30.0}, daemon=True)
    try:
        with serial.Serial(pty.path, 115200, timeout=0) as port:  # the rate starts the drive
            thread.start()
            deadline = time.monotonic() + 20
            while pty.stats.unread_bytes == 0 and time.monotonic() < deadline:
                time.sleep(0.05)  # not reading
            assert pty.stats.unread_bytes > 0, "the pty's buffer never filled"
            data = b""
            for _ in range(20):
                time.sleep(0.05)
                data += port.read(1 << 20)
    finally:
        pty.stop()
        thread.join(timeout=10)
    lines = data.split(b"\r\n")[:-1]
    assert len(lines) > 100
    for line in lines:  # NMEA 0183's own check: the XOR of the bytes between $ and *, in hex
        assert line[:1] == b"$" and line[-3:-2] == b"*", line
        assert functools.reduce(operator.xor, line[1:-3]) == int(line[-2:], 16), line


def test_bad_options_are_one_line(tmp_path: Path) -> None:
    oval = REPO / "config" / "tracks" / "oval.trk"
    for args, text in (
        (("--protocol", "ubx", "--pty", "--track", str(oval)), "no geodetic anchor"),
        (("--protocol", "ubx", "--pty", "--track", str(ROAD), "--rate", "10"), "--rate: a u-blox receiver"),
        (("--protocol", "nmea", "--to", "127.0.0.1:9", "--track", str(ROAD)), "give --pty"),
        (("--protocol", "forza", "--pty", "--track", str(ROAD)), "--pty is for ubx, nmea"),
        (
            ("--protocol", "nmea", "--pty", "--track", str(ROAD), "--baud", "12345"),
            "--baud: no termios constant",
        ),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "wrtfd", "simulate", *args], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode != 0
        assert text in proc.stderr
        assert "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not os.listdir(tmp_path)


def test_offline_epochs_straddle_the_true_crossings(road: tuple[LanePath, Drive, tuple[float, ...]]) -> None:
    path, drive, _ = road
    fixes = list(epochs(drive, GnssErrors(seed=1, noise_m=0.0), rate_hz=25, utc_start_ns=UTC0))
    utc = np.array([f.utc_ns for f in fixes], dtype=np.int64)
    assert set(np.diff(utc).tolist()) == {40_000_000}
    assert utc[0] == UTC0 - 1_000_000_000 and utc[-1] >= UTC0 + round((drive.end_s + 1.0) * 1e9) - 40_000_000
    x, z = drive.plane.to_xy(np.array([f.lat_deg for f in fixes]), np.array([f.lon_deg for f in fixes]))
    along, _, _ = path.project_many(x, z)
    laps = truth_laps(drive, UTC0)
    assert [lap["lap"] for lap in laps] == [1, 2]
    for lap in laps:
        for key in ("start_utc_us", "end_utc_us"):
            crossing_ns = int(lap[key]) * 1000  # type: ignore[call-overload]
            i = int(np.searchsorted(utc, crossing_ns))  # the first fix at or after the crossing
            assert along[i - 1] > path.length_m - 5.0  # just before the line (end of the lap)
            assert along[i] < 5.0  # just after it


def test_the_pit_lane_is_beside_the_track_and_its_velocity_that_of_the_path(
    road: tuple[LanePath, Drive, tuple[float, ...]],
) -> None:
    """``pit_laps=(1,)``: around the line at the end of lap 1 the car is 12 m right of the lane
    (the heading turned right), elsewhere on it; its velocity adds up to the distance between
    positions through the pit lane too, and changes no faster than a car's (the offset of a
    lane jumps where its curvature does: 7 m/s in one 25 Hz step before it was smoothed); its
    true laps are the lane's, but where it crosses a line in the pit lane; the pit lines lie
    across that lane."""
    from wrtfd.simulate.gnss import PIT_OFFSET_M, pit_lane_lines

    path, plain, sectors = road
    pits = Drive(path, plain.plane, laps=2, seed=7, sectors_m=sectors, pit_laps=(1,))
    line_t = plain.laps[0].end_s
    for t in (plain.laps[0].start_s + 10.0, plain.laps[1].end_s):  # far from the pit lane
        assert pits.at(t)[:2] == plain.at(t)[:2]
    ts = np.arange(line_t - 12.0, line_t + 12.0, 0.01)
    pos = np.array([pits.at(float(t))[:2] for t in ts])
    speed = np.array([pits.at(float(t))[3] for t in ts])
    ground = float(np.sum(np.hypot(*np.diff(pos, axis=0).T)))
    assert ground == pytest.approx(float(np.sum(0.5 * (speed[1:] + speed[:-1]) * 0.01)), rel=1e-3)
    lateral = np.hypot(
        pos[:, 0] - np.array([plain.at(float(t))[0] for t in ts]),
        pos[:, 1] - np.array([plain.at(float(t))[1] for t in ts]),
    )
    assert lateral.max() == pytest.approx(PIT_OFFSET_M, abs=0.5) and lateral[0] < 0.01
    x, z, *_ = pits.at(line_t)
    x0, z0, _, _, ve, vn, _ = plain.at(line_t)
    right = (x - x0) * vn - (z - z0) * ve  # along the heading turned right, (vn, -ve), times speed
    assert right / math.hypot(ve, vn) == pytest.approx(PIT_OFFSET_M, abs=0.5)
    for drive in (plain, pits):  # no faster than 2 g between two fixes of a 25 Hz receiver
        vel = np.array([drive.at(float(t))[4:6] for t in np.arange(0.0, drive.end_s + 1.0, 0.04)])
        assert float(np.hypot(*np.diff(vel, axis=0).T).max()) < 2 * 9.81 * 0.04
    # the true laps: the lane's, but for the line at the end of lap 1 (in the pit lane), where the
    # moved car crosses it (sampled every 0.5 ms), and the sectors either side of that line
    px, _, pz = path.point_at(0.0)
    hx, hz = path.heading_at(0.0)
    fine = np.arange(line_t - 1.0, line_t + 1.0, 0.0005)
    ahead = np.array([(pits.at(float(t))[0] - px) * hx + (pits.at(float(t))[1] - pz) * hz for t in fine])
    (k,) = np.flatnonzero((ahead[:-1] < 0) & (ahead[1:] >= 0))
    assert pits.laps[0].end_s == pytest.approx(fine[k], abs=0.0005)
    assert pits.laps[0].end_s == pits.laps[1].start_s and abs(pits.laps[0].end_s - line_t) < 0.1
    assert (pits.laps[0].start_s, pits.laps[1].end_s) == (plain.laps[0].start_s, plain.laps[1].end_s)
    for pit_lap, lap in zip(pits.laps, plain.laps, strict=True):
        assert pit_lap.number == lap.number
        assert sum(pit_lap.sector_times_s) == pytest.approx(pit_lap.time_s, abs=1e-9)
        # the pit lane is 160 m either side of the line: the sectors beyond it are the lane's
        assert pit_lap.sector_times_s[1:-1] == pytest.approx(lap.sector_times_s[1:-1], abs=1e-9)
    entry, exit_ = pit_lane_lines(path, plain.plane, entry_m=-100.0, exit_m=100.0)
    for line, s in ((entry, -100.0), (exit_, 100.0)):
        mx, mz = plain.plane.to_xy(*line.middle)
        px, _, pz = path.point_at(s % path.length_m)
        assert math.hypot(float(mx) - px, float(mz) - pz) == pytest.approx(PIT_OFFSET_M, abs=0.01)
    with pytest.raises(ValueError):
        pit_lane_lines(path, plain.plane, entry_m=-150.0, exit_m=100.0)  # beyond the lane
