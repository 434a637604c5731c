"""Hostile HTTP clients on real sockets, for the web server's tests and the daemon's: HTTP/2 with
prior knowledge (built with the ``h2`` library, hypercorn's own dependency), the h2c upgrade, and
chunked bodies past the body bound."""

from __future__ import annotations

import base64
import socket
import time

from h2.config import H2Configuration
from h2.connection import H2Connection

#: What every HTTP/2 connection starts with (RFC 9113 3.4).
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def read_answer(sock: socket.socket, *, quiet_s: float = 0.5, timeout_s: float = 10.0) -> bytes:
    """Everything the server sends until it closes, or until ``quiet_s`` without a byte once
    something came (an HTTP/2 server keeps the connection open)."""
    out = b""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        sock.settimeout(quiet_s if out else max(0.05, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            if out:
                break
            continue
        except OSError:  # reset: the server closed with our data unread
            break
        if not chunk:
            break
        out += chunk
    return out


def h2_post(
    host: str, port: int, path: str, *, body_bytes: int, headers: dict[str, str] | None = None
) -> bytes:
    """An HTTP/2 POST with prior knowledge (``curl --http2-prior-knowledge -X POST -T FILE``): as
    much of a ``body_bytes`` body as the initial flow-control window lets go, at once; returns
    what the server answered (raw bytes)."""
    conn = H2Connection(H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    fields = [
        (":method", "POST"),
        (":path", path),
        (":scheme", "http"),
        (":authority", f"{host}:{port}"),
        ("content-length", str(body_bytes)),
        *((k.lower(), v) for k, v in (headers or {}).items()),
    ]
    conn.send_headers(1, fields)
    sent = 0
    room = min(body_bytes, conn.local_flow_control_window(1))
    while sent < room:
        n = min(conn.max_outbound_frame_size, room - sent)
        conn.send_data(1, b"x" * n)
        sent += n
    with socket.create_connection((host, port), timeout=10) as s:
        try:
            s.sendall(conn.data_to_send())
        except OSError:
            pass  # the server may close while the body is still going out: read what it said
        return read_answer(s)


def h2c_upgrade(host: str, port: int, path: str = "/status", *, method: str = "GET") -> bytes:
    """A request asking to switch to HTTP/2 (``Upgrade: h2c``, RFC 7540 3.2); no body."""
    settings = base64.urlsafe_b64encode(b"\x00\x03\x00\x00\x00\x64").rstrip(b"=").decode()
    head = (
        f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: Upgrade, HTTP2-Settings\r\n"
        f"Upgrade: h2c\r\nHTTP2-Settings: {settings}\r\n\r\n"
    ).encode()
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(head)
        answer = read_answer(s)
        if answer.startswith(b"HTTP/1.1 101"):  # switched: speak HTTP/2 as a client would
            conn = H2Connection(H2Configuration(client_side=True))
            conn.initiate_upgrade_connection()
            conn.send_headers(
                3,
                [(":method", "POST"), (":path", "/api/mark"), (":scheme", "http"), (":authority", host)],
            )
            for _ in range(3):
                conn.send_data(3, b"x" * conn.max_outbound_frame_size)
            try:
                s.sendall(conn.data_to_send())
            except OSError:
                pass
            answer += read_answer(s)
        return answer


def oversized_chunked_post(
    host: str, port: int, path: str, *, csrf: str | None = None, host_header: str | None = None
) -> socket.socket:
    """A chunked POST past the 1 KiB body bound, sent at once: one 2000-byte chunk, then many
    one-byte ones (they reach the server as many small body events after the app has refused the
    body). Returns the open socket, the answer unread."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host_header or f'{host}:{port}'}\r\nTransfer-Encoding: chunked\r\n"
    )
    if csrf is not None:
        head += f"X-Wrtfd-Csrf: {csrf}\r\n"
    body = b"7d0\r\n" + b"x" * 2000 + b"\r\n" + b"1\r\nx\r\n" * 60
    s = socket.create_connection((host, port), timeout=10)
    s.sendall(head.encode() + b"\r\n" + body)
    return s
