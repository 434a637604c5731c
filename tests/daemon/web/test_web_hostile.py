"""HTTP/2 clients and oversized chunked bodies against the real web server on real sockets.

The page's port speaks HTTP/1.1 only (docs/web.md): an HTTP/2 prior-knowledge connection gets
one HTTP/1.1 error answer, an ``Upgrade: h2c`` is ignored. A chunked body past the bound gets
its 413 and its connection's task ends with the connection. None of it may put a traceback in
the log.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.daemon.web.hostile import h2_post, h2c_upgrade, oversized_chunked_post, read_answer
from tests.daemon.web.webserver import Running, running_server
from wrtfd.format.markers import clean_note

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


def _status_line(answer: bytes) -> bytes:
    return answer.split(b"\r\n", 1)[0]


def test_head_of_the_update_stream_answers_its_head_and_ends(caplog: pytest.LogCaptureFixture) -> None:
    """HEAD /api/events then a second request on the same connection: the HEAD answer ends (no
    page is subscribed, no connection held), so pages stay free for real ones."""
    caplog.set_level(logging.WARNING)
    with running_server() as srv:
        baseline = _baseline(srv)
        for _ in range(5):
            with socket.create_connection((srv.host, srv.port), timeout=10) as s:
                s.sendall(b"HEAD /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                s.sendall(b"GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                started = time.monotonic()
                answer = read_answer(s, quiet_s=5.0)
                closed_after_s = time.monotonic() - started
            assert answer.startswith(b"HTTP/1.1 200 "), answer[:80]
            head, _, rest = answer.partition(b"\r\n\r\n")
            assert b"text/event-stream" in head and b"connection: close" in head.lower()
            assert rest == b""  # no body, and the second request is not served
            assert closed_after_s < 4.0  # the server closed it; no quiet wait of 5 s
        assert srv.server.stats()["pages"] == 0
        assert _settled(srv, baseline) == baseline
        # a real page still gets its stream
        with socket.create_connection((srv.host, srv.port), timeout=10) as s:
            s.sendall(b"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert b"event: hello" in read_answer(s, quiet_s=1.0)
    assert _tracebacks(caplog) == []


def test_hostile_header_values_are_refused_and_counted_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    with running_server(token="a-configured-token-0123456789") as srv:
        csrf = srv.csrf().encode()
        host = b"Host: 127.0.0.1\r\n"
        mark = b"POST /api/mark HTTP/1.1\r\n" + host
        cases = [
            (b"GET /status HTTP/1.1\r\nHost: [\r\n\r\n", 400),
            (b"GET /status HTTP/1.1\r\nHost: ]\r\n\r\n", 400),
            (b"GET /status HTTP/1.1\r\nHost: [::1\r\n\r\n", 400),
            (mark + b"Origin: http://[\r\nX-Wrtfd-Csrf: " + csrf + b"\r\nContent-Length: 0\r\n\r\n", 403),
            (mark + b"X-Wrtfd-Csrf: \xe9\r\nContent-Length: 0\r\n\r\n", 403),
            (mark + b"Authorization: Bearer \xe9\r\nContent-Length: 0\r\n\r\n", 403),
            (mark + b"Cookie: wrtfd_auth=\xe9\r\nContent-Length: 0\r\n\r\n", 403),
            (b"GET /?token=%C3%A9 HTTP/1.1\r\n" + host + b"\r\n", 403),
            (b"GET /?token=%ED%A0%80 HTTP/1.1\r\n" + host + b"\r\n", 403),
        ]
        for request, status in cases:
            answer = srv.raw(request)
            assert _status_line(answer).startswith(b"HTTP/1.1 %d " % status), (request, answer[:80])
        # on loopback, reading needs nothing: a malformed credential is just not one
        answer = srv.raw(b"GET /status HTTP/1.1\r\n" + host + b"Authorization: Bearer \xe9\r\n\r\n")
        assert _status_line(answer).startswith(b"HTTP/1.1 200 ")
        refused = srv.server.stats()["refused_requests"]
        assert refused.get("bad_host") == 3
        assert refused.get("bad_origin") == 1
        assert refused.get("bad_csrf") == 3
        assert refused.get("bad_token") == 2
        assert srv.daemon.marks == []
    assert _tracebacks(caplog) == []
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_note_with_a_lone_surrogate_is_cleaned_before_it_is_marked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    with running_server() as srv:
        hdr = {"Content-Type": "application/json", "X-Wrtfd-Csrf": srv.csrf()}
        code, _, answer = srv.request("POST", "/api/mark", body=b'{"note": "a\\ud800b\\u0007c"}', headers=hdr)
        assert code == 200, answer
        # what the recorder was given is what is answered: the text the file will hold
        assert srv.daemon.marks == [json.loads(answer)["note"]] == [clean_note("a\ud800b\x07c")]
    assert _tracebacks(caplog) == []


def test_marks_past_the_waiting_bound_get_their_own_answer() -> None:
    with running_server() as srv:
        hdr = {"Content-Type": "application/json", "X-Wrtfd-Csrf": srv.csrf()}
        srv.daemon.waiting_full = True
        code, headers, answer = srv.request("POST", "/api/mark", body=b'{"note": "x"}', headers=hdr)
        assert code == 429 and b"too many marks waiting" in answer and "retry-after" in headers
        assert srv.server.stats()["refused_requests"].get("marks_waiting") == 1
        srv.daemon.waiting_full = False
        srv.daemon.recording = False
        code, _, answer = srv.request("POST", "/api/mark", body=b'{"note": "x"}', headers=hdr)
        assert code == 409 and b"nothing is being recorded" in answer


def test_a_websocket_upgrade_is_refused_cleanly_and_counted(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    with running_server() as srv:
        baseline = _baseline(srv)
        for path, host in ((b"/status", b"127.0.0.1"), (b"/api/events", b"evil.example"), (b"/x", b"[")):
            answer = srv.raw(
                b"GET " + path + b" HTTP/1.1\r\nHost: " + host + b"\r\nUpgrade: websocket\r\n"
                b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                b"Sec-WebSocket-Version: 13\r\n\r\n"
            )
            assert _status_line(answer).startswith(b"HTTP/1.1 404 "), answer[:80]
            assert b"WebSocket" in answer.partition(b"\r\n\r\n")[2]
        assert srv.server.stats()["refused_requests"].get("websocket") == 3
        assert _settled(srv, baseline) == baseline
    assert _tracebacks(caplog) == []


def test_pages_refused_past_max_pages_are_counted() -> None:
    with running_server() as srv:
        assert srv.server.broadcaster is not None
        srv.server.broadcaster.max_subscribers = 2
        socks = []
        try:
            for _ in range(4):
                s = socket.create_connection((srv.host, srv.port), timeout=10)
                s.sendall(b"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                socks.append(s)
            answers = [s.recv(12) for s in socks]
            assert sorted(answers).count(b"HTTP/1.1 503") == 2
            stats = srv.server.stats()
            assert stats["pages"] == 2 and stats["refused_requests"].get("pages_full") == 2
        finally:
            for s in socks:
                s.close()
