"""HTTP/2 clients and oversized chunked bodies against the real web server on real sockets.

The page's port speaks HTTP/1.1 only (docs/web.md): an HTTP/2 prior-knowledge connection gets
one HTTP/1.1 error answer, an ``Upgrade: h2c`` is ignored. A chunked body past the bound gets
its 413 and its connection's task ends with the connection. None of it may put a traceback in
the log.
"""

from __future__ import annotations

import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.daemon.web.hostile import h2_post, h2c_upgrade, oversized_chunked_post, read_answer
from tests.daemon.web.webserver import Running, running_server

#: Every wait for the server to settle is bounded by this (seconds).
SETTLE_S = 20.0


def _tracebacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Log records with a traceback, or an error from the server or asyncio's loop."""
    return [
        f"{r.name}: {r.getMessage()}"
        for r in caplog.records
        if r.exc_info
        or "Traceback" in r.getMessage()
        or "Unhandled exception" in r.getMessage()
        or (r.levelno >= logging.ERROR and r.name.startswith(("asyncio", "wrtfd.web")))
    ]


#: hypercorn's task per connection (asyncio's client_connected_cb): one while a connection lives.
CONNECTION_TASK = "_server_callback"


def _baseline(srv: Running) -> list[str]:
    """The server's tasks once it has served a request and let its connection go."""
    assert srv.request("GET", "/healthz")[0] == 200
    deadline = time.monotonic() + SETTLE_S
    while any(CONNECTION_TASK in t for t in srv.tasks()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return srv.tasks()


def _settled(srv: Running, baseline: list[str]) -> list[str]:
    """The server's tasks once they are back to ``baseline`` (what is left after the deadline)."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        now = srv.tasks()
        if (now == baseline and srv.server.open_connections == 0) or time.monotonic() > deadline:
            return now
        time.sleep(0.05)


def test_http2_prior_knowledge_gets_a_clean_http11_refusal(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    with running_server() as srv:
        baseline = _baseline(srv)
        csrf = srv.csrf()
        cases = [{}, {"x-wrtfd-csrf": csrf}] * 15  # refused before the body (403), and by size (413)
        with ThreadPoolExecutor(8) as pool:
            answers = list(
                pool.map(
                    lambda h: h2_post(srv.host, srv.port, "/api/mark", body_bytes=10 << 20, headers=h),
                    cases,
                )
            )
        for answer in answers:
            # one HTTP/1.1 answer that says why, then the connection is closed
            assert answer.startswith(b"HTTP/1.1 505 "), answer[:80]
            assert answer.endswith(b"\r\n\r\nthis server speaks HTTP/1.1 only\n")
        assert _settled(srv, baseline) == baseline
        assert srv.daemon.marks == []
        assert srv.request("GET", "/healthz")[0] == 200
    assert _tracebacks(caplog) == []


def test_an_h2c_upgrade_is_ignored_and_answered_in_http11(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    with running_server() as srv:
        baseline = _baseline(srv)
        for _ in range(10):
            answer = h2c_upgrade(srv.host, srv.port, "/status")
            assert answer.startswith(b"HTTP/1.1 200 "), answer[:80]
            assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["healthy"] is True
            answer = h2c_upgrade(srv.host, srv.port, "/api/mark", method="POST")
            assert answer.startswith(b"HTTP/1.1 403 "), answer[:80]  # no CSRF token: refused
        assert _settled(srv, baseline) == baseline
        assert srv.daemon.marks == []
    assert _tracebacks(caplog) == []


def test_oversized_chunked_bodies_leave_no_task_behind(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    with running_server() as srv:
        baseline = _baseline(srv)
        csrf = srv.csrf()
        held = []
        for i in range(30):
            # read and refused by size (413); refused before the app by the guard (400: a
            # DNS-rebound Host); refused by the route before the body (403: no CSRF token)
            kind = i % 3
            s = oversized_chunked_post(
                srv.host,
                srv.port,
                "/api/mark",
                csrf=csrf if kind != 2 else None,
                host_header="evil.example" if kind == 1 else None,
            )
            answer = read_answer(s)
            assert answer.startswith((b"HTTP/1.1 413 ", b"HTTP/1.1 400 ", b"HTTP/1.1 403 ")[kind]), answer[
                :80
            ]
            if i % 2:
                s.close()
            else:
                held.append(s)  # a client that keeps its end open: the server must still let go
        try:
            assert _settled(srv, baseline) == baseline  # every connection's task has ended
        finally:
            for s in held:
                s.close()
        assert srv.daemon.marks == []
        assert srv.request("GET", "/healthz")[0] == 200
    assert _tracebacks(caplog) == []
