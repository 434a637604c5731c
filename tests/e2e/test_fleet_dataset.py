"""The fleet's recordings as a dataset: two rigs (real daemons, each with its driver) drive
simulated laps and send their lap records to a real nats-server; ``wrtfd collect`` mirrors their
files, ``wrtfd dataset`` turns the folder into Parquet, and DuckDB's best lap per driver over the
lap table equals the team's leaderboard, ``wrtfd laps --fleet`` (which ranks the records the rigs
sent live, not the files): the same drivers in the same order, the same laps counted, the same
best lap (rig, file, session, lap) and time, and docs/dataset.md's best sectors add up to the
leaderboard's theoretical best. Both ways of timing a file: re-detected on the track file
(``--track``) and read back from the lap channels the rigs recorded.
"""

from __future__ import annotations

import functools
import json
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_daemon_harness import FOLLOW_SIMULATOR, Daemon, run_cli, wait_for
from tests.e2e.test_fleet import (
    OVAL,
    fleet_daemon,
    start_connected,
    upload_leftovers,
    wait_laps_sent,
)
from tests.fleet.nats_server import TOKEN, NatsServer

duckdb = pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")

pytestmark = pytest.mark.slow

WAIT_S = 60.0
DRIVERS = {"rig-a": "Ada", "rig-b": "Bob"}
DOC = Path(__file__).resolve().parents[2] / "docs" / "dataset.md"


def _records(d: Daemon) -> int:
    path = d.tmp_path / "rec" / "laps.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


def _has_laps(d: Daemon) -> bool:
    return _records(d) >= 2


def _simulate(port: int, *, laps: int, seed: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "wrtfd", "simulate", "--protocol", "forza", "--track", str(OVAL)),
            *("--to", f"127.0.0.1:{port}", "--laps", str(laps), "--speed-scale", "4", "--seed", str(seed)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_dataset_best_lap_per_driver_equals_the_fleet_leaderboard(tmp_path: Path) -> None:
    server = NatsServer(tmp_path / "nats").start()
    daemons = {
        rig: fleet_daemon(
            tmp_path,
            rig,
            server,
            recorder_extra=f'{FOLLOW_SIMULATOR}[recorder.metadata]\nDriver = "{driver}"\n',
            fleet_extra="live_hz = 2\n",
        )
        for rig, driver in DRIVERS.items()
    }
    sims = []
    try:
        start_connected(daemons.values())
        sims = [  # two drives of their own (seeds): different lap times
            _simulate(d.ports[0], laps=laps, seed=seed)  # type: ignore[attr-defined]
            for d, laps, seed in zip(daemons.values(), (3, 4), (5, 6), strict=True)
        ]
        for sim in sims:
            assert sim.wait(timeout=180) == 0
        for d in daemons.values():
            wait_for(functools.partial(_has_laps, d), f"{d.tmp_path.name}: its laps recorded", WAIT_S)
            wait_laps_sent(d, WAIT_S)
            d.signal(signal.SIGTERM)
            assert d.wait_exit() == 0, d.stderr
        upload_leftovers(
            daemons.values(), WAIT_S
        )  # whatever the stop left queued is uploaded at the next start

        into = tmp_path / "collected"
        got = run_cli("collect", "--url", server.url, "--token", TOKEN, "--into", str(into))
        assert got.returncode == 0, got.stderr
        # laps re-detected from the positions on the track file, and read back from the lap
        # channels the rigs recorded live: two ways, one leaderboard
        redetected, recorded = tmp_path / "season", tmp_path / "season-recorded"
        built = run_cli("dataset", str(into), "-o", str(redetected), "--track", str(OVAL))
        assert built.returncode == 0, built.stderr
        built = run_cli("dataset", str(into), "-o", str(recorded))
        assert built.returncode == 0, built.stderr

        cli = run_cli(
            "laps", "--fleet", "--track", str(OVAL), "--url", server.url, "--token", TOKEN, "--json"
        )
        assert cli.returncode == 0, cli.stderr
        board = json.loads(cli.stdout)
    finally:
        for sim in sims:
            if sim.poll() is None:
                sim.kill()
        for d in daemons.values():
            d.stop()
        server.stop()

    for out in (redetected, recorded):
        _same_as_the_leaderboard(out, board)


def _same_as_the_leaderboard(out: Path, board: dict[str, Any]) -> None:
    con = duckdb.connect()
    rows = con.sql(
        f"""
        SELECT coalesce(driver_name, '(' || rig || ')') AS who, count(*) AS laps,
               min(time_s) AS best_s, arg_min(rig, time_s) AS rig, arg_min(file, time_s) AS file,
               arg_min(session, time_s) AS session, arg_min(lap, time_s) AS lap
        FROM read_parquet('{out}/laps/**/*.parquet', hive_partitioning = true)
        WHERE track_name = 'Small oval track' AND valid IS NOT false
        GROUP BY who
        ORDER BY best_s, who
        """
    ).fetchall()
    drivers = board["drivers"]
    assert [r[0] for r in rows] == [d["driver"] for d in drivers]
    assert {d["driver"] for d in drivers} == set(DRIVERS.values())
    for (driver, laps, best_s, rig, file, session, lap), d in zip(rows, drivers, strict=True):
        best = d["best"]
        assert driver == d["driver"]
        assert laps == d["laps"] >= 2, (driver, laps, d["laps"])
        assert best_s == pytest.approx(d["best_s"], abs=1e-4)
        assert (rig, file, session, lap) == (
            best["rig"],
            f"{best['rig']}/{best['file']}",
            best["session"],
            best["lap"],
        )
        assert d["rigs"] == [rig] and DRIVERS[rig] == driver
    # the doc's best sectors per driver, added up: the leaderboard's theoretical best
    query = re.findall(r"```sql\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)[0]
    sectors = con.sql(query.replace("'OUT/", f"'{out}/")).fetchall()
    for d in drivers:
        mine = [best for who, _, best in sectors if who == d["driver"]]
        assert len(mine) == 3
        assert sum(mine) == pytest.approx(d["theoretical_best_s"], abs=3e-4)
