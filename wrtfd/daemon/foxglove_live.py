"""The live view in Foxglove: the daemon's frames over the Foxglove WebSocket protocol.

``[foxglove] port = 8765`` starts a Foxglove WebSocket server (the ``foxglove-sdk`` package, the
``foxglove`` extra) that advertises one channel per topic of
:class:`~wrtfd.exporters.foxglove.FoxgloveEncoder` for each recording group (the same topics and
messages as the MCAP export), plus ``/wrtfd/log`` for session starts and ends. Why this library
and what it does with its own threads: ``docs/foxglove.md``.

The recording path never waits on a viewer:

* :meth:`FoxgloveLive.notify` (the hub's observer, called on the recorder's thread) only appends
  to a bounded deque and wakes the publisher; when nobody is subscribed it returns at once, and
  when the deque is full the block is dropped and counted (``dropped.publisher_behind``);
* the publisher is a task on the daemon's loop: it decimates to ``rate_hz`` per group, encodes
  only when a client is subscribed, and hands each message to the SDK, which copies it into every
  subscribed client's bounded queue (``client_backlog`` messages, the oldest dropped first) and
  returns: the sockets are written by the SDK's own threads, outside the interpreter lock;
* starting and stopping the server (a bind, a join of the SDK's tasks) run in a worker thread;
* the SDK's accept loop ends for good, closing its listening socket without a word, when an
  accept fails (the process at its open-file limit): every :data:`LISTENER_CHECK_S` the listener
  is looked for in ``/proc`` and, when gone, the state says ``failed`` (counted in
  ``listener_failures``, one rate-limited error line) and the server is started again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.lowlevel
import numpy as np

from wrtfd._optional import require
from wrtfd.daemon.logs import LOGGER_NAME
from wrtfd.exporters.foxglove import LOG_SCHEMA_BYTES, LOG_TOPIC, FoxgloveEncoder, LogLevel, log_message
from wrtfd.format.records import take_records
from wrtfd.recorder.observe import LiveFrames, ObserverHub, RecordingEvent, SessionEnded, SessionStarted

if TYPE_CHECKING:
    from wrtfd.daemon.config import FoxgloveConfig
    from wrtfd.format.schema import Schema

__all__ = ["FOXGLOVE_EXTRA", "FoxgloveLive", "decimate", "require_sdk"]

log = logging.getLogger("wrtfd.foxglove")

FOXGLOVE_EXTRA = "foxglove"
#: Blocks of live frames (one per engine step, 0.1 s by default) waiting for the publisher.
MAX_PENDING = 64
BIND_RETRY_S = 5.0
#: Seconds between checks that the server still listens (the SDK does not say when it stops).
LISTENER_CHECK_S = 5.0
STOP_TIMEOUT_S = 2.0
#: Clients listed one by one in the status (the rest are counted).
MAX_LISTED_CLIENTS = 32
#: The SDK's own log lines reach Python's logging from its threads; only warnings and errors do,
#: so that no debug line is ever forwarded while one of the SDK's locks is held (docs/foxglove.md).
SDK_LOG_LEVEL = "WARNING"


def require_sdk() -> Any:
    """The ``foxglove`` module of foxglove-sdk, or one line naming the extra (MissingDependencyError)."""
    return require("foxglove", extra=FOXGLOVE_EXTRA, purpose="[foxglove] (the live Foxglove server)")


def decimate(times_us: list[int], due_us: int | None, period_us: float) -> tuple[list[int], int | None]:
    """Indices of the frames to send so that they come ``period_us`` apart on average.

    ``due_us`` is when the next frame is due (None: the first frame is). A frame at or after it is
    kept and the next is due one period later on the same grid, or one period after the frame
    when the stream had a gap longer than a period. Returns the indices and the next due time.
    """
    keep: list[int] = []
    for i, t in enumerate(times_us):
        if due_us is None or t >= due_us:
            keep.append(i)
            due = (due_us if due_us is not None else t) + period_us
            due_us = int(due if t < due else t + period_us)
    return keep, due_us


@dataclass(slots=True)
class _Group:
    """One recording group's encoder and its channels (``encoder.topics[i]`` -> ``channels[i]``)."""

    encoder: FoxgloveEncoder
    channels: list[Any]
    names: list[str]
    due_us: int | None = None
    last_us: int | None = None


@dataclass(slots=True)
class _Client:
    """What the status knows of a client: its subscriptions and what it was offered."""

    topics: dict[str, int] = field(default_factory=dict)  # topic -> topic count at subscribe time
    offered: int = 0  # messages of topics it has since left


