"""A real daemon's page port against HTTP/2 clients and oversized chunked bodies, then SIGTERM.

What users saw: ``curl --http2-prior-knowledge -X POST -T 10MB`` put ~28 lines of traceback in
the journal per request, and each chunked POST over the body bound left a task that ended only
at SIGTERM, with a ``CancelledError`` traceback. Here every client gets a clean HTTP/1.1 answer,
and the daemon's whole log, SIGTERM included, holds no traceback.
"""

from __future__ import annotations

import json
import signal
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.daemon.web.hostile import h2_post, h2c_upgrade, oversized_chunked_post, read_answer
from tests.e2e.test_daemon_harness import Daemon, free_port, udp_source, wait_for

pytestmark = pytest.mark.slow

BAD_LINES = ("Traceback", "Unhandled exception", "CancelledError", "KeyError")


def test_http2_and_oversized_chunked_clients_leave_no_traceback_and_no_task(tmp_path: Path) -> None:
    status_port = free_port()
    config = (
        udp_source("forza", "forza", free_port(socket.SOCK_DGRAM))
        + f'[recorder]\noutput_dir = "{tmp_path / "rec"}"\n[status]\nport = {status_port}\n'
        + '[logging]\nformat = "text"\n'
    )
    d = Daemon(tmp_path, config, status_port=status_port).start()
    try:
        d.wait_ready()
        code, body = d.get("/api/csrf")
        assert code == 200
        csrf = json.loads(body)["csrf"]
        host = "127.0.0.1"
        cases = [{}, {"x-wrtfd-csrf": csrf}] * 15
        with ThreadPoolExecutor(8) as pool:
            answers = list(
                pool.map(
                    lambda h: h2_post(host, status_port, "/api/mark", body_bytes=10 << 20, headers=h), cases
                )
            )
        assert all(a.startswith(b"HTTP/1.1 505 ") for a in answers), {a[:40] for a in answers}
        for _ in range(10):
            assert h2c_upgrade(host, status_port, "/api/mark", method="POST").startswith(b"HTTP/1.1 403 ")
        for i in range(30):  # refused by size (413), by the guard (400: a foreign Host), by CSRF (403)
            kind = i % 3
            evil = "evil.example" if kind == 1 else None
            with oversized_chunked_post(
                host, status_port, "/api/mark", csrf=None if kind == 2 else csrf, host_header=evil
            ) as s:
                assert read_answer(s).startswith((b"HTTP/1.1 413 ", b"HTTP/1.1 400 ", b"HTTP/1.1 403 ")[kind])

        def connections_gone() -> bool:
            web = d.status().get("web") or {}
            return web.get("open_connections") == 1  # the status request's own

        wait_for(connections_gone, "every connection closed")
        refused = (d.status().get("web") or {}).get("refused_requests") or {}
        assert refused.get("http2") == 30
        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 0, d.stderr
        bad = [ln for ln in d.lines if any(word in ln for word in BAD_LINES)]
        assert bad == [], "\n".join(bad[:40])
    finally:
        d.stop()
