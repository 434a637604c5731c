"""``collect`` against a real nats-server: byte-identical, idempotent, atomic, and safe with names."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import pytest

from tests.fleet.nats_server import TOKEN, NatsServer
from wrtfd.fleet.client import FleetError, connect
from wrtfd.fleet.collect import INDEX_NAME, collect, safe_relative
from wrtfd.fleet.config import ConnectOptions
from wrtfd.fleet.queue import UploadEntry
from wrtfd.fleet.upload import ObjectUploader


def _options(server: NatsServer, token: str = TOKEN) -> ConnectOptions:
    return ConnectOptions(servers=(server.url,), token=token)


async def _upload(server: NatsServer, files: dict[str, Path]) -> None:
    nc = await connect(_options(server), name="test")
    up = ObjectUploader(nc.jetstream(), "wrtfd", chunk_bytes=8192, new_nuid=lambda: os.urandom(8).hex())

    async def save(e: UploadEntry) -> UploadEntry:
        return e

    for i, (name, path) in enumerate(files.items()):
        await up.upload(
            UploadEntry(id=str(i), path=str(path), object=name, queued_us=i), headers={}, save=save
        )
    await nc.close()


@pytest.fixture
def recordings(tmp_path: Path) -> dict[str, Path]:
    out = tmp_path / "rig"
    out.mkdir()
    files = {}
    for name, size in (("a.wrtf", 50_000), ("b.wrtf", 1), ("c.wrtf", 0), ("d.wrtf", 8192 * 3)):
        (out / name).write_bytes(os.urandom(size))
        files[f"rig-1/{name}"] = out / name
    return files


async def test_collect_mirrors_byte_for_byte_and_a_second_run_downloads_nothing(
    nats_server: NatsServer, recordings: dict[str, Path], tmp_path: Path
) -> None:
    await _upload(nats_server, recordings)
    into = tmp_path / "pit"
    report = await collect(_options(nats_server), "wrtfd", into)
    assert sorted(report.downloaded) == sorted(recordings)
    for name, path in recordings.items():
        assert (into / name).read_bytes() == path.read_bytes()
    assert not list(into.rglob(".*.part"))
    mtimes = {name: (into / name).stat().st_mtime_ns for name in recordings}
    again = await collect(_options(nats_server), "wrtfd", into)
    assert again.downloaded == [] and again.present == len(recordings)
    assert {name: (into / name).stat().st_mtime_ns for name in recordings} == mtimes  # untouched


async def test_a_damaged_local_copy_is_replaced_and_an_unindexed_good_one_kept(
    nats_server: NatsServer, recordings: dict[str, Path], tmp_path: Path
) -> None:
    await _upload(nats_server, recordings)
    into = tmp_path / "pit"
    await collect(_options(nats_server), "wrtfd", into)
    damaged = into / "rig-1" / "a.wrtf"
    data = bytearray(damaged.read_bytes())
    data[100] ^= 0xFF
    damaged.write_bytes(bytes(data))
    (into / INDEX_NAME).unlink()  # and the index is gone: every file is checked by its hash
    report = await collect(_options(nats_server), "wrtfd", into)
    assert report.downloaded == ["rig-1/a.wrtf"]
    assert report.present == len(recordings) - 1
    assert damaged.read_bytes() == recordings["rig-1/a.wrtf"].read_bytes()


async def test_unsafe_object_names_are_skipped(nats_server: NatsServer, tmp_path: Path) -> None:
    nc = await connect(_options(nats_server), name="test")
    js = nc.jetstream()
    store = await js.create_object_store("wrtfd")
    for name in ("../evil.wrtf", "/abs.wrtf", "rig/.hidden", "rig/ok.wrtf"):
        await store.put(name, b"x" * 10)
    await nc.close()
    into = tmp_path / "pit" / "into"
    report = await collect(_options(nats_server), "wrtfd", into)
    assert report.downloaded == ["rig/ok.wrtf"]
    assert sorted(report.skipped_names) == ["../evil.wrtf", "/abs.wrtf", "rig/.hidden"]
    assert not (tmp_path / "pit" / "evil.wrtf").exists()


def test_safe_relative() -> None:
    assert safe_relative("rig/a.wrtf") == Path("rig/a.wrtf")
    for bad in ("", "/x", "a/../b", "a//b", "a/./b", "a/b c", "a\\b", "x" * 2000, "/".join("a" * 20)):
        assert safe_relative(bad) is None, bad


async def test_a_wrong_token_or_no_bucket_is_one_clear_error(nats_server: NatsServer, tmp_path: Path) -> None:
    with pytest.raises(FleetError, match="authorization refused"):
        await collect(_options(nats_server, "wrong"), "wrtfd", tmp_path / "x")
    with pytest.raises(FleetError, match="no bucket 'nope'"):
        await collect(_options(nats_server), "nope", tmp_path / "x")
    import asyncio

    from tests.fleet.nats_server import free_port

    nobody = ConnectOptions(servers=(f"nats://127.0.0.1:{free_port()}",))
    with pytest.raises(FleetError, match="connection refused"):  # and not a hang: one retry
        await asyncio.wait_for(collect(nobody, "wrtfd", tmp_path / "x"), 15)


async def test_a_rig_filter_collects_only_that_rig(nats_server: NatsServer, tmp_path: Path) -> None:
    a, b = tmp_path / "a.wrtf", tmp_path / "b.wrtf"
    a.write_bytes(b"a" * 100)
    b.write_bytes(b"b" * 100)
    await _upload(nats_server, {"rig-1/a.wrtf": a, "rig-2/b.wrtf": b})
    report: Any = await collect(_options(nats_server), "wrtfd", tmp_path / "pit", rig="rig-2")
    assert report.downloaded == ["rig-2/b.wrtf"]


async def test_follow_waits_for_the_bucket_and_mirrors_new_uploads(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    import asyncio

    into = tmp_path / "pit"
    seen: list[str] = []
    all_there = asyncio.Event()

    def on_file(name: str, _report: object) -> None:
        seen.append(name)
        if len(seen) == 6:
            all_there.set()

    follow = asyncio.create_task(collect(_options(nats_server), "wrtfd", into, follow=True, on_file=on_file))
    await asyncio.sleep(0.5)  # no bucket yet: --follow waits for the first rig
    files = {}
    for i in range(6):
        path = tmp_path / f"f{i}.wrtf"
        path.write_bytes(os.urandom(20_000 + i))
        files[f"rig-1/f{i}.wrtf"] = path
    await _upload(nats_server, files)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(all_there.wait(), 20)
    follow.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await follow
    assert sorted(seen) == sorted(files)
    for name, path in files.items():
        assert (into / name).read_bytes() == path.read_bytes()
    assert (into / INDEX_NAME).is_file()  # saved on the way out


async def test_reconciliation_finds_objects_a_consumer_did_not_deliver(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    """What guards completeness against servers whose consumers skip a message under load."""
    from wrtfd.fleet.collect import _InfoReader

    files = {}
    for i in range(3):
        path = tmp_path / f"m{i}.wrtf"
        path.write_bytes(os.urandom(1000 + i))
        files[f"rig-1/m{i}.wrtf"] = path
    await _upload(nats_server, files)
    nc = await connect(_options(nats_server), name="test")
    reader = _InfoReader(nc.jetstream(), "wrtfd")
    missed = await reader.missed({"rig-1/m1.wrtf"})
    assert sorted(i.name for i in missed) == ["rig-1/m0.wrtf", "rig-1/m2.wrtf"]
    assert all(i.size == files[i.name].stat().st_size for i in missed)
    assert await reader.missed(set(files)) == []
    await nc.close()
