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
