"""Status endpoint: hostile request heads (over real TCP), health rules, Prometheus text, real TCP server.

The server is hypercorn + Starlette since the page (wrtfd.daemon.web); the hand-written request
parser these tests once called is gone, so its hostile heads are now sent to the real server.
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from wrtfd.daemon.status import health_problems, render_metrics
from wrtfd.daemon.web.server import MAX_HEAD_BYTES, StatusServer


def _snapshot(**over: Any) -> dict[str, Any]:
    snap: dict[str, Any] = {
        "uptime_s": 100.0,
        "sources": {
            "forza": {
                "state": "receiving",
                "required": True,
                "silent_after_s": 5.0,
                "last_sample_age_s": 0.1,
                "received": 10,
                "samples": 9,
                "bytes": 3310,
                "restarts": 0,
                "rate_hz": 60.0,
                "dropped": {"wrong_size": 1},
            },
            "gps": {
                "state": "failed",
                "required": False,
                "silent_after_s": 5.0,
                "last_sample_age_s": None,
                "received": 0,
                "samples": 0,
                "bytes": 0,
                "restarts": 3,
                "dropped": {},
            },
        },
        "recorder": {"state": "ok", "frames": 9, "dropped_ticks": 2, "fsync_lag_s": 0.5},
        "disk": {"free_bytes": 10 << 30, "min_free_bytes": 200 << 20},
    }
    snap.update(over)
    return snap


@pytest.mark.anyio
async def test_query_strings_and_http_1_0_are_served() -> None:
    server = StatusServer("127.0.0.1", 0, lambda: _snapshot(healthy=True, problems=[]))
    async with anyio.create_task_group() as tg:
        port = await tg.start(server.serve)
        code, _, body = await _get(port, b"GET /status?x=1 HTTP/1.1\r\nHost: a.b\r\n\r\n")
        assert code == 400 and b"Host" in body  # a name: refused (DNS rebinding), see test_web_access
        code, _, body = await _get(port, b"GET /status?x=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert code == 200 and json.loads(body)["uptime_s"] == 100.0
        code, _, _ = await _get(port, b"HEAD /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        assert code == 200
        tg.cancel_scope.cancel()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("head", "status"),
    [
        (b"POST /status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 405),
        (b"GET status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400),
        (b"GET /status\r\n\r\n", 400),
        (b"GET /status SPDY/3\r\n\r\n", 400),
        (b"GET /\xff HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400),
        (b"GET / HTTP/1.1\r\nnocolon\r\n\r\n", 400),
        (b"GET /" + b"a" * MAX_HEAD_BYTES + b" HTTP/1.1", 431),
    ],
)
async def test_hostile_heads_are_refused(head: bytes, status: int) -> None:
    server = StatusServer("127.0.0.1", 0, lambda: _snapshot(healthy=True, problems=[]))
    async with anyio.create_task_group() as tg:
        port = await tg.start(server.serve)
        assert (await _get(port, head))[0] == status
        tg.cancel_scope.cancel()


@given(st.binary(max_size=300))
def test_any_head_gets_an_answer_or_a_close(head: bytes) -> None:
    """Whatever arrives, the server answers with a status it means, or closes: never a 500."""

    async def main() -> None:
        server = StatusServer("127.0.0.1", 0, lambda: _snapshot(healthy=True, problems=[]))
        async with anyio.create_task_group() as tg:
            port = await tg.start(server.serve)
            async with await anyio.connect_tcp("127.0.0.1", port) as stream:
                await stream.send(head + b"\r\n\r\n")
                data = b""
                with anyio.move_on_after(10):
                    try:
                        while True:
                            data += await stream.receive()
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        pass
            if data:
                code = int(data.split(b" ", 2)[1])
                assert code in (200, 400, 404, 405, 408, 413, 431), data[:200]
            tg.cancel_scope.cancel()

    anyio.run(main, backend="asyncio")


def test_health_rules() -> None:
    assert health_problems(_snapshot()) == []
    silent = _snapshot()
    silent["sources"]["forza"]["last_sample_age_s"] = 7.5
    assert health_problems(silent) == ["source forza silent for 7.5 s (limit 5 s)"]
    never = _snapshot(uptime_s=6.0)
    never["sources"]["forza"]["last_sample_age_s"] = None  # never received: counts from start
    assert health_problems(never) == ["source forza silent for 6.0 s (limit 5 s)"]
    # gps is failed but not required: not a health problem on its own
    stuck = _snapshot(recorder={"state": "stalled"})
    assert health_problems(stuck) == ["recorder stalled: write pending too long"]
    full = _snapshot(disk={"free_bytes": 100 << 20, "min_free_bytes": 200 << 20})
    assert health_problems(full) == ["free disk 100 MiB below 200 MiB"]


_METRIC_LINE = re.compile(r'^[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? -?[0-9.e+]+$')


def test_metrics_text_format() -> None:
    text = render_metrics(_snapshot(healthy=True))
    lines = text.splitlines()
    samples = [ln for ln in lines if not ln.startswith("#")]
    assert all(_METRIC_LINE.match(ln) for ln in samples), [ln for ln in samples if not _METRIC_LINE.match(ln)]
    assert 'wrtfd_source_up{source="forza"} 1' in lines
    assert 'wrtfd_source_up{source="gps"} 0' in lines
    assert 'wrtfd_source_dropped_total{source="forza",reason="wrong_size"} 1' in lines
    assert "wrtfd_recorder_frames_total 9" in lines
    assert "wrtfd_recorder_dropped_ticks_total 2" in lines
    assert "wrtfd_healthy 1" in lines
    # every family is declared once, before its samples
    types = [ln.split()[2] for ln in lines if ln.startswith("# TYPE")]
    assert len(types) == len(set(types))
    assert text.endswith("\n")


def test_metric_labels_are_escaped() -> None:
    snap = _snapshot()
    snap["sources"]["forza"]["dropped"] = {'we"ird\\reason\n': 3}
    assert 'reason="we\\"ird\\\\reason\\n"} 3' in render_metrics(snap)


async def _get(port: int, raw: bytes) -> tuple[int, dict[str, str], bytes]:
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(raw)
        data = b""
        try:
            while True:
                data += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            pass
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode().split("\r\n")
    # header names are case-insensitive (hypercorn sends them lower-case): keyed as written here
    headers = {
        {"content-type": "Content-Type", "content-length": "Content-Length"}.get(k.lower(), k): v
        for k, v in (line.split(": ", 1) for line in header_lines)
    }
    return int(status_line.split()[1]), headers, body


@pytest.mark.anyio
async def test_server_routes_over_real_tcp() -> None:
    state = {"snap": _snapshot(healthy=True, problems=[])}
    server = StatusServer("127.0.0.1", 0, lambda: state["snap"])
    async with anyio.create_task_group() as tg:
        port = await tg.start(server.serve)
        assert port == server.port and port > 0
        code, headers, body = await _get(port, b"GET /status HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n")
        assert code == 200 and headers["Content-Type"] == "application/json"
        assert json.loads(body)["sources"]["forza"]["received"] == 10
        assert int(headers["Content-Length"]) == len(body)
        code, _, body = await _get(port, b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert code == 200 and b"wrtfd_source_up" in body
        code, _, body = await _get(port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert (code, body) == (200, b"ok\n")
        state["snap"] = _snapshot(problems=["source forza silent for 9.0 s (limit 5 s)"])
        code, _, body = await _get(port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert code == 503 and b"forza silent" in body
        code, headers, body = await _get(port, b"HEAD /status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert code == 200 and body == b"" and int(headers["Content-Length"]) > 0
        assert (await _get(port, b"GET /nope HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))[0] == 404
        assert (await _get(port, b"DELETE /status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))[0] == 405
        assert (await _get(port, b"GET /" + b"x" * (MAX_HEAD_BYTES + 10)))[0] == 431
        tg.cancel_scope.cancel()


def _listening_addresses(port: int) -> set[str]:
    """Local addresses with a TCP socket listening on ``port``, from /proc/net/tcp (state 0A)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        addr_hex, port_hex = local.split(":")
        if state == "0A" and int(port_hex, 16) == port:
            found.add(socket.inet_ntoa(bytes.fromhex(addr_hex)[::-1]))
    return found


@pytest.mark.anyio
async def test_server_binds_only_the_configured_address() -> None:
    server = StatusServer("127.0.0.1", 0, dict)
    async with anyio.create_task_group() as tg:
        port = await tg.start(server.serve)
        assert _listening_addresses(port) == {"127.0.0.1"}
        tg.cancel_scope.cancel()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
