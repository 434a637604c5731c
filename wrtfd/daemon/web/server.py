"""Serving the app with hypercorn inside the daemon's task group, on a socket we own.

Why hypercorn (``docs/web.md``): its documented ``serve(app, config, shutdown_trigger=...)``
installs no signal handlers (the daemon owns SIGTERM/SIGINT/SIGHUP/SIGUSR1), it runs on the
daemon's asyncio loop, and it bounds what a client can make it hold: the request head (h11's
``h11_max_incomplete_size``: 431 past it) and the time to send it (the keep-alive timer runs from
the moment a connection opens until a complete request head has arrived, so a slow-header client
is cut off after ``keep_alive_timeout``).

What it does not bound is the number of connections, so the listening socket is ours
(:class:`CappedListener`): past ``max_connections`` a new connection is accepted and closed at
once, counted in :attr:`StatusServer.refused_connections`.

The port is bound at start (a taken port is reported then), but the web stack (hypercorn,
Starlette, the routes and the page's assets: about 5 MB on a small computer) is loaded off the
loop when the first connection arrives, which waits in the listen backlog meanwhile: a daemon
whose page nobody opens never loads it.

The port speaks HTTP/1.1 only (:func:`http11_only`): hypercorn would switch a cleartext
connection to HTTP/2 (prior knowledge, ``Upgrade: h2c``), and its HTTP/2 code logs a traceback
for every request body that goes on after the answer (docs/web.md).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import secrets
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.abc

from wrtfd.daemon.web.access import AccessPolicy
from wrtfd.daemon.web.live import Broadcaster

if TYPE_CHECKING:
    from hypercorn.config import Config as HypercornConfig

    from wrtfd.daemon.web.routes import Actions, Guard

__all__ = ["MAX_HEAD_BYTES", "CappedListener", "StatusServer", "WebLimits", "http11_only", "web_server"]

log = logging.getLogger("wrtfd.web")

#: A request head (request line and headers) bigger than this is answered 431 and cut.
MAX_HEAD_BYTES = 8192


def http11_only() -> bool:
    """Keep hypercorn's cleartext connections on HTTP/1.1 (idempotent); False if it cannot be done.

    hypercorn has no setting for it (``alpn_protocols`` applies to TLS only): its HTTP/1.1
    protocol switches to HTTP/2 when a request is the HTTP/2 preface or asks ``Upgrade: h2c``
    without a body. That check is replaced by one that switches nothing: the preface is then an
    ``HTTP/2.0`` request, which :class:`~wrtfd.daemon.web.routes.Guard` answers 505, and an
    ``Upgrade: h2c`` header is ignored (RFC 9110 7.8 lets a server do so).
    """
    global _HTTP11_ONLY
    if _HTTP11_ONLY:
        return True
    from hypercorn.protocol import h11 as hypercorn_h11

    protocol = getattr(hypercorn_h11, "H11Protocol", None)
    if protocol is None or not callable(getattr(protocol, "_check_protocol", None)):
        log.error("web: this hypercorn cannot be kept to HTTP/1.1; HTTP/2 clients are served by it")
        return False

    async def switch_nothing(self: Any, event: Any) -> None:
        return None

    protocol._check_protocol = switch_nothing
    _HTTP11_ONLY = True
    return True


_HTTP11_ONLY = False


class _CountedSocket(socket.socket):
    """An accepted connection that tells its listener when it is closed."""

    def __init__(self, listener: CappedListener, family: int, type_: int, proto: int, fileno: int) -> None:
        super().__init__(family, type_, proto, fileno)
        self._listener: CappedListener | None = listener

    def close(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.open_connections -= 1
        super().close()


def _spare_descriptor() -> int | None:
    try:
        return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


class CappedListener(socket.socket):
    """A listening TCP socket that keeps at most ``limit`` accepted connections open.

    It holds one spare file descriptor: when the process has none left (EMFILE, ENFILE), the
    spare makes room to accept the waiting connection and close it at once, counted as refused.
    Otherwise the connection stays in the backlog, and asyncio retries every second and logs a
    traceback each time (a hundred lines for a few status polls, measured).
    """

    def __init__(self, family: int, limit: int) -> None:
        super().__init__(family, socket.SOCK_STREAM)
        self.limit = limit
        self.open_connections = 0
        self.refused = 0
        self._spare = _spare_descriptor()

    def close(self) -> None:
        spare, self._spare = self._spare, None
        if spare is not None:
            os.close(spare)
        super().close()

    def _refuse_without_descriptors(self) -> None:
        """Accept and close one waiting connection with the spare descriptor's room."""
        assert self._spare is not None
        os.close(self._spare)
        self._spare = None
        try:
            conn, _ = super().accept()  # BlockingIOError when none waits after all
            conn.close()
            self.refused += 1
        finally:
            self._spare = _spare_descriptor()

    def accept(self) -> tuple[socket.socket, Any]:
        while True:
            try:
                conn, addr = super().accept()  # BlockingIOError when none waits: the loop's signal
            except OSError as exc:
                if exc.errno not in (errno.EMFILE, errno.ENFILE) or self._spare is None:
                    raise
                self._refuse_without_descriptors()
                continue
            if self.open_connections >= self.limit:
                self.refused += 1
                conn.close()
                continue
            counted = _CountedSocket(self, conn.family, conn.type, conn.proto, conn.detach())
            # as hypercorn sets on the sockets it makes: an answer's body goes out behind its
            # head at once, not held for the head's ACK (Nagle), where a close on unread input
            # (a reset) would lose it
            counted.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.open_connections += 1
            return counted, addr


