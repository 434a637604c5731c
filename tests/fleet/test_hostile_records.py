"""Records, object infos and local files written by someone else: each hostile one is skipped
(counted where the module counts), never an exception that stops a board, a download, a fetch or
the daemon's start. The documents are the ones outside testing broke the fleet with."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.fleet.nats_server import TOKEN, NatsServer
from wrtfd.fleet.client import connect
from wrtfd.fleet.collect import collect
from wrtfd.fleet.config import ConnectOptions
from wrtfd.fleet.lapref import BestLapUploader, ReferenceFollower, RefTarget, ref_object_name
from wrtfd.fleet.laps import LapForwarder
from wrtfd.fleet.leaderboard import leaderboard
from wrtfd.fleet.team import TeamBoard

GOOD = {
    "id": "g1",
    "rig": "rig-1",
    "driver": "Ada",
    "car": "GT3",
    "track": "Oval",
    "time_s": 31.0,
    "sectors_s": [],
}
DEEP = "[" * 5000 + "]" * 5000


def _hostile_laps() -> dict[str, str]:
    """JSON texts of lap records, as other rigs could write them."""
    base = json.dumps({**GOOD, "id": "h", "driver": "Eve", "time_s": 1.0, "sectors_s": []})
    return {
        "401-digit time": base.replace('"time_s": 1.0', '"time_s": ' + "9" * 401),
        "401-digit sector": base.replace('"sectors_s": []', '"sectors_s": [' + "9" * 401 + "]"),
        "sectors of 1e308": base.replace('"sectors_s": []', '"sectors_s": [1e308, 1e308, 1e308]'),
        "NaN time": base.replace('"time_s": 1.0', '"time_s": NaN'),
        "deep": base.replace('"sectors_s": []', f'"sectors_s": {DEEP}'),
    }


@pytest.mark.parametrize("kind", sorted(_hostile_laps()))
def test_the_team_panel_skips_a_hostile_record(kind: str) -> None:
    board = TeamBoard("b", rows=5, rig="rig-9", driver=None)
    board.add("$KV.b.evil.h", _hostile_laps()[kind].encode())
    board.add("$KV.b.rig-1.g1", json.dumps({**GOOD, "sectors_s": [15.0, 16.0]}).encode())
    board.track = "Oval"
    board.rank()  # raised OverflowError or RecursionError, and the panel stayed empty for good
    assert [(r["driver"], r["best_s"]) for r in board.snapshot()["rows"]] == [("Ada", 31.0)]


def test_sectors_that_cannot_be_the_laps_are_left_out_of_the_theoretical_best() -> None:
    laps = [
        {**GOOD, "time_s": 31.0, "sectors_s": [10.0, 10.5, 10.5]},
        {**GOOD, "id": "z", "driver": "Eve", "time_s": 35.0, "sectors_s": [0.0, 0.0, 0.0]},  # was 0.000
        {**GOOD, "id": "s", "driver": "Eve", "time_s": 34.0, "sectors_s": [1.0, 1.0, 1.0]},  # sum 3 s
        {**GOOD, "id": "n", "driver": "Bo", "time_s": 33.0, "sectors_s": [11.0, "x", 11.0]},  # not a lap
    ]
    board = leaderboard(laps, track="Oval")
    assert board.theoretical_s == 31.0
    assert [(r.driver, r.best_s, r.theoretical_s) for r in board.rows] == [
        ("Ada", 31.0, 31.0),
        ("Eve", 34.0, None),
    ]
    assert board.skipped == 1


@pytest.mark.parametrize(
    "state",
    ['{"k": {"record": [1, 2]}}', '{"k": {"record": {"time_s": ' + "9" * 401 + "}}}", DEEP, "\xff"],
)
def test_a_damaged_best_lap_state_is_forgotten_not_fatal(tmp_path: Path, state: str) -> None:
    """The daemon's fleet side builds this at start: it raised, and the daemon did not start."""
    path = tmp_path / ".fleet" / "best_laps.json"
    path.parent.mkdir()
    path.write_bytes(state.encode("utf-8", "surrogateescape"))
    assert BestLapUploader(tmp_path, path).best == {}


def test_a_damaged_laps_offset_starts_from_the_beginning(tmp_path: Path) -> None:
    offset = tmp_path / "laps.offset"
    offset.write_text(DEEP)
    assert LapForwarder(tmp_path / "laps.jsonl", offset, rig="r").offset == 0  # raised RecursionError


def _options(server: NatsServer) -> ConnectOptions:
    return ConnectOptions(servers=(server.url,), token=TOKEN)