class _Listener:
    """The SDK's ServerListener: called on the SDK's threads, outside its locks; only bookkeeping."""

    def __init__(self, live: FoxgloveLive) -> None:
        self._live = live

    def on_subscribe(self, client: Any, channel: Any) -> None:
        self._live._subscribed(int(client.id), str(channel.topic))

    def on_unsubscribe(self, client: Any, channel: Any) -> None:
        self._live._unsubscribed(int(client.id), str(channel.topic))


class FoxgloveLive:
    """The Foxglove WebSocket server of a daemon: an observer of its hub and a task of its group."""

    def __init__(self, config: FoxgloveConfig, schemas: Mapping[str, Schema], hub: ObserverHub) -> None:
        self.config = config
        self.hub = hub
        self._sdk = require_sdk()
        self._sdk.set_log_level(SDK_LOG_LEVEL)
        _share_daemon_log_handlers(logging.getLogger(self._sdk.__name__))
        self.context = self._sdk.Context()
        self.period_us = 1e6 / config.rate_hz
        self._groups: dict[str, _Group] = {}
        taken: set[str] = {LOG_TOPIC}
        for group in sorted(schemas):
            encoder = FoxgloveEncoder(schemas[group])
            names = []
            for t in encoder.topics:
                # Topics are per source and sources are unique, but derived ones (/laps, /stale)
                # exist once per group: a later group's copy is namespaced by the group.
                name = t.topic if t.topic not in taken else f"/{group}{t.topic}"
                taken.add(name)
                names.append(name)
            channels = [
                self._channel(n, t.schema_name, t.schema_bytes)
                for n, t in zip(names, encoder.topics, strict=True)
            ]
            self._groups[group] = _Group(encoder, channels, names)
        self._log_channel = self._channel(LOG_TOPIC, "foxglove.Log", LOG_SCHEMA_BYTES)
        self.topics = sorted(taken)
        self.server: Any = None
        self.state = "starting"
        self.error: str | None = None
        self.port: int | None = None
        # Bookkeeping shared with the SDK's threads (listener) and read by the status.
        self._lock = threading.Lock()
        self._clients: dict[int, _Client] = {}
        self._topic_count: dict[str, int] = dict.fromkeys(taken, 0)
        self._watched = False
        # Between the recorder (notify) and the publisher task.
        self._pending: deque[tuple[LiveFrames | SessionStarted | SessionEnded, int]] = deque()
        self._session: dict[str, int] = {}
        self._wakeup: anyio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self.frames_seen = 0
        self.frames_published = 0
        self.messages_published = 0
        self.dropped_behind = 0
        #: Times the server was found no longer listening (and started again).
        self.listener_failures = 0
        self._listen_inodes: frozenset[str] = frozenset()

    def _channel(self, topic: str, schema_name: str, schema: bytes) -> Any:
        sdk = self._sdk
        return sdk.Channel(
            topic,
            schema=sdk.Schema(name=schema_name, encoding="jsonschema", data=schema),
            message_encoding="json",
            context=self.context,
        )

    # --- the observer (recorder's thread: return at once) -------------------------------------

    @property
    def wants_frames(self) -> bool:
        """No client subscribed, no frames: the recorder copies none for the server."""
        return self._watched

    def notify(self, item: RecordingEvent | LiveFrames) -> None:
        if isinstance(item, SessionStarted):
            # Counted even unwatched, so a client that comes later sees the right number.
            self._session[item.group] = self._session.get(item.group, -1) + 1
        elif not isinstance(item, LiveFrames | SessionEnded):
            return
        if not self._watched:
            return
        if len(self._pending) >= MAX_PENDING:
            if isinstance(item, LiveFrames):
                self.dropped_behind += len(item.frames)
            return
        self._pending.append((item, max(0, self._session.get(item.group, 0))))
        self._wake()

    def _wake(self) -> None:
        event = self._wakeup
        if event is None or self._loop is None:
            return
        if threading.get_ident() == self._loop_thread:
            event.set()
        else:
            self._loop.call_soon_threadsafe(event.set)

    # --- listener bookkeeping (the SDK's threads) ---------------------------------------------

    def _subscribed(self, client_id: int, topic: str) -> None:
        with self._lock:
            new = client_id not in self._clients
            c = self._clients.setdefault(client_id, _Client())
            c.topics[topic] = self._topic_count.get(topic, 0)
            self._watched = True
        if new:
            log.info(
                "foxglove: client %d subscribed (first topic %s)",
                client_id,
                topic,
                extra={"rate_key": "foxglove-client-subscribed"},
            )

    def _unsubscribed(self, client_id: int, topic: str) -> None:
        gone = None
        with self._lock:
            c = self._clients.get(client_id)
            if c is not None and topic in c.topics:
                c.offered += self._topic_count.get(topic, 0) - c.topics.pop(topic)
                if not c.topics:
                    gone = self._clients.pop(client_id)
            self._watched = bool(self._clients)
        if gone is not None:
            log.info(
                "foxglove: client %d left (%d messages offered to it)",
                client_id,
                gone.offered,
                extra={"rate_key": "foxglove-client-left"},
            )

    # --- the publisher (the loop) --------------------------------------------------------------

    def _publish_pending(self) -> None:
        while self._pending:
            item, session = self._pending.popleft()
            if isinstance(item, LiveFrames):
                self._publish_frames(item, session)
            elif isinstance(item, SessionStarted):
                text = f"{item.group}: session {session} started ({item.reason})"
                self._log(item.wall_us * 1000, text)
            else:
                self._log(self._end_time_ns(item.group), _ended_text(item, session))

    def _end_time_ns(self, group: str) -> int:
        g = self._groups.get(group)
        if g is not None and g.last_us is not None:
            return g.last_us * 1000
        return time.time_ns()

    def _log(self, t_ns: int, text: str) -> None:
        if self._log_channel.has_sinks():
            self._log_channel.log(log_message(t_ns, LogLevel.INFO, text), log_time=t_ns)
            self._count(LOG_TOPIC, 1)

    def _count(self, topic: str, n: int) -> None:
        self.messages_published += n
        self._topic_count[topic] = self._topic_count.get(topic, 0) + n

    def _publish_frames(self, item: LiveFrames, session: int) -> None:
        g = self._groups.get(item.group)
        if g is None or len(item.frames) == 0:
            return
        self.frames_seen += len(item.frames)
        times = item.times_us.tolist()
        g.last_us = int(times[-1])
        keep, g.due_us = decimate(times, g.due_us, self.period_us)
        wanted = [t for t, ch in zip(g.encoder.topics, g.channels, strict=True) if ch.has_sinks()]
        if not keep or not wanted:
            return
        index = np.asarray(keep, dtype=np.intp)
        # bytes, not numpy's field-by-field copy (which leaves the padding uninitialised)
        frames, times_us = take_records(item.frames, index), item.times_us[index]
        self.frames_published += len(keep)
        slot = {id(t): i for i, t in enumerate(g.encoder.topics)}
        counts = [0] * len(g.channels)
        for topic, t_ns, msg in g.encoder.encode(frames, times_us, session, wanted):
            i = slot[id(topic)]
            g.channels[i].log(msg, log_time=t_ns)
            counts[i] += 1
        for name, n in zip(g.names, counts, strict=True):
            if n:
                self._count(name, n)

    # --- the task --------------------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; a port that cannot be bound is retried, recording goes on."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self.hub.add(self)
        try:
            async with anyio.create_task_group() as tg:
                await tg.start(self._keep_listening)
                task_status.started()
                while True:
                    self._wakeup = anyio.Event()
                    if not self._pending:
                        await self._wakeup.wait()
                    self._publish_pending()
                    await anyio.lowlevel.checkpoint()  # blocks arriving meanwhile wait their turn
        finally:
            self.hub.remove(self)
            self._wakeup = None
            self._pending.clear()
            with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_TIMEOUT_S):
                await self.stop()

    async def _keep_listening(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Start the server (retrying a port that cannot be bound), watch that it still listens,
        start it again when it does not; ``started`` after the first attempt."""
        reported = False
        while True:
            while self.server is None:
                try:
                    self.server = await anyio.to_thread.run_sync(self._start)
                except RuntimeError as exc:  # the SDK's FoxgloveError (a bind failure)
                    self.state, self.error = "retrying", str(exc).removeprefix("FoxgloveError: ")
                    log.error(
                        "foxglove: cannot listen on %s:%d: %s; recording goes on, retrying",
                        self.config.host,
                        self.config.port,
                        self.error,
                        extra={"rate_key": "foxglove-bind"},
                    )
                    if not reported:
                        reported = True
                        task_status.started()
                    await anyio.sleep(BIND_RETRY_S)
            port = int(self.server.port)
            self._listen_inodes = await anyio.to_thread.run_sync(_listening_inodes, port)
            self.state, self.error, self.port = "listening", None, port
            log.info("foxglove: live view on %s", self.url)
            if not reported:
                reported = True
                task_status.started()
            # polled: the SDK has no event for it
            while await anyio.to_thread.run_sync(_still_listening, self._listen_inodes):  # noqa: ASYNC110
                await anyio.sleep(LISTENER_CHECK_S)
            self.listener_failures += 1
            self.state = "failed"
            self.error = (
                "the server stopped listening (the SDK gives no reason: most likely the process"
                " reached its open-file limit while accepting a connection)"
            )
            log.error(
                "foxglove: %s; starting it again in %.0f s",
                self.error,
                BIND_RETRY_S,
                extra={"rate_key": "foxglove-listener"},
            )
            server, self.server = self.server, None
            await anyio.to_thread.run_sync(server.stop, abandon_on_cancel=True)
            await anyio.sleep(BIND_RETRY_S)

    def _start(self) -> Any:
        return self._sdk.start_server(
            name="wrtfd",
            host=self.config.host,
            port=self.config.port,
            context=self.context,
            server_listener=_Listener(self),
            message_backlog_size=self.config.client_backlog,
        )

    async def stop(self) -> None:
        server, self.server = self.server, None
        self.state = "stopped"
        if server is not None:
            await anyio.to_thread.run_sync(server.stop, abandon_on_cancel=True)

    @property
    def url(self) -> str:
        port = self.port if self.port is not None else self.config.port
        return f"ws://{self.config.host}:{port}"

    # --- status ----------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            clients = {
                str(cid): {
                    "topics": sorted(c.topics),
                    "messages_offered": c.offered
                    + sum(self._topic_count.get(t, 0) - at for t, at in c.topics.items()),
                }
                for cid, c in sorted(self._clients.items())[:MAX_LISTED_CLIENTS]
            }
            subscribed = len(self._clients)
        return {
            "state": self.state,
            "url": self.url,
            "error": self.error,
            "rate_hz": self.config.rate_hz,
            "client_backlog": self.config.client_backlog,
            "topics": self.topics,
            "subscribed_clients": subscribed,
            "clients": clients,
            "frames_seen": self.frames_seen,
            "frames_published": self.frames_published,
            "messages_published": self.messages_published,
            "dropped": {"publisher_behind": self.dropped_behind},
            "listener_failures": self.listener_failures,
        }


def _socket_inodes() -> set[str]:
    """The inodes of this process's sockets (``/proc/self/fd``); empty off Linux."""
    inodes = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir("/proc/self/fd"):
            try:
                link = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:  # closed meanwhile
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    return inodes


def _listen_table() -> dict[str, int]:
    """inode -> port of every listening TCP socket of this network namespace (``/proc``)."""
    out: dict[str, int] = {}
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with contextlib.suppress(OSError), open(table, encoding="ascii", errors="replace") as f:
            next(f, None)
            for line in f:
                fields = line.split()
                if len(fields) > 9 and fields[3] == "0A":  # TCP_LISTEN
                    with contextlib.suppress(ValueError, IndexError):
                        out[fields[9]] = int(fields[1].rsplit(":", 1)[1], 16)
    return out


def _listening_inodes(port: int) -> frozenset[str]:
    """The inodes of this process's sockets listening on ``port`` (empty: cannot tell)."""
    ours = _socket_inodes()
    return frozenset(i for i, p in _listen_table().items() if p == port and i in ours)


def _still_listening(inodes: frozenset[str]) -> bool:
    """True while one of the listening sockets ``inodes`` is still open in this process, or when
    that cannot be told (no /proc). The SDK closes its socket when its accept loop ends; this
    looks only at our descriptors (0.05 ms), not at the kernel's socket table again (reading
    ``/proc/self/net/tcp`` costs 10 ms of CPU here, however few sockets there are)."""
    if not inodes:
        return True
    return not inodes.isdisjoint(_socket_inodes())


class _RateKeyed(logging.Handler):
    """Hands the SDK's lines to the daemon's handlers with a ``rate_key`` per logger and level:
    the SDK logs per client (an error line for each client that resets its connection), and
    the daemon's rate limit then holds a burst to one line per interval."""

    def __init__(self, targets: list[logging.Handler]) -> None:
        super().__init__()
        self.targets = targets

    def emit(self, record: logging.LogRecord) -> None:
        if not hasattr(record, "rate_key"):
            record.rate_key = f"{record.name}:{record.levelname}"
        for handler in self.targets:
            handler.handle(record)


def _share_daemon_log_handlers(logger: logging.Logger) -> None:
    """The SDK's own lines (``foxglove.websocket.server``...) go where the daemon's go."""
    ours = logging.getLogger(LOGGER_NAME)
    if ours.handlers and not logger.handlers:
        logger.addHandler(_RateKeyed(list(ours.handlers)))
        logger.propagate = False


def _ended_text(item: SessionEnded, session: int) -> str:
    text = (
        f"{item.group}: session {session} ended ({item.reason}): {item.frames} frames,"
        f" {item.dropped_ticks} dropped ticks, {item.duration_s:.1f} s"
    )
    if item.laps is not None:
        text += f", {item.laps} laps"
        if item.best_lap_s is not None:
            text += f", best {item.best_lap_s:.3f} s"
    return text
