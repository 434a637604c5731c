"""The web server against real sockets: routes, CSRF and Origin, hostile clients, bounds."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.daemon.web.webserver import running_server
from wrtfd.daemon.web import routes
from wrtfd.daemon.web.server import MAX_HEAD_BYTES, CappedListener, WebLimits


def test_the_page_and_its_assets_are_served_from_the_package() -> None:
    with running_server() as srv:
        code, headers, body = srv.request("GET", "/")
        assert code == 200 and headers["content-type"].startswith("text/html")
        assert b'src="/static/app.js"' in body and b"//" not in body.replace(b"http://", b"").split(b"<body")[
            0
        ].replace(b"<!doctype", b"")
        assert "script-src 'self'" in headers["content-security-policy"]
        assert "access-control-allow-origin" not in headers  # no CORS, wildcard or other
        for name, kind in (("app.js", "text/javascript"), ("app.css", "text/css")):
            code, headers, body = srv.request("GET", f"/static/{name}")
            assert code == 200 and headers["content-type"].startswith(kind) and len(body) > 500
        assert srv.request("GET", "/static/../server.py")[0] == 404
        assert srv.request("GET", "/static/secret.txt")[0] == 404


def test_mark_needs_the_csrf_token_and_our_own_origin() -> None:
    with running_server() as srv:
        body = json.dumps({"note": "brake fade"}).encode()
        code, _, answer = srv.request(
            "POST", "/api/mark", body=body, headers={"Content-Type": "application/json"}
        )
        assert code == 403 and b"CSRF" in answer and srv.daemon.marks == []
        csrf = srv.csrf()
        hdr = {"Content-Type": "application/json", "X-Wrtfd-Csrf": csrf}
        evil = {**hdr, "Origin": "http://evil.example"}
        assert srv.request("POST", "/api/mark", body=body, headers=evil)[0] == 403
        code, _, answer = srv.request(
            "POST", "/api/mark", body=body, headers={**hdr, "Origin": f"http://127.0.0.1:{srv.port}"}
        )
        assert code == 200 and json.loads(answer)["marked"] == {"main": 101}
        assert srv.daemon.marks == ["brake fade"]
        assert srv.request("POST", "/api/session", headers=hdr)[0] == 200 and srv.daemon.sessions == 1
        srv.daemon.recording = False
        assert srv.request("POST", "/api/mark", body=body, headers=hdr)[0] == 409
        assert srv.request("POST", "/api/mark", body=b"not json", headers=hdr)[0] == 400
        assert srv.request("POST", "/api/mark", body=b'{"note": 5}', headers=hdr)[0] == 400
        assert srv.request("GET", "/api/mark")[0] == 405


def test_mark_start_finish_asks_the_gnss_sources() -> None:
    from wrtfd.daemon.mark_client import NotRecording, post_mark

    with running_server() as srv:
        hdr = {"Content-Type": "application/json", "X-Wrtfd-Csrf": srv.csrf()}
        body = json.dumps({"note": "", "start_finish": True}).encode()
        code, _, answer = srv.request("POST", "/api/mark", body=body, headers=hdr)
        assert code == 409 and b"no GNSS source times laps" in answer and srv.daemon.marks == []
        bad = json.dumps({"start_finish": "yes"}).encode()
        assert srv.request("POST", "/api/mark", body=bad, headers=hdr)[0] == 400
        srv.daemon.gnss = ["gps"]
        code, _, answer = srv.request("POST", "/api/mark", body=body, headers=hdr)
        assert code == 200 and json.loads(answer)["start_finish"] == ["gps"] and srv.daemon.lines_asked == 1
        # the client of `wrtfd mark --start-finish`
        got = post_mark(f"http://127.0.0.1:{srv.port}", "start/finish", start_finish=True)
        assert got.note == "start/finish" and srv.daemon.lines_asked == 2
        srv.daemon.gnss = []
        with pytest.raises(NotRecording, match="no GNSS source times laps"):
            post_mark(f"http://127.0.0.1:{srv.port}", start_finish=True)


def test_dns_rebinding_names_are_refused() -> None:
    with running_server() as srv:
        for host in ("evil.example", "evil.example:8787", "localhost.evil.example"):
            code, _, body = srv.request("GET", "/status", headers={"Host": host})
            assert code == 400 and b"Host" in body
        for host in ("localhost", f"127.0.0.1:{srv.port}", "[::1]:80"):
            assert srv.request("GET", "/status", headers={"Host": host})[0] == 200


def test_bodies_are_bounded_in_size_and_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(routes, "BODY_TIMEOUT_S", 1.0)
    with running_server() as srv:
        csrf = srv.csrf()
        big = b'{"note": "' + b"x" * 5000 + b'"}'
        hdr = {"Content-Type": "application/json", "X-Wrtfd-Csrf": csrf}
        assert srv.request("POST", "/api/mark", body=big, headers=hdr)[0] == 413
        # chunked, no length: cut once it passes the bound
        head = (
            f"POST /api/mark HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Wrtfd-Csrf: {csrf}\r\n"
            "Transfer-Encoding: chunked\r\n\r\n"
        ).encode()
        chunk = b"400\r\n" + b"x" * 1024 + b"\r\n"
        assert srv.raw(head + chunk * 3).startswith(b"HTTP/1.1 413")
        # a body that trickles in: cut after BODY_TIMEOUT_S
        with socket.create_connection((srv.host, srv.port), timeout=20) as s:
            s.sendall(head.replace(b"Transfer-Encoding: chunked", b"Content-Length: 100"))
            s.sendall(b'{"no')
            answer = s.recv(4096)
        assert answer.startswith(b"HTTP/1.1 408") and srv.daemon.marks == []


def test_oversize_and_slow_request_heads_are_cut_off() -> None:
    with running_server(limits=WebLimits(keep_alive_timeout_s=1.0)) as srv:
        huge = (
            b"GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Junk: " + b"a" * (2 * MAX_HEAD_BYTES) + b"\r\n\r\n"
        )
        assert srv.raw(huge).startswith(b"HTTP/1.1 431")
        # slowloris: a header byte every 0.1 s would take 60 s; the server closes long before
        with socket.create_connection((srv.host, srv.port), timeout=20) as s:
            s.sendall(b"GET /status HTTP/1.1\r\n")
            sent, closed = 0, False
            for _ in range(600):
                try:
                    s.sendall(b"X")
                    sent += 1
                    s.settimeout(0.1)
                    if s.recv(1) == b"":
                        closed = True
                        break
                except TimeoutError:
                    continue
                except OSError:
                    closed = True
                    break
            assert closed and sent < 600
        # a connection that sends nothing is closed too
        with socket.create_connection((srv.host, srv.port), timeout=20) as s:
            assert s.recv(1) == b""
        assert srv.request("GET", "/healthz")[0] == 200  # and the server is fine


def test_accepted_connections_send_without_nagle_delay() -> None:
    """hypercorn sets TCP_NODELAY on the sockets it makes; the listener is ours, so it does."""
    with CappedListener(socket.AF_INET, limit=2) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        with socket.create_connection(listener.getsockname()) as client:
            conn, _ = listener.accept()
            with conn:
                assert conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
            assert client.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0  # not by default
        assert listener.open_connections == 0


OUT_OF_DESCRIPTORS = """
import json, os, resource, socket, sys
from wrtfd.daemon.web.server import CappedListener
listener = CappedListener(socket.AF_INET, limit=8)
listener.bind(("127.0.0.1", 0)); listener.listen(); listener.setblocking(False)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
held = []
try:
    while True:
        held.append(os.open(os.devnull, os.O_RDONLY))
