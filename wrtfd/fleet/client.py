"""Connecting to the team's NATS server, and the streams wrtfd keeps there.

Two small JetStream streams hold what a newcomer (``wrtfd watch``, ``wrtfd fleet status``, the
pit-wall page) needs at once instead of waiting for the next message:

* ``WRTFD_STATE`` captures ``wrtfd.*.status`` and ``wrtfd.*.*.layout``, keeping the last
  message of each subject: every rig's latest status and every group's frame layout;
* ``WRTFD_EVENTS`` captures ``wrtfd.*.events`` (sessions, markers, files, uploads) for a week
  (64 MiB at most).

Rigs create them when missing (and leave them alone when present, so a team may configure them
differently). Publishing to the subjects never waits for them: status and events are plain
publishes the streams happen to capture.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from wrtfd.errors import WrtfdError
from wrtfd.fleet.config import ConnectOptions

__all__ = [
    "EVENTS_STREAM",
    "STATE_STREAM",
    "FleetError",
    "LastError",
    "connect",
    "describe_error",
    "ensure_streams",
    "is_auth_error",
    "read_last_per_subject",
    "require_nats",
]

log = logging.getLogger("wrtfd.fleet")

STATE_STREAM = "WRTFD_STATE"
EVENTS_STREAM = "WRTFD_EVENTS"
STATE_SUBJECTS = ("wrtfd.*.status", "wrtfd.*.*.layout")
EVENTS_SUBJECTS = ("wrtfd.*.events",)
EVENTS_MAX_AGE_S = 7 * 86400.0
EVENTS_MAX_BYTES = 64 << 20


class FleetError(WrtfdError):
    """The fleet server cannot be used (unreachable, refused, not JetStream, missing extra)."""


def require_nats() -> None:
    """Raise FleetError naming the extra when nats-py is not installed."""
    try:
        import nats  # noqa: F401
    except ImportError:
        raise FleetError("the fleet needs nats-py: pip install 'wrtfd[fleet]'") from None


def is_auth_error(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "authorization violation" in text or "authentication" in text or "user authentication" in text


def describe_error(exc: BaseException) -> str:
    """One line for a person: what went wrong talking to the server."""
    if is_auth_error(exc):
        return "authorization refused by the server (wrong or missing token / user / password / creds)"
    if isinstance(exc, ssl.SSLError | ssl.CertificateError):
        return f"TLS: {getattr(exc, 'reason', None) or exc}"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (is nats-server running there?)"
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc) or type(exc).__name__
    name = type(exc).__name__
    text = str(exc).removeprefix("nats: ").strip()
    if name in ("NoServersError",) and not text:
        return "no server could be reached"
    return f"{name}: {text}" if text else name


class LastError:
    """An ``error_cb`` (:meth:`record`) that keeps the last error only (to explain a failed connection).

    nats-py hands the error callback every asynchronous error for the connection's life, an
    exception raised by a subscription's callback among them: a list of them (each with its
    traceback, holding the message) grew without bound under a flood of bad messages."""

    __slots__ = ("count", "last")

    def __init__(self) -> None:
        self.last: Exception | None = None
        self.count = 0

    async def record(self, exc: Exception) -> None:
        """The callback itself (nats-py takes coroutine functions only, not callable objects)."""
        self.last = exc.with_traceback(None)
        self.count += 1


#: How long closing a client that failed to connect may take (nats-py can wait on a dead TLS link).
CLOSE_TIMEOUT_S = 2.0
#: A command given several servers: attempts per node, at first and after losing one.
CLI_RECONNECTS = 3


async def connect(
    options: ConnectOptions,
    *,
    name: str,
    forever: bool = False,
    error_cb: Callable[[Exception], Awaitable[None]] | None = None,
    disconnected_cb: Callable[[], Awaitable[None]] | None = None,
    reconnected_cb: Callable[[], Awaitable[None]] | None = None,
    pending_bytes: int = 2 << 20,
) -> Any:
    """A connected ``nats.aio.client.Client``.

    ``forever``: keep trying (every ``reconnect_wait_s``) until it connects, reporting each
    failure to ``error_cb`` (the daemon); else one attempt at each server, a FleetError on
    failure (the CLI). Given several servers (a cluster), the CLI's connection too moves to
    another node when its own goes away (:data:`CLI_RECONNECTS` attempts per node).
    """
    import nats.aio.client

    remember = LastError()
    cluster = len(options.servers) > 1

    kwargs: dict[str, Any] = {
        "servers": list(options.servers),
        "name": name,
        "connect_timeout": options.connect_timeout_s,
        "reconnect_time_wait": options.reconnect_wait_s,
        # (0 would mean "forever" to nats-py: 1 is one attempt and one retry)
        "max_reconnect_attempts": -1 if forever else (CLI_RECONNECTS if cluster else 1),
        "allow_reconnect": forever or cluster,
        "error_cb": error_cb or remember.record,
        "pending_size": pending_bytes,
    }
    if disconnected_cb is not None:
        kwargs["disconnected_cb"] = disconnected_cb
    if reconnected_cb is not None:
        kwargs["reconnected_cb"] = reconnected_cb
    if options.token is not None:
        kwargs["token"] = options.token
    if options.user is not None:
        kwargs["user"] = options.user
        kwargs["password"] = options.password
    if options.creds is not None:
        kwargs["user_credentials"] = str(options.creds)
    if options.tls is not None:
        kwargs["tls"] = options.tls
    nc = nats.aio.client.Client()
    try:
        await nc.connect(**kwargs)
    except BaseException as exc:
        # A refused login leaves nats-py's transport open: close it, whatever happened.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(nc.close(), CLOSE_TIMEOUT_S)
        if forever or not isinstance(exc, Exception):
            raise
        cause = remember.last if remember.last is not None and type(exc).__name__ == "NoServersError" else exc
        raise FleetError(f"{options.shown}: {describe_error(cause)}") from None
    return nc


async def ensure_streams(js: Any, *, replicas: int = 1) -> None:
    """Create ``WRTFD_STATE`` and ``WRTFD_EVENTS`` where they do not exist yet (``replicas``
    copies: the cluster's size)."""
    from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig
    from nats.js.errors import NotFoundError

    wanted = (
        StreamConfig(
            name=STATE_STREAM,
            description="wrtfd: the last status of every rig and the frame layout of every group",
            subjects=list(STATE_SUBJECTS),
            retention=RetentionPolicy.LIMITS,
            max_msgs_per_subject=1,
            storage=StorageType.FILE,
            discard=DiscardPolicy.OLD,
            allow_direct=True,
            num_replicas=replicas,
        ),
        StreamConfig(
            name=EVENTS_STREAM,
            description="wrtfd: sessions, markers, files and uploads of every rig",
            subjects=list(EVENTS_SUBJECTS),
            retention=RetentionPolicy.LIMITS,
            max_age=EVENTS_MAX_AGE_S,
            max_bytes=EVENTS_MAX_BYTES,
            storage=StorageType.FILE,
            discard=DiscardPolicy.OLD,
            num_replicas=replicas,
        ),
    )
    for config in wanted:
        assert config.name is not None
        try:
            await js.stream_info(config.name)
        except NotFoundError:
            await js.add_stream(config)


#: Messages asked for at once when reading the last message of every subject.
LAST_PER_SUBJECT_BATCH = 256


async def read_last_per_subject(
    js: Any, stream: str, subject: str, on_msg: Callable[[str, bytes, float | None], None]
) -> None:
    """The last message of every subject matching ``subject`` in ``stream``, oldest first, to
    ``on_msg(subject, data, unix_time)``: one short-lived pull consumer, whatever the number of
    subjects (asking for each subject's last message was 45 s for 20,000 made-up rigs). The
    caller keeps what it wants of them (the latest :data:`~wrtfd.fleet.watch.MAX_RIGS`)."""
    from nats.errors import TimeoutError as NatsTimeout
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    from wrtfd.fleet.upload import drop_consumer, pull_consumer

    config = ConsumerConfig(
        ack_policy=AckPolicy.NONE,
        deliver_policy=DeliverPolicy.LAST_PER_SUBJECT,
        inactive_threshold=30.0,
        mem_storage=True,
    )
    psub = await pull_consumer(js, stream, subject, config)
    try:
        pending = (await psub.consumer_info()).num_pending
        while pending > 0:
            try:
                msgs = await psub.fetch(batch=min(LAST_PER_SUBJECT_BATCH, pending), timeout=5.0)
            except NatsTimeout:
                return
            for msg in msgs:
                meta = msg.metadata
                pending = meta.num_pending
                stamp = meta.timestamp.timestamp() if meta.timestamp is not None else None
                on_msg(msg.subject, bytes(msg.data or b""), stamp)
    finally:
        await drop_consumer(js, stream, psub)