async def test_a_deep_line_is_skipped_and_the_lines_after_it_are_sent(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    laps = tmp_path / "laps.jsonl"
    lines = [
        json.dumps({**GOOD, "id": "aaaaaaaaaaaa"}),
        '{"id": ' + DEEP + "}",
        json.dumps({**GOOD, "id": "bbbbbbbbbbbb"}),
    ]
    laps.write_text("\n".join(lines) + "\n")
    nc = await connect(_options(nats_server), name="t")
    try:
        js = nc.jetstream(timeout=10.0)
        fwd = LapForwarder(laps, tmp_path / "laps.offset", rig="rig-1")
        await fwd.ensure_bucket(js)
        assert await fwd.forward(js) == 2  # raised at the deep line, every time, sending nothing after it
        assert fwd.offset == laps.stat().st_size
        kv = await js.key_value("wrtfd-laps")
        assert sorted(await kv.keys()) == ["rig-1.aaaaaaaaaaaa", "rig-1.bbbbbbbbbbbb"]
    finally:
        await nc.close()


def _info_subject(bucket: str, name: str) -> str:
    return f"$O.{bucket}.M.{base64.urlsafe_b64encode(name.encode()).decode()}"


@pytest.mark.parametrize(
    ("kind", "edit"),
    [
        ("a list", lambda info: [1, 2, 3]),
        ("a number for the name", lambda info: {**info, "name": 12345}),
        ("a text for the size", lambda info: {**info, "size": "abc"}),
        ("a text for the chunks", lambda info: {**info, "chunks": "abc"}),
        ("a negative size", lambda info: {**info, "size": -5}),
        ("options as a list", lambda info: {**info, "options": [1]}),
    ],
)
async def test_collect_skips_a_forged_object_info(
    nats_server: NatsServer, tmp_path: Path, kind: str, edit: Any
) -> None:
    nc = await connect(_options(nats_server), name="t")
    try:
        js = nc.jetstream(timeout=10.0)
        store = await js.create_object_store("wrtfd")
        await store.put("rig-1/good.wrtf", b"hello world" * 100)
        digest = "SHA-256=" + base64.urlsafe_b64encode(hashlib.sha256(b"x").digest()).decode()
        info = {"name": "evil/x.wrtf", "bucket": "wrtfd", "nuid": "NUIDNUIDNUID", "size": 1, "chunks": 1}
        await js.publish(
            _info_subject("wrtfd", "evil/x.wrtf"), json.dumps(edit({**info, "digest": digest})).encode()
        )
        await js.publish(_info_subject("wrtfd", "evil/deep.wrtf"), ('{"name": ' + DEEP + "}").encode())
    finally:
        await nc.close()
    report = await collect(_options(nats_server), "wrtfd", tmp_path / "pit")  # raised ExceptionGroup
    assert report.downloaded == ["rig-1/good.wrtf"], kind
    assert report.malformed_infos == 2  # each counted once, though the reconciliation sees it again
    assert (tmp_path / "pit" / "rig-1" / "good.wrtf").read_bytes() == b"hello world" * 100


async def test_a_forged_lap_file_info_is_not_read_past_its_size(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    """An info claiming 1 byte, pointing at a 2 MiB object's chunks: nats-py's get() read all of
    it (80 MiB in the outside test, at every poll); the follower reads one chunk past the size,
    refuses it, and does not read that object again."""
    record = {**GOOD, "id": "eeeeeeeeeeee", "rig": "evil", "lap": 1, "time_s": 20.0, "sectors_s": []}
    nc = await connect(_options(nats_server), name="t")
    try:
        js = nc.jetstream(timeout=10.0)
        fwd_laps = tmp_path / "laps.jsonl"
        fwd_laps.write_text(json.dumps(record) + "\n")
        fwd = LapForwarder(fwd_laps, tmp_path / "laps.offset", rig="evil")
        await fwd.ensure_bucket(js)
        assert await fwd.forward(js) == 1
        store = await js.create_object_store("wrtfd-best-laps")
        big = await store.put("junk", os.urandom(2 << 20))
        name = ref_object_name(record)
        forged = {"name": name, "bucket": "wrtfd-best-laps", "nuid": big.nuid, "size": 1, "chunks": 1}
        forged["digest"] = "SHA-256=" + base64.urlsafe_b64encode(bytes(32)).decode()
        await js.publish(
            _info_subject("wrtfd-best-laps", name),
            json.dumps(forged).encode(),
            headers={"Nats-Rollup": "sub"},
        )
        target = RefTarget("forza", "main", "fleet:best", None, "Oval", None, None, offer=lambda r: None)
        follow = ReferenceFollower([target], tmp_path / "refs", laps_bucket="wrtfd-laps")
        assert await follow.refresh(js) == 0
        assert target.error == f"{name}: more than its 1 bytes"
        assert not list((tmp_path / "refs").glob("*.wrtf"))
        assert await follow.refresh(js) == 0  # the same info: refused without reading its chunks
        assert target.error == f"{name}: more than its 1 bytes"
        assert len(follow._refused) == 1
    finally:
        await nc.close()


async def test_laps_fleet_prints_other_rigs_names_as_text_and_strict_json(
    nats_server: NatsServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import anyio

    from wrtfd.cli.main import main

    evil = {**GOOD, "id": "x", "rig": "evil", "driver": "\x1b[2J\x1b[HMallory\n  1  Fake", "time_s": 30.0}
    nc = await connect(_options(nats_server), name="t")
    try:
        js = nc.jetstream(timeout=10.0)
        laps = tmp_path / "laps.jsonl"
        laps.write_text(json.dumps({**GOOD, "id": "aaaaaaaaaaaa"}) + "\n")
        fwd = LapForwarder(laps, tmp_path / "laps.offset", rig="rig-1")
        await fwd.ensure_bucket(js)
        await fwd.forward(js)
        raw = json.dumps(evil).replace('"time_s": 30.0', '"time_s": 30.0, "speed": NaN, "top": Infinity')
        await js.publish("$KV.wrtfd-laps.evil.x", raw.encode())
    finally:
        await nc.close()
    args = ["laps", "--fleet", "--track", "Oval", "--url", nats_server.url, "--token", TOKEN]
    assert await anyio.to_thread.run_sync(main, args) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "?[2J?[HMallory?  1  Fa" in out  # names are cut to 22
    assert len(out.splitlines()) == 4  # the track, the header, two drivers: no line made by a name
    assert await anyio.to_thread.run_sync(main, [*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out, parse_constant=lambda name: pytest.fail(f"{name} in --json"))
    best = next(d["best"] for d in doc["drivers"] if d["driver"].endswith("Fake"))
    assert best["speed"] is None and best["top"] is None
