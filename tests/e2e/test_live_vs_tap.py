"""Live vs tap: the real daemon records with ``raw_tap`` on; importing its tap gives its frames.

A ``wrtfd run`` subprocess records simulated games (``wrtfd simulate`` subprocesses: Forza and
F1 on the shipped oval, one lap each, at the games' own pace) and, in another test, a GPS on a
pseudo-terminal. Each recording group gets a pcapng tap file beside its WRTF file, with the same
name. ``wrtfd import TAP --config the-daemon.toml`` then makes the recording again from the tap
alone: the same sessions, ticks and frame bytes. tshark opens every tap with the packet count
the feeds sent (datagrams the decoder dropped included).
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.e2e.test_daemon_harness import Daemon, free_port, run_cli, udp_source, wait_for
from tests.importers.frames import assert_same_frames, frame_bytes
from tests.importers.test_tap_replay import frames_and_headers
from tests.sources.serial_pty import PtyDevice
from tests.sources.test_serial_record import epoch
from wrtfd.format import Reader
from wrtfd.recorder.tap import is_tap_file

REPO = Path(__file__).resolve().parents[2]
OVAL = REPO / "config" / "tracks" / "oval.trk"
GARBAGE = [b"not forza", b"\x00" * 17, b"a game update changed the packet"]


def tshark_count(path: Path) -> int:
    out = subprocess.run(
        ["tshark", "-r", str(path), "-T", "fields", "-e", "frame.number"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return len(out.stdout.split())


def by_sources(directory: Path) -> dict[str, Path]:
    """WRTF files of ``directory`` by the sources they record (``wrtfd.sources`` metadata)."""
    out = {}
    for path in directory.glob("*.wrtf"):
        with Reader(path) as r:
            out[r.metadata["wrtfd.sources"]] = path
    return out


def assert_same_recording(live: Path, imported: Path) -> int:
    """Same sessions, ticks, frame bytes and session headers (byte for byte: their
    ``start_timestamp`` too); returns frames."""
    live_frames, live_ticks, live_headers = frames_and_headers(live)
    tap_frames, tap_ticks, tap_headers = frames_and_headers(imported)
    assert tap_ticks == live_ticks, live.name
    assert_same_frames(tap_frames, live_frames, live.name)
    assert tap_headers == live_headers, live.name
    with Reader(live) as a, Reader(imported) as b:
        assert [frame_bytes(b, i) for i in range(len(b.sessions))] == [
            frame_bytes(a, i) for i in range(len(a.sessions))
        ]
    return len(live_ticks)


def import_tap(tap: Path, config: Path, out: Path) -> None:
    proc = run_cli("import", str(tap), "--config", str(config), "-o", str(out))
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_live_vs_tap_forza_and_f1(tmp_path: Path) -> None:
    forza_port, f1_port, status_port = free_port(socket.SOCK_DGRAM), free_port(socket.SOCK_DGRAM), free_port()
    out = tmp_path / "rec"
    config = (
        udp_source("forza", "forza", forza_port, 'group = "forza"\nrcvbuf_bytes = 4194304\n')
        + udp_source("f1", "f1", f1_port, 'group = "f1"\nrcvbuf_bytes = 4194304\n').replace(
            'host = "127.0.0.1"',
            'host = "0.0.0.0"',  # a tap of a socket bound to every address
        )
        # The replay is the live file only where no sample was late live (a late one is dropped
        # live; a replay has none): half a second of look-ahead rides out a loaded test machine,
        # where the default 0.1 s once closed a tick before its F1 datagram was read (one frame
        # differed). The import takes the same window from the same config.
        + f'[recorder]\noutput_dir = "{out}"\nraw_tap = true\njitter_s = 0.5\n'
        + f'[status]\nport = {status_port}\n[logging]\nformat = "text"\n'
    )
    d = Daemon(tmp_path, config, status_port=status_port).start()
    try:
        d.wait_ready()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for g in GARBAGE:  # the decoder drops these; the tap keeps them
                s.sendto(g, ("127.0.0.1", forza_port))
        sims = {}
        for name, port in (("forza", forza_port), ("f1", f1_port)):
            args = ["simulate", "--protocol", name, "--track", str(OVAL), "--to", f"127.0.0.1:{port}"]
            sims[name] = subprocess.Popen(
                [sys.executable, "-m", "wrtfd", *args, "--laps", "1", "--json"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        sent = {}
        for name, sim in sims.items():
            stdout, stderr = sim.communicate(timeout=120)
            assert sim.returncode == 0, stderr
            summary = json.loads(stdout)
            assert summary["send_errors"] == 0
            sent[name] = summary["datagrams"]
        sent["forza"] += len(GARBAGE)
        wait_for(
            lambda: all(d.status()["sources"][n]["received"] == sent[n] for n in sent),
            "every datagram read by the daemon",
        )
        wait_for(lambda: d.status()["tap"]["packets"] == sum(sent.values()), "the tap to write them")
        status = d.status()
        tap_status = status["tap"]
        late = {
            g: {n: c["late"] for n, c in v["per_source"].items()}
            for g, v in status["recorder"]["groups"].items()
        }
        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 0, d.stderr
    finally:
        d.stop()
    assert tap_status["dropped_total"] == 0 and tap_status["groups"] == ["forza", "f1"]
    assert late == {"forza": {"forza": 0}, "f1": {"f1": 0}}

    live = by_sources(out)
    assert set(live) == {"forza", "f1"}
    taps = sorted(out.glob("*.pcapng"))
    assert all(is_tap_file(p) for p in taps)
    assert sorted(p.stem for p in taps) == sorted(p.stem for p in live.values())  # names match
    imported = tmp_path / "imported"
    for name, path in live.items():
        tap = path.with_suffix(".pcapng")
        if shutil.which("tshark") is not None:
            assert tshark_count(tap) == sent[name]
        import_tap(tap, d.config_path, imported)
    again = by_sources(imported)
    assert set(again) == set(live)
    for name in live:
        assert assert_same_recording(live[name], again[name]) > 600, name  # about 15 s at 60 Hz


def test_live_vs_tap_gps_on_a_serial_port(tmp_path: Path) -> None:
    """Serial bytes are tapped as the chunks the port returned; the import feeds them to the
    config's NMEA source chunk by chunk, as the live source was fed."""
    device = PtyDevice()
    out, status_port = tmp_path / "rec", free_port()
    config = (
        f'[[sources]]\nkind = "serial"\nname = "gps"\nprotocol = "nmea"\ndevice = "{device.path}"\n'
        f"baudrate = 115200\nraw_tap = true\n"
        # half a second of look-ahead, as in the game test above: a loaded machine once recorded
        # 29 frames live of 30 epochs (likely one read after the default 0.1 s window had closed
        # its tick; the late count, asserted now, was not kept then)
        f'[recorder]\noutput_dir = "{out}"\nrate_hz = 20\njitter_s = 0.5\n'
        f'[status]\nport = {status_port}\n[logging]\nformat = "text"\n'
    )
    d = Daemon(tmp_path, config, status_port=status_port).start()
    try:
        d.wait_ready()
        device.write_all(b"garbage before the first sentence\r\n")
        device.write_timed([epoch(i) for i in range(30)])
        wait_for(lambda: d.status()["sources"]["gps"]["samples"] == 60, "every sentence decoded")
        wait_for(lambda: d.status()["tap"]["packets"] > 0, "the tap")
        late = d.status()["recorder"]["per_source"]["gps"]["late"]
        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 0, d.stderr
    finally:
        d.stop()
        device.close()
    assert late == 0  # no epoch read after its tick closed (the replay has none late)
    (live,) = out.glob("*.wrtf")
    tap = live.with_suffix(".pcapng")
    with Reader(live) as r:
        assert r.total_frames == 30  # one frame per epoch (the GPS's own clock places them)
    imported = tmp_path / "imported"
    import_tap(tap, d.config_path, imported)
    (again,) = imported.glob("*.wrtf")
    assert assert_same_recording(live, again) == 30
    with Reader(again) as r:
        lat = np.array(r.frames(len(r.sessions) - 1)["gps"]["lat_deg"])  # a copy: the file closes
    assert np.nanmax(lat) == pytest.approx(47 + 29 / 1000 / 60)
