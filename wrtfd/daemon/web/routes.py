"""The Starlette app: the page, its assets, the status endpoints, pushed updates and the actions.

Every request passes :class:`Guard` first (a plain ASGI wrapper, cheap): a bounded number of
requests at once (pushed-update streams have their own bound), the ``Host`` check, a path
target, security headers, ``Connection: close`` on plain answers (one request per connection,
as the status endpoint always did; only the update stream stays open), and no body for HEAD (a
HEAD of the update stream is a plain answer: its head, and the connection closes). A WebSocket
handshake is answered 404 (this port has none; Foxglove has its own). Each route then checks what
the caller may do (:mod:`.access`). Request bodies are read with a size and a time bound.

Every refusal is counted under its reason (``refused``, shared by the guard and the routes:
``/status`` -> ``web.refused_requests``).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from importlib import resources
from typing import Any, Protocol

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from wrtfd import __version__
from wrtfd.daemon.status import render_metrics
from wrtfd.daemon.web.access import COOKIE, Access, AccessPolicy
from wrtfd.daemon.web.live import Broadcaster, to_json
from wrtfd.format.markers import clean_note
from wrtfd.recorder.markers import MAX_PENDING as MAX_MARKERS_WAITING
from wrtfd.recorder.markers import TooManyMarkersError

__all__ = ["MAX_BODY_BYTES", "Actions", "Guard", "build_app"]

log = logging.getLogger("wrtfd.web")

#: A mark's body (a short note in JSON) is never bigger than this.
MAX_BODY_BYTES = 1024
#: ... and arrives within this long.
BODY_TIMEOUT_S = 5.0
#: Seconds between keep-alive comments on an idle update stream.
KEEPALIVE_S = 15.0
#: What the browser waits before reconnecting a dropped update stream (SSE ``retry:``).
RETRY_MS = 1500
COOKIE_MAX_AGE_S = 30 * 86400

STATIC_FILES: dict[str, str] = {
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"cache-control", b"no-store"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; "
        b"frame-ancestors 'none'",
    ),
)


class Actions(Protocol):
    """What the daemon offers the web server."""

    def snapshot(self) -> dict[str, Any]: ...

    def mark(self, note: str) -> Mapping[str, int]:
        """Markers at this moment in every group that records: ``{group: tick}`` (empty: none)."""

    def new_session(self) -> None: ...

    def start_finish(self, width_m: float = 30.0) -> list[str]:
        """Lay the start/finish line at the car's next fix: the GNSS sources asked (empty: none)."""


