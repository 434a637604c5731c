"""The live Foxglove server in-process: a real SDK server, a real WebSocket client, frames from a hub.

The daemon itself, with a simulator feeding it, is in ``tests/e2e/test_daemon_foxglove.py``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import resource
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.daemon.foxglove_client import SUBPROTOCOL, channels_of, message_data, subscribe
from wrtfd.daemon.config import FoxgloveConfig, LoadedConfig, parse_config
from wrtfd.daemon.logs import RateLimitFilter
from wrtfd.daemon.wiring import composed_schemas
from wrtfd.errors import ConfigError
from wrtfd.format.schema import Schema
from wrtfd.recorder.observe import LiveFrames, ObserverHub, SessionEnded, SessionStarted

foxglove = pytest.importorskip("foxglove", reason="the foxglove extra (foxglove-sdk) is not installed")
ws_client = pytest.importorskip("websockets.asyncio.client")

from wrtfd.daemon.foxglove_live import FoxgloveLive, decimate  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
OVAL = REPO / "config" / "tracks" / "oval.trk"
T0_US = 1_790_000_000_000_000


@pytest.fixture(scope="module", autouse=True)
def sdk_runtime() -> Iterator[None]:
    """The SDK's runtime (its threads and their sockets) lives as long as the process: start it
    before any test's leak baseline is taken, so that a test leaves only what it opened."""
    foxglove.start_server(host="127.0.0.1", port=0, context=foxglove.Context()).stop()
    yield


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def schemas(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Schema]:
    """Two recording groups, each with a track: both have a /laps topic (built off the loop)."""
    tmp_path = tmp_path_factory.mktemp("schemas")
    data = {
        "sources": [
            {"kind": "udp", "protocol": "forza", "port": 5301, "group": "a", "track": str(OVAL)},
            {"kind": "udp", "protocol": "f1", "port": 20777, "group": "b", "track": str(OVAL)},
        ],
        "recorder": {"output_dir": str(tmp_path / "rec")},
    }
    loaded = LoadedConfig(config=parse_config(data, "t.toml"), origin="t.toml", base_dir=tmp_path)
    return composed_schemas(loaded)


