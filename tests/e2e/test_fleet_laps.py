"""Lap records across the fleet: two rigs (real daemons) drive simulated laps on the game's clock
and publish their lap records to a real nats-server. The server goes down while laps are being
made, one rig is killed (``kill -9``) during the outage and started again after it. In the end
the laps bucket holds every lap of every collected file exactly once, each equal to the lap
``wrtfd laps --json --track`` finds there (time, sectors, tick range).
"""

from __future__ import annotations

import asyncio
import functools
import json
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_daemon_harness import FOLLOW_SIMULATOR, Daemon, run_cli, wait_for
from tests.e2e.test_fleet import (
    OVAL,
    fleet,
    fleet_daemon,
    restarted,
    simulate,
    start_connected,
    upload_leftovers,
    wait_laps_sent,
)
from tests.fleet.nats_server import TOKEN, NatsServer

pytestmark = pytest.mark.slow

WAIT_S = 60.0
RATE_HZ = 60


def _lines(d: Daemon) -> list[dict[str, Any]]:
    path = d.tmp_path / "rec" / "laps.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _sent(d: Daemon) -> int:
    return int((fleet(d).get("laps") or {}).get("sent") or 0)


def _frames_written(d: Daemon) -> int:
    return int(d.status()["recorder"]["frames_written"])


def _bucket(server: NatsServer) -> tuple[list[dict[str, Any]], int]:
    async def read() -> tuple[list[dict[str, Any]], int]:
        import nats

        from wrtfd.fleet.laps import read_records

        nc = await nats.connect(server.url, token=TOKEN)
        js = nc.jetstream(timeout=10.0)
        records = await read_records(js, "wrtfd-laps")
        messages = int((await js.stream_info("KV_wrtfd-laps")).state.messages)
        await nc.close()
        return records, messages

    return asyncio.run(read())


def _file_laps(path: Path, tmp: Path) -> list[tuple[int, dict[str, Any]]]:
    """``(session, lap)`` of every lap ``wrtfd laps --track`` finds (a crash leftover repaired first)."""
    fixed = tmp / path.name
    repair = run_cli("repair", str(path), "-o", str(fixed))
    if repair.returncode != 0 or not fixed.exists():
        shutil.copy(path, fixed)
    out = run_cli("laps", str(fixed), "--track", str(OVAL), "--json")
    assert out.returncode == 0, out.stderr
    return [(s["session"], lap) for s in json.loads(out.stdout)["sessions"] for lap in s["laps"]]


def test_lap_records_arrive_once_across_an_outage_and_a_kill(tmp_path: Path) -> None:
    server = NatsServer(tmp_path / "nats").start()
    extra_rec = FOLLOW_SIMULATOR
    extra_fleet = "reconnect_wait_s = 0.5\nlive_hz = 2\n"
    daemons = {
        rig: fleet_daemon(tmp_path, rig, server, recorder_extra=extra_rec, fleet_extra=extra_fleet)
        for rig in ("rig-a", "rig-b")
    }
    sims = []
    try:
        start_connected(daemons.values())
        sims = [simulate(d.ports[0], laps=6, speed_scale=4) for d in daemons.values()]  # type: ignore[attr-defined]
        for d in daemons.values():
            wait_for(functools.partial(_sent, d), "a lap record sent live", WAIT_S)
        server.stop()
        b = daemons["rig-b"]
        before = len(_lines(b))
        wait_for(lambda: len(_lines(b)) > before, "rig-b: a lap made while the server is down", WAIT_S)
        # past the lap's last frames on disk (the writer hands frames over every batch)
        written = _frames_written(b)
        wait_for(lambda: _frames_written(b) > written + RATE_HZ, "rig-b: its frames written", WAIT_S)
        assert b.proc is not None
        b.proc.kill()  # kill -9, in the middle of a session, the server still down
        b.proc.wait(timeout=10)
        for sim in sims:
            assert sim.wait(timeout=120) == 0
        a = daemons["rig-a"]
        assert len(_lines(a)) > _sent(a)  # rig-a has laps that wait for the server
        server.start()
        daemons["rig-b"] = b = restarted(b).start()
        b.wait_ready()
        for d in daemons.values():
            wait_laps_sent(d, WAIT_S)
        for d in daemons.values():
            d.signal(signal.SIGTERM)
            assert d.wait_exit() == 0, d.stderr
        # the files: rig-a's last at its stop; rig-b's crash leftover at its restart
        upload_leftovers(daemons.values(), WAIT_S)
        into = tmp_path / "collected"
        got = run_cli("collect", "--url", server.url, "--token", TOKEN, "--into", str(into))
        assert got.returncode == 0, got.stderr

        records, messages = _bucket(server)
        local = [r for d in daemons.values() for r in _lines(d)]
        assert sorted(r["id"] for r in records) == sorted(r["id"] for r in local)
        assert messages == len(records)  # one message per record: none sent twice

        work = tmp_path / "work"
        work.mkdir()
        expected: dict[tuple[str, str, int, int], dict[str, Any]] = {}
        for rig in daemons:
            for path in sorted((into / rig).glob("*.wrtf")):
                for session, lap in _file_laps(path, work):
                    expected[(rig, path.name, session, lap["lap"])] = lap
        by_key = {(r["rig"], r["file"], r["session"], r["lap"]): r for r in records}
        assert len(by_key) == len(records)
        assert set(by_key) == set(expected)  # none lost, none extra
        per_rig = {rig: sum(1 for k in by_key if k[0] == rig) for rig in daemons}
        assert per_rig["rig-a"] >= 4 and per_rig["rig-b"] >= 2, per_rig
        for key, lap in expected.items():
            rec = by_key[key]
            assert rec["time_s"] == pytest.approx(lap["time_s"], abs=1e-4), key
            assert rec["sectors_s"] == pytest.approx(lap["sectors_s"], abs=1e-4), key
            assert rec["start_s"] == pytest.approx(lap["start_s"], abs=1e-4), key
            assert (rec["first_tick"] - 1) / RATE_HZ < lap["start_s"] <= rec["first_tick"] / RATE_HZ + 1e-6
            assert rec["last_tick"] / RATE_HZ < lap["end_s"] <= (rec["last_tick"] + 1) / RATE_HZ + 1e-6

        # the leaderboard: each rig's best (no driver configured: the rig's name), from the bucket
        best = {f"({rig})": min(r["time_s"] for r in records if r["rig"] == rig) for rig in daemons}
        cli = run_cli(
            "laps", "--fleet", "--track", str(OVAL), "--url", server.url, "--token", TOKEN, "--json"
        )
        assert cli.returncode == 0, cli.stderr
        board = json.loads(cli.stdout)
        assert {d["driver"]: d["best_s"] for d in board["drivers"]} == best
        assert [d["gap_s"] for d in board["drivers"]] == pytest.approx(
            sorted(v - min(best.values()) for v in best.values())
        )
        table = run_cli(
            "laps",
            "--fleet",
            "--track",
            str(OVAL),
            "--url",
            server.url,
            "--token",
            TOKEN,
            "--driver",
            "(rig-b)",
        )
        assert table.returncode == 0, table.stderr
        assert "(rig-b)" in table.stdout and "(rig-a)" not in table.stdout
    finally:
        for sim in sims:
            if sim.poll() is None:
                sim.kill()
        for d in daemons.values():
            d.stop()
        server.stop()