def _hypercorn_config(listener: CappedListener) -> HypercornConfig:
    """hypercorn's config, serving on our socket instead of binding its own."""
    from hypercorn.config import Config, Sockets

    class _Config(Config):
        def create_sockets(self) -> Sockets:
            return Sockets(secure_sockets=[], insecure_sockets=[listener], quic_sockets=[])

    return _Config()


async def _readable(sock: socket.socket) -> None:
    """Return when ``sock`` is readable (for a listener: a connection waits to be accepted)."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(sock.fileno(), wake)
    try:
        await ready
    finally:
        loop.remove_reader(sock.fileno())


class WebLimits:
    """Bounds of the server (defaults for a recorder on a small computer)."""

    def __init__(
        self,
        *,
        max_connections: int = 64,
        max_requests: int = 32,
        keep_alive_timeout_s: float = 5.0,
        max_head_bytes: int = MAX_HEAD_BYTES,
    ) -> None:
        self.max_connections = max_connections
        self.max_requests = max_requests
        self.keep_alive_timeout_s = keep_alive_timeout_s
        self.max_head_bytes = max_head_bytes


class StatusServer:
    """The daemon's HTTP server; ``port`` is the bound port once :meth:`serve` has started.

    ``snapshot`` alone gives the status endpoints; ``actions`` adds marks and new sessions,
    ``broadcaster`` the page and its pushed updates.
    """

    def __init__(
        self,
        host: str,
        port: int,
        snapshot: Callable[[], dict[str, Any]],
        *,
        policy: AccessPolicy | None = None,
        actions: Actions | None = None,
        broadcaster: Broadcaster | None = None,
        limits: WebLimits | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.limits = limits or WebLimits()
        self.policy = policy or AccessPolicy.build(host, None)
        self.broadcaster = broadcaster
        self.actions: Actions = actions or _ReadOnly(snapshot)
        #: The ASGI app, built with the web stack when the first connection arrives.
        self.app: Guard | None = None
        self._listener: CappedListener | None = None
        self._shutdown = anyio.Event()
        self._stopped = anyio.Event()

    @property
    def refused_connections(self) -> int:
        return 0 if self._listener is None else self._listener.refused

    @property
    def open_connections(self) -> int:
        return 0 if self._listener is None else self._listener.open_connections

    def stats(self) -> dict[str, Any]:
        b, app = self.broadcaster, self.app
        return {
            "open_connections": self.open_connections,
            "refused_connections": self.refused_connections,
            "refused_requests": {} if app is None else dict(app.refused),
            "pages": 0 if b is None else len(b.subscribers),
            "pushes": 0 if b is None else b.pushes,
            "marks": 0 if app is None else app.handlers.marks,
        }

    async def serve(self, *, task_status: anyio.abc.TaskStatus[int] = anyio.TASK_STATUS_IGNORED) -> None:
        """Bind, report the port, serve until cancelled; raises OSError when the port is taken."""
        port = await self.serve_until_bound()
        task_status.started(port)
        await self.serve_forever()

    async def serve_until_bound(self) -> int:
        """Bind the listener (OSError if the address is taken); returns the bound port."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = CappedListener(family, self.limits.max_connections)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
            sock.listen(128)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self._listener = sock
        self.port = int(sock.getsockname()[1])
        return self.port

    def _load(self) -> Guard:
        """Import the web stack and build the app (off the loop: imports and the page's assets)."""
        import hypercorn.asyncio  # noqa: F401  (serve_forever's, imported here off the loop)

        from wrtfd.daemon.web.routes import build_app

        http11_only()
        return build_app(
            self.policy,
            self.actions,
            self.broadcaster,
            max_requests=self.limits.max_requests,
            max_head_bytes=self.limits.max_head_bytes,
        )

    def _config(self, listener: CappedListener) -> HypercornConfig:
        config = _hypercorn_config(listener)
        config.keep_alive_timeout = self.limits.keep_alive_timeout_s
        config.h11_max_incomplete_size = self.limits.max_head_bytes
        # bounds for HTTP/2 too, should http11_only() ever fail to keep it away
        config.h2_max_concurrent_streams = 8
        config.h2_max_header_list_size = self.limits.max_head_bytes
        config.read_timeout = None  # the keep-alive timer and the app's body timeout bound reads
        config.graceful_timeout = 1.0
        config.include_server_header = False
        config.accesslog = None
        config.errorlog = logging.getLogger("wrtfd.web.server")
        config.loglevel = "WARNING"
        return config

    async def serve_forever(self) -> None:
        """Serve until :meth:`aclose` or cancellation (which shuts the server down gracefully).

        The web stack is loaded when the first connection waits on the listener. hypercorn runs
        in an asyncio task of its own: its ``asyncio.TaskGroup`` cancels and uncancels its parent
        task on shutdown, which must not be an anyio task (anyio would take the leftover
        cancellation for its own and cancel the daemon's task group).
        """
        listener = self._listener
        if listener is None:
            raise RuntimeError("serve_until_bound() first")
        task: asyncio.Task[None] | None = None
        try:
            if self.app is None:
                async with anyio.create_task_group() as tg:

                    async def until_shutdown() -> None:
                        await self._shutdown.wait()
                        tg.cancel_scope.cancel()

                    tg.start_soon(until_shutdown)
                    await _readable(listener)
                    tg.cancel_scope.cancel()
                if self._shutdown.is_set():
                    return
                self.app = await anyio.to_thread.run_sync(self._load)
            from hypercorn.asyncio import serve as hypercorn_serve

            app = cast(Any, self.app)  # an ASGI 3 app; hypercorn's typing wants its own scope types
            task = asyncio.get_running_loop().create_task(
                hypercorn_serve(app, self._config(listener), shutdown_trigger=self._shutdown.wait)
            )
            await asyncio.shield(task)
        finally:
            if task is not None and not task.done():
                self._shutdown.set()
                with anyio.CancelScope(shield=True), anyio.move_on_after(2.0):
                    await asyncio.wait([task])
                if not task.done():
                    task.cancel()
            self._stopped.set()
            listener.close()

    async def aclose(self, timeout_s: float = 2.0) -> None:
        """Stop serving: update streams end (pages reconnect to the next daemon), then the server."""
        if self.broadcaster is not None:
            self.broadcaster.close()
        self._shutdown.set()
        with anyio.move_on_after(timeout_s):
            await self._stopped.wait()