except OSError:
    pass
print(listener.getsockname()[1], flush=True)
sys.stdin.readline()  # the client has connected
out = {}
try:
    listener.accept()
except BlockingIOError:
    out["after"] = "none waiting"
except OSError as exc:
    out["after"] = f"{type(exc).__name__} {exc.errno}"
out["refused"] = listener.refused
os.close(held.pop())
print(json.dumps(out), flush=True)
"""


def test_a_connection_when_no_descriptor_is_left_is_refused_and_counted() -> None:
    """At the open-file limit the spare descriptor takes the connection and closes it (else it
    waits in the backlog while asyncio retries and logs a traceback a second)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", OUT_OF_DESCRIPTORS],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        port = int(proc.stdout.readline())
        with socket.create_connection(("127.0.0.1", port), timeout=10) as client:
            proc.stdin.write("\n")
            proc.stdin.flush()
            result = json.loads(proc.stdout.readline())
            assert client.recv(1) == b""  # accepted and closed at once
    finally:
        proc.kill()
        proc.wait()
    assert result == {"after": "none waiting", "refused": 1}  # was: OSError 24 (EMFILE)


def test_connections_and_requests_are_bounded() -> None:
    # (a connection its client closed while idle is let go at the keep-alive timeout)
    limits = WebLimits(max_connections=4, keep_alive_timeout_s=5.0)
    with running_server(limits=limits) as srv:
        idle = [socket.create_connection((srv.host, srv.port), timeout=10) for _ in range(4)]
        try:
            deadline = time.monotonic() + 10
            while srv.server.open_connections < 4 and time.monotonic() < deadline:
                time.sleep(0.02)
            with socket.create_connection((srv.host, srv.port), timeout=10) as extra:
                assert extra.recv(1) == b""  # accepted and closed at once
            assert srv.server.refused_connections >= 1
        finally:
            for s in idle:
                s.close()
        deadline = time.monotonic() + 20
        while srv.server.open_connections and time.monotonic() < deadline:
            time.sleep(0.02)
        assert srv.request("GET", "/healthz")[0] == 200  # room again once they went


def test_status_endpoints_keep_their_answers() -> None:
    with running_server(page=False) as srv:
        code, headers, body = srv.request("GET", "/status")
        assert code == 200 and headers["content-type"] == "application/json" and json.loads(body)["healthy"]
        assert headers["connection"] == "close"
        assert srv.request("GET", "/")[0] == 404  # no page: [web] enabled = false
        assert srv.request("POST", "/api/mark")[0] in (404, 405)


def test_update_stream_says_hello_then_pushes_updates() -> None:
    with running_server(push_hz=5) as srv:
        conn = http.client.HTTPConnection(srv.host, srv.port, timeout=10)
        try:
            conn.request("GET", "/api/events", headers={"Accept": "text/event-stream"})
            resp = conn.getresponse()
            assert resp.status == 200 and resp.getheader("content-type", "").startswith("text/event-stream")
            stream = b""
            deadline = time.monotonic() + 15
            while stream.count(b"event: update") < 3 and time.monotonic() < deadline:
                stream += resp.read1(65536)
            assert srv.server.stats()["pages"] == 1
        finally:
            conn.close()
    assert stream.startswith(b"retry: ")
    events = [e for e in stream.split(b"\n\n") if b"data: " in e]
    hello = json.loads(events[0].split(b"data: ", 1)[1].split(b"\n")[0])
    assert hello["can_write"] is True and len(hello["csrf"]) > 20
    update = json.loads(events[1].split(b"data: ", 1)[1])
    assert update["healthy"] is True and "live" in update and "alerts" in update
