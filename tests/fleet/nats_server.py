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
    ) -> None:
        self.binary = require_nats_server()
        self.directory = directory
        self.store = directory / "store"
        self.port = free_port()
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

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None
