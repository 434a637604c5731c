"""Every shipped example config (``config/*.toml``) is valid and starts the real daemon as shipped.

Only what belongs to this machine is replaced: serial device paths by real pseudo-terminals,
ports by free loopback ports, the output directory by a temporary one. Relative paths in the
example (the DBC of ``incar.toml``) keep meaning "beside the example": they are resolved against
``config/`` exactly as the daemon resolves them against the config file.
"""

from __future__ import annotations

import signal
import socket
import struct
import threading
import time
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from tests.e2e.test_daemon_harness import Daemon, free_port, recordings, wait_for
from tests.sources.serial_pty import PtyDevice
from wrtfd.cli.main import main as cli_main
from wrtfd.daemon.toml_out import dumps
from wrtfd.daemon.wiring import resolve_option_paths
from wrtfd.decoders.can_dbc import CanFrame
from wrtfd.decoders.nmea import nmea_checksum
from wrtfd.decoders.slcan import encode_slcan
from wrtfd.format import Reader

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
CONFIG_DIR = REPO / "config"
EXAMPLES = sorted(CONFIG_DIR.glob("*.toml"))
#: Frame ids and payloads of config/example-car.dbc (encoded with cantools, see the asserts).
ENGINE_ID, ENGINE_DATA = 0x140, bytes.fromhex("e02e648203000000")  # 3000 rpm, 40 %, 90 degC, gear 3
STEERING_ID, STEERING_DATA = 0x025, bytes.fromhex("83ff1e0000000000")  # -12.5 deg, 30 deg/s


def test_examples_exist() -> None:
    assert {p.name for p in EXAMPLES} >= {"simrig.toml", "incar.toml", "struct-feed.toml"}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_passes_config_check(example: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["config", "check", str(example)]) == 0
    assert capsys.readouterr().out.startswith(f"{example}: ok: ")


def test_example_dbc_payloads_are_what_the_test_sends() -> None:
    import cantools

    db = cantools.database.load_file(str(CONFIG_DIR / "example-car.dbc"))
    assert isinstance(db, cantools.database.can.Database)
    engine = cast("Mapping[str, float]", db.decode_message(ENGINE_ID, ENGINE_DATA))
    assert (engine["RPM"], engine["THROTTLE"], engine["COOLANT_TEMP"], engine["GEAR"]) == (3000, 40, 90, 3)
    steering = cast("Mapping[str, float]", db.decode_message(STEERING_ID, STEERING_DATA))
    assert steering["STEERING_ANGLE"] == pytest.approx(-12.5)


def _nmea(body: str) -> bytes:
    return b"$%s*%02X\r\n" % (body.encode(), nmea_checksum(body.encode()))


class _DeviceFeed:
    """Plays a GPS (1 Hz) or a CAN adapter (50 Hz) on a pty until stopped."""

    def __init__(self, device: PtyDevice, protocol: str) -> None:
        self.device = device
        self.protocol = protocol
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _chunk(self, i: int) -> bytes:
        if self.protocol == "nmea":
            clock = f"1200{i % 60:02d}.00"
            return _nmea(f"GNRMC,{clock},A,4700.0000,N,00800.0000,E,20.0,45.0,210325,,,A") + _nmea(
                f"GNGGA,{clock},4700.0000,N,00800.0000,E,1,12,0.8,420.0,M,47.0,M,,"
            )
        return encode_slcan(CanFrame(ENGINE_ID, ENGINE_DATA)) + encode_slcan(
            CanFrame(STEERING_ID, STEERING_DATA)
        )

    def _run(self) -> None:
        period_s = 1.0 if self.protocol == "nmea" else 0.02
        start = time.monotonic()
        i = 0
        while not self._stop.is_set():
            self.device.read_available(0.0)  # what the source writes (SLCAN open commands)
            try:
                self.device.write_all(self._chunk(i))
            except OSError:
                return
            i += 1
            self._stop.wait(max(0.0, start + i * period_s - time.monotonic()))

    def start(self) -> _DeviceFeed:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def _struct_record(t_ms: int, rpm: float, speed: float) -> bytes:
    """One record of config/struct-feed.toml's layout."""
    return struct.pack("<2s2xIH2xf", b"WR", t_ms, round(rpm * 4), speed)


