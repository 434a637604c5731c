"""Run inside a private network namespace (see test_web_lan.py): a server bound to a non-loopback
address of this namespace, probed from that address. Prints one JSON object of findings."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository: tests.* imports

from tests.daemon.web.webserver import running_server

ADDRESS = sys.argv[1]
TOKEN = "lan-token-0123456789abcdef"
found: dict[str, object] = {}

with running_server(host=ADDRESS, token=TOKEN) as srv:
    body = json.dumps({"note": "from the LAN"}).encode()
    hdr = {"Content-Type": "application/json"}
    found["peer_is_the_lan_address"] = ADDRESS
    found["status_without_token"] = srv.request("GET", "/status")[0]
    found["page_without_token"] = srv.request("GET", "/")[0]
    found["events_without_token"] = srv.request("GET", "/api/events")[0]
    found["csrf_without_token"] = srv.request("GET", "/api/csrf")[0]
    found["mark_without_token"] = srv.request("POST", "/api/mark", body=body, headers=hdr)[0]
    found["session_without_token"] = srv.request("POST", "/api/session", headers=hdr)[0]
    found["mark_wrong_token"] = srv.request(
        "POST", "/api/mark", body=body, headers={**hdr, "Authorization": "Bearer nope-nope-nope-nope"}
    )[0]
    found["marks_before_token"] = list(srv.daemon.marks)
    found["mark_bearer"] = srv.request(
        "POST", "/api/mark", body=body, headers={**hdr, "Authorization": f"Bearer {TOKEN}"}
    )[0]
    code, headers, _ = srv.request("GET", f"/?token={TOKEN}")
    found["login"] = [code, headers.get("location"), headers.get("set-cookie", "")]
    cookie = headers.get("set-cookie", "").split(";")[0]
    found["status_with_cookie"] = srv.request("GET", "/status", headers={"Cookie": cookie})[0]
    found["mark_cookie_without_csrf"] = srv.request(
        "POST", "/api/mark", body=body, headers={**hdr, "Cookie": cookie}
    )[0]
    code, _csrf_headers, csrf_body = srv.request("GET", "/api/csrf", headers={"Cookie": cookie})
    csrf_value = json.loads(csrf_body)["csrf"]
    found["mark_cookie_with_csrf"] = srv.request(
        "POST", "/api/mark", body=body, headers={**hdr, "Cookie": cookie, "X-Wrtfd-Csrf": csrf_value}
    )[0]
    url = f"http://{ADDRESS}:{srv.port}"
    cli = [sys.executable, "-m", "wrtfd", "mark", "cli note", "--url", url]
    no_token = subprocess.run(cli, capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin"})
    found["cli_without_token"] = [no_token.returncode, no_token.stderr.strip()]
    with_token = subprocess.run([*cli, "--token", TOKEN], capture_output=True, text=True, timeout=60)
    found["cli_with_token"] = [with_token.returncode, with_token.stdout.strip()]
    found["marks"] = list(srv.daemon.marks)
    # a page opened on this machine (a loopback peer) may mark with the CSRF token alone, and its
    # update stream's hello says so
    with socket.socket() as s:
        s.settimeout(10)
        s.bind(("127.0.0.1", 0))
        s.connect((ADDRESS, srv.port))
        s.sendall(f"GET /api/events HTTP/1.1\r\nHost: {ADDRESS}:{srv.port}\r\n\r\n".encode())
        got = b""
        while b"event: hello\ndata: " not in got or not got.split(b"event: hello\ndata: ")[1].count(b"\n"):
            got += s.recv(65536)
    hello = json.loads(got.split(b"event: hello\ndata: ")[1].split(b"\n")[0])
    with socket.socket() as s:
        s.settimeout(10)
        s.bind(("127.0.0.1", 0))
        s.connect((ADDRESS, srv.port))
        s.sendall(
            f"POST /api/mark HTTP/1.1\r\nHost: {ADDRESS}:{srv.port}\r\nX-Wrtfd-Csrf: {hello['csrf']}\r\n"
            "Content-Length: 0\r\n\r\n".encode()
        )
        status_line = s.recv(65536).split(b"\r\n")[0].decode()
    found["loopback_peer"] = [hello["can_write"], status_line]

with running_server(host=ADDRESS, token=TOKEN, public_read=True) as srv:
    found["public_status"] = srv.request("GET", "/status")[0]
    found["public_page"] = srv.request("GET", "/")[0]
    found["public_mark_without_token"] = srv.request(
        "POST", "/api/mark", body=b"{}", headers={"Content-Type": "application/json"}
    )[0]

print(json.dumps(found))
