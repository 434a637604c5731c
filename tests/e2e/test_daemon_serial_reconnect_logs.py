"""Serial reconnect lines of a real ``wrtfd run`` are rate limited like every repeated event.

The in-car config (config/incar.toml: a GPS and an SLCAN adapter on USB serial) with its devices
absent: each source retries with a doubling backoff (0.25 s, 0.5 s, 1 s, 2 s, 4 s, ...) and used
to log every retry. docs/daemon.md promises at most one line per ``logging.repeat_interval_s``
for each kind of repeated event.
"""

from __future__ import annotations

import re
import signal
import time
from pathlib import Path

from tests.e2e.test_daemon_harness import Daemon, free_port, wait_for

REPO = Path(__file__).resolve().parents[2]
INTERVAL_S = 4
RECONNECT = re.compile(r" WARNING wrtfd\.sources\.serial: (\w+) \(.*\): reconnecting ")


def incar_without_adapters(tmp_path: Path, status_port: int) -> str:
    """config/incar.toml with devices that are not there and a short repeat interval."""
    text = (REPO / "config" / "incar.toml").read_text()
    text = text.replace("usb-u-blox_AG_GNSS_receiver-if00", "wrtfd-test-absent-gps")
    text = text.replace("usb-CANable_slcan-if00", "wrtfd-test-absent-can")
    text = text.replace('"example-car.dbc"', repr(str(REPO / "config" / "example-car.dbc")).replace("'", '"'))
    text = text.replace("port = 8787", f"port = {status_port}")
    text = text.replace("[recorder]\n", f'[recorder]\noutput_dir = "{tmp_path / "rec"}"\n')
    assert "absent-gps" in text and "absent-can" in text and str(status_port) in text
    return text + f'\n[logging]\nformat = "text"\nrepeat_interval_s = {INTERVAL_S}\n'


def test_reconnect_lines_are_at_most_one_per_repeat_interval(tmp_path: Path) -> None:
    status_port = free_port()
    d = Daemon(tmp_path, incar_without_adapters(tmp_path, status_port), status_port=status_port)
    started = time.monotonic()
    d.start()
    try:
        d.wait_ready()

        def retried_five_times() -> bool:
            # The fifth failed open waits 4 s: 0.25 + 0.5 + 1 + 2 s of retries are behind.
            sources = d.status()["sources"]
            return all(sources[name]["detail"].endswith("retry in 4 s") for name in ("gps", "can"))

        wait_for(retried_five_times, "five failed opens of each device")
        d.signal(signal.SIGTERM)
        elapsed_s = time.monotonic() - started  # the daemon logged for less than this
        assert d.wait_exit() == 0, d.stderr
    finally:
        d.stop()
    per_source: dict[str, int] = {}
    for line in d.lines:
        if m := RECONNECT.search(line):
            per_source[m[1]] = per_source.get(m[1], 0) + 1
    allowed = int(elapsed_s // INTERVAL_S) + 1
    assert set(per_source) == {"gps", "can"}, d.stderr
    assert all(1 <= n <= allowed for n in per_source.values()), (per_source, allowed, d.stderr)
