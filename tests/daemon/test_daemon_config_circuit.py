"""A GNSS source's ``circuit`` / ``circuits``: config keys, the plug-in handed to the recorder,
the circuit in the file metadata, and the journal line of a circuit picked by position."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from wrtfd.daemon.config import load_config
from wrtfd.daemon.journal import describe
from wrtfd.daemon.wiring import build_source, composed_schemas, lap_metadata, prepare
from wrtfd.errors import ConfigError
from wrtfd.recorder.observe import ObserverHub, SourceStateChanged
from wrtfd.tracks.circuit import recorded_circuit, shipped_circuits
from wrtfd.tracks.geodesy import LocalPlane
from wrtfd.tracks.lapchannels import LAP_FIELDS

REPO = Path(__file__).resolve().parents[2]
GPS = '[[sources]]\nkind = "serial"\nname = "gps"\nprotocol = "nmea"\ndevice = "/dev/null"\n'


def _config(tmp_path: Path, extra: str, sources: str = GPS) -> Path:
    path = tmp_path / "wrtfd.toml"
    path.write_text(f'{sources}{extra}\n[recorder]\noutput_dir = "{tmp_path / "rec"}"\n')
    return path


def test_circuit_file(tmp_path: Path) -> None:
    path = _config(tmp_path, f'circuit = "{REPO / "wrtfd" / "circuits" / "road-america.json"}"\n')
    loaded = load_config(path)
    built = build_source(loaded, 0, loaded.config.sources[0])
    assert built.laps is None and built.gnss_laps is not None
    plug = built.gnss_laps
    assert plug.circuit is not None and plug.circuit.name == "Road America"
    meta = lap_metadata(loaded, [plug])
    assert meta["Circuit"] == "Road America"
    again = recorded_circuit(meta, "f.wrtf")
    assert again is not None and again.start == plug.circuit.start
    # the recorded frame: the gps channels and the same lap channels as a game's
    frame = composed_schemas(loaded)["main"].frame_dtype
    assert frame["laps"].names == tuple(f["name"] for f in LAP_FIELDS)
    assert {"lap_number", "lap_distance", "lap_time", "delta", "last_delta"} <= set(frame["laps"].names)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('circuit = "missing.json"\n', "sources[0].circuit: "),
        ('circuit = "c.json"\ntrack = "x.trk"\n', "either a track (game positions) or a circuit"),
        ('circuit = "c.json"\ncircuits = "."\n', "sources[0]: circuits: the folder is for picking"),
        ('circuits = "nodir"\n', "sources[0].circuits: "),
    ],
)
def test_errors_name_the_key(tmp_path: Path, extra: str, message: str) -> None:
    path = _config(tmp_path, extra)
    with pytest.raises(ConfigError) as err:
        loaded = load_config(path)
        build_source(loaded, 0, loaded.config.sources[0])
    assert message in str(err.value)


def test_a_protocol_without_latitude_is_refused(tmp_path: Path) -> None:
    obd = '[[sources]]\nkind = "serial"\nname = "car"\nprotocol = "obd"\ndevice = "/dev/null"\n'
    path = _config(tmp_path, 'circuit = "auto"\n', obd)
    loaded = load_config(path)
    with pytest.raises(ConfigError, match=r"sources\[0\]\.circuit: GNSS lap timing needs the latitude"):
        build_source(loaded, 0, loaded.config.sources[0])


def test_auto_pick_tells_the_journal(tmp_path: Path) -> None:
    mine = tmp_path / "circuits"
    mine.mkdir()
    (mine / "club.json").write_text(
        json.dumps(
            {
                "format": "wrtfd-circuit",
                "name": "Club",
                "start_finish": {"a": [10.0, 10.0], "b": [10.0, 10.0002]},
            }
        )
    )
    (mine / "broken.json").write_text("{")
    loaded = load_config(_config(tmp_path, f'circuits = "{mine}"\n'))
    pipeline = prepare(loaded)
    hub: ObserverHub = pipeline.hub
    seen: list[object] = []

    class Catch:
        def notify(self, item: object) -> None:
            seen.append(item)

    hub.add(Catch(), frames=False)
    # the recorder's own plug-in: every candidate, and the journal's listener
    recorder_plug = pipeline.recorder.groups["main"].recorder.derived[0]
    assert {c.name for c in recorder_plug.candidates} >= {"Club", "Hillside", "Road America"}
    assert len(recorder_plug.pick_listeners) == 1
    hill = next(c for c in shipped_circuits() if c.name == "Hillside")
    lat, lon = LocalPlane(*hill.centre).to_latlon(0.0, 200.0)  # 200 m north of the line
    assert recorder_plug.feed(0.0, float(lat), float(lon), 1000.0) is not None
    event = next(e for e in seen if isinstance(e, SourceStateChanged))
    assert describe(event) == (
        logging.INFO,
        "source gps: circuit Hillside picked, 0.2 km from the first fix",
        "source:gps",
    )
    assert recorder_plug.live()["circuit"] == "Hillside"
    assert np.isfinite(recorder_plug.feed(0.1, float(lat), float(lon) + 1e-5, 1000.1).lap_distance_m)


@pytest.mark.parametrize(
    ("extra", "lag"), [("", 60.0), ("refine_lag_s = 20\n", 20.0), ("refine_lag_s = 0\n", None)]
)
def test_refine_lag_reaches_the_timer(tmp_path: Path, extra: str, lag: float | None) -> None:
    """``refine_lag_s``: the GNSS lap timer's lag (default 60 s, docs/circuits.md); 0: laps final
    at the line."""
    circuit = REPO / "wrtfd" / "circuits" / "road-america.json"
    for key in (f'circuit = "{circuit}"\n', 'circuit = "auto"\n'):
        path = _config(tmp_path, key + extra)
        loaded = load_config(path)
        plug = build_source(loaded, 0, loaded.config.sources[0]).gnss_laps
        assert plug is not None
        if plug.timer is None:  # auto: a timer once a circuit is picked
            plug.use(next(c for c in shipped_circuits() if c.name == "Hillside"))
        assert plug.timer is not None and plug.timer.refine_lag_s == lag


def test_refine_lag_out_of_range_names_the_key(tmp_path: Path) -> None:
    path = _config(tmp_path, 'circuit = "auto"\nrefine_lag_s = -1\n')
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert "refine_lag_s" in str(err.value)
