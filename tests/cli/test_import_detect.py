"""``wrtfd import``: the format detected from magic bytes or structure; progress; Ctrl-C leaves nothing."""

from __future__ import annotations

import io
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.pcap.test_pcap_io import classic_pcap, write_tap
from wrtfd.cli.import_cmd import detect_format
from wrtfd.errors import ImportFormatError
from wrtfd.importers.report import PROGRESS_MIN_BYTES, Progress
from wrtfd.pcap import PcapngWriter

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("content", "fmt"),
    [
        (
            b"# candump\n(1631416514.717133) can0 0D2#0000FFFF10000000\n"
            b"(1631416514.717134) can1 12345678#DEAD\n",
            "candump",
        ),
        (b"Time Stamp,ID,Extended,Dir,Bus,LEN,D1,D2\n166064000,0x21A,false,Rx,0,2,FE,36,\n", "savvycan"),
        (b"Time Stamp,ID,Extended,Bus,LEN,D1\n1,21A,false,0,1,FE\n", "savvycan"),
        (
            b"# Name: a receiver\n$GPRMC,113938.50,A,3842.86,N,11705.43,W,0.011,46.4,231122,,,D*2E\r\n"
            b"$GPGGA,1,2\n",
            "nmea",
        ),
        (b"12:00:01 $GPGGA,123519,4807.038,N\n12:00:02 $GPRMC,123519,A\n12:00:03 $$GPGSV,1,1\n", "nmea"),
        (b"ZDDS\x01\x00", "zddsrec"),
        (b"\x01\x00\x0e\x00CARLA_RECORDER", "carla"),
    ],
)
def test_detected_from_content(tmp_path: Path, content: bytes, fmt: str) -> None:
    path = tmp_path / "input.bin"  # the name says nothing
    path.write_bytes(content)
    assert detect_format(path) == fmt


def test_captures_and_ibt_detected(shared_data: Path, tmp_path: Path) -> None:
    tap = tmp_path / "x"
    write_tap(tap, 3)
    assert detect_format(tap) == "pcap"
    classic = tmp_path / "y"
    classic.write_bytes(classic_pcap([], linktype=1, nano=True, order=">"))
    assert detect_format(classic) == "pcap"
    assert detect_format(shared_data / "ibt" / "valid_test_file.ibt") == "ibt"
    assert detect_format(shared_data / "nmea" / "telit-he910.log") == "nmea"
    assert detect_format(shared_data / "can" / "subaru" / "can_sample.log") == "candump"


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"hello\nworld\n",
        b"(1.0) can0 123#00\nnot candump\n",
        struct.pack("<10i", 2, 1, 60, 0, 0, 0, 0, 0, 0, 0),
    ],
)
def test_unknown_content_is_refused(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "u.log"
    path.write_bytes(content)
    with pytest.raises(ImportFormatError):
        detect_format(path)


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_tty_for_big_files() -> None:
    shown = Tty()
    p = Progress("big.pcapng", PROGRESS_MIN_BYTES * 2, stream=shown)
    p.update(PROGRESS_MIN_BYTES)
    p.done()
    assert "importing big.pcapng:  50%" in shown.getvalue()
    small, not_tty = Tty(), io.StringIO()
    Progress("s", PROGRESS_MIN_BYTES - 1, stream=small).update(10)
    Progress("n", PROGRESS_MIN_BYTES * 2, stream=not_tty).update(10)
    assert small.getvalue() == "" and not_tty.getvalue() == ""


@pytest.mark.slow
def test_ctrl_c_leaves_no_file(tmp_path: Path) -> None:
    """SIGINT in the middle of a long import: exit 130, no output, no staging directory."""
    cap = tmp_path / "big.pcapng"
    payload = bytearray(331)
    with cap.open("wb") as f:
        w = PcapngWriter(f)
        iface = w.add_udp_interface("eth0")
        for i in range(150_000):
            struct.pack_into("<iI", payload, 0, 1, i * 16)
            w.write_datagram(
                iface,
                1_700_000_000_000_000_000 + i * 16_666_667,
                ("10.0.0.2", 1),
                ("10.0.0.1", 5301),
                bytes(payload),
            )
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "wrtfd", "import", str(cap), "-o", str(out)],
        stderr=subprocess.PIPE, env=env,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not list(out.glob(".wrtfd-import-*/*.wrtf")):  # recording under way
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "the import never started writing"
        time.sleep(0.02)
    # Stopped first, so the interrupt lands in the import whatever the machine's load: the staging
    # directory is still the only thing in the output (the import has not finished and renamed it).
    proc.send_signal(signal.SIGSTOP)
    try:
        assert proc.poll() is None and [p.name.startswith(".wrtfd-import-") for p in out.iterdir()] == [True]
        proc.send_signal(signal.SIGINT)
    finally:
        proc.send_signal(signal.SIGCONT)
    assert proc.wait(timeout=60) == 130
    assert not out.exists()  # the import made the folder: it goes too (importers/output.py)
