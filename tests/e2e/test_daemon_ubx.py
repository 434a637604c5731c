"""End to end: ``wrtfd run`` (a real daemon subprocess) sets up a simulated u-blox receiver that
``wrtfd simulate --protocol ubx --pty`` (another subprocess) plays on a pseudo-terminal, and
records it. For an M8 (legacy CFG messages) and an M10 (CFG-VALSET): the set-up found the
receiver at its out-of-box 9600 baud, moved it to a faster rate (the simulator's line follows the
termios rate the daemon set), a refused setting is one log line and a status problem, and the
file's NAV-PVT epochs come at the configured rate.
"""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.e2e.test_daemon_harness import UBX_PATIENCE, Daemon, free_port, recordings, run_cli, wait_for
from tests.e2e.test_live_vs_tap import assert_same_recording
from wrtfd.format import Reader

pytestmark = pytest.mark.slow

ROAD = Path(__file__).resolve().parents[2] / "config" / "tracks" / "road.trk"
ANCHOR = (44.9, 2.5)  # road.trk's geodetic anchor


def _run(
    tmp_path: Path, generation: str, ubx: str, refuse: str, source: str = ""
) -> tuple[dict[str, Any], list[str], dict[str, Any], Path]:
    link = tmp_path / "usb-u-blox-if00"
    truth = tmp_path / "truth.json"
    sim = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "wrtfd",
            "simulate",
            "--protocol",
            "ubx",
            "--pty",
            "--generation",
            generation,
            "--track",
            str(ROAD),
            "--link",
            str(link),
            "--truth",
            str(truth),
            "--refuse",
            refuse,
            "--laps",
            "1",
            "--seed",
            "4",
            "--wait",
            "40",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    status_port = free_port()
    out = tmp_path / "rec"
    config = (
        f'[[sources]]\nkind = "serial"\nname = "gps"\nprotocol = "ubx"\ndevice = "{link}"\nbaudrate = 9600\n'
        f"{source}"
        f"[sources.ubx]\n{ubx}\n{UBX_PATIENCE}"
        # every epoch must reach the file: half a second of jitter window rides out a daemon or a
        # simulator stalled by the rest of the suite (at eight workers, with the default 0.1 s, one
        # epoch of the 25 Hz receiver was missing: an 80 ms step among the 40 ms ones)
        f'[recorder]\noutput_dir = "{out}"\nrate_hz = 50\njitter_s = 0.5\n'
        f'[status]\nport = {status_port}\n[logging]\nformat = "text"\n'
    )
    d = Daemon(tmp_path, config, status_port=status_port)
    try:
        assert sim.stdout is not None
        pty_path = sim.stdout.readline().strip()
        assert pty_path.startswith("/dev/"), pty_path
        wait_for(link.exists, "the simulator's pty link")
        d.start()
        d.wait_ready()
        wait_for(lambda: any("found at 9600 baud" in ln for ln in d.lines), "the receiver set up")
        wait_for(truth.exists, "the simulated car to start")
        first = d.status()["sources"]["gps"]["samples"]
        wait_for(lambda: d.status()["sources"]["gps"]["samples"] >= first + 60, "60 NAV-PVT after the set-up")
        status = d.status()
        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 0, d.stderr
    finally:
        d.stop()
        sim.send_signal(signal.SIGTERM)  # the drive ends early; the truth file is written again
        assert sim.wait(timeout=20) == 0, sim.communicate()[1]
    files = recordings(out)
    assert len(files) == 1, files
    return status, d.lines, json.loads(truth.read_text()), files[0]


