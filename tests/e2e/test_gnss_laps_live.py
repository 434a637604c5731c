"""A track day, headless, on the live path: the real daemon (``wrtfd run`` subprocess) reads a
GNSS receiver on a pseudo-terminal with ``circuit = "auto"`` and no circuit file. The receiver is
played here at its own pace: NMEA RMC/GGA at 10 Hz for the simulated car driving road.trk laid on
its anchor. The daemon picks Hillside from the shipped library (the journal says so), times the
lap, shows it in its status, and ``wrtfd laps`` on the file gives the car's own lap time."""

from __future__ import annotations

import json
import math
import re
import signal
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.e2e.test_daemon_harness import Daemon, free_port, run_cli, wait_for
from tests.sources.serial_pty import PtyDevice
from tests.sources.test_serial_record import nmea
from wrtfd.defaults import TICK_JITTER_S
from wrtfd.format.reader import Reader
from wrtfd.simulate.car import Simulation
from wrtfd.tracks import load_track
from wrtfd.tracks.geodesy import track_plane
from wrtfd.tracks.geometry import LanePath
from wrtfd.tracks.laps import timing_sectors

ROAD = Path(__file__).resolve().parents[2] / "config" / "tracks" / "road.trk"
T0 = datetime(2026, 5, 1, 10, 0, 0, tzinfo=UTC)


def _angle(value: float, deg_digits: int, hemis: str) -> tuple[str, str]:
    a = abs(value)
    deg = int(a)
    minutes = (a - deg) * 60.0
    return f"{deg:0{deg_digits}d}{minutes:09.6f}", hemis[0] if value >= 0 else hemis[1]


def receiver_epochs() -> tuple[list[tuple[float, bytes]], list[float], list[tuple[float, ...]]]:
    """(offset s, RMC+GGA bytes) at 10 Hz, and the car's own lap and sector times."""
    track = load_track(ROAD)
    path = LanePath(track)
    plane = track_plane(track.extensions)
    assert plane is not None
    sim = Simulation(path, laps=1, rate_hz=100, sectors_m=timing_sectors(track, path), cooldown_s=1.0)
    epochs = []
    for i, s in enumerate(sim.states()):
        if i % 10:
            continue
        lat, lon = plane.to_latlon(s.x, s.z)
        lat_s, ns = _angle(float(lat), 2, "NS")
        lon_s, ew = _angle(float(lon), 3, "EW")
        when = T0 + timedelta(seconds=round(s.t_s, 2))
        clock = when.strftime("%H%M%S.") + f"{when.microsecond // 10000:02d}"
        course = (90.0 - math.degrees(math.atan2(s.heading_z, s.heading_x))) % 360.0
        knots = s.speed_mps / 0.514444
        data = nmea(f"GPRMC,{clock},A,{lat_s},{ns},{lon_s},{ew},{knots:.3f},{course:.2f},010526,,,A") + nmea(
            f"GPGGA,{clock},{lat_s},{ns},{lon_s},{ew},1,12,0.8,420.0,M,47.0,M,,"
        )
        epochs.append((s.t_s, data))
    return epochs, [lap.time_s for lap in sim.laps], [lap.sector_times_s for lap in sim.laps]


def _bound(device: PtyDevice) -> tuple[float, str]:
    """5 ms with every epoch written on time. A CI run (six workers on two cores) once had the
    live lap 11.2 ms off, its file without the 0.6 s of fixes before the first crossing: either
    the daemon or the test process that plays the receiver was starved (not known which). A
    receiver is never late: when this one wrote an epoch later than a tick stays open (dropped
    as late), the run cannot show the 5 ms, and the lap is held to what a gap allows, 50 ms. A
    daemon starved with the epochs on time still fails the 5 ms."""
    late = max((late_s for _, late_s in device.lateness), default=0.0)
    if late <= TICK_JITTER_S:
        return 0.005, f"every epoch written on time (at most {late:.3f} s late)"
    return 0.05, f"the test's receiver wrote an epoch {late:.3f} s late (starved): a gap's bound"


def gps_daemon(tmp_path: Path, device: PtyDevice, source_extra: str = "") -> tuple[Daemon, Path]:
    """The daemon (started, as the unit runs it: tests/priority.py) recording the NMEA receiver
    on ``device`` at 20 Hz, and its output directory."""
    out, status_port = tmp_path / "rec", free_port()
    config = (
        f'[[sources]]\nkind = "serial"\nname = "gps"\nprotocol = "nmea"\ndevice = "{device.path}"\n'
        f"baudrate = 115200\n{source_extra}"
        f'[recorder]\noutput_dir = "{out}"\nrate_hz = 20\n'
        f'[status]\nport = {status_port}\n[logging]\nformat = "text"\n'
    )
    return Daemon(tmp_path, config, status_port=status_port, as_service=True).start(), out


