"""A real ``nats-server`` (Debian's package; ``.ci/run`` installs it) for the fleet tests.

JetStream on, its store in a temp directory, a free loopback port; optionally a token and TLS.
It can be stopped and started again on the same port and store (the outage test). Tests skip
with a clear reason when the binary is absent.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

NATS_SERVER = shutil.which("nats-server") or "/usr/sbin/nats-server"
TOKEN = "pit-wall-token"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def require_nats_server() -> str:
    if not Path(NATS_SERVER).is_file():
        pytest.skip("nats-server is not installed (Debian package nats-server; .ci/run installs it)")
    try:
        import nats  # noqa: F401
    except ImportError:
        pytest.skip("nats-py is not installed (pip install -e '.[test]')")
    return NATS_SERVER


class NatsServer:
    """``nats-server -js`` on ``127.0.0.1:<port>`` with its store in ``directory``."""

    def __init__(
        self,
        directory: Path,
        *,
        token: str | None = TOKEN,
        tls: tuple[Path, Path] | None = None,
        max_payload: int | None = None,
        port: int | None = None,
        cluster: str | None = None,
    ) -> None:
        self.binary = require_nats_server()
        #: Extra lines for a node of a cluster (``server_name``, ``cluster { ... }``).
        self.cluster = cluster
        self.directory = directory
        self.store = directory / "store"
        self.port = free_port() if port is None else port
        self.token = token
        self.tls = tls
        self.max_payload = max_payload
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = directory / "nats-server.log"

    @property
    def url(self) -> str:
        return f"{'tls' if self.tls else 'nats'}://127.0.0.1:{self.port}"

    def start(self) -> NatsServer:
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.directory / "nats.conf"
        lines = [f"listen: 127.0.0.1:{self.port}", f'jetstream {{ store_dir: "{self.store}" }}']
        if self.token is not None:
            lines.append(f'authorization {{ token: "{self.token}" }}')
        if self.tls is not None:
            cert, key = self.tls
            lines.append(f'tls {{ cert_file: "{cert}"\n key_file: "{key}" }}')
        if self.max_payload is not None:
            lines.append(f"max_payload: {self.max_payload}")
        if self.cluster is not None:
            lines.append(self.cluster)
        config.write_text("\n".join(lines) + "\n")
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the process
        self.proc = subprocess.Popen([self.binary, "-c", str(config)], stdout=log, stderr=log)
        log.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"nats-server exited: {self.log_path.read_text()[-2000:]}")
            if b"Server is ready" in self.log_path.read_bytes().split(b"Starting nats-server")[-1]:
                return self
            time.sleep(0.05)
        raise AssertionError(f"nats-server not ready: {self.log_path.read_text()[-2000:]}")

    def kill(self) -> None:
        """``kill -9``: no goodbye to the clients or to the other nodes."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None


class NatsCluster:
    """Three ``nats-server -js`` nodes clustered on loopback (routes between them), each with its
    own store; the layout of ``config/nats-cluster/``. ``urls`` is what a rig's ``servers`` gets."""

    def __init__(self, directory: Path, *, size: int = 3, token: str | None = TOKEN) -> None:
        client_ports = [free_port() for _ in range(size)]
        route_ports = [free_port() for _ in range(size)]
        self.nodes: list[NatsServer] = []
        for i in range(size):
            routes = ", ".join(f"nats-route://127.0.0.1:{p}" for j, p in enumerate(route_ports) if j != i)
            extra = (
                f"server_name: n{i + 1}\n"
                f"cluster {{ name: wrtfd\n listen: 127.0.0.1:{route_ports[i]}\n routes: [{routes}] }}"
            )
            self.nodes.append(
                NatsServer(directory / f"n{i + 1}", token=token, port=client_ports[i], cluster=extra)
            )

    @property
    def urls(self) -> list[str]:
        return [n.url for n in self.nodes]

    def start(self) -> NatsCluster:
        for node in self.nodes:
            node.start()
        self.wait_meta_leader()
        return self

    def wait_meta_leader(self, timeout_s: float = 60.0) -> None:
        wait_meta_leader(self.urls, self.nodes[0].token, timeout_s)

    def node_of(self, url: str) -> NatsServer:
        (node,) = [n for n in self.nodes if n.url == url]
        return node

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def wait_meta_leader(urls: list[str], token: str | None, timeout_s: float = 60.0) -> None:
    """Until the cluster's JetStream answers (a meta leader was elected) and can place a stream
    on every node (a leader that does not know all its peers yet refuses an R3 stream: "no
    suitable peers for placement", seen on a loaded machine): polled with a probe stream that is
    deleted again, bounded."""
    import asyncio

    import nats
    from nats.js.api import StorageType, StreamConfig

    async def ask() -> None:
        nc = await nats.connect(urls, token=token, connect_timeout=2, allow_reconnect=False)
        try:
            js = nc.jetstream(timeout=2.0)
            await js.account_info()
            probe = StreamConfig(
                name="TEST_PLACEMENT_PROBE",
                subjects=["test.placement.probe"],
                storage=StorageType.MEMORY,
                num_replicas=len(urls),
            )
            await js.add_stream(probe)
            await js.delete_stream("TEST_PLACEMENT_PROBE")
        finally:
            await nc.close()

    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            asyncio.run(ask())
            return
        except Exception as exc:  # no meta leader yet, or it does not know every peer yet
            last = exc
            time.sleep(0.2)
    raise AssertionError(f"the cluster elected no JetStream meta leader in {timeout_s} s: {last!r}")
