"""A three-node JetStream cluster on loopback: a rig (a real daemon) uploads to it with
``servers = [...]`` and ``replicas = 3``; the node it is connected to is killed (``kill -9``) in
the middle of an upload. The rig moves to another node, every upload completes, ``wrtfd collect``
(given all three URLs, one of them dead) gives byte-identical files, and ``wrtfd fleet status``
keeps answering.
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

from tests.e2e.test_daemon_harness import Daemon, free_port, run_cli, udp_source, wait_for
from tests.fleet.nats_server import TOKEN, NatsCluster

pytestmark = pytest.mark.slow

#: Small files at a capped rate: the uploads last a few seconds, long enough to lose a node in one.
FILES = 4
FILE_BYTES = 96 * 1024
RATE = 64 * 1024
WAIT_S = 90.0


@pytest.fixture
def cluster(tmp_path: Path) -> Any:
    c = NatsCluster(tmp_path / "nats").start()
    yield c
    c.stop()


def _fleet(d: Daemon) -> dict[str, Any]:
    return dict(d.status().get("fleet") or {})


def _stream_replicas(urls: list[str], names: list[str]) -> dict[str, int]:
    async def read() -> dict[str, int]:
        import nats

        nc = await nats.connect(urls, token=TOKEN)
        try:
            js = nc.jetstream(timeout=5.0)
            return {n: int((await js.stream_info(n)).config.num_replicas or 0) for n in names}
        finally:
            await nc.close()

    return asyncio.run(read())


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
    status_port = free_port()
    servers = ", ".join(f'"{u}"' for u in cluster.urls)
    config = (
        udp_source("forza", "forza", free_port(socket.SOCK_DGRAM))
        + f'[recorder]\noutput_dir = "rec"\n[status]\nport = {status_port}\n[logging]\nformat = "text"\n'
        + f'[fleet]\nservers = [{servers}]\nreplicas = 3\ntoken = "{TOKEN}"\nrig = "rig-c"\n'
        + f"status_interval_s = 1.0\nchunk_bytes = 16384\nupload_rate_bytes_s = {RATE}\n"
        + "reconnect_wait_s = 0.5\nconnect_timeout_s = 2\n"
    )
    d = Daemon(tmp_path / "rig", config, status_port=status_port).start()
    try:
        d.wait_ready()

        def uploading() -> str | None:
            f = _fleet(d)
            current = (f.get("uploads") or {}).get("current") or {}
            return f.get("server") if current.get("sent_bytes", 0) > 0 and f.get("state") == "connected" else None

        first = wait_for(uploading, "an upload under way", WAIT_S)
        assert first in cluster.urls
        cluster.node_of(first).kill()

        def moved() -> str | None:
            f = _fleet(d)
            return f.get("server") if f.get("state") == "connected" and f.get("server") != first else None

        second = wait_for(moved, "the rig on another node", WAIT_S)
        assert second in cluster.urls and second != first

        def settled() -> dict[str, Any] | None:
            up = _fleet(d).get("uploads") or {}
            return up if up.get("done") == FILES and up.get("queued") == 0 else None

        up = wait_for(settled, "every upload verified", WAIT_S)
        assert up["done_bytes"] == FILES * FILE_BYTES

        everyone = ",".join(cluster.urls)  # the dead node first or not: the list is shuffled
        status = run_cli("fleet", "status", "--url", everyone, "--token", TOKEN, "--json")
        assert status.returncode == 0, status.stderr
        doc = json.loads(status.stdout)
        assert doc["rigs"]["rig-c"]["fleet"]["uploads"]["done"] == FILES
        assert doc["bucket"]["bytes"] >= FILES * FILE_BYTES

        into = tmp_path / "collected"
        got = run_cli("collect", "--url", everyone, "--token", TOKEN, "--into", str(into))
        assert got.returncode == 0, got.stderr
        collected = {p.name: p.read_bytes() for p in (into / "rig-c").iterdir()}
        assert collected == local

        replicas = _stream_replicas(
            [u for u in cluster.urls if u != first], ["OBJ_wrtfd", "WRTFD_STATE", "WRTFD_EVENTS"]
        )
        assert replicas == {"OBJ_wrtfd": 3, "WRTFD_STATE": 3, "WRTFD_EVENTS": 3}
        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 0, d.stderr
    finally:
        d.stop()
