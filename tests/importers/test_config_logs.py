"""CAN and NMEA logs imported through a daemon config (``--config``): the config's sources,
DBC, groups and recorder policy, as the in-car daemon would have recorded the same data."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from tests.importers.frames import assert_same_frames
from wrtfd.cli.main import main
from wrtfd.format import Reader


def incar_config(path: Path, dbc: Path, *, gps_drives: bool) -> None:
    path.write_text(
        f"""
[[sources]]
kind = "serial"
name = "gps"
protocol = "nmea"
device = "/dev/ttyUSB0"
drives_frames = {"true" if gps_drives else "false"}

[[sources]]
kind = "serial"
name = "can0"
protocol = "slcan"
device = "/dev/ttyUSB1"
options = {{ dbc = "{dbc}" }}

[recorder]
rate_hz = 50
session_idle_s = 120
metadata = {{ Car = "BRZ" }}
"""
    )


def frames(path: Path) -> tuple[np.ndarray, dict[str, str]]:
    with Reader(path) as r:
        assert len(r.sessions) == 1
        return np.array(r.frames(0)), dict(r.metadata)


def test_candump_through_the_incar_config(shared_data: Path, tmp_path: Path) -> None:
    base = shared_data / "can" / "subaru"
    log = tmp_path / "drive.log"
    log.write_bytes(b"".join((base / "can_sample.log").read_bytes().splitlines(keepends=True)[:20_000]))
    config = tmp_path / "incar.toml"
    incar_config(config, base / "sample_can_spec.dbc", gps_drives=False)
    by_config, by_dbc = tmp_path / "c.wrtf", tmp_path / "d.wrtf"
    assert main(["import", str(log), "--config", str(config), "-o", str(by_config)]) == 0
    assert (
        main(
            [
                "import",
                str(log),
                "--dbc",
                str(base / "sample_can_spec.dbc"),
                "--rate",
                "50",
                "-o",
                str(by_dbc),
            ]
        )
        == 0
    )
    a, meta = frames(by_config)
    b, _ = frames(by_dbc)
    assert meta["Car"] == "BRZ"  # the config's recorder metadata
    assert list(a["tick"]) == list(b["tick"])
    assert assert_same_frames(a["can0"], b["can0"]) > 10
    assert set(a.dtype.names or ()) >= {"gps", "can0"}  # the whole group's frame, as live
    assert all(math.isnan(v) for v in a["gps"]["lat_deg"])


def test_nmea_through_a_config(shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = shared_data / "nmea" / "ublox-zed-f9p-nmea.log"
    config = tmp_path / "gps.toml"
    incar_config(config, shared_data / "can" / "subaru" / "sample_can_spec.dbc", gps_drives=True)
    out = tmp_path / "gps.wrtf"
    assert main(["import", str(log), "--config", str(config), "-o", str(out)]) == 0
    a, _ = frames(out)
    plain = tmp_path / "plain.wrtf"
    assert main(["import", str(log), "--rate", "50", "-o", str(plain)]) == 0
    b, _ = frames(plain)
    assert list(a["tick"]) == list(b["tick"])
    assert assert_same_frames(a["gps"], b["gps"]) > 10
    # a GPS that only rides along records nothing on its own: one clear error line
    incar_config(config, shared_data / "can" / "subaru" / "sample_can_spec.dbc", gps_drives=False)
    capsys.readouterr()
    assert main(["import", str(log), "--config", str(config), "-o", str(tmp_path / "none.wrtf")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no frame was recorded" in err[0]
