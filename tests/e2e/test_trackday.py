"""A whole track day, headless (issue 24, "Must show").

The real daemon (``wrtfd run``) from a config with a u-blox source (``protocol = "ubx"`` on the
pty of ``wrtfd simulate --protocol ubx --pty``) and ``circuit = "auto"``, no circuit file. The
simulator drives 5 laps of road.trk ("Hillside road course", laid on its anchor: Hillside in the
shipped library) with 1 m of position noise, at 25 Hz (the rate the daemon sets the receiver to),
8 times faster than real time (``--speed-scale 8``; the daemon records at the source's clock,
``recorder.clock = "source"``, so the file's times are the receiver's). Checked:

- the journal: the receiver set up, ``circuit Hillside picked, 0.0 km from the first fix``;
- the laps and sectors the daemon timed (its status, what the page shows) against the
  simulator's own (``--truth``), and the same laps from ``wrtfd laps FILE --json`` (no options:
  the circuit reached the file's metadata);
- the refinement of live laps (``refine_lag_s = 20`` here, the simulator holding the car 22 s of
  drive time after the last line, so that its last lap is refined while fixes come): the page's
  last and best lap and each lap record in ``laps.jsonl`` (once per lap) and journal line are the
  refined times, within a few ms of ``wrtfd laps`` (smoothed over the whole session);
- the page in a real browser: the last and best lap times, the circuit, and the delta;
- ``wrtfd export FILE -o run.vbo``: the ``[laptiming]`` Start gate of the circuit, the columns.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.e2e.test_daemon_harness import (
    FOLLOW_SIMULATOR,
    UBX_PATIENCE,
    Daemon,
    free_port,
    recordings,
    run_cli,
    wait_for,
)
from tests.e2e.test_web_page import PHONE, browser  # noqa: F401  (the module's browser fixture)
from wrtfd.format import Reader
from wrtfd.tracks.circuit import shipped_circuits

pytestmark = pytest.mark.slow

ROAD = Path(__file__).resolve().parents[2] / "config" / "tracks" / "road.trk"
LAPS = 5
#: The simulated car's laps from 25 Hz fixes with 1 m of white noise (one value per epoch; the
#: noise drawn depends on when the daemon enables NAV-PVT, so it differs run to run). The issue
#: asks for 5 ms: runs of this test gave 0.0-4.6 ms (sectors up to 6.4 ms), but the same pipeline
#: offline over 8 seeds reaches 11 ms (sectors 16 ms). The bounds are what holds, not the goal.
LAP_TOLERANCE_S = 0.012
SECTOR_TOLERANCE_S = 0.020
#: The source's ``refine_lag_s`` (less than the default 60 s: 2.5 s of real time at 8x).
REFINE_LAG_S = 20
#: A refined live lap against the same lap after the session (``wrtfd laps``: smoothed over every
#: fix, not only the lag's): the issue's 5 ms at 25 Hz.
REFINED_TOLERANCE_S = 0.005


def _fmt_lap(s: float) -> str:
    """The page's lap-time format (app.js fmtLap)."""
    ms = round(s * 1000)
    m, rest = divmod(ms, 60000)
    return f"{m}:{rest / 1000:06.3f}" if m else f"{rest / 1000:.3f}"


def _page(browser: Any, url: str, ready_js: str) -> dict[str, str]:  # noqa: F811
    """What the page shows of the laps once ``ready_js`` holds, read in one go (one short
    browser session)."""
    context = browser.new_context(viewport=PHONE, bypass_csp=True)
    card = '[data-group="main"]'
    selectors = {
        "current": ".laprow.current .v",
        "last": ".laprow.last .v",
        "best": ".laprow.best .v",
        "circuit": ".laprow.circuit .v",
        "delta": ".delta .dval",
        "ref": ".delta .dref",
    }
    try:
        page = context.new_page()
        page.goto(url)
        try:
            page.wait_for_function(ready_js.replace("CARD", card), timeout=60_000)
        except Exception:
            print(page.locator(card).inner_html())
            raise
        read = ", ".join(
            f"{k}: document.querySelector('{card} {sel}')?.textContent ?? null"
            for k, sel in selectors.items()
        )
        shown: dict[str, str] = page.evaluate(f"() => ({{{read}}})")
        shown["button"] = str(page.locator(f"{card} .sfbtn").is_visible())
        return shown
    finally:
        context.close()


