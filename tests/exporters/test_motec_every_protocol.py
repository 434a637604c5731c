"""Issue 23 item 13: every shipped game's common channels get MoTeC's names in a ``.ld``.

For each shipped definition (read here from ``wrtfd/schemas``, not through wrtfd's registry) a
recording is made of a source the user named ``car`` (so the game is recognised by its fields,
not its name), with known values in the common channels; the export is read back with the
independent ``.ld`` reader and each MoTeC channel must hold those values, converted as MoTeC
expects (pedals in %, steering angle in degrees, gear -1 = reverse).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
import yaml

from tests.exporters.ld_reader import read_ld
from wrtfd.cli.main import main
from wrtfd.decoders.base import Sample
from wrtfd.decoders.registry import all_protocols
from wrtfd.recorder import RecorderPolicy, SourceSpec, replay

SCHEMAS = Path(__file__).resolve().parents[2] / "wrtfd" / "schemas"
START_US = 1_767_225_600_000_000
N = 120


class Want(NamedTuple):
    motec: str
    field: str
    low: float  # the field's values run from low to high over the recording
    high: float
    factor: float = 1.0
    offset: float = 0.0


def pedals(throttle: str, brake: str, full: float) -> list[Want]:
    pct = 100.0 / full
    return [Want("Throttle Pos", throttle, 0, full, pct), Want("Brake Pos", brake, 0, full, pct)]


DEG = 180.0 / math.pi

#: protocol -> the MoTeC channels its recording must have (from the protocols' own documents).
EXPECTED: dict[str, list[Want]] = {
    "forza": [
        Want("Ground Speed", "speed", 0, 80),
        Want("Engine RPM", "engine_rpm", 800, 9000),
        Want("Gear", "gear", 0, 7),
        *pedals("accel", "brake", 255),
    ],
    "f1": [
        Want("Ground Speed", "speed", 0, 330),
        Want("Engine RPM", "engine_rpm", 4000, 12000),
        Want("Gear", "gear", -1, 8),
        *pedals("throttle", "brake", 1),
    ],
    "assetto_corsa": [
        Want("Ground Speed", "speed_kmh", 0, 250),
        Want("Engine RPM", "engine_rpm", 800, 8000),
        *pedals("gas", "brake", 1),
    ],
    "codemasters": [
        Want("Ground Speed", "speed", 0, 60),
        Want("Engine RPM", "engine_rpm", 800, 8000),
        *pedals("throttle", "brake", 1),
    ],
    "outgauge": [
        Want("Ground Speed", "speed", 0, 60),
        Want("Engine RPM", "rpm", 800, 8000),
        Want("Gear", "gear", 0, 7, 1.0, -1.0),
        *pedals("throttle", "brake", 1),
    ],
    "outsim2": [
        Want("Gear", "gear", 0, 7, 1.0, -1.0),
        Want("Steered Angle", "input_steer", -1.5, 1.5, DEG),
        *pedals("throttle", "brake", 1),
    ],
    "nmea": [
        Want("GPS Latitude", "lat_deg", 51.0, 51.01),
        Want("GPS Longitude", "lon_deg", -1.02, -1.0),
        Want("GPS Speed", "speed_mps", 0, 50),
        Want("GPS Heading", "course_deg", 0, 359),
    ],
    "ubx": [
        Want("GPS Latitude", "lat_deg", 44.9, 44.91),
        Want("GPS Longitude", "lon_deg", 2.5, 2.51),
        Want("GPS Altitude", "alt_msl_m", 300, 320),
        Want("GPS Speed", "speed_mps", 0, 50),
        Want("GPS Heading", "course_deg", 0, 359),
    ],
    "obd": [
        Want("Ground Speed", "vehicle_speed_kmh", 0, 200),
        Want("Engine RPM", "engine_rpm", 800, 6000),
        Want("Throttle Pos", "throttle_pct", 0, 100),
    ],
    "gt7": [
        Want("Ground Speed", "speed", 0, 80),
        Want("Engine RPM", "engine_rpm", 800, 9000),
        Want("Gear", "gear", 0, 7),
        Want("Steered Angle", "steering_wheel_angle", -2, 2, DEG),
        *pedals("throttle", "brake", 255),
    ],
    "pcars2": [
        Want("Ground Speed", "speed", 0, 80),
        Want("Engine RPM", "rpm", 800, 9000),
        Want("Gear", "gear", -1, 7),
        Want("Steering Pos", "steering", -127, 127, 100.0 / 127.0),
        *pedals("throttle", "brake", 255),
    ],
    "pcars": [
        Want("Ground Speed", "speed", 0, 80),
        Want("Engine RPM", "rpm", 800, 9000),
        Want("Gear", "gear", -1, 7),
        Want("Steering Pos", "steering", -127, 127, 100.0 / 127.0),
        *pedals("throttle", "brake", 255),
    ],
    "acc": [
        Want("Ground Speed", "speed_kmh", 0, 280),
        Want("Gear", "gear", -1, 6),
    ],
    "wrc": [
        Want("Ground Speed", "vehicle_speed", 0, 60),
        Want("Engine RPM", "vehicle_engine_rpm_current", 800, 8000),
        Want("Gear", "vehicle_gear_index", 0, 6),
        Want("Steering Pos", "vehicle_steering", -1, 1, 100.0),
        *pedals("vehicle_throttle", "vehicle_brake", 1),
    ],
}

#: Shipped definitions with none of the common channels (LFS OutSim v1: motion and position only).
NO_COMMON_CHANNELS = {"outsim"}


def definition(protocol: str) -> dict[str, Any]:
    data = yaml.safe_load((SCHEMAS / f"{protocol}.wrtf.yaml").read_text())
    assert isinstance(data, dict)
    return data


def field_type(defn: dict[str, Any], name: str) -> str:
    frame = defn["frame"]
    fields = frame["fields"] if isinstance(frame, dict) else frame
    (found,) = [f["type"] for f in fields if f["name"] == name]
    return str(found)


def ramp(want: Want, type_name: str) -> np.ndarray:
    values = np.linspace(want.low, want.high, N)
    if not type_name.startswith("float"):
        values = np.round(values)
    return values.astype(np.dtype(type_name if type_name != "bool" else "u1"))


def test_every_shipped_definition_is_covered() -> None:
    """A game added with a definition but no MoTeC names (or no entry here) fails."""
    shipped = {p.name.removesuffix(".wrtf.yaml") for p in SCHEMAS.glob("*.wrtf.yaml")}
    assert shipped == set(EXPECTED) | NO_COMMON_CHANNELS
    fixed = {name for name, info in all_protocols().items() if isinstance(info.schema_file, str)}
    assert fixed == shipped


@pytest.mark.parametrize("protocol", sorted(EXPECTED))
def test_common_channels_have_motec_names(protocol: str, tmp_path: Path) -> None:
    defn = definition(protocol)
    wants = EXPECTED[protocol]
    columns = {w.field: ramp(w, field_type(defn, w.field)) for w in wants}
    samples = [
        Sample("car", 10**12 + i * 20_000_000, {k: v[i].item() for k, v in columns.items()}) for i in range(N)
    ]
    (wrtf,) = replay(
        samples,
        [SourceSpec("car", defn)],
        RecorderPolicy(output_dir=tmp_path, rate_hz=50),
        start_timestamp_us=START_US,
    )
    out = tmp_path / "car.ld"
    assert main(["export", str(wrtf), "-o", str(out)]) == 0
    ld = read_ld(out.read_bytes())
    for want in wants:
        channel = ld.channel(want.motec)
        expected = columns[want.field].astype(np.float64) * want.factor + want.offset
        got = channel.physical()
        assert got.shape == expected.shape, want
        tol = channel.precision + 1e-5 * max(1.0, float(np.abs(expected).max()))
        np.testing.assert_allclose(got, expected, rtol=0, atol=tol, err_msg=str(want))
