"""MCAP export for Foxglove, JSON encoding: read back with the mcap reader, every message checked
against its schema (the CDR encoding: test_mcap_cdr.py)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.format.samples import write_car_file
from wrtfd.cli.main import main
from wrtfd.format import Reader
from wrtfd.format.reader import ticks_to_time_us

mcap_reader = pytest.importorskip("mcap.reader")
jsonschema = pytest.importorskip("jsonschema")


def read_all(
    path: Path,
) -> tuple[dict[str, list[tuple[int, int, dict[str, Any]]]], dict[str, str], list[Any]]:
    """{topic: [(log_time, publish_time, message)]}, {topic: schema name}; every message is
    validated against its channel's JSON Schema on the way."""
    out: dict[str, list[tuple[int, int, dict[str, Any]]]] = defaultdict(list)
    names: dict[str, str] = {}
    validators: dict[int, Any] = {}
    with path.open("rb") as f:
        reader = mcap_reader.make_reader(f)
        metadata = list(reader.iter_metadata())
        for schema, channel, message in reader.iter_messages():
            assert (
                schema is not None and schema.encoding == "jsonschema" and channel.message_encoding == "json"
            )
            v = validators.get(schema.id)
            if v is None:
                doc = json.loads(schema.data)
                jsonschema.Draft202012Validator.check_schema(doc)
                v = validators[schema.id] = jsonschema.Draft202012Validator(doc)
            body = json.loads(message.data)
            v.validate(body)
            out[channel.topic].append((message.log_time, message.publish_time, body))
            names[channel.topic] = schema.name
    return out, names, metadata


def test_forza_topics_values_times_and_laps(forza_oval: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.mcap"
    assert main(["export", str(forza_oval), "-o", str(out), "--mcap-encoding", "json"]) == 0
    topics, names, metadata = read_all(out)
    assert names == {
        "/forza": "wrtfd.forza",
        "/laps": "wrtfd.laps",
        "/stale": "wrtfd.stale",
        "/wrtfd/log": "foxglove.Log",
    }
    with Reader(forza_oval) as r:
        for s in r.sessions:
            f = r.frames(s.index)
            t_ns = ticks_to_time_us(f["tick"], s.time_base_us, r.rate_hz) * 1000
            msgs = [m for m in topics["/forza"] if m[2]["session"] == s.index]
            assert [m[0] for m in msgs] == t_ns.tolist()  # log time = frame time (N9)
            assert [m[1] for m in msgs] == t_ns.tolist()
            assert [m[2]["tick"] for m in msgs] == f["tick"].tolist()
            speed = np.array([m[2]["speed"] for m in msgs], dtype=np.float32)
            assert np.array_equal(speed, f["forza"]["speed"])
            assert [m[2]["tire_temp_2"] for m in msgs] == f["forza"]["tire_temp"][:, 2].tolist()
            assert [m[2]["gear"] for m in msgs] == f["forza"]["gear"].tolist()
            laps = [m[2]["lap_number"] for m in topics["/laps"] if m[2]["session"] == s.index]
            assert laps == f["laps"]["lap_number"].tolist()
        assert metadata[0].name == "wrtfd" and metadata[0].metadata["Track"] == r.metadata["Track"]
    logs = [m[2]["message"] for m in topics["/wrtfd/log"]]
    assert logs[0] == "session 0 start (60 frames)" and logs[-1] == "session 1 end"
    lap_lines = [line for line in logs if " lap " in line]
    assert len(lap_lines) == 2 and sum("(best)" in line for line in lap_lines) == 1
    log_times = [m[0] for m in topics["/wrtfd/log"]]
    assert log_times == sorted(log_times)


def test_gps_location_fixes_for_the_map(gps_drive: Path, tmp_path: Path) -> None:
    out = tmp_path / "gps.mcap"
    assert main(["export", str(gps_drive), "-o", str(out), "--mcap-encoding", "json"]) == 0
    topics, names, _ = read_all(out)
    assert names["/gps/fix"] == "foxglove.LocationFix" and names["/gps"] == "wrtfd.gps"
    fixes = topics["/gps/fix"]
    with Reader(gps_drive) as r:
        f = np.array(r.frames(0))  # a copy: the reader's views die with its memory map
        s = r.sessions[0]
        t_ns = ticks_to_time_us(f["tick"], s.time_base_us, r.rate_hz) * 1000
    ok = np.isfinite(f["gps"]["lat_deg"]) & (f["gps"]["lat_deg"] != 0)
    assert len(fixes) == int(ok.sum()) > 100
    assert [m[0] for m in fixes] == t_ns[ok].tolist()
    assert [m[2]["latitude"] for m in fixes] == f["gps"]["lat_deg"][ok].tolist()  # float64, exact
    assert [m[2]["longitude"] for m in fixes] == f["gps"]["lon_deg"][ok].tolist()
    first = fixes[0][2]
    assert first["timestamp"]["sec"] * 10**9 + first["timestamp"]["nsec"] == fixes[0][0]
    assert first["frame_id"] == "gps" and len(first["position_covariance"]) == 9


def test_nan_enum_text_and_top_level_fields(tmp_path: Path) -> None:
    """A single-source file with fields at the top level: one /frame topic; NaN and inf are
    null, enums their numbers, text strings, bools booleans."""
    src = tmp_path / "car.wrtf"
    write_car_file(src)
    out = tmp_path / "car.mcap"
    assert main(["export", str(src), "-o", str(out), "--session", "0", "--mcap-encoding", "json"]) == 0
    topics, names, _ = read_all(out)
    assert set(names) == {"/frame", "/wrtfd/log"}
    msgs = [m[2] for m in topics["/frame"]]
    assert [m["speed"] for m in msgs][:3] == [pytest.approx(0.1), None, None]
    assert [m["state"] for m in msgs] == [0, 1, 7, 0, 1]
    assert [m["on_track"] for m in msgs] == [True, False, True, False, True]
    assert msgs[0]["driver"] == "Ayrton" and msgs[0]["wheels_3_temperature"] == 83.25
    assert {m["session"] for m in msgs} == {0}


def test_encoder_is_reusable_for_a_live_stream(forza_road: Path) -> None:
    """The live view's seam: frames -> (topic, schema, message), no file involved."""
    from wrtfd.exporters.foxglove import FoxgloveEncoder

    with Reader(forza_road) as r:
        enc = FoxgloveEncoder(r.schema)
        f = r.frames(1)[:3]
        t_us = ticks_to_time_us(f["tick"], r.sessions[1].time_base_us, r.rate_hz)
        got = list(enc.encode(f, t_us, 1))
    assert [t.topic for t, _, _ in got] == ["/forza", "/stale", "/laps"] * 3  # frame order
    for topic, t_ns, data in got:
        jsonschema.validate(json.loads(data), topic.schema)
        assert t_ns % 1000 == 0
