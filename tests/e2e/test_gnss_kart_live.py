"""The kart's real NMEA log (../shared/data/trackday) on the live path: the real daemon reads it
from a pseudo-terminal, replayed at the pace of its own fix times (about two minutes: its own
module, so that the test runners spread it beside the rest)."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path

from tests.e2e.test_daemon_harness import Daemon, free_port, run_cli, wait_for
from tests.sources.serial_pty import PtyDevice


def test_real_kart_nmea_live_at_its_own_pace(shared_data: Path, tmp_path: Path) -> None:
    """The kart's real NMEA (about 17 Hz, irregular) replayed on a pty at the pace of its own
    fix times: the daemon's laps equal RaceChrono's within 0.1 s (about 110 s of wall time)."""
    from tests.tracks.test_gnss_real_logs import kart_log
    from wrtfd.format import Reader
    from wrtfd.tracks.analysis import recorded_session_laps

    log, expected = kart_log(shared_data, tmp_path)
    chunks: list[tuple[float, bytes]] = []
    first: float | None = None
    for line in log.read_bytes().splitlines():
        clock = line.split(b",")[1]
        t = int(clock[:2]) * 3600 + int(clock[2:4]) * 60 + float(clock[4:])
        first = t if first is None else first
        if chunks and chunks[-1][0] == t - first:
            chunks[-1] = (chunks[-1][0], chunks[-1][1] + line + b"\r\n")
        else:
            chunks.append((t - first, line + b"\r\n"))
    a, b = expected["start_finish_line"]
    (tmp_path / "okc.json").write_text(
        json.dumps(
            {
                "format": "wrtfd-circuit",
                "name": "OKC",
                "direction": "either",
                "start_finish": {"a": a, "b": b},
            }
        )
    )
    device = PtyDevice()
    out, status_port = tmp_path / "rec", free_port()
    config = (
        f'[[sources]]\nkind = "serial"\nname = "gps"\nprotocol = "nmea"\ndevice = "{device.path}"\n'
        f'baudrate = 115200\ncircuit = "okc.json"\n'
        f'[recorder]\noutput_dir = "{out}"\nrate_hz = 50\n'
        f'[status]\nport = {status_port}\n[logging]\nformat = "text"\n'
    )
    d = Daemon(tmp_path, config, status_port=status_port).start()
    writer = threading.Thread(target=device.write_timed, args=(chunks,), daemon=True)
    try:
        d.wait_ready()
        writer.start()
        writer.join(timeout=chunks[-1][0] + 60.0)
        assert not writer.is_alive()
        wait_for(
            lambda: d.status()["recorder"]["derived"].get("laps", {}).get("lap_count", 0) >= 2,
            "both laps timed",
        )
        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 0, d.stderr
    finally:
        d.stop()
        device.close()
    (recording,) = out.glob("*.wrtf")
    with Reader(recording) as r:
        frames = r.frames(0)
        times = (r.frame_times_us(0) - r.sessions[0].time_base_us) / 1e6
        live = recorded_session_laps(frames, times).laps  # what the daemon's plug-in wrote
    assert [lap.number for lap in live] == [1, 2]
    for got, want in zip(live, expected["laps"], strict=True):
        assert abs(got.time_s - want["racechrono_s"]) < 0.1
    # re-timed from the circuit in the metadata, the fixes smoothed both ways (docs/circuits.md):
    # the same laps, within a few hundredths of the live times, and of RaceChrono's likewise
    done = run_cli("laps", str(recording), "--json")
    assert done.returncode == 0, done.stderr
    again = json.loads(done.stdout)["sessions"][0]["laps"]
    assert [lap["lap"] for lap in again] == [1, 2]
    for lap, got, want in zip(again, live, expected["laps"], strict=True):
        assert abs(lap["time_s"] - got.time_s) < 0.05
        assert abs(lap["time_s"] - want["racechrono_s"]) < 0.1