@contextlib.contextmanager
def _track_day(
    tmp_path: Path,
    *sim_args: str,
    source: str,
    ubx: str = "rate_hz = 25\nbaud = 115200\nnmea_off = true\n",
    recorder: str = f"rate_hz = 50\n{FOLLOW_SIMULATOR}session_idle_s = 120\n",
    link_name: str = "gnss",
) -> Iterator[tuple[Daemon, subprocess.Popen[str], int]]:
    """The u-blox simulator driving road.trk on a pty (``sim_args`` added) and the daemon reading
    it at 9600 baud (``source`` lines added to its source, ``[sources.ubx]`` ``ubx``, recording
    into ``tmp_path / "rec"``), started and ready; both stopped at the end. Yields the daemon,
    the simulator and the status port."""
    link = tmp_path / link_name
    sim = subprocess.Popen(
        [
            *(sys.executable, "-m", "wrtfd", "simulate", "--protocol", "ubx", "--pty", "--track", str(ROAD)),
            *("--link", str(link), *sim_args),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    status_port = free_port()
    config = (
        f'[[sources]]\nkind = "serial"\nname = "gps"\nprotocol = "ubx"\ndevice = "{link}"\nbaudrate = 9600\n'
        f"{source}[sources.ubx]\n{ubx}{UBX_PATIENCE}"
        f'[recorder]\noutput_dir = "{tmp_path / "rec"}"\n{recorder}'
        f'[status]\nport = {status_port}\n[logging]\nformat = "text"\n'
    )
    d = Daemon(tmp_path, config, status_port=status_port)
    try:
        assert sim.stdout is not None
        assert sim.stdout.readline().strip().startswith("/dev/")
        wait_for(link.exists, "the simulator's pty link")
        d.start()
        d.wait_ready()
        yield d, sim, status_port
    finally:
        d.stop()
        if sim.poll() is None:
            sim.send_signal(signal.SIGTERM)
        sim.wait(timeout=20)


def _delta(text: str) -> float:
    """A delta as the page writes it (``+0.12``, ``−0.05``)."""
    return float(text.replace("−", "-"))


@pytest.mark.allow_leaks  # Playwright's executor thread lives with the module's browser fixture
def test_a_whole_track_day_headless(tmp_path: Path, browser: Any) -> None:  # noqa: F811
    truth_file = tmp_path / "truth.json"
    out = tmp_path / "rec"
    with _track_day(
        tmp_path,
        *("--generation", "m10", "--truth", str(truth_file), "--laps", str(LAPS), "--seed", "5"),
        *("--noise-m", "1", "--noise-tau-s", "0.04", "--speed-scale", "8", "--wait", "60"),
        *("--hold", str(REFINE_LAG_S + 2)),
        source=f'circuit = "auto"\nrefine_lag_s = {REFINE_LAG_S}\n',
        link_name="usb-u-blox-if00",
    ) as (d, sim, status_port):
        wait_for(lambda: any("found at 9600 baud" in ln for ln in d.lines), "the receiver set up")
        picked = wait_for(
            lambda: next((ln for ln in d.lines if "circuit Hillside picked" in ln), None),
            "the circuit picked",
        )
        assert re.search(r"source gps: circuit Hillside picked, 0\.0 km from the first fix$", picked), picked
        # while the car drives lap 3 or later: the delta to the best lap, the last lap's delta
        url = f"http://127.0.0.1:{status_port}/"
        driving = _page(
            browser,
            url,
            "(document.querySelector('CARD .delta .dref')?.textContent || '')"
            ".includes('last lap') && document.querySelector('CARD .delta .dval')?.textContent !== '–'",
        )
        assert sim.wait(timeout=240) == 0, sim.communicate()[1]  # the drive is over
        try:
            wait_for(
                lambda: (
                    d.status()["recorder"]["derived"].get("laps", {}).get("lap_count", 0) >= LAPS
                    and (d.status()["recorder"]["laps_live"].get("laps", {}).get("last") or {}).get("final")
                ),
                "every lap timed, the last one refined",
            )
        except AssertionError as e:  # say what the daemon saw: its laps, the source's counts, its log
            seen = d.status()
            raise AssertionError(
                f"{e}\n{seen['recorder'].get('derived')}\n{seen['sources']}\n{d.stderr}"
            ) from None
        status = d.status()["recorder"]
        shown = _page(
            browser,
            url,
            "(document.querySelector('CARD .laprow.best .v')?.textContent || '').includes('(lap ')"
            " && document.querySelectorAll('CARD .laprow').length === 4",
        )
        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 0, d.stderr
    truth = json.loads(truth_file.read_text())
    want = truth["laps"]
    assert [lap["lap"] for lap in want] == list(range(1, LAPS + 1))
    assert truth["stats"]["rate_hz"] == 25.0

    # what the daemon timed live (its status: what the page is sent)
    live = status["laps_live"]["laps"]
    assert live["circuit"] == "Hillside" and live["lap_count"] == LAPS
    assert status["derived"]["laps"]["lap_count"] == LAPS
    best = min(want, key=lambda lap: lap["time_s"])
    assert live["best"]["number"] == best["lap"]
    assert abs(live["best"]["time_s"] - best["time_s"]) < LAP_TOLERANCE_S
    assert abs(live["last"]["time_s"] - want[-1]["time_s"]) < LAP_TOLERANCE_S

    # the page (a real browser), after the drive: the laps and the circuit
    assert shown["circuit"] == "Hillside" and shown["button"] == "True", shown
    assert shown["last"].startswith(_fmt_lap(live["last"]["time_s"]) + " ("), shown
    assert shown["best"].startswith(f"{_fmt_lap(live['best']['time_s'])} (lap {best['lap']})"), shown
    # while driving: a delta in large digits, and the last lap's delta to the best before it
    assert re.fullmatch(r"[+−]\d+\.\d\d", driving["delta"]), driving
    m = re.search(r"^vs (\S+) \(lap (\d)\) · last lap ([+−]\d+\.\d\d)$", driving["ref"])
    assert m is not None, driving
    last_s = float(driving["last"].split()[0])
    current = re.match(r"lap (\d+) ", driving["current"])
    assert current is not None, driving
    k = int(current[1]) - 2  # the index of the lap just timed, in the truth's list
    assert k >= 1 and abs(want[k]["time_s"] - last_s) < LAP_TOLERANCE_S, (driving, want)
    before = min(lap["time_s"] for lap in want[:k])
    assert abs(_delta(m[3]) - (want[k]["time_s"] - before)) < 2 * LAP_TOLERANCE_S + 0.005, (driving, want)
    ref_lap = min(want[: k + 1], key=lambda lap: lap["time_s"])
    assert int(m[2]) == ref_lap["lap"], (driving, want)

    # the file: laps and sectors from `wrtfd laps FILE --json`, no options
    (recording,) = recordings(out)
    with Reader(recording) as r:
        assert r.metadata["Circuit"] == "Hillside"
        assert "Start" in r.metadata["vbo.laptiming"]
    done = run_cli("laps", str(recording), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["circuit"] == "Hillside"
    (session,) = report["sessions"]
    got = session["laps"]
    assert [lap["lap"] for lap in got] == list(range(1, LAPS + 1))
    errors = []
    for g, w in zip(got, want, strict=True):
        errors.append(abs(g["time_s"] - w["time_s"]))
        assert len(g["sectors_s"]) == len(w["sectors_s"]) == 3
        for gs, ws in zip(g["sectors_s"], w["sectors_s"], strict=True):
            assert abs(gs - ws) < SECTOR_TOLERANCE_S, (g, w)
    assert max(errors) < LAP_TOLERANCE_S, errors
    # the same laps as live; after the session the fixes are smoothed both ways (docs/circuits.md),
    # so a time moves by a few milliseconds from the live one (both are within LAP_TOLERANCE_S of
    # the truth, asserted above)
    assert abs(session["best_lap_s"] - live["best"]["time_s"]) < LAP_TOLERANCE_S

    # refined: the page's last and best lap, the lap records (each lap once) and the journal
    assert live["last"]["final"] and live["best"]["final"]
    assert "refining" not in shown["last"] + shown["best"], shown  # the page's mark until refined
    records = [json.loads(ln) for ln in (out / "laps.jsonl").read_text().splitlines()]
    assert [r["lap"] for r in records] == list(range(1, LAPS + 1)), records
    by_lap = {r["lap"]: r for r in records}
    for g in got:
        r = by_lap[g["lap"]]
        assert abs(r["time_s"] - g["time_s"]) < REFINED_TOLERANCE_S, (r, g)
        assert math.fsum(r["sectors_s"]) == pytest.approx(r["time_s"], abs=1e-5)
        # one journal line per lap, with the record's time to the millisecond (the record keeps
        # 6 decimals, so a time on a half millisecond may print 1 ms apart)
        said = [
            m for ln in d.lines if (m := re.search(rf"lap {r['lap']} completed in group main: (\S+) ", ln))
        ]
        assert len(said) == 1, "\n".join(ln for ln in d.lines if "completed" in ln)
        minutes, _, seconds = said[0][1].rpartition(":")
        assert abs(int(minutes or 0) * 60 + float(seconds) - r["time_s"]) <= 0.0005 + 1e-6, (said[0][0], r)
    for a, b in itertools.pairwise(records):
        assert b["start_s"] == pytest.approx(a["end_s"], abs=2e-6)  # one crossing, refined once
    assert live["last"]["time_s"] == pytest.approx(by_lap[LAPS]["time_s"], abs=5e-4)
    assert live["best"]["time_s"] == pytest.approx(by_lap[live["best"]["number"]]["time_s"], abs=5e-4)

    # the VBO export: the circuit's start gate and the columns
    vbo = tmp_path / "run.vbo"
    done = run_cli("export", str(recording), "-o", str(vbo))
    assert done.returncode == 0, done.stderr
    text = vbo.read_bytes().decode("latin-1")  # CRLF lines, as Racelogic writes them
    sections = dict(re.findall(r"\[([a-z ]+)\]\r\n(.*?)(?=\r\n\[|\Z)", text, re.S))
    start = [ln for ln in sections["laptiming"].splitlines() if ln.startswith("Start")]
    assert len(start) == 1, sections["laptiming"]
    lat_min = float(start[0].split()[2])
    lon_min_west = float(start[0].split()[1])
    circuit = next(c for c in shipped_circuits() if c.name == "Hillside")
    mid = circuit.start.middle
    assert abs(lat_min / 60 - mid[0]) < 1e-6 and abs(-lon_min_west / 60 - mid[1]) < 1e-6
    columns = sections["column names"].split()
    # the standard columns from the u-blox source, then its other channels by their own names
    assert columns[:7] == ["sats", "time", "lat", "long", "velocity", "heading", "height"]
    assert {"h_acc_m", "vel_n_mps", "vel_e_mps"} <= set(columns) and "lap_time" not in columns
    rows = [ln for ln in sections["data"].splitlines() if ln.strip()]
    assert len(rows) > LAPS * 40 * 25 and all(len(r.split()) == len(columns) for r in rows[:100])


@pytest.mark.allow_leaks  # Playwright's executor thread lives with the module's browser fixture
def test_the_pages_start_finish_button_lays_a_line(tmp_path: Path, browser: Any) -> None:  # noqa: F811
    """No circuit near (the one given is 10 km away): the page's SET START/FINISH button, pressed
    while the car drives, lays a line where the car is; the journal and the page say so, and the
    next lap is timed against it. The file being recorded was opened before (its metadata has
    the configured circuit) but keeps the line in a marker: ``wrtfd laps FILE`` times its laps
    against it, the laps the daemon timed live (its lap records), and the VBO export has its
    gate."""
    (tmp_path / "far.json").write_text(
        json.dumps(
            {
                "format": "wrtfd-circuit",
                "name": "Faraway",
                "start_finish": {"a": [45.0, 2.6], "b": [45.0002, 2.6]},
            }
        )
    )
    with (
        _track_day(
            tmp_path,
            *("--laps", "3", "--seed", "2", "--speed-scale", "6", "--wait", "60"),
            source='circuit = "far.json"\n',
            ubx="rate_hz = 10\nbaud = 115200\n",
            recorder=f"rate_hz = 20\n{FOLLOW_SIMULATOR}",
        ) as (d, _sim, status_port),
        browser.new_context(viewport=PHONE, bypass_csp=True) as context,
    ):
        page = context.new_page()
        page.goto(f"http://127.0.0.1:{status_port}/")
        card = '[data-group="main"]'
        page.wait_for_function(
            f"document.querySelector('{card} .laprow.circuit .v')?.textContent === 'Faraway'"
            f" && !document.querySelector('{card} .sfbtn').disabled",
            timeout=60_000,
        )
        # the car moving (a line needs a heading): its lap distance grows
        wait_for(
            lambda: (
                d.status()["recorder"]["laps_live"]["laps"].get("circuit") == "Faraway"
                and any("found at" in ln for ln in d.lines)
                and (d.status()["sources"]["gps"]["rate_hz"] or 0) > 5
            ),
            "the receiver set up",
        )
        # pressed maybe before the car sets off: the line waits for a fix that tells the heading
        page.click(f"{card} .sfbtn")
        laid = wait_for(
            lambda: next((ln for ln in d.lines if "laid across the car's heading by a mark" in ln), None),
            "the line laid",
        )
        assert re.search(r"source gps: circuit start/finish marked at 44\.\d{5}, 2\.\d{5} laid across", laid)
        page.wait_for_function(
            f"(document.querySelector('{card} .laprow.circuit .v')?.textContent || '')"
            ".startsWith('start/finish marked at 44.')",
            timeout=30_000,
        )
        assert page.locator("#markmsg").inner_text() == "start/finish line asked of gps"
        wait_for(
            lambda: d.status()["recorder"]["derived"]["laps"]["lap_count"] >= 2,
            "two laps timed against the laid line",
            timeout_s=120.0,
        )
        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 0, d.stderr
    # the file was open before the line was laid: its metadata keeps the configured circuit; the
    # press is a marker in it, and so is the line laid, which `wrtfd laps` times against
    name = re.search(r"circuit (start/finish marked at .*) laid across", laid)
    assert name is not None
    (recording,) = recordings(tmp_path / "rec")
    with Reader(recording) as r:
        assert r.metadata["Circuit"] == "Faraway"
    assert run_cli("validate", str(recording)).returncode == 0
    done = run_cli("laps", str(recording), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["circuit"] == name[1]
    (session,) = report["sessions"]
    notes = [m["note"] for m in session["markers"]]
    assert notes[0] == "start/finish" and len(notes) == 2, notes
    ends = re.fullmatch(r"start/finish line (44\.\d{7}),(2\.\d{7}) (44\.\d{7}),(2\.\d{7})", notes[1])
    assert ends is not None, notes
    # the daemon's laps (one record each), every one of them in the file's laps, to the tolerance
    # of a live lap against the same lap timed after the session (test_a_whole_track_day_headless)
    live = [json.loads(ln) for ln in (tmp_path / "rec" / "laps.jsonl").read_text().splitlines()]
    assert len(live) >= 2 and all(rec["track"] == name[1] for rec in live), live
    got = session["laps"]
    for rec in live:
        same = [g for g in got if abs(g["end_s"] - rec["end_s"]) < LAP_TOLERANCE_S]
        assert len(same) == 1, (rec, got)
        assert abs(same[0]["time_s"] - rec["time_s"]) < LAP_TOLERANCE_S, (rec, same)
        assert len(same[0]["sectors_s"]) == len(rec["sectors_s"]) == 0  # a laid line has no sectors
    # a crash after the mark (the file cut in the middle of its last lap: no footers, a torn
    # frame group) still gives the line and the laps before the cut: the marker is in the frames
    crashed = tmp_path / "crashed.wrtf"
    data = recording.read_bytes()
    with Reader(recording) as r:  # 3 s into the last lap (frames after the first hold ticks)
        sess = r.sessions[0]
        k = int(np.searchsorted(r.frames(0)["tick"], round((got[-1]["start_s"] + 3.0) * r.rate_hz)))
        cut = sess.frames_offset + k * r.schema.frame_size + r.schema.frame_size // 2
    crashed.write_bytes(data[:cut])
    done = run_cli("laps", str(crashed), "--json")
    assert done.returncode == 0, done.stderr
    torn = json.loads(done.stdout)
    assert torn["circuit"] == name[1]
    assert [g["time_s"] for g in torn["sessions"][0]["laps"]] == pytest.approx(
        [g["time_s"] for g in got[:-1]], abs=LAP_TOLERANCE_S
    )
    # the VBO export: the laid line's gate, not the configured circuit's
    vbo = tmp_path / "run.vbo"
    done = run_cli("export", str(recording), "-o", str(vbo))
    assert done.returncode == 0, done.stderr
    text = vbo.read_bytes().decode("latin-1")
    (start,) = [ln for ln in text.split("\r\n") if ln.startswith("Start")]
    mid_lat = (float(ends[1]) + float(ends[3])) / 2
    mid_lon = (float(ends[2]) + float(ends[4])) / 2
    assert abs(float(start.split()[2]) / 60 - mid_lat) < 1e-6, start
    assert abs(-float(start.split()[1]) / 60 - mid_lon) < 1e-6, start


@pytest.mark.allow_leaks  # Playwright's executor thread lives with the module's browser fixture
def test_a_pit_stop_flags_the_in_lap_and_the_out_lap(tmp_path: Path, browser: Any) -> None:  # noqa: F811
    """The real daemon times a car that takes the pit lane at the end of lap 1 (``wrtfd simulate
    --pit-lap 1``) on road.trk's circuit with pit lines across that lane, the exit after the line:
    the page shows lap 1 as an in-lap while it is the last lap, the journal and the lap records
    flag laps 1 and 2, lap 3 (the only flying lap) is the best and the delta's reference, and
    ``wrtfd laps FILE`` flags the same laps."""
    import dataclasses

    from wrtfd.simulate.gnss import pit_lane_lines
    from wrtfd.tracks import LanePath, load_track
    from wrtfd.tracks.circuit import circuit_from_track, circuit_to_dict
    from wrtfd.tracks.geodesy import track_plane

    track = load_track(ROAD)
    plane = track_plane(track.extensions)
    assert plane is not None
    entry, exit_ = pit_lane_lines(LanePath(track), plane, entry_m=-100.0, exit_m=100.0)
    circuit = dataclasses.replace(
        circuit_from_track(track), name="Hillside with pits", pit_entry=entry, pit_exit=exit_
    )
    (tmp_path / "pits.json").write_text(json.dumps(circuit_to_dict(circuit)))
    truth_file = tmp_path / "truth.json"
    out = tmp_path / "rec"
    with (
        _track_day(
            tmp_path,
            *("--laps", "3", "--seed", "3", "--speed-scale", "6", "--wait", "60"),
            *("--pit-lap", "1", "--truth", str(truth_file), "--noise-m", "1", "--noise-tau-s", "0.04"),
            source='circuit = "pits.json"\n',
        ) as (d, sim, status_port),
        browser.new_context(viewport=PHONE, bypass_csp=True) as context,
    ):
        page = context.new_page()
        page.goto(f"http://127.0.0.1:{status_port}/")
        last_row = '[data-group="main"] .laprow.last .v'
        page.wait_for_function(
            f"(document.querySelector('{last_row}')?.textContent || '').includes('-lap')",
            polling=100,
            timeout=120_000,
        )
        on_page = page.locator(last_row).inner_text()
        shown = d.status()["recorder"]["laps_live"]["laps"]["last"]  # what the page is sent
        assert shown["number"] == 1 and shown["pit"] == "in", shown
        assert on_page.startswith(f"{_fmt_lap(shown['time_s'])} in-lap ("), on_page
        assert sim.wait(timeout=240) == 0, sim.communicate()[1]
        wait_for(lambda: d.status()["recorder"]["derived"]["laps"]["lap_count"] >= 3, "every lap timed")
        live = d.status()["recorder"]["laps_live"]["laps"]
        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 0, d.stderr
    want = json.loads(truth_file.read_text())["laps"]
    assert live["best"]["number"] == 3 and "pit" not in live["best"], live
    assert live["reference"]["number"] == 3, live  # the delta's session reference
    assert abs(live["best"]["time_s"] - want[2]["time_s"]) < LAP_TOLERANCE_S
    journal = [ln for ln in d.stderr.splitlines() if re.search(r"lap \d completed in group main", ln)]
    assert len(journal) == 3, journal
    assert journal[0].endswith(", in-lap (through the pit lane)"), journal
    assert journal[1].endswith(", out-lap (through the pit lane)"), journal
    assert "pit lane" not in journal[2], journal
    records = [json.loads(ln) for ln in (out / "laps.jsonl").read_text().splitlines()]
    assert [(r["lap"], r["pit"], r["valid"]) for r in records] == [
        (1, "in", None),
        (2, "out", None),
        (3, None, None),
    ]
    # timed as any lap; lap 1 begins 3 s after the car set off, the filter only 3 s old (it
    # averages ~30 s): 8.5-14.6 ms measured over three runs, so the sector bound
    for r, w in zip(records, want, strict=True):
        bound = SECTOR_TOLERANCE_S if r["lap"] == 1 else LAP_TOLERANCE_S
        assert abs(r["time_s"] - w["time_s"]) < bound, (r, w)
    (recording,) = recordings(out)
    done = run_cli("laps", str(recording), "--json")
    assert done.returncode == 0, done.stderr
    (session,) = json.loads(done.stdout)["sessions"]
    assert [(lap["lap"], lap.get("pit")) for lap in session["laps"]] == [(1, "in"), (2, "out"), (3, None)]
    assert session["best_lap"] == 3