def test_track_day_on_a_pty(tmp_path: Path) -> None:
    epochs, lap_times, sector_times = receiver_epochs()
    assert len(lap_times) == 1
    device = PtyDevice()
    d, out = gps_daemon(tmp_path, device, 'circuit = "auto"\n')
    writer = threading.Thread(target=device.write_timed, args=(epochs,), daemon=True)
    try:
        d.wait_ready()
        writer.start()
        picked = wait_for(
            lambda: next((ln for ln in d.lines if "circuit Hillside picked" in ln), None),
            "the circuit picked",
        )
        assert re.search(r"source gps: circuit Hillside picked, 0\.0 km from the first fix$", picked), picked
        wait_for(
            lambda: d.status()["recorder"]["derived"].get("laps", {}).get("lap_count", 0) >= 1,
            "the lap timed",
            timeout_s=120.0,
        )
        recorder = d.status()["recorder"]
        bound, why = _bound(device)
        # noise-free fixes: within 5 ms live too (on an idle machine within 1.5 ms; 2.8 ms seen
        # under load)
        assert abs(recorder["derived"]["laps"]["best_lap_ms"] / 1000 - lap_times[0]) < bound, why
        page = recorder["laps_live"]["laps"]  # what the page shows
        assert page["circuit"] == "Hillside" and page["lap_count"] == 1
        assert abs(page["last"]["time_s"] - lap_times[0]) < bound, why
        assert len(page["last"]["sectors_s"]) == 3
        writer.join(timeout=30)
        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 0, d.stderr
    finally:
        d.stop()
        device.close()
    assert "session ended in group main" in d.stderr and ", 1 lap, best" in d.stderr
    (recording,) = out.glob("*.wrtf")
    done = run_cli("laps", str(recording), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    (lap,) = [lp for s in report["sessions"] for lp in s["laps"]]
    # noise-free fixes (6-decimal minutes: 2 mm), the car's own crossing times: within 5 ms
    bound, why = _bound(device)
    assert abs(lap["time_s"] - lap_times[0]) < bound, why
    assert len(lap["sectors_s"]) == 3
    for got, want in zip(lap["sectors_s"], sector_times[0], strict=True):
        assert abs(got - want) < bound, why


STALL_S = 1.5  # as long as the port keeps 10 Hz NMEA (about 1.5 KB a second) in its buffer


def test_a_stalled_daemon_keeps_the_fixes_it_read_late(tmp_path: Path) -> None:
    """The daemon is stopped (SIGSTOP) for 1.5 s while the receiver keeps sending: the port
    keeps the bytes, and the daemon reads them at once when it runs again. Each fix still gets
    a frame of its own at its own time: none superseded by the next, no clock re-anchored
    (before: the stall's fixes were placed at the read, in one tick, and most were lost)."""
    epochs = receiver_epochs()[0][:100]  # 10 s at 10 Hz
    device = PtyDevice()
    d, out = gps_daemon(tmp_path, device)
    writer = threading.Thread(target=device.write_timed, args=(epochs,), daemon=True)
    try:
        d.wait_ready()
        writer.start()
        wait_for(lambda: len(device.lateness) >= 30, "3 s of fixes written")
        d.signal(signal.SIGSTOP)
        time.sleep(STALL_S)
        d.signal(signal.SIGCONT)
        writer.join(timeout=30)
        wait_for(lambda: d.status()["sources"]["gps"]["received"] >= 2 * len(epochs), "every sentence read")
        counters = d.status()["recorder"]["per_source"]["gps"]
        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 0, d.stderr
    finally:
        d.stop()
        device.close()
    sent = [round((T0 + timedelta(seconds=round(t_s, 2))).timestamp() * 1e6) for t_s, _ in epochs]
    # A starved test process that wrote a fix later than a tick stays open made it late for any
    # daemon: such fixes may be missing, and the clock re-anchored on them (said if so).
    late = {t for t, (_, late_s) in zip(sent, device.lateness, strict=True) if late_s > TICK_JITTER_S}
    if not late:
        assert (counters["late"], counters["reanchors"]) == (0, 0), counters
    (recording,) = out.glob("*.wrtf")
    with Reader(recording) as r:
        recorded = r.frames(0)["gps"]["fix_time_utc_us"].tolist()
    assert len(recorded) == len(set(recorded)), "a fix in two frames"
    missing = sorted(set(sent) - set(recorded))
    assert set(missing) <= late, f"{len(missing)} fixes missing, {len(late)} written late by the test"