class _ReadOnly:
    """Actions of a server without a recorder behind it (status endpoints only)."""

    def __init__(self, snapshot: Callable[[], dict[str, Any]]) -> None:
        self.snapshot = snapshot

    def mark(self, note: str) -> dict[str, int]:
        return {}

    def new_session(self) -> None:
        return None

    def start_finish(self, width_m: float = 30.0) -> list[str]:
        return []


def web_server(daemon: Any, config: Any, token: str | None) -> StatusServer:
    """The daemon's server from its config (``[status]`` where, ``[web]`` what and for whom).

    ``daemon`` offers ``snapshot``, ``mark``, ``new_session`` and ``output_dir``; ``token`` is
    ``[web] token`` or None (then a generated one is used off loopback, and logged).
    """
    from wrtfd.daemon.web.access import TOKEN_FILE, resolve_token
    from wrtfd.daemon.web.live import LiveView

    st, web = config.status, config.web
    resolved = resolve_token(token or web.token, st.host, daemon.output_dir) if web.enabled else None
    if resolved is not None and not (token or web.token):
        log.warning(
            "web: listening on %s; changes (mark, new session) need the token %s (kept in %s)."
            " Open the page once as http://HOST:%d/?token=%s",
            st.host,
            resolved,
            daemon.output_dir / TOKEN_FILE,
            st.port,
            resolved,
        )
    if web.enabled:
        policy = AccessPolicy.build(
            st.host, resolved, public_read=web.public_read, allowed_hosts=web.allowed_hosts
        )
    else:  # status endpoints only, as they always were: readable by whoever reaches them
        policy = AccessPolicy(st.host, None, secrets.token_urlsafe(24), public_read=True)
    broadcaster = None
    if web.enabled:
        broadcaster = Broadcaster(
            LiveView(web.channels), daemon.snapshot, push_hz=web.push_hz, max_subscribers=web.max_pages
        )
    limits = WebLimits(max_connections=web.max_connections)
    return StatusServer(
        st.host,
        st.port,
        daemon.snapshot,
        policy=policy,
        actions=daemon,
        broadcaster=broadcaster,
        limits=limits,
    )