def _frames(schema: Schema, ticks: np.ndarray, start_us: int, rate_hz: int = 60) -> LiveFrames:
    frames = np.zeros(len(ticks), dtype=schema.frame_dtype)
    frames["tick"] = ticks
    if "forza" in (schema.frame_dtype.names or ()):
        frames["forza"]["speed"] = np.where(ticks == 9, np.nan, ticks.astype(np.float32) * 0.5)
    times = start_us + (ticks.astype(np.int64) * 1_000_000 + rate_hz // 2) // rate_hz
    group = "a" if "forza" in (schema.frame_dtype.names or ()) else "b"
    return LiveFrames(group, schema, frames, times)


async def _wait(predicate: Any, what: str, timeout_s: float = 10.0) -> None:
    with anyio.fail_after(timeout_s):
        while not predicate():  # noqa: ASYNC110 - the SDK's threads update counters, not events
            await anyio.sleep(0.02)


def _listening_here(port: int) -> bool:
    """Does a socket of this process listen on TCP ``port`` (/proc: the SDK's server is Rust)?"""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port and inode in inodes:
                    return True
    return False


async def _recv_json(ws: Any) -> dict[str, Any]:
    with anyio.fail_after(5):
        msg = await ws.recv()
    assert isinstance(msg, str), msg
    return dict(json.loads(msg))


async def test_advertises_every_groups_topics_and_sends_decimated_frames_to_subscribers(
    schemas: dict[str, Schema],
) -> None:
    hub = ObserverHub()
    live = FoxgloveLive(FoxgloveConfig(port=_free_port(), rate_hz=20), schemas, hub)
    # One channel per topic of each group; the second group's /laps is namespaced by its group.
    assert {"/forza", "/f1", "/laps", "/b/laps", "/wrtfd/log"} <= set(live.topics)
    async with anyio.create_task_group() as tg:
        await tg.start(live.run)
        assert live.snapshot()["state"] == "listening" and live in hub._observers
        async with ws_client.connect(live.url, subprotocols=[SUBPROTOCOL], proxy=None) as ws:
            info = await _recv_json(ws)
            assert info["op"] == "serverInfo" and info["name"] == "wrtfd"
            channels = channels_of(await _recv_json(ws))
            assert sorted(channels) == live.topics
            assert channels["/forza"].schema_name == "wrtfd.forza"
            assert channels["/wrtfd/log"].schema_name == "foxglove.Log"
            assert channels["/b/laps"].schema_name == "wrtfd.laps"

            # Nobody watching: the hub's items are not even queued.
            hub.publish(SessionStarted("a", "first", T0_US))
            hub.publish(_frames(schemas["a"], np.arange(0, 6), T0_US))
            assert live.snapshot()["frames_seen"] == 0

            subs = {1: channels["/forza"], 2: channels["/wrtfd/log"]}
            await ws.send(subscribe(subs))
            await _wait(lambda: live.snapshot()["subscribed_clients"] == 1, "the subscription")
            # The listener hears of a subscription from the SDK's thread; frames published before
            # the channels have the client as a sink go to nobody (a live view misses a few; this
            # test wants them all). Once, in a loaded run, nothing came in 10 s: likely that.
            forza = live._groups["a"].channels[live._groups["a"].names.index("/forza")]
            await _wait(lambda: forza.has_sinks() and live._log_channel.has_sinks(), "the sinks")
            start_us = T0_US + 10_000_000
            hub.publish(SessionStarted("a", "session", start_us))  # the group's 2nd session
            for first in range(0, 60, 6):  # ten engine steps of 6 frames at 60 Hz
                hub.publish(_frames(schemas["a"], np.arange(first, first + 6), start_us))
            hub.publish(_frames(schemas["b"], np.arange(0, 60), start_us))  # nobody subscribed to /f1
            hub.publish(SessionEnded("a", "idle", 60, 0, 1.0))

            got: dict[int, list[tuple[int, dict[str, Any]]]] = {1: [], 2: []}
            with anyio.fail_after(10):
                while len(got[1]) < 20 or len(got[2]) < 2:
                    raw = await ws.recv()
                    if isinstance(raw, str):
                        continue  # status messages
                    sub, t_ns, body = message_data(raw)
                    subs[sub].validator.validate(body)
                    got[sub].append((t_ns, body))
            ticks = [b["tick"] for _, b in got[1]]
            assert ticks == list(range(0, 60, 3))  # 60 Hz frames at 20 Hz
            for t_ns, body in got[1]:
                assert t_ns == (start_us + (body["tick"] * 1_000_000 + 30) // 60) * 1000  # N9
                speed = None if body["tick"] == 9 else body["tick"] * 0.5  # JSON has no NaN: null
                assert body["speed"] == speed and body["session"] == 1
            logs = [b["message"] for _, b in got[2]]
            assert logs[0] == "a: session 1 started (session)"
            assert logs[1].startswith("a: session 1 ended (idle): 60 frames")
            assert got[2][0][0] == start_us * 1000

            snap = live.snapshot()
            # Client ids are the SDK's (counted across servers): only the values are known.
            assert list(snap["clients"].values()) == [
                {"topics": ["/forza", "/wrtfd/log"], "messages_offered": 22}
            ]
            assert snap["frames_seen"] == 120 and snap["frames_published"] == 20  # group b: unwatched
            assert snap["messages_published"] == 22  # /f1 was encoded for nobody
        await _wait(lambda: live.snapshot()["subscribed_clients"] == 0, "the client to leave")
        tg.cancel_scope.cancel()
    assert live.snapshot()["state"] == "stopped" and live not in hub._observers
    # The listening socket is closed: none of this process's sockets listens on the port (a
    # connection attempt could reach another process that took the port meanwhile). The SDK's
    # server thread closes it a moment after stop() returns: a loaded machine showed it still open.
    port = live.port
    assert port
    deadline = time.monotonic() + 10.0
    while _listening_here(port):
        assert time.monotonic() < deadline, f"port {port} still listening 10 s after the stop"
        await anyio.sleep(0.02)


async def test_a_taken_port_is_retried_and_reported_while_recording_goes_on(
    schemas: dict[str, Schema],
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        live = FoxgloveLive(FoxgloveConfig(port=port), schemas, ObserverHub())
        async with anyio.create_task_group() as tg:
            await tg.start(live.run)  # returns although the port is taken
            snap = live.snapshot()
            assert snap["state"] == "retrying" and "in use" in snap["error"]
            tg.cancel_scope.cancel()
    assert live.snapshot()["state"] == "stopped"


# --- decimation ------------------------------------------------------------------------------


def test_decimate_regular_streams() -> None:
    times = [(t * 1_000_000 + 30) // 60 for t in range(600)]  # 10 s at 60 Hz
    keep, _ = decimate(times, None, 1e6 / 20)
    assert keep == list(range(0, 600, 3))
    keep, _ = decimate(times, None, 1e6 / 25)
    assert len(keep) in (250, 251)  # 25 Hz on average, not every 3rd frame (20 Hz)
    keep, _ = decimate(times, None, 1e6 / 60)
    assert keep == list(range(600))  # at or above the recording's rate: every frame


@given(
    steps=st.lists(st.integers(min_value=1, max_value=200_000), min_size=1, max_size=300),
    period_us=st.integers(min_value=1, max_value=500_000),
    cuts=st.lists(st.integers(min_value=0, max_value=300), max_size=5),
)
def test_decimate_never_faster_than_the_rate_and_chunking_does_not_matter(
    steps: list[int], period_us: int, cuts: list[int]
) -> None:
    times = list(np.cumsum(steps).tolist())
    keep, _ = decimate(times, None, period_us)
    assert keep[0] == 0 and keep == sorted(set(keep))
    kept = [times[i] for i in keep]
    assert (len(kept) - 1) * period_us <= kept[-1] - kept[0]
    due: int | None = None
    pieces: list[int] = []
    bounds = [0, *sorted(c for c in cuts if c < len(times)), len(times)]
    for lo, hi in itertools.pairwise(bounds):
        k, due = decimate(times[lo:hi], due, period_us)
        pieces += [lo + i for i in k]
    assert pieces == keep


# --- config ----------------------------------------------------------------------------------


def _config(foxglove_table: dict[str, Any]) -> Any:
    data = {"sources": [{"kind": "udp", "protocol": "forza", "port": 5301}], "foxglove": foxglove_table}
    return parse_config(data, "t.toml")


def test_config_defaults_off_and_errors_name_the_key() -> None:
    assert (
        parse_config({"sources": [{"kind": "udp", "protocol": "forza"}]}, "t.toml").foxglove.enabled is False
    )
    cfg = _config({"port": 8765}).foxglove
    assert cfg.enabled and cfg.host == "127.0.0.1" and cfg.rate_hz == 20.0 and cfg.client_backlog == 256
    cases: list[tuple[dict[str, Any], str]] = [
        ({"prot": 8765}, "t.toml: foxglove.prot: unknown key"),
        ({"port": 70000}, "t.toml: foxglove.port: expected less than or equal to 65535"),
        ({"port": 8765, "host": "localhost"}, "t.toml: foxglove.host: expected an IP address"),
        ({"port": 8765, "rate_hz": 0}, "t.toml: foxglove.rate_hz: expected greater than 0"),
        ({"port": 8765, "client_backlog": 4}, "t.toml: foxglove.client_backlog: expected greater than"),
    ]
    for table, expected in cases:
        with pytest.raises(ConfigError) as err:
            _config(table)
        assert str(err.value).startswith(expected), str(err.value)


def test_encoding_only_the_subscribed_topics_gives_the_same_messages(schemas: dict[str, Schema]) -> None:
    from wrtfd.exporters.foxglove import FoxgloveEncoder

    live = _frames(schemas["a"], np.arange(0, 12), T0_US)
    encoder = FoxgloveEncoder(schemas["a"])
    everything = list(encoder.encode(live.frames, live.times_us, 3))
    forza = [t for t in encoder.topics if t.topic == "/forza"]
    only = list(encoder.encode(live.frames, live.times_us, 3, forza))
    assert only == [m for m in everything if m[0].topic == "/forza"] and len(only) == 12
    assert list(encoder.encode(live.frames, live.times_us, 3, [])) == []


async def test_a_listener_killed_by_the_open_file_limit_is_reported_and_started_again(
    schemas: dict[str, Schema], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK's accept loop ends for good (its socket closed, nothing said) when an accept fails
    at the open-file limit: the status must not say "listening" then, and the server comes back."""
    from wrtfd.daemon import foxglove_live

    monkeypatch.setattr(foxglove_live, "LISTENER_CHECK_S", 0.05, raising=False)
    monkeypatch.setattr(foxglove_live, "BIND_RETRY_S", 0.5)
    live = FoxgloveLive(FoxgloveConfig(port=_free_port()), schemas, ObserverHub())
    async with anyio.create_task_group() as tg:
        await tg.start(live.run)
        port = live.port
        assert port is not None and live.snapshot()["state"] == "listening" and _listening_here(port)
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        socks: list[socket.socket] = []
        states = set()
        resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 30, hard))
        try:
            # both ends in this process: the clients take the last files, the SDK's accept fails
            for _ in range(60):
                try:
                    socks.append(socket.create_connection(("127.0.0.1", port), timeout=1))
                except OSError:
                    break
            with anyio.fail_after(10):
                while live.snapshot()["state"] == "listening":  # noqa: ASYNC110 - polled status
                    await anyio.sleep(0.01)
            states.add(live.snapshot()["state"])
        finally:
            for s in socks:
                s.close()
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        assert states <= {"failed", "retrying"} and not _listening_here(port)
        await _wait(lambda: live.snapshot()["state"] == "listening", "listening again")
        snap = live.snapshot()
        assert snap["listener_failures"] == 1 and snap["error"] is None and _listening_here(port)
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        tg.cancel_scope.cancel()
    lines = [r.getMessage() for r in caplog.records if r.name == "wrtfd.foxglove" and r.levelno >= 40]
    assert len(lines) == 1 and "stopped listening" in lines[0]


async def test_client_lines_are_rate_limited(schemas: dict[str, Schema]) -> None:
    """A client subscribing and unsubscribing in a loop: its journal lines carry a rate key (the
    daemon's log filter passes one per interval and counts the rest)."""
    live = FoxgloveLive(FoxgloveConfig(port=_free_port()), schemas, ObserverHub())
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign, assignment]
    logger = logging.getLogger("wrtfd.foxglove")
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        for _ in range(100):
            live._subscribed(7, "/forza")
            live._unsubscribed(7, "/forza")
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    limiter = RateLimitFilter(10.0, clock=lambda: 0.0)
    passed = [r for r in records if limiter.filter(r)]
    assert len(records) == 200 and len(passed) == 2


def test_the_sdks_own_lines_are_rate_limited_in_the_daemons_log() -> None:
    """The SDK logs an error line per client that resets its connection (about a thousand in a
    burst of 1,100 connections): forwarded to the daemon's handlers with a rate key per logger
    and level, a burst is one line, and the next line says how many were held back."""
    import io

    from wrtfd.daemon.foxglove_live import _share_daemon_log_handlers
    from wrtfd.daemon.logs import LOGGER_NAME, configure_logging

    ours = logging.getLogger(LOGGER_NAME)
    sdk = logging.getLogger("wrtfd-test-sdk")  # a logger of the SDK's kind, without its handlers
    saved = (list(ours.handlers), ours.level, ours.propagate)
    out = io.StringIO()
    try:
        configure_logging(level="info", fmt="text", stream=out, env={})
        _share_daemon_log_handlers(sdk)
        child = logging.getLogger("wrtfd-test-sdk.websocket.server")
        for i in range(1000):
            child.error("Error receiving from client %d: connection reset", i)
        sdk.warning("a warning of its own")
    finally:
        for handler in list(sdk.handlers):
            sdk.removeHandler(handler)
        ours.handlers[:] = saved[0]
        ours.setLevel(saved[1])
        ours.propagate = saved[2]
    lines = out.getvalue().splitlines()
    assert len(lines) == 2, lines  # was 1000 + 1
    assert "Error receiving from client 0" in lines[0] and "a warning of its own" in lines[1]
