"""``fetch_status`` against real loopback servers that answer badly: bounded size and time."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from wrtfd.daemon.status_client import MAX_STATUS_BYTES, fetch_status, status_url, url_for
from wrtfd.errors import StatusError


def serve_once(answer: Callable[[socket.socket], None]) -> Iterator[int]:
    """A TCP server on loopback that reads a request head, then lets ``answer`` talk."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    stop = threading.Event()

    def run() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            with conn:
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    head += chunk
                try:
                    answer(conn)
                except OSError:
                    pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        thread.join(timeout=5)
        srv.close()


def http(body: bytes, status: str = "200 OK") -> Callable[[socket.socket], None]:
    def answer(conn: socket.socket) -> None:
        conn.sendall(
            f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n".encode()
            + body
        )

    return answer


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[int]:
    yield from serve_once(request.param)


GOOD = json.dumps({"sources": {}, "healthy": True, "problems": []}).encode()


@pytest.mark.parametrize("server", [http(GOOD)], indirect=True)
def test_a_status_document_is_read(server: int) -> None:
    answer = fetch_status(f"127.0.0.1:{server}")
    assert answer.body == GOOD and answer.healthy
    assert answer.url == f"http://127.0.0.1:{server}/status"


@pytest.mark.parametrize(
    ("server", "message"),
    [
        (http(b"{nope"), "not JSON"),
        (http(b"[1, 2]"), "not a wrtfd status"),
        (http(b'{"healthy": true}'), "not a wrtfd status"),
        (http(b"gone", "404 Not Found"), "HTTP 404 Not Found"),
        (lambda conn: conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n"), "not an HTTP answer"),
    ],
    indirect=["server"],
)
def test_bad_answers_are_one_status_error(server: int, message: str) -> None:
    with pytest.raises(StatusError, match=message):
        fetch_status(f"http://127.0.0.1:{server}")


def endless(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n")
    chunk = b" " * 65536
    for _ in range(MAX_STATUS_BYTES // len(chunk) + 4):
        conn.sendall(chunk)


@pytest.mark.parametrize("server", [endless], indirect=True)
def test_an_endless_answer_is_cut_at_the_size_bound(server: int) -> None:
    with pytest.raises(StatusError, match=f"larger than {MAX_STATUS_BYTES} bytes"):
        fetch_status(f"127.0.0.1:{server}")


def trickle(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
    for _ in range(300):  # one byte every 0.1 s for 30 s: each read is quick, the whole is not
        conn.sendall(b" ")
        time.sleep(0.1)


@pytest.mark.parametrize("server", [trickle], indirect=True)
def test_a_trickling_answer_is_cut_at_the_time_bound(server: int) -> None:
    started = time.monotonic()
    with pytest.raises(StatusError, match="no answer within 1 s"):
        fetch_status(f"127.0.0.1:{server}", timeout_s=1.0)
    assert time.monotonic() - started < 15  # ended by the deadline, not by the sender's 30 s


def test_nobody_listening_is_unreachable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(StatusError, match=f"http://127.0.0.1:{port}/status: unreachable: Connection refused"):
        fetch_status(f"127.0.0.1:{port}")


def test_urls() -> None:
    assert status_url("localhost:9000") == ("localhost", 9000, "/status", "http://localhost:9000/status")
    assert status_url("http://[::1]:8787/status")[3] == "http://[::1]:8787/status"
    assert status_url("http://host/wrtfd/")[1:3] == (80, "/wrtfd/status")
    with pytest.raises(StatusError, match="expected an http://HOST"):
        status_url("https://example.org")
    assert url_for("0.0.0.0", 8787) == "http://127.0.0.1:8787"
    assert url_for("::", 8787) == "http://[::1]:8787"
    assert url_for("192.168.1.5", 1) == "http://192.168.1.5:1"
