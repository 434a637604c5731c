"""Lap records store and forward against a real nats-server: what a rig sends from laps.jsonl,
where it resumes, what a torn or foreign line does, and that a lap sent again is in the bucket once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.fleet.nats_server import TOKEN, NatsServer
from wrtfd.fleet.client import connect
from wrtfd.fleet.config import ConnectOptions
from wrtfd.fleet.laps import LapForwarder, read_records


def line(i: int) -> bytes:
    doc = {"v": 1, "id": f"{i:024x}", "rig": "rig-1", "lap": i, "time_s": 30.0 + i, "sectors_s": [10.0] * 3}
    return json.dumps(doc).encode() + b"\n"


async def _js(server: NatsServer) -> tuple[Any, Any]:
    nc = await connect(ConnectOptions(servers=(server.url,), token=TOKEN), name="t")
    return nc, nc.jetstream(timeout=10.0)


async def _messages(js: Any) -> int:
    return int((await js.stream_info("KV_wrtfd-laps")).state.messages)


async def test_sends_complete_lines_resumes_and_keeps_each_lap_once(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    laps, offset = tmp_path / "laps.jsonl", tmp_path / ".fleet" / "laps.offset"
    half = line(3)[:20]
    laps.write_bytes(line(1) + b"not json\n" + b'{"id": "../x"}\n' + line(2) + half)
    nc, js = await _js(nats_server)
    fwd = LapForwarder(laps, offset, rig="rig-1")
    await fwd.ensure_bucket(js)
    assert await fwd.forward(js) == 2
    assert fwd.counters.bad_lines == 2
    # the offset is just before the line being written, on disk
    assert json.loads(offset.read_bytes())["offset"] == laps.stat().st_size - len(half)
    laps.write_bytes(laps.read_bytes() + line(3)[20:] + line(4))  # the line finished, one more
    assert await fwd.forward(js) == 2
    got = sorted((r["lap"], r["time_s"]) for r in await read_records(js))
    assert got == [(1, 31.0), (2, 32.0), (3, 33.0), (4, 34.0)]
    assert await _messages(js) == 4

    # a crash before the offset was saved: everything is sent again, each lap is still once
    offset.unlink()
    again = LapForwarder(laps, offset, rig="rig-1")
    assert again.offset == 0
    assert await again.forward(js) == 4
    assert sorted(r["lap"] for r in await read_records(js)) == [1, 2, 3, 4]
    assert await _messages(js) == 4
    # a restart resumes at the saved offset: nothing new, nothing sent
    assert await LapForwarder(laps, offset, rig="rig-1").forward(js) == 0
    await nc.close()


async def test_a_file_replaced_by_a_shorter_one_is_sent_from_its_start(
    tmp_path: Path, nats_server: NatsServer
) -> None:
    laps, offset = tmp_path / "laps.jsonl", tmp_path / "laps.offset"
    laps.write_bytes(line(1) + line(2) + line(3))
    nc, js = await _js(nats_server)
    fwd = LapForwarder(laps, offset, rig="rig-1")
    await fwd.ensure_bucket(js)
    assert await fwd.forward(js) == 3
    laps.write_bytes(line(9))
    assert await fwd.forward(js) == 1
    assert sorted(r["lap"] for r in await read_records(js)) == [1, 2, 3, 9]
    await nc.close()


async def test_an_empty_server_has_no_records(nats_server: NatsServer) -> None:
    nc, js = await _js(nats_server)
    assert await read_records(js) == []
    await nc.close()
