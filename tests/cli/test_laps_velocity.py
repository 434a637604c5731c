"""``wrtfd laps`` on a u-blox recording whose velocity is wrong all the time (20 % high): the
laps are timed from the fixes alone, and the report says so (docs/circuits.md, "How laps are
timed"); the same recording with the receiver's own velocity says nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.tracks.test_gnss_delta import ROAD, UTC0_NS, _session, _turned
from wrtfd.cli.main import main
from wrtfd.decoders.ubx import ubx_definition
from wrtfd.format import Schema, Writer
from wrtfd.recorder.compose import compose_definition
from wrtfd.tracks import load_track
from wrtfd.tracks.circuit import circuit_from_track, circuit_to_dict


def _recording(directory: Path, scale: float) -> tuple[Path, Path]:
    frames, _, _ = _session(10, 0)
    schema = Schema.from_dict(compose_definition([("gps", ubx_definition())]))
    path = directory / f"gps-{scale}.wrtf"
    with Writer(path, schema, rate_hz=10, start_timestamp_us=UTC0_NS // 1000) as w:
        w.begin_session()
        w.write_frames(_turned(frames, scale, 0.0))
    circuit = directory / "road.json"
    circuit.write_text(json.dumps(circuit_to_dict(circuit_from_track(load_track(ROAD)))))
    return path, circuit


@pytest.mark.parametrize(("scale", "ignored"), [(1.2, True), (1.0, False)])
def test_laps_says_when_the_velocity_was_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], scale: float, ignored: bool
) -> None:
    recording, circuit = _recording(tmp_path, scale)
    capsys.readouterr()
    assert main(["laps", str(recording), "--circuit", str(circuit), "--json"]) == 0
    (session,) = json.loads(capsys.readouterr().out)["sessions"]
    assert session["velocity_ignored"] is ignored
    assert [lap["lap"] for lap in session["laps"]] == ([2, 3, 4, 5] if ignored else [1, 2, 3, 4, 5])
    assert main(["laps", str(recording), "--circuit", str(circuit)]) == 0
    said = "laps timed from the fixes alone" in capsys.readouterr().out
    assert said is ignored
