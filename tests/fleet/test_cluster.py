"""A three-node JetStream cluster on loopback: a rig (a real daemon) uploads to it with
``servers = [...]`` and ``replicas = 3`` while it records simulated laps; the node it is
connected to is killed (``kill -9``) in the middle of an upload. The rig moves to another node,
every upload completes, every lap record arrives once, ``wrtfd collect`` (given all three URLs,
one of them dead) gives byte-identical files, and ``wrtfd fleet status`` keeps answering.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_daemon_harness import FOLLOW_SIMULATOR, Daemon, free_port, run_cli, udp_source, wait_for
from tests.e2e.test_fleet import OVAL, simulate
from tests.fleet.nats_server import TOKEN, NatsCluster

pytestmark = pytest.mark.slow

#: Small files at a capped rate: the uploads last a few seconds, long enough to lose a node in one.
FILES = 4
FILE_BYTES = 96 * 1024
RATE = 32 * 1024
WAIT_S = 90.0


@pytest.fixture
def cluster(tmp_path: Path) -> Any:
    c = NatsCluster(tmp_path / "nats").start()
    yield c
    c.stop()


def _fleet(d: Daemon) -> dict[str, Any]:
    return dict(d.status().get("fleet") or {})


def _server_side(urls: list[str], names: list[str]) -> tuple[dict[str, int], list[dict[str, Any]], int]:
    """The streams' replicas, the lap records in the bucket and the messages its stream holds."""

    async def read() -> tuple[dict[str, int], list[dict[str, Any]], int]:
        import nats

        from wrtfd.fleet.laps import read_records

        nc = await nats.connect(urls, token=TOKEN)
        try:
            js = nc.jetstream(timeout=10.0)
            replicas = {n: int((await js.stream_info(n)).config.num_replicas or 0) for n in names}
            records = await read_records(js, "wrtfd-laps")
            messages = int((await js.stream_info("KV_wrtfd-laps")).state.messages)
            return replicas, records, messages
        finally:
            await nc.close()

    return asyncio.run(read())


def _local_laps(rec: Path) -> list[dict[str, Any]]:
    path = rec / "laps.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def test_rig_moves_to_another_node_uploads_complete_collect_is_byte_identical(
    tmp_path: Path, cluster: NatsCluster
) -> None:
    rec = tmp_path / "rig" / "rec"
    rec.mkdir(parents=True)
    local = {}
    for i in range(FILES):
        path = rec / f"2026-11-27_10-0{i}-00_forza.wrtf"
        path.write_bytes(os.urandom(FILE_BYTES))
        old = time.time() - 60
        os.utime(path, (old, old))  # finished before the daemon started: the start-up scan queues it
        local[path.name] = path.read_bytes()
    status_port, forza_port = free_port(), free_port(socket.SOCK_DGRAM)
    servers = ", ".join(f'"{u}"' for u in cluster.urls)
    config = (
        udp_source("forza", "forza", forza_port, f'track = "{OVAL}"\n')
        + f'[recorder]\noutput_dir = "rec"\n{FOLLOW_SIMULATOR}session_idle_s = 3.0\n'
        + f'[status]\nport = {status_port}\n[logging]\nformat = "text"\n'
        + f'[fleet]\nservers = [{servers}]\nreplicas = 3\ntoken = "{TOKEN}"\nrig = "rig-c"\n'
        + f"status_interval_s = 1.0\nchunk_bytes = 16384\nupload_rate_bytes_s = {RATE}\n"
        + "reconnect_wait_s = 0.5\nconnect_timeout_s = 2\n"
    )
    d = Daemon(tmp_path / "rig", config, status_port=status_port).start()
    sim = None
    try:
        d.wait_ready()
        sim = simulate(forza_port, laps=5, speed_scale=4)  # lap records published meanwhile

        def laps_sent() -> bool:
            return int((_fleet(d).get("laps") or {}).get("sent") or 0) >= 1

        wait_for(laps_sent, "a lap record sent", WAIT_S)

        def uploading() -> str | None:
            f = _fleet(d)
            current = (f.get("uploads") or {}).get("current") or {}
            return (
                f.get("server")
                if current.get("sent_bytes", 0) > 0 and f.get("state") == "connected"
                else None
            )

        first = wait_for(uploading, "an upload under way", WAIT_S)
        assert first in cluster.urls
        cluster.node_of(first).kill()

        def moved() -> str | None:
            f = _fleet(d)
            return f.get("server") if f.get("state") == "connected" and f.get("server") != first else None

        second = wait_for(moved, "the rig on another node", WAIT_S)
        assert second in cluster.urls and second != first

        assert sim.wait(timeout=WAIT_S) == 0

        def settled() -> dict[str, Any] | None:
            f = _fleet(d)
            up = f.get("uploads") or {}
            laps = f.get("laps") or {}
            if d.status()["recorder"]["in_session"] or up.get("queued") != 0:
                return None
            # the recording of the laps too (closed when its session idled)
            done = up.get("done") == len(list(rec.glob("*.wrtf"))) and laps.get("pending_bytes") == 0
            return up if done else None

        try:
            up = wait_for(settled, "every upload verified, every lap record sent", WAIT_S)
        except AssertionError:
            print(
                "DEBUG",
                json.dumps(_fleet(d), indent=1),
                d.status()["recorder"]["in_session"],
                d.stderr[-3000:],
            )
            raise
        files = sorted(p.name for p in rec.glob("*.wrtf"))
        assert up["done"] >= FILES and len(files) > FILES
        for name in files:
            local.setdefault(name, (rec / name).read_bytes())

        everyone = ",".join(cluster.urls)  # the dead node first or not: the list is shuffled
        status = run_cli("fleet", "status", "--url", everyone, "--token", TOKEN, "--json")
        assert status.returncode == 0, status.stderr
        doc = json.loads(status.stdout)
        assert doc["rigs"]["rig-c"]["fleet"]["uploads"]["done"] >= FILES
        assert doc["bucket"]["bytes"] >= FILES * FILE_BYTES

        into = tmp_path / "collected"
        got = run_cli("collect", "--url", everyone, "--token", TOKEN, "--into", str(into))
        assert got.returncode == 0, got.stderr
        collected = {p.name: p.read_bytes() for p in (into / "rig-c").iterdir()}
        assert collected == local

        # the files, the state and events, the lap records and the best laps' lap files
        names = ["OBJ_wrtfd", "WRTFD_STATE", "WRTFD_EVENTS", "KV_wrtfd-laps", "OBJ_wrtfd-best-laps"]
        replicas, records, messages = _server_side([u for u in cluster.urls if u != first], names)
        assert replicas == dict.fromkeys(names, 3)
        lines = _local_laps(rec)
        assert len(lines) >= 3
        assert sorted(r["id"] for r in records) == sorted(r["id"] for r in lines)
        assert messages == len(records)  # each once
        assert {r["id"]: r for r in records} == {r["id"]: r for r in lines}
        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 0, d.stderr
    finally:
        if sim is not None and sim.poll() is None:
            sim.kill()
        d.stop()
