"""The local status endpoint: ``GET /status`` (JSON), ``GET /metrics`` (Prometheus), ``GET /healthz``.

A deliberately tiny HTTP/1.1 server on an anyio TCP listener: GET/HEAD only, one request per
connection (``Connection: close``), the request head bounded to :data:`MAX_HEAD_BYTES` and read
under a timeout, a bounded number of connections at once. A framework would bring routing,
keep-alive and body parsing we do not want to expose on a recorder.

The payloads are built elsewhere (``app``) as a plain snapshot dict; this module only renders
it (:func:`render_metrics`) and judges it (:func:`health_problems`), both pure.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc

__all__ = [
    "MAX_HEAD_BYTES",
    "HttpRequest",
    "RequestError",
    "StatusServer",
    "health_problems",
    "parse_request_head",
    "render_metrics",
]

log = logging.getLogger("wrtfd.status")

MAX_HEAD_BYTES = 8192
READ_TIMEOUT_S = 5.0
MAX_CONNECTIONS = 16

#: Source states that count as "up" (bound and able to receive).
UP_STATES = frozenset({"listening", "receiving"})


class RequestError(Exception):
    """A request we refuse; ``status`` is the HTTP status code to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class HttpRequest:
    method: str
    path: str


def parse_request_head(head: bytes) -> HttpRequest:
    """Parse ``GET /path HTTP/1.1`` and the header lines; raises RequestError on anything odd."""
    if len(head) > MAX_HEAD_BYTES:
        raise RequestError(431, "request head too large")
    try:
        text = head.decode("ascii")
    except UnicodeDecodeError:
        raise RequestError(400, "non-ASCII request head") from None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise RequestError(400, "malformed request line")
    method, target, _version = parts
    if method not in ("GET", "HEAD"):
        raise RequestError(405, f"method {method} not allowed")
    if not target.startswith("/"):
        raise RequestError(400, "request target must be a path")
    for line in lines[1:]:
        if line and ":" not in line:
            raise RequestError(400, "malformed header line")
    path = target.split("?", 1)[0]
    return HttpRequest(method=method, path=path)


_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
}


def _response(status: int, body: bytes, content_type: str, *, head_only: bool = False) -> bytes:
    lines = [
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        "Cache-Control: no-store",
        "Connection: close",
        "",
        "",
    ]
    return "\r\n".join(lines).encode() + (b"" if head_only else body)


# --- judging and rendering (pure) --------------------------------------------------------------


def health_problems(snapshot: Mapping[str, Any]) -> list[str]:
    """Why the daemon is unhealthy (empty: healthy), from a status snapshot.

    Unhealthy when a required source has been silent longer than its ``silent_after_s`` (a source
    that never received counts from daemon start), the recorder is failing or stuck, or free disk
    is below the threshold.
    """
    problems: list[str] = []
    uptime_s = float(snapshot.get("uptime_s", 0.0))
    for name, src in snapshot.get("sources", {}).items():
        if not src.get("required"):
            continue
        limit = float(src.get("silent_after_s", math.inf))
        age = src.get("last_sample_age_s")
        silent_s = uptime_s if age is None else float(age)
        if silent_s > limit:
            problems.append(f"source {name} silent for {silent_s:.1f} s (limit {limit:g} s)")
    rec = snapshot.get("recorder", {})
    if rec.get("state") in ("failing", "stalled"):
        problems.append(f"recorder {rec.get('state')}: {rec.get('error') or 'write pending too long'}")
    disk = snapshot.get("disk", {})
    free = disk.get("free_bytes")
    minimum = disk.get("min_free_bytes", 0)
    if free is not None and free < minimum:
        problems.append(f"free disk {free // (1 << 20)} MiB below {minimum // (1 << 20)} MiB")
    return problems


def _label(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _metric_name(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in text.lower())


def _num(value: object) -> str | None:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | float):
        if isinstance(value, float) and math.isnan(value):
            return "NaN"
        return repr(value) if isinstance(value, float) else str(value)
    return None


