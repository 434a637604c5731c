"""Ask a running daemon for a marker: ``POST /api/mark``, bounded in time and size like ``/status``.

With a token: ``Authorization: Bearer``. Without one (a daemon on loopback): the CSRF token is
read first from ``/api/csrf`` (readable only by a same-origin page or a local program), then sent
in ``X-Wrtfd-Csrf``, as the page does.
"""

from __future__ import annotations

import http.client
import json
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from wrtfd.daemon.status_client import base_url, exchange_errors
from wrtfd.errors import StatusError

__all__ = ["MarkAnswer", "NotRecording", "post_mark"]

MAX_ANSWER_BYTES = 64 * 1024


class NotRecording(StatusError):
    """The daemon answered, but no group has a session to put the marker in."""


@dataclass(frozen=True, slots=True)
class MarkAnswer:
    marked: dict[str, int]
    wall_us: int
    note: str


def _request(
    host: str,
    port: int,
    method: str,
    path: str,
    shown: str,
    *,
    body: bytes | None,
    headers: dict[str, str],
    timeout_s: float,
) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
    with closing(conn), exchange_errors(shown + path, timeout_s):
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        raw = resp.read(MAX_ANSWER_BYTES + 1)
    if len(raw) > MAX_ANSWER_BYTES:
        raise StatusError(f"{shown}{path}: answer larger than {MAX_ANSWER_BYTES} bytes")
    try:
        data = json.loads(raw) if raw.strip() else {}
    except (UnicodeDecodeError, json.JSONDecodeError):
        data = {"error": raw[:200].decode("utf-8", "replace").strip()}
    return resp.status, data if isinstance(data, dict) else {}


def post_mark(
    url: str, note: str = "", *, token: str | None = None, timeout_s: float = 5.0, start_finish: bool = False
) -> MarkAnswer:
    """A marker now in every group that records (and, with ``start_finish``, the start/finish line
    laid where the car is, by every GNSS source that times laps).

    :raises NotRecording: no group has a session in progress.
    :raises StatusError: unreachable, refused (a token is needed) or not a wrtfd daemon.
    """
    host, port, _, shown = base_url(url)
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    else:
        code, data = _request(
            host, port, "GET", "/api/csrf", shown, body=None, headers=headers, timeout_s=timeout_s
        )
        if code != 200 or not isinstance(data.get("csrf"), str):
            why = data.get("error") or f"HTTP {code}"
            raise StatusError(f"{shown}: cannot mark: {why} (a token may be needed: --token)")
        headers["X-Wrtfd-Csrf"] = data["csrf"]
    body = json.dumps({"note": note, "start_finish": True} if start_finish else {"note": note}).encode()
    code, data = _request(
        host, port, "POST", "/api/mark", shown, body=body, headers=headers, timeout_s=timeout_s
    )
    if code == 409:
        raise NotRecording(f"{shown}: {data.get('error', 'nothing is being recorded')}")
    if code != 200 or not isinstance(data.get("marked"), dict):
        raise StatusError(f"{shown}/api/mark: HTTP {code}: {data.get('error', 'not a wrtfd answer')}")
    return MarkAnswer(
        {str(k): int(v) for k, v in data["marked"].items()},
        int(data.get("wall_us", 0)),
        str(data.get("note", "")),
    )
