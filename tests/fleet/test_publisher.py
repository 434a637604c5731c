"""The rig's publisher in-process against a real nats-server: what it sends, what it bounds."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import struct
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.fleet.conftest import (
    START_US,
    dirty_heap,
    forza_frames,
    forza_schema,
    padded_frames,
    shipped_schemas,
)
from tests.fleet.nats_server import TOKEN, NatsServer, free_port
from wrtfd.fleet.client import connect
from wrtfd.fleet.config import ConnectOptions, FleetSettings
from wrtfd.fleet.encoding import decode_frames, decode_layout
from wrtfd.fleet.publisher import LIVE_BUFFER_BLOCKS, FleetPublisher
from wrtfd.format import Reader, Schema, Writer
from wrtfd.recorder.observe import FileClosed, LiveFrames, SessionStarted

FRAMES_COUNT = struct.Struct("<I")


def _settings(url: str, tmp_path: Path, token: str = TOKEN, **kw: Any) -> FleetSettings:
    base: dict[str, Any] = {
        "connect": ConnectOptions(servers=(url,), token=token, reconnect_wait_s=0.2),
        "rig": "rig-t",
        "live_hz": 10.0,
        "status_interval_s": 0.5,
        "upload": True,
        "bucket": "wrtfd",
        "upload_existing": False,
        "delete_after_upload": False,
        "verify": "content",
        "chunk_bytes": 4096,
        "upload_rate_bytes_s": None,
        "queue_dir": tmp_path / "rec" / ".fleet",
    }
    base.update(kw)
    return FleetSettings(**base)


async def _until(predicate: Any, what: str, timeout_s: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def schema(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return forza_schema(tmp_path_factory.mktemp("schema"))


async def test_live_frames_status_and_events_reach_a_subscriber(
    nats_server: NatsServer, tmp_path: Path, schema: Schema
) -> None:
    (tmp_path / "rec").mkdir()
    got: list[Any] = []
    nc = await connect(ConnectOptions(servers=(nats_server.url,), token=TOKEN), name="sub")

    async def on_msg(msg: Any) -> None:
        got.append((msg.subject, bytes(msg.data)))

    await nc.subscribe("wrtfd.>", cb=on_msg)
    pub = FleetPublisher(_settings(nats_server.url, tmp_path), output_dir=tmp_path / "rec")
    pub.start()
    await _until(lambda: pub.state == "connected", "the connection")
    pub.notify(SessionStarted("main", "first", 1))
    for k in range(10):  # 2 s of 60 Hz frames in 0.2 s blocks
        frames, times = forza_frames(schema, 12, first_tick=12 * k)
        pub.notify(LiveFrames("main", schema, frames, times))
    pub.offer_status({"recorder": {"groups": {"main": {"in_session": True}}}, "sources": {}, "healthy": True})
    await _until(lambda: any(s == "wrtfd.rig-t.status" for s, _ in got), "a status message")
    subjects = [s for s, _ in got]
    assert "wrtfd.rig-t.main.layout" in subjects and "wrtfd.rig-t.events" in subjects
    _rig, _group, layout = decode_layout(next(p for s, p in got if s.endswith(".layout")))
    ticks: list[int] = []
    for s, p in got:
        if s == "wrtfd.rig-t.main.frames":
            ticks.extend(int(t) for t in decode_frames(p, layout)[1]["tick"])
    assert len(ticks) == 20  # 2 s at 10 Hz, from 120 frames at 60 Hz
    assert ticks == sorted(ticks) and all(b - a == 6 for a, b in itertools.pairwise(ticks))
    status = json.loads(next(p for s, p in got if s.endswith(".status")))
    assert status["rig"] == "rig-t" and status["state"] == "recording"
    event = json.loads(next(p for s, p in got if s.endswith(".events")))
    assert event["type"] == "session_started" and event["group"] == "main"
    snap = pub.snapshot()
    assert snap["live"]["frames_sent"] == 20 and snap["live"]["dropped_total"] == 0
    await pub.close()
    assert pub.state == "stopped"
    await nc.close()


def _file_frames(path: Path, schema: Schema, frames: Any) -> dict[int, bytes]:
    """``frames`` written by the WRTF writer, read back as bytes from the disk, by tick."""
    with Writer(path, schema, rate_hz=60, start_timestamp_us=START_US) as w:
        w.begin_session()
        w.write_frames(frames)
        w.end_session()
    raw = path.read_bytes()
    size = schema.frame_dtype.itemsize
    with Reader(path) as r:
        (session,) = r.sessions
        at = session.frames_offset
        assert r.schema.frame_dtype.itemsize == size
    out = {}
    for k in range(len(frames)):
        frame = raw[at + k * size : at + (k + 1) * size]
        out[int.from_bytes(frame[:8], "little")] = frame
    return out


@pytest.mark.parametrize("live_hz", [10.0, 1000.0])
async def test_published_frames_are_the_files_frames_padding_included_for_every_shipped_definition(
    nats_server: NatsServer, tmp_path: Path, live_hz: float
) -> None:
    """One group per shipped definition; its frames carry 0xAA in every padding byte (freed
    memory: 0x55). What a subscriber gets must be the bytes the WRTF file holds for the same tick,
    padding included, decimated (10 Hz) or not (1000 Hz: every frame)."""
    (tmp_path / "rec").mkdir()
    schemas = shipped_schemas(tmp_path)
    got: list[tuple[str, bytes]] = []
    nc = await connect(ConnectOptions(servers=(nats_server.url,), token=TOKEN), name="sub")

    async def on_msg(msg: Any) -> None:
        got.append((msg.subject, bytes(msg.data)))

    await nc.subscribe("wrtfd.rig-t.*.frames", cb=on_msg)
    await nc.flush()
    pub = FleetPublisher(_settings(nats_server.url, tmp_path, live_hz=live_hz), output_dir=tmp_path / "rec")
    pub.start()
    try:
        await _until(lambda: pub.state == "connected", "the connection")
        on_disk: dict[str, dict[int, bytes]] = {}
        sent = 0
        for name, schema in schemas.items():
            frames, _clean = padded_frames(schema, 60, seed=len(name))
            times = START_US + np.arange(60, dtype=np.int64) * 1_000_000 // 60
            on_disk[name] = _file_frames(tmp_path / f"{name}.wrtf", schema, frames)
            for k in range(0, 60, 12):  # 0.2 s blocks, as the recorder hands them over
                dirty_heap()
                pub.notify(LiveFrames(name, schema, frames[k : k + 12], times[k : k + 12]))
                await _until(lambda: not pub._live, "the block taken")
            sent += 60 if live_hz > 60 else 10
        await _until(lambda: pub.snapshot()["live"]["frames_sent"] == sent, "every frame sent")
        await nc.flush()
        await _until(
            lambda: sum(FRAMES_COUNT.unpack_from(p, 8)[0] for _, p in got) == sent, "every frame received"
        )
        checked = dict.fromkeys(schemas, 0)
        for subject, payload in got:
            name = subject.split(".")[2]
            magic, _layout_id, count, size = struct.unpack_from("<4sIII", payload)
            assert magic == b"WLF1" and size == schemas[name].frame_dtype.itemsize
            body = payload[16 + 8 * count :]
            for k in range(count):
                frame = body[k * size : (k + 1) * size]
                assert frame == on_disk[name][int.from_bytes(frame[:8], "little")], name
                checked[name] += 1
        assert checked == dict.fromkeys(schemas, 60 if live_hz > 60 else 10)
    finally:
        await pub.close()
        await nc.close()


def test_the_live_buffer_is_bounded_and_counts_what_it_drops(tmp_path: Path, schema) -> None:  # type: ignore[no-untyped-def]
    pub = FleetPublisher(_settings("nats://127.0.0.1:1", tmp_path), output_dir=tmp_path)
    frames, times = forza_frames(schema, 10)
    for _ in range(LIVE_BUFFER_BLOCKS + 25):  # nobody drains it (the fleet thread is stuck)
        pub.notify(LiveFrames("main", schema, frames, times))
    assert len(pub._live) == LIVE_BUFFER_BLOCKS
    assert pub.snapshot()["live"]["dropped"]["buffer_full"] == 25 * 10


async def test_without_a_server_live_frames_are_dropped_and_files_wait_in_the_queue(
    tmp_path: Path, schema: Schema
) -> None:
    out = tmp_path / "rec"
    out.mkdir()
    (out / "a.wrtf").write_bytes(b"x" * 1000)
    pub = FleetPublisher(_settings(f"nats://127.0.0.1:{free_port()}", tmp_path), output_dir=out)
    pub.start()
    frames, times = forza_frames(schema, 12)
    for k in range(20):
        pub.notify(LiveFrames("main", schema, frames, times + k * 200_000))
        await asyncio.sleep(0.02)
    pub.notify(FileClosed("main", str(out / "a.wrtf"), 10, 1000, True))
    await _until(lambda: pub.snapshot()["uploads"]["queued"] == 1, "the file in the queue")
    await _until(lambda: pub.snapshot()["live"]["dropped"]["disconnected"] > 0, "dropped live frames")
    snap = pub.snapshot()
    assert snap["state"] == "connecting" and "connection refused" in (snap["last_error"] or "")
    assert snap["uploads"]["queued_bytes"] == 1000
    assert len(list((out / ".fleet" / "pending").glob("*.json"))) == 1  # on disk, for the next start
    await pub.close()


async def test_a_closed_file_is_uploaded_verified_and_deleted_only_then(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    out = tmp_path / "rec"
    out.mkdir()
    content = os.urandom(50_000)
    (out / "a.wrtf").write_bytes(content)
    pub = FleetPublisher(_settings(nats_server.url, tmp_path, delete_after_upload=True), output_dir=out)
    pub.start()
    pub.notify(FileClosed("main", str(out / "a.wrtf"), 10, len(content), True))
    await _until(lambda: pub.snapshot()["uploads"]["done"] == 1, "the upload")
    assert not (out / "a.wrtf").exists()
    assert list((out / ".fleet" / "pending").glob("*.json")) == []
    log = [json.loads(x) for x in (out / ".fleet" / "uploaded.jsonl").read_text().splitlines()]
    assert log[0]["object"] == "rig-t/a.wrtf" and log[0]["size"] == len(content)
    nc = await connect(ConnectOptions(servers=(nats_server.url,), token=TOKEN), name="check")
    store = await nc.jetstream().object_store("wrtfd")
    obj = await store.get("rig-t/a.wrtf")
    assert obj.data == content
    assert obj.info.headers["Wrtfd-Complete"] == ["true"] and obj.info.headers["Wrtfd-Group"] == ["main"]
    await nc.close()
    await pub.close()


async def test_a_wrong_token_is_refused_and_said_so(nats_server: NatsServer, tmp_path: Path) -> None:
    pub = FleetPublisher(_settings(nats_server.url, tmp_path, token="wrong"), output_dir=tmp_path)
    pub.start()
    await _until(lambda: pub.state == "refused", "the refusal")
    assert pub.problem() == "refused by the server"
    assert "authorization refused" in (pub.snapshot()["last_error"] or "")
    await pub.close()


async def test_a_file_still_being_queued_at_the_stop_is_uploaded(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    """The stop's last uploads wait for a file the publisher is still putting in its queue (on a
    loaded machine the queue's write takes a while; the file was left for the next start)."""
    out = tmp_path / "rec"
    out.mkdir()
    content = os.urandom(20_000)
    (out / "a.wrtf").write_bytes(content)
    pub = FleetPublisher(_settings(nats_server.url, tmp_path), output_dir=out)
    pub.start()
    await _until(lambda: pub.state == "connected", "the link")
    queue_add = pub._queue.add

    def slow_add(*args: Any, **kwargs: Any) -> Any:  # a slow disk, in the fleet's worker thread
        time.sleep(0.5)
        return queue_add(*args, **kwargs)

    pub._queue.add = slow_add  # type: ignore[method-assign]
    pub.notify(FileClosed("main", str(out / "a.wrtf"), 10, len(content), True))
    await _until(lambda: not pub._events, "the event taken by the publisher")
    await pub.close()  # SIGTERM now: the file is still being queued
    nc = await connect(ConnectOptions(servers=(nats_server.url,), token=TOKEN), name="check")
    try:
        obj = await (await nc.jetstream().object_store("wrtfd")).get("rig-t/a.wrtf")
        assert obj.data == content
    finally:
        await nc.close()