#: Source snapshot key -> (metric name, type, help).
_SOURCE_METRICS: tuple[tuple[str, str, str, str], ...] = (
    ("received", "wrtfd_source_received_total", "counter", "Datagrams, lines or frames received"),
    ("samples", "wrtfd_source_samples_total", "counter", "Samples handed to the recorder"),
    ("bytes", "wrtfd_source_bytes_total", "counter", "Bytes received"),
    ("restarts", "wrtfd_source_restarts_total", "counter", "Restarts after a failure"),
    ("rate_hz", "wrtfd_source_sample_rate_hz", "gauge", "Samples per second, recent"),
    ("last_sample_age_s", "wrtfd_source_last_sample_age_seconds", "gauge", "Seconds since the last sample"),
)

#: Recorder snapshot key -> (metric name, type, help); keys the recorder does not report are skipped.
_RECORDER_METRICS: tuple[tuple[str, str, str, str], ...] = (
    ("frames", "wrtfd_recorder_frames_total", "counter", "Frames produced"),
    ("frames_written", "wrtfd_recorder_frames_written_total", "counter", "Frames written to files"),
    ("frames_lost", "wrtfd_recorder_frames_lost_total", "counter", "Frames lost to disk errors or backlog"),
    ("dropped_ticks", "wrtfd_recorder_dropped_ticks_total", "counter", "Ticks without data (gaps)"),
    ("bytes_written", "wrtfd_recorder_bytes_written_total", "counter", "Bytes written to all files"),
    ("bytes", "wrtfd_recorder_file_bytes", "gauge", "Size of the current file"),
    ("sessions", "wrtfd_recorder_sessions_total", "counter", "Sessions started"),
    ("files", "wrtfd_recorder_files_total", "counter", "Files opened"),
    ("errors", "wrtfd_recorder_errors_total", "counter", "Write errors"),
    ("samples", "wrtfd_recorder_samples_total", "counter", "Samples taken in"),
    ("intake_dropped", "wrtfd_recorder_intake_dropped_total", "counter", "Samples refused: intake full"),
    ("intake_queued", "wrtfd_recorder_intake_queued", "gauge", "Samples waiting in the intake"),
    ("fsync_lag_s", "wrtfd_recorder_fsync_lag_seconds", "gauge", "Seconds since data was last made durable"),
    ("write_pending_s", "wrtfd_recorder_write_pending_seconds", "gauge", "Age of the write in progress"),
    ("frame_rate_hz", "wrtfd_recorder_frame_rate_hz", "gauge", "Frames per second, recent"),
)


def render_metrics(snapshot: Mapping[str, Any]) -> str:
    """The snapshot in the Prometheus text exposition format (version 0.0.4)."""
    out: list[str] = []

    def family(name: str, kind: str, help_text: str, samples: list[tuple[str, str]]) -> None:
        if not samples:
            return
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} {kind}")
        out.extend(f"{name}{labels} {value}" for labels, value in samples)

    sources: Mapping[str, Mapping[str, Any]] = snapshot.get("sources", {})
    family(
        "wrtfd_source_up",
        "gauge",
        "1 when the source is bound and receiving or waiting",
        [
            (f'{{source="{_label(n)}"}}', "1" if s.get("state") in UP_STATES else "0")
            for n, s in sources.items()
        ],
    )
    for key, name, kind, help_text in _SOURCE_METRICS:
        samples = []
        for n, s in sources.items():
            value = _num(s.get(key))
            if value is not None:
                samples.append((f'{{source="{_label(n)}"}}', value))
        family(name, kind, help_text, samples)
    drops = [
        (f'{{source="{_label(n)}",reason="{_label(reason)}"}}', str(count))
        for n, s in sources.items()
        for reason, count in sorted(s.get("dropped", {}).items())
    ]
    family("wrtfd_source_dropped_total", "counter", "Inputs dropped, by reason", drops)

    rec: Mapping[str, Any] = snapshot.get("recorder", {})
    for key, name, kind, help_text in _RECORDER_METRICS:
        value = _num(rec.get(key))
        if value is not None:
            family(name, kind, help_text, [("", value)])
    per_source: Mapping[str, Mapping[str, Any]] = rec.get("per_source") or {}
    counters = sorted({k for c in per_source.values() for k in c})
    for counter in counters:
        samples = []
        for n, c in per_source.items():
            value = _num(c.get(counter))
            if value is not None:
                samples.append((f'{{source="{_label(n)}"}}', value))
        family(
            f"wrtfd_recorder_source_{_metric_name(counter)}_total",
            "counter",
            f"Per-source scheduler counter {counter}",
            samples,
        )
    family(
        "wrtfd_recorder_up",
        "gauge",
        "1 while the recorder writes normally",
        [("", "1" if rec.get("state") == "ok" else "0")],
    )

    disk: Mapping[str, Any] = snapshot.get("disk", {})
    free = _num(disk.get("free_bytes"))
    if free is not None:
        family("wrtfd_disk_free_bytes", "gauge", "Free bytes on the recording file system", [("", free)])
    family(
        "wrtfd_healthy",
        "gauge",
        "1 when /healthz answers 200",
        [("", "1" if snapshot.get("healthy") else "0")],
    )
    uptime = _num(snapshot.get("uptime_s"))
    if uptime is not None:
        family("wrtfd_uptime_seconds", "gauge", "Seconds since the daemon started", [("", uptime)])
    return "\n".join(out) + "\n"