class Guard:
    """The ASGI wrapper every request passes (see the module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        policy: AccessPolicy,
        *,
        max_requests: int = 32,
        max_head_bytes: int = 8192,
        refused: dict[str, int] | None = None,
    ) -> None:
        self.app = app
        self.policy = policy
        self.max_requests = max_requests
        self.max_head_bytes = max_head_bytes
        self.active = 0
        #: Refused requests by reason (the routes count theirs here too).
        self.refused: dict[str, int] = {} if refused is None else refused
        #: The route handlers (their counters are in the server's stats).
        self.handlers: Any = None

    def _refuse(self, why: str) -> None:
        self.refused[why] = self.refused.get(why, 0) + 1

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await self.app(scope, receive, send)
            elif scope["type"] == "websocket":
                self._refuse("websocket")
                await _refuse_websocket(send)
            return
        raw = scope.get("raw_path") or b""
        headers = scope.get("headers", ())
        body = _BodyLeft(receive, any(k in (b"content-length", b"transfer-encoding") for k, _ in headers))
        send = body.wrap(send)
        # h11 bounds a head that arrives in pieces; one that arrives whole (up to hypercorn's
        # 64 KiB read) is parsed, so the bound is applied here as well.
        size = len(raw) + len(scope.get("query_string", b"")) + sum(len(k) + len(v) + 4 for k, v in headers)
        if size > self.max_head_bytes:
            self._refuse("head_too_large")
            await _plain(send, 431, "request head too large\n")
            return
        if scope.get("http_version") not in ("1.0", "1.1"):  # the HTTP/2 preface (server.http11_only)
            self._refuse("http2")
            await _plain(send, 505, "this server speaks HTTP/1.1 only\n")
            return
        if not raw.startswith(b"/"):
            self._refuse("bad_target")
            await _plain(send, 400, "request target must be a path\n")
            return
        host = next((v.decode("latin-1") for k, v in headers if k == b"host"), None)
        if not self.policy.host_allowed(host):
            self._refuse("bad_host")
            await _plain(
                send, 400, "Host must be an IP address, localhost or a name in [web] allowed_hosts\n"
            )
            return
        head = scope["method"] == "HEAD"
        # HEAD of the update stream gets its head only, as a plain answer: a stream whose body
        # is never sent would hold its page and connection for ever (hypercorn stops reading
        # the connection while an answer is unfinished)
        streaming = scope["path"] == "/api/events" and not head
        if not streaming and self.active >= self.max_requests:
            self._refuse("busy")
            await _plain(send, 503, "busy\n")
            return

        async def guarded_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", ()) if h[0].lower() != b"connection"]
                headers.extend(
                    SECURITY_HEADERS
                    if not any(h[0] == b"cache-control" for h in headers)
                    else SECURITY_HEADERS[1:]
                )
                if not streaming:
                    headers.append((b"connection", b"close"))
                message = {**message, "headers": headers}
            elif head and message["type"] == "http.response.body" and message.get("body"):
                message = {**message, "body": b""}
            await send(message)

        if not streaming:
            self.active += 1
        try:
            await self.app(scope, body.receive, guarded_send)
        finally:
            if not streaming:
                self.active -= 1


class _BodyLeft:
    """What of a request body the app left unread, discarded until the stream closes.

    hypercorn hands body chunks to the app through a queue of 10 and waits while it is full;
    when the stream closes it queues a disconnect the same way. An app that answers before the
    body's end (413) stops reading, so a client that sends on fills the queue and both waits
    block for ever: the connection's task outlives the connection, until shutdown. Whatever
    the app left is therefore read and dropped from its last send on, until the disconnect (or
    :data:`BODY_TIMEOUT_S`, a bound on the drain itself; the body is never kept).
    """

    __slots__ = ("_receive", "done")

    def __init__(self, receive: Receive, has_body: bool) -> None:
        self._receive = receive
        #: The body's end (or the disconnect) has been received, or there is no body.
        self.done = not has_body

    async def receive(self) -> Message:
        message = await self._receive()
        if message["type"] == "http.disconnect" or not message.get("more_body", False):
            self.done = True
        return message

    def wrap(self, send: Send) -> Send:
        """``send`` that sends the response's last message with :meth:`send_last`."""

        async def wrapped(message: Message) -> None:
            if (
                message["type"] == "http.response.body"
                and not message.get("more_body", False)
                and not self.done
            ):
                await self.send_last(send, message)
            else:
                await send(message)

        return wrapped

    async def send_last(self, send: Send, message: Message) -> None:
        """The response's last message, sent while the rest of the body is read and dropped."""
        self.done = True
        failed: list[BaseException] = []

        async def last() -> None:
            try:
                await send(message)
            except Exception as exc:  # raised as itself below, not in an exception group
                failed.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(self._drain)
            await last()
        if failed:
            raise failed[0]

    async def _drain(self) -> None:
        with anyio.move_on_after(BODY_TIMEOUT_S):
            while (await self._receive())["type"] != "http.disconnect":
                pass


async def _plain(send: Send, status: int, text: str) -> None:
    body = text.encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        *SECURITY_HEADERS,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _refuse_websocket(send: Send) -> None:
    """Refuse a WebSocket handshake with a plain HTTP answer (the ASGI ``websocket.http.response``
    extension, which hypercorn offers); the connection then closes."""
    body = b"no WebSocket on this port (the live Foxglove view has its own: [foxglove] port)\n"
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        *SECURITY_HEADERS,
    ]
    await send({"type": "websocket.http.response.start", "status": 404, "headers": headers})
    await send({"type": "websocket.http.response.body", "body": body})


def _load_static() -> dict[str, bytes]:
    root = resources.files("wrtfd.daemon.web") / "static"
    files = {name: (root / name).read_bytes() for name in STATIC_FILES}
    files["index.html"] = (root / "index.html").read_bytes()
    return files


#: The page's assets, read once when this module is imported (16 KB): never on the event loop.
STATIC = _load_static()


