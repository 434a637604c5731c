"""Read a daemon's ``/status``: one bounded HTTP GET, for ``wrtfd status`` and scripts.

The answer is untrusted like any input: the whole exchange is bounded in time (``timeout_s``,
across connect and every read) and size (:data:`MAX_STATUS_BYTES`), and anything but a ``200``
with a JSON object is a :class:`~wrtfd.errors.StatusError` naming the URL and what was wrong.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from wrtfd.errors import StatusError

__all__ = [
    "DEFAULT_URL",
    "MAX_STATUS_BYTES",
    "StatusAnswer",
    "base_url",
    "exchange_errors",
    "fetch_status",
    "status_url",
    "url_for",
]

DEFAULT_URL = "http://127.0.0.1:8787"
#: A status document of many sources is tens of KiB; more than this is not a wrtfd status.
MAX_STATUS_BYTES = 1 << 20
_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class StatusAnswer:
    url: str
    body: bytes
    snapshot: dict[str, Any]

    @property
    def healthy(self) -> bool:
        return bool(self.snapshot.get("healthy")) and not self.snapshot.get("problems")


def url_for(host: str, port: int) -> str:
    """The status URL of a daemon listening on ``host`` (a wildcard address means this machine)."""
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def base_url(url: str) -> tuple[str, int, str, str]:
    """(host, port, path, ``http://host:port`` shown) of a daemon URL such as ``127.0.0.1:8787``.

    :raises StatusError: not an ``http://`` URL with a host.
    """
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
    except ValueError:  # an unclosed IPv6 bracket
        raise StatusError(f"{url}: expected an http://HOST[:PORT] URL") from None
    if parts.scheme != "http" or not parts.hostname:
        raise StatusError(f"{url}: expected an http://HOST[:PORT] URL")
    try:
        port = parts.port or 80
    except ValueError:
        raise StatusError(f"{url}: bad port") from None
    host = parts.hostname
    return host, port, parts.path, f"http://{f'[{host}]' if ':' in host else host}:{port}"


def status_url(url: str) -> tuple[str, int, str, str]:
    """(host, port, request path, URL shown) for a base URL such as ``http://127.0.0.1:8787``.

    :raises StatusError: not an ``http://`` URL with a host.
    """
    host, port, path, shown = base_url(url)
    path = path.rstrip("/")
    if not path.endswith("/status"):
        path += "/status"
    return host, port, path, shown + path


@contextmanager
def exchange_errors(where: str, timeout_s: float) -> Iterator[None]:
    """What a failed HTTP exchange with a daemon raises, as one :class:`StatusError` naming ``where``
    (``wrtfd status`` and ``wrtfd mark`` say the same about the same failure)."""
    try:
        yield
    except TimeoutError:
        raise StatusError(f"{where}: no answer within {timeout_s:g} s") from None
    except OSError as exc:
        raise StatusError(f"{where}: unreachable: {exc.strerror or exc}") from None
    except http.client.HTTPException as exc:
        raise StatusError(f"{where}: not an HTTP answer ({type(exc).__name__})") from None


def fetch_status(url: str, *, timeout_s: float = 5.0) -> StatusAnswer:
    """GET the status document; raises StatusError when there is no usable answer."""
    host, port, path, shown = status_url(url)
    deadline = time.monotonic() + timeout_s
    conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
    with closing(conn), exchange_errors(shown, timeout_s):
        conn.request("GET", path, headers={"Accept": "application/json"})
        resp = conn.getresponse()
        body = b""
        while len(body) <= MAX_STATUS_BYTES:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            if conn.sock is not None:
                conn.sock.settimeout(remaining)
            chunk = resp.read1(_CHUNK)  # what has arrived: a trickle cannot hold each read open
            if not chunk:
                break
            body += chunk
    if len(body) > MAX_STATUS_BYTES:
        raise StatusError(f"{shown}: answer larger than {MAX_STATUS_BYTES} bytes; not a wrtfd status")
    if resp.status != 200:
        raise StatusError(f"{shown}: HTTP {resp.status} {resp.reason}")
    try:
        snapshot = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StatusError(f"{shown}: not JSON ({exc})") from None
    if not isinstance(snapshot, dict) or not isinstance(snapshot.get("sources"), dict):
        raise StatusError(f"{shown}: JSON, but not a wrtfd status (no sources)")
    return StatusAnswer(url=shown, body=body, snapshot=snapshot)
