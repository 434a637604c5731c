"""The shipped ``config/nats-server.conf`` runs a JetStream server the fleet can use as is."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fleet.nats_server import free_port, require_nats_server
from wrtfd.fleet.client import connect, ensure_streams
from wrtfd.fleet.config import ConnectOptions
from wrtfd.fleet.upload import ObjectUploader

CONF = Path(__file__).resolve().parents[2] / "config" / "nats-server.conf"


@pytest.fixture
def shipped_server(tmp_path: Path) -> Iterator[int]:
    """The documented command, on a free loopback port instead of 0.0.0.0:4222."""
    binary = require_nats_server()
    port = free_port()
    log = tmp_path / "log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                binary,
                "-js",
                "-sd",
                str(tmp_path / "store"),
                "-c",
                str(CONF),
                "-a",
                "127.0.0.1",
                "-p",
                str(port),
            ],
            stdout=out,
            stderr=out,
        )
    try:
        deadline = time.monotonic() + 20
        while b"Server is ready" not in log.read_bytes():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def test_the_shipped_config_starts_jetstream_with_its_token(shipped_server: int) -> None:
    token = re.search(r'token: "([^"]+)"', CONF.read_text())
    assert token is not None
    nc = await connect(
        ConnectOptions(servers=(f"nats://127.0.0.1:{shipped_server}",), token=token[1]), name="t"
    )
    js = nc.jetstream()
    await ensure_streams(js)
    await ObjectUploader(js, "wrtfd", new_nuid=lambda: "x").ensure_bucket()
    info = await js.stream_info("OBJ_wrtfd")
    assert info.config.storage == "file"
    assert nc.max_payload == 1 << 20
    await nc.close()


def test_the_shipped_cluster_configs_form_a_jetstream_cluster_with_three_replicas(tmp_path: Path) -> None:
    """``config/nats-cluster/node{1,2,3}.conf`` with only the host names, ports and store
    directories changed for one machine: the three nodes elect a JetStream meta leader and the
    fleet's streams and bucket get three replicas."""
    import asyncio

    from tests.fleet.nats_server import wait_meta_leader

    binary = require_nats_server()
    texts = {i: (CONF.parent / "nats-cluster" / f"node{i}.conf").read_text() for i in (1, 2, 3)}
    token = re.search(r'token: "([^"]+)"', texts[1])
    assert token is not None
    client = {i: free_port() for i in (1, 2, 3)}
    route = {i: free_port() for i in (1, 2, 3)}
    procs = []
    try:
        for i, text in texts.items():
            for j in (1, 2, 3):
                text = text.replace(f"nats-route://node{j}:{6221 + j}", f"nats-route://127.0.0.1:{route[j]}")
            text = text.replace(f"0.0.0.0:{4221 + i}", f"127.0.0.1:{client[i]}")
            text = text.replace(f"0.0.0.0:{6221 + i}", f"127.0.0.1:{route[i]}")
            text = text.replace(f"/var/lib/wrtfd-nats/node{i}", str(tmp_path / f"store{i}"))
            assert "0.0.0.0" not in text and "/var/lib" not in text and "nats-route://node" not in text
            conf = tmp_path / f"node{i}.conf"
            conf.write_text(text)
            log = tmp_path / f"node{i}.log"
            with open(log, "wb") as out:
                procs.append(subprocess.Popen([binary, "-c", str(conf)], stdout=out, stderr=out))
            deadline = time.monotonic() + 20
            while b"Server is ready" not in log.read_bytes():
                assert procs[-1].poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.05)
        urls = [f"nats://127.0.0.1:{client[i]}" for i in (1, 2, 3)]
        wait_meta_leader(urls, token[1])

        async def check() -> dict[str, int]:
            nc = await connect(ConnectOptions(servers=tuple(urls), token=token[1]), name="t")
            try:
                js = nc.jetstream(timeout=10.0)
                await ensure_streams(js, replicas=3)
                await ObjectUploader(js, "wrtfd", new_nuid=lambda: "x", replicas=3).ensure_bucket()
                return {
                    name: int((await js.stream_info(name)).config.num_replicas or 0)
                    for name in ("WRTFD_STATE", "WRTFD_EVENTS", "OBJ_wrtfd")
                }
            finally:
                await nc.close()

        assert asyncio.run(check()) == {"WRTFD_STATE": 3, "WRTFD_EVENTS": 3, "OBJ_wrtfd": 3}
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=10)