class _Handlers:
    def __init__(
        self,
        policy: AccessPolicy,
        actions: Actions,
        broadcaster: Broadcaster | None,
        refused: dict[str, int],
    ) -> None:
        self.policy = policy
        self.actions = actions
        self.broadcaster = broadcaster
        self.static = STATIC
        self.marks = 0
        self.refused = refused

    def _refuse(self, why: str, response: Response) -> Response:
        """``response``, a refusal counted under ``why``."""
        self.refused[why] = self.refused.get(why, 0) + 1
        return response

    def access(self, request: Request) -> Access:
        peer = request.client.host if request.client else None
        return self.policy.check(peer=peer, headers=request.headers, cookies=request.cookies)

    def _no_read(self) -> Response:
        return PlainTextResponse(
            "a token is needed: open this page as /?token=TOKEN (see `wrtfd config show`)\n", 401
        )

    # -- the page ----------------------------------------------------------------------------------

    async def index(self, request: Request) -> Response:
        token = request.query_params.get("token")
        if token is not None:
            if not self.policy.token_matches(token):
                return self._refuse("bad_token", PlainTextResponse("wrong token\n", 403))
            response = RedirectResponse("/", status_code=303)
            response.set_cookie(
                COOKIE, token, max_age=COOKIE_MAX_AGE_S, path="/", httponly=True, samesite="strict"
            )
            return response
        if not self.access(request).read:
            return self._no_read()
        return Response(self.static["index.html"], media_type="text/html; charset=utf-8")

    async def static_file(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC_FILES:
            return PlainTextResponse("not found\n", 404)
        return Response(self.static[name], media_type=STATIC_FILES[name])

    # -- the status endpoints (as before) ------------------------------------------------------

    async def status(self, request: Request) -> Response:
        if not self.access(request).read:
            return self._no_read()
        body = json.dumps(self.actions.snapshot(), indent=2, sort_keys=False, default=str).encode() + b"\n"
        return Response(body, media_type="application/json")

    async def metrics(self, request: Request) -> Response:
        if not self.access(request).read:
            return self._no_read()
        return Response(
            render_metrics(self.actions.snapshot()), media_type="text/plain; version=0.0.4; charset=utf-8"
        )

    async def healthz(self, request: Request) -> Response:
        if not self.access(request).read:
            return self._no_read()
        problems = self.actions.snapshot().get("problems", [])
        if problems:
            return PlainTextResponse("unhealthy: " + "; ".join(problems) + "\n", 503)
        return PlainTextResponse("ok\n")

    # -- pushed updates ------------------------------------------------------------------------

    async def events(self, request: Request) -> Response:
        acc = self.access(request)
        if not acc.read:
            return self._no_read()
        if self.broadcaster is None:
            return PlainTextResponse("the page is disabled ([web] enabled = false)\n", 404)
        broadcaster = self.broadcaster
        if request.method == "HEAD":  # its head only (Guard): no page is subscribed
            return Response(b"", media_type="text/event-stream", headers={"cache-control": "no-store"})
        sub = broadcaster.subscribe()
        if sub is None:
            return self._refuse(
                "pages_full", PlainTextResponse("too many pages open\n", 503, headers={"retry-after": "5"})
            )
        hello = {
            "version": __version__,
            "csrf": self.policy.csrf,
            # whoever may change things with the CSRF token (which the page gets here), as
            # AccessPolicy.check decides: a loopback peer of a LAN server too
            "can_write": acc.write or acc.trusted,
            "channels": broadcaster.view.wanted,
        }

        async def stream() -> Any:
            try:
                yield b"retry: %d\nevent: hello\ndata: " % RETRY_MS + to_json(hello) + b"\n\n"
                yield broadcaster.build()
                while not sub.closed:
                    data = await sub.next(KEEPALIVE_S)
                    if sub.closed:
                        return
                    yield data if data is not None else b": keep-alive\n\n"
            finally:
                broadcaster.unsubscribe(sub)

        return StreamingResponse(
            stream(), media_type="text/event-stream", headers={"cache-control": "no-store"}
        )

    # -- actions -------------------------------------------------------------------------------

    async def csrf(self, request: Request) -> Response:
        """The CSRF token, for a program on this machine (``wrtfd mark``); same rules as reading."""
        if not self.access(request).read:
            return self._no_read()
        return JSONResponse({"csrf": self.policy.csrf})

    async def _change(self, request: Request) -> bytes | Response:
        """The body of a change the caller may make, or the answer refusing it."""
        if not self.policy.origin_allowed(request.headers.get("origin"), request.headers.get("host")):
            return self._refuse("bad_origin", JSONResponse({"error": "cross-origin request refused"}, 403))
        acc = self.access(request)
        if not acc.write:
            if not acc.trusted:
                return self._refuse("unauthorized", JSONResponse({"error": acc.reason}, 401))
            return self._refuse("bad_csrf", JSONResponse({"error": acc.reason}, 403))
        body = await _bounded_body(request)
        if isinstance(body, Response):
            self._refuse("body_too_slow" if body.status_code == 408 else "body_too_large", body)
        return body

    async def mark(self, request: Request) -> Response:
        body = await self._change(request)
        if isinstance(body, Response):
            return body
        note = ""
        start_finish = False
        if body.strip():
            try:
                data = json.loads(body)
            except (UnicodeDecodeError, json.JSONDecodeError):
                data = None
            if (
                not isinstance(data, dict)
                or not isinstance(data.get("note", ""), str)
                or not isinstance(data.get("start_finish", False), bool)
            ):
                return self._refuse(
                    "bad_body",
                    JSONResponse({"error": 'body must be JSON: {"note": "...", "start_finish": false}'}, 400),
                )
            # as the file will hold it (control characters, lone surrogates, length), so that the
            # answer and the journal say what was recorded
            note = clean_note(data.get("note", ""))
            start_finish = data.get("start_finish", False)
        wall_us = time.time_ns() // 1000
        lines: list[str] = []
        if start_finish:
            lines = list(self.actions.start_finish())
            if not lines:
                return JSONResponse(
                    {"error": 'no GNSS source times laps here (give it circuit = "auto")'}, 409
                )
            log.info("start/finish line asked of %s", ", ".join(lines))
        try:
            marked = dict(self.actions.mark(note))
        except TooManyMarkersError:
            return self._refuse(
                "marks_waiting",
                JSONResponse(
                    {"error": f"too many marks waiting ({MAX_MARKERS_WAITING}) for their frame: try again"},
                    429,
                    headers={"retry-after": "1"},
                ),
            )
        if not marked:
            return JSONResponse({"error": "nothing is being recorded: no session to mark"}, 409)
        self.marks += 1
        log.info("marker %r in %s", note, ", ".join(f"{g} at tick {t}" for g, t in marked.items()))
        return JSONResponse({"marked": marked, "wall_us": wall_us, "note": note, "start_finish": lines})

    async def new_session(self, request: Request) -> Response:
        body = await self._change(request)
        if isinstance(body, Response):
            return body
        self.actions.new_session()
        log.info("new session requested over HTTP")
        return JSONResponse({"ok": True})


async def _bounded_body(request: Request) -> bytes | Response:
    """The request body, at most MAX_BODY_BYTES and within BODY_TIMEOUT_S (else 413 / 408)."""
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > MAX_BODY_BYTES):
        return JSONResponse({"error": f"body larger than {MAX_BODY_BYTES} bytes"}, 413)
    body = b""
    with anyio.move_on_after(BODY_TIMEOUT_S) as scope:
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_BODY_BYTES:
                return JSONResponse({"error": f"body larger than {MAX_BODY_BYTES} bytes"}, 413)
    if scope.cancelled_caught:
        return JSONResponse({"error": "body too slow"}, 408)
    return body


