"""``wrtfd laps`` on a track day with a pit stop: the simulated car takes the pit lane at the end
of lap 2 (``Drive(pit_laps=...)``, as ``wrtfd simulate --pit-lap 2``), the circuit file has pit
lines across that lane only; the recording is imported through a daemon config as the in-car
daemon records it (docs/circuits.md, "Pit lane")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.tracks.sim_recording import gnss_recording
from wrtfd.cli.main import main
from wrtfd.format import Reader
from wrtfd.tracks.laps import format_lap_time

#: As tests/cli/test_compare_gnss.py: 10 Hz NMEA with 1 m of wandering error.
LAP_TOLERANCE_S = 0.05

LAYOUTS = {
    # the pit exit after the line: lap 2 ends in the pit lane, lap 3 begins there
    "exit-after-the-line": ((-100.0, 100.0), [None, "in", "out", None]),
    # the pit exit before the line: the whole pit lane inside lap 2
    "exit-before-the-line": ((-110.0, -30.0), [None, "in-out", None, None]),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_laps_flags_in_and_out_laps(tmp_path: Path, layout: str, capsys: pytest.CaptureFixture[str]) -> None:
    lines_m, flags = LAYOUTS[layout]
    recording, truth = gnss_recording(tmp_path, laps=4, pit_laps=(2,), pit_lines_m=lines_m)
    with Reader(recording) as r:
        kept = json.loads(r.metadata["CircuitLines"])
    assert {"pit_entry", "pit_exit"} <= set(kept)  # the circuit with its pit lines, in the file
    capsys.readouterr()
    assert main(["laps", str(recording), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (session,) = report["sessions"]
    got = session["laps"]
    assert [lap["lap"] for lap in got] == [1, 2, 3, 4]
    assert [lap.get("pit") for lap in got] == flags
    # timed as any lap: the pit lane runs beside the line, which spans it
    for g, w in zip(got, truth, strict=True):
        assert abs(g["time_s"] - float(w["time_s"])) < LAP_TOLERANCE_S, (g, w)  # type: ignore[arg-type]
    # the best and the theoretical best from the laps on the track only
    racing = [lap for lap in got if lap.get("pit") is None]
    best = min(racing, key=lambda lap: lap["time_s"])
    assert session["best_lap"] == best["lap"] and session["best_lap_s"] == best["time_s"]
    theoretical = sum(min(lap["sectors_s"][k] for lap in racing) for k in range(3))
    assert session["theoretical_best_s"] == round(theoretical, 3)
    for lap in got:
        assert lap["delta_s"] == round(lap["time_s"] - best["time_s"], 3)
    # the table says which laps they are
    assert main(["laps", str(recording)]) == 0
    rows = {int(ln.split()[0]): ln for ln in capsys.readouterr().out.splitlines() if ln[:5].strip().isdigit()}
    for lap in got:
        row = rows[lap["lap"]]
        assert row.split()[1] == format_lap_time(lap["time_s"])
        if lap.get("pit"):
            assert row.endswith(f"  {lap['pit']}-lap"), row
        else:
            assert "-lap" not in row, row