def _epochs(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The file's distinct NAV-PVT epochs: (iTOW ms, lat, lon), in order."""
    with Reader(path) as reader:
        gps = reader.frames(0)["gps"]
        itow = np.asarray(gps["itow_ms"], dtype=np.int64)
        lat = np.asarray(gps["lat_deg"], dtype=np.float64)
        lon = np.asarray(gps["lon_deg"], dtype=np.float64)
    keep = np.concatenate([[True], np.diff(itow) != 0]) & (itow > 0)
    return itow[keep], lat[keep], lon[keep]


def _check_rate_and_place(path: Path, period_ms: int) -> None:
    itow, lat, lon = _epochs(path)
    steps = np.diff(itow)
    # before the set-up: 1 Hz; after: the configured period, every epoch recorded
    tail = steps[-50:]
    assert set(tail.tolist()) == {period_ms}, sorted(set(tail.tolist()))
    assert np.all(steps > 0)
    good = ~np.isnan(lat)
    assert good.sum() >= 50
    dlat_m = (lat[good] - ANCHOR[0]) * 111_000
    dlon_m = (lon[good] - ANCHOR[1]) * 111_000 * math.cos(math.radians(ANCHOR[0]))
    assert np.max(np.hypot(dlat_m, dlon_m)) < 2000  # on the circuit laid at the anchor


def test_m8_legacy_set_up_nak_and_baud_change(tmp_path: Path) -> None:
    status, lines, truth, path = _run(
        tmp_path, "m8", "rate_hz = 10\nbaud = 115200\nnmea_off = true", refuse="CFG-NAV5"
    )
    found = [ln for ln in lines if "found at 9600 baud" in ln]
    assert len(found) == 1
    assert "legacy CFG messages; 3 of 4 settings taken, now at 115200 baud" in found[0]
    refused = [ln for ln in lines if "refused" in ln]
    assert len(refused) == 1 and "CFG-NAV5 automotive (NAK)" in refused[0]
    assert status["sources"]["gps"]["problems"] == [
        "M8 or older refused CFG-NAV5 automotive (NAK); recording what it sends"
    ]
    assert "source gps: M8 or older refused CFG-NAV5" in " ".join(status["problems"])
    assert status["sources"]["gps"]["dropped_total"] == 0
    _check_rate_and_place(path, 100)
    assert truth["stats"]["baud_changes"] == [115200]
    assert [c for c in truth["stats"]["commands"]] == [
        ["CFG-RATE", "ack"],
        ["CFG-MSG", "ack"],
        ["CFG-NAV5", "nak"],
        ["CFG-PRT", "ack"],
    ]


def test_m10_valset_at_25_hz_and_its_tap_replays(tmp_path: Path) -> None:
    status, lines, truth, path = _run(
        tmp_path,
        "m10",
        "rate_hz = 25\nbaud = 230400\nnmea_off = true",
        refuse="CFG_UART1_BAUDRATE_NOT_A_KEY",
        source="raw_tap = true\n",
    )
    found = [ln for ln in lines if "found at 9600 baud" in ln]
    assert len(found) == 1 and "MAX-M10S" in found[0]
    assert "CFG-VALSET; 6 of 6 settings taken, now at 230400 baud" in found[0]
    # the source's own count after the set-up (2 s of epochs: 50, give or take one at each end)
    (counted,) = [float(ln.split("NAV-PVT at ")[1].split()[0]) for ln in lines if "NAV-PVT at " in ln]
    assert 24.0 <= counted <= 26.0
    assert not [ln for ln in lines if "refused" in ln or "did not answer" in ln]
    assert status["sources"]["gps"]["problems"] == []
    assert status["sources"]["gps"]["dropped_total"] == 0
    _check_rate_and_place(path, 40)
    assert truth["stats"]["baud_changes"] == [230400]
    assert {c[0].split()[0] for c in truth["stats"]["commands"]} == {"CFG-VALSET"}

    # the raw tap holds every byte read (the baud probe's noise, the set-up's answers, NMEA):
    # importing it with the daemon's config makes the same recording
    imported = tmp_path / "imported"
    proc = run_cli(
        "import",
        str(path.with_suffix(".pcapng")),
        "--config",
        str(tmp_path / "wrtfd.toml"),
        "-o",
        str(imported),
    )
    assert proc.returncode == 0, proc.stderr
    (again,) = imported.glob("*.wrtf")
    assert assert_same_recording(path, again) > 60