def build_app(
    policy: AccessPolicy,
    actions: Actions,
    broadcaster: Broadcaster | None,
    *,
    max_requests: int = 32,
    max_head_bytes: int = 8192,
) -> Guard:
    """The whole app, wrapped in its :class:`Guard`. ``broadcaster`` None: no page, status only."""
    refused: dict[str, int] = {}
    h = _Handlers(policy, actions, broadcaster, refused)
    routes = [
        Route("/status", h.status, methods=["GET"]),
        Route("/metrics", h.metrics, methods=["GET"]),
        Route("/healthz", h.healthz, methods=["GET"]),
    ]
    if broadcaster is not None:
        routes += [
            Route("/api/mark", h.mark, methods=["POST"]),
            Route("/api/csrf", h.csrf, methods=["GET"]),
            Route("/api/session", h.new_session, methods=["POST"]),
            Route("/", h.index, methods=["GET"]),
            Route("/static/{name}", h.static_file, methods=["GET"]),
            Route("/api/events", h.events, methods=["GET"]),
        ]
    app = Starlette(routes=routes, exception_handlers={404: _not_found})
    guard = Guard(app, policy, max_requests=max_requests, max_head_bytes=max_head_bytes, refused=refused)
    guard.handlers = h
    return guard


async def _not_found(request: Request, exc: Exception) -> Response:
    return PlainTextResponse("not found: try /, /status, /metrics or /healthz\n", 404)
