"""A real web server (hypercorn on a loopback port, in a thread of its own) for the web tests.

The server runs its own event loop in a thread, so the tests talk to it with plain blocking
sockets and http.client, as a hostile or an ordinary client would.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio

from wrtfd.daemon.web.access import AccessPolicy
from wrtfd.daemon.web.live import Broadcaster, LiveView
from wrtfd.daemon.web.server import StatusServer, WebLimits
from wrtfd.recorder.markers import TooManyMarkersError


def snapshot() -> dict[str, Any]:
    return {
        "uptime_s": 12.0,
        "sources": {
            "forza": {"state": "receiving", "rate_hz": 60.0, "last_sample_age_s": 0.1, "dropped": {}}
        },
        "recorder": {"state": "ok", "groups": {"main": {"state": "ok", "in_session": True}}},
        "disk": {"free_bytes": 10 << 30, "min_free_bytes": 200 << 20},
        "problems": [],
        "healthy": True,
    }


class FakeDaemon:
    """What the server asks of the daemon; marks are recorded, ``recording`` says if any group is."""

    def __init__(self) -> None:
        self.marks: list[str] = []
        self.sessions = 0
        self.recording = True
        #: every group's markers are waiting already (the recorder's bound): marks are refused
        self.waiting_full = False
        #: GNSS sources that time laps (``wrtfd mark --start-finish`` asks them for a line)
        self.gnss: list[str] = []
        self.lines_asked = 0

    def snapshot(self) -> dict[str, Any]:
        return snapshot()

    def mark(self, note: str) -> dict[str, int]:
        if not self.recording:
            return {}
        if self.waiting_full:
            raise TooManyMarkersError("too many marks waiting")
        self.marks.append(note)
        return {"main": 100 + len(self.marks)}

    def new_session(self) -> None:
        self.sessions += 1

    def start_finish(self, width_m: float = 30.0) -> list[str]:
        self.lines_asked += len(self.gnss)
        return list(self.gnss)


class Running:
    def __init__(self, server: StatusServer, daemon: FakeDaemon, token: Any = None) -> None:
        self.server = server
        self.daemon = daemon
        self.host = server.host
        self.port = server.port
        self._token = token

    def tasks(self) -> list[str]:
        """The unfinished asyncio tasks of the server's event loop (their coroutines' names)."""

        def names() -> list[str]:
            coros = [t.get_coro() for t in asyncio.all_tasks() if not t.done()]
            return sorted(getattr(c, "__qualname__", type(c).__name__) for c in coros)

        return anyio.from_thread.run_sync(names, token=self._token)

    def request(
        self, method: str, path: str, *, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def csrf(self) -> str:
        code, _, body = self.request("GET", "/api/csrf")
        assert code == 200, body
        return str(json.loads(body)["csrf"])

    def raw(self, data: bytes, *, timeout_s: float = 10.0) -> bytes:
        with socket.create_connection((self.host, self.port), timeout=timeout_s) as s:
            s.sendall(data)
            out = b""
            try:
                while chunk := s.recv(65536):
                    out += chunk
            except TimeoutError:
                out += b"<timeout>"
        return out


@contextmanager
def running_server(
    *,
    host: str = "127.0.0.1",
    token: str | None = None,
    public_read: bool = False,
    limits: WebLimits | None = None,
    page: bool = True,
    push_hz: float = 10.0,
) -> Iterator[Running]:
    daemon = FakeDaemon()
    started = threading.Event()
    stop: dict[str, Any] = {}
    box: dict[str, Any] = {}

    async def main() -> None:
        policy = AccessPolicy.build(host, token, public_read=public_read)
        broadcaster = Broadcaster(LiveView(), daemon.snapshot, push_hz=push_hz) if page else None
        server = StatusServer(
            host, 0, daemon.snapshot, policy=policy, actions=daemon, broadcaster=broadcaster, limits=limits
        )
        box["server"] = server
        async with anyio.create_task_group() as tg:
            if broadcaster is not None:
                tg.start_soon(broadcaster.run)
            await tg.start(server.serve)
            stop["event"] = anyio.Event()
            stop["token"] = anyio.lowlevel.current_token()
            started.set()
            await stop["event"].wait()
            await server.aclose()
            tg.cancel_scope.cancel()

    thread = threading.Thread(target=lambda: anyio.run(main, backend="asyncio"), daemon=True)
    thread.start()
    assert started.wait(20), "the server did not start"
    try:
        yield Running(box["server"], daemon, stop["token"])
    finally:
        anyio.from_thread.run_sync(stop["event"].set, token=stop["token"])
        thread.join(20)