def _source_name(src: dict[str, Any]) -> str:
    """A source's name as the daemon gives it: ``name``, else its protocol (the kind's own for
    the kinds with one protocol, such as gt7 and acc)."""
    return str(src.get("name", src.get("protocol", src["kind"])))


def _localise(example: Path, out: Path, devices: dict[str, PtyDevice]) -> tuple[dict[str, Any], int]:
    """The example with this machine's devices, ports and output directory; relative paths
    resolved against the example's directory. Returns (config, status port)."""
    data = tomllib.loads(example.read_text())
    for src in data["sources"]:
        name = _source_name(src)
        if src["kind"] == "serial":
            devices[name] = PtyDevice()
            src["device"] = devices[name].path
        elif src["kind"] in ("udp", "dds"):
            src["host"] = "127.0.0.1"
            src["port"] = free_port(socket.SOCK_DGRAM if src["kind"] == "udp" else socket.SOCK_STREAM)
        elif src["kind"] == "gt7":  # the console is this machine: nobody answers its heartbeats
            src["host"] = src["console"] = "127.0.0.1"
            src["port"] = free_port(socket.SOCK_DGRAM)
            src["console_port"] = free_port(socket.SOCK_DGRAM)
        if "options" in src:
            src["options"] = resolve_option_paths(src["options"], example.parent)
        for key in ("definition", "track", "topic_map"):
            if key in src and not Path(src[key]).is_absolute():
                src[key] = str(example.parent / src[key])
    recorder = data.setdefault("recorder", {})
    recorder["output_dir"] = str(out)
    assert "schema" not in recorder, "a pinned example needs its pinned file resolved here too"
    status_port = free_port()
    data["status"] = {**data.get("status", {}), "host": "127.0.0.1", "port": status_port}
    data["logging"] = {**data.get("logging", {}), "format": "text"}
    return data, status_port


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_daemon_starts_with_example(example: Path, tmp_path: Path) -> None:
    out = tmp_path / "rec"
    devices: dict[str, PtyDevice] = {}
    config, status_port = _localise(example, out, devices)
    feeds: list[_DeviceFeed] = []
    d = Daemon(tmp_path, dumps(config), status_port=status_port).start()
    try:
        ready = d.wait_ready()
        names = [_source_name(s) for s in config["sources"]]
        assert sorted(ready["sources"]) == sorted(names)
        for name, src in ready["sources"].items():
            assert src["state"] in ("listening", "receiving"), (name, src)
        for name, device in devices.items():
            assert ready["sources"][name]["detail"] == f"opened {device.path}"
        protocols = {_source_name(s): s.get("protocol", s["kind"]) for s in config["sources"]}

        # Data through each example's own decoding path, where the test can make it itself.
        feeds = [_DeviceFeed(dev, protocols[name]).start() for name, dev in devices.items()]
        struct_sources = [s for s in config["sources"] if s.get("protocol") == "struct"]
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            for i in range(50):
                for src in struct_sources:
                    sock.sendto(_struct_record(1000 + 10 * i, 2500.0, 12.5), ("127.0.0.1", src["port"]))
        if devices or struct_sources:
            wait_for(lambda: d.status()["recorder"]["frames_written"] > 0, "frames written")
            snap = d.status()
            for name in [*devices, *(s["name"] for s in struct_sources)]:
                assert snap["sources"][name]["samples"] > 0, (name, snap["sources"][name])
        for feed in feeds:
            feed.stop()

        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 0, d.stderr
    finally:
        for feed in feeds:
            feed.stop()
        d.stop()
        for device in devices.values():
            device.close()
    assert "stopped: every session and file finalized" in d.stderr
    files = recordings(out)
    if "can" in devices:
        with Reader(files[0]) as r:
            can = r.frames(0)["can"]
            assert set(can["rpm"].tolist()) == {3000.0}
            steering = can["steering_angle"][~np.isnan(can["steering_angle"])]
            # NaN only before the first STEERING frame: the ENGINE frame before it drove a frame.
            assert len(steering) >= len(can) - 1 and set(steering.round(3).tolist()) == {-12.5}
    if struct_sources:
        with Reader(files[0]) as r:
            feed_frames = r.frames(0)["feed"]
            assert set(feed_frames["rpm"].tolist()) == {2500.0}