# --- the server --------------------------------------------------------------------------------


class StatusServer:
    """Serves a snapshot callable; ``port`` is the bound port once :meth:`serve` has started."""

    def __init__(self, host: str, port: int, snapshot: Callable[[], dict[str, Any]]) -> None:
        self.host = host
        self.port = port
        self._snapshot = snapshot
        self._limiter = anyio.CapacityLimiter(MAX_CONNECTIONS)
        self._listener: anyio.abc.Listener[anyio.abc.SocketStream] | None = None
        self.requests = 0

    async def serve(self, *, task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED) -> None:
        """Bind, report the port, serve until cancelled; raises OSError when the port is taken."""
        port = await self.serve_until_bound()
        task_status.started(port)
        await self.serve_forever()

    async def serve_until_bound(self) -> int:
        """Bind the listener (OSError if the address is taken); returns the bound port."""
        listener = await anyio.create_tcp_listener(local_host=self.host, local_port=self.port)
        self._listener = listener
        sock = listener.listeners[0].extra(anyio.abc.SocketAttribute.local_address)
        self.port = int(sock[1])
        return self.port

    async def serve_forever(self) -> None:
        listener = self._listener
        if listener is None:
            raise RuntimeError("serve_until_bound() first")
        async with listener:
            await listener.serve(self._handle)

    async def _handle(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            try:
                self._limiter.acquire_nowait()
            except anyio.WouldBlock:
                return  # too many at once: drop the connection rather than queue without bound
            try:
                await self._answer(stream)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError):
                pass  # the client went away; nothing to tell it
            finally:
                self._limiter.release()

    async def _answer(self, stream: anyio.abc.SocketStream) -> None:
        head = b""
        with anyio.move_on_after(READ_TIMEOUT_S) as scope:
            while b"\r\n\r\n" not in head:
                chunk = await stream.receive(4096)
                head += chunk
                if len(head) > MAX_HEAD_BYTES:
                    break
        if scope.cancelled_caught:
            await stream.send(_response(408, b"request timeout\n", "text/plain"))
            return
        self.requests += 1
        try:
            request = parse_request_head(
                head.split(b"\r\n\r\n", 1)[0] if len(head) <= MAX_HEAD_BYTES else head
            )
        except RequestError as exc:
            await stream.send(_response(exc.status, f"{exc}\n".encode(), "text/plain; charset=utf-8"))
            return
        head_only = request.method == "HEAD"
        await stream.send(self._route(request.path, head_only))

    def _route(self, path: str, head_only: bool) -> bytes:
        if path not in ("/status", "/metrics", "/healthz"):
            return _response(
                404, b"not found: try /status, /metrics or /healthz\n", "text/plain", head_only=head_only
            )
        snap = self._snapshot()
        if path == "/status":
            body = json.dumps(snap, indent=2, sort_keys=False, default=str).encode() + b"\n"
            return _response(200, body, "application/json", head_only=head_only)
        if path == "/metrics":
            return _response(
                200,
                render_metrics(snap).encode(),
                "text/plain; version=0.0.4; charset=utf-8",
                head_only=head_only,
            )
        problems = snap.get("problems", [])
        if problems:
            body = ("unhealthy: " + "; ".join(problems) + "\n").encode()
            return _response(503, body, "text/plain; charset=utf-8", head_only=head_only)
        return _response(200, b"ok\n", "text/plain; charset=utf-8", head_only=head_only)
