"""Resumable, verified uploads against a real nats-server: interrupted, gapped, repeated, replaced."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.fleet.nats_server import TOKEN, NatsServer
from wrtfd.fleet.client import connect
from wrtfd.fleet.config import ConnectOptions
from wrtfd.fleet.queue import UploadEntry
from wrtfd.fleet.upload import (
    CHUNK_HEADER,
    FileGoneError,
    ObjectUploader,
    UploadError,
    chunk_subject,
)

CHUNK = 16 * 1024


class Stop(Exception):
    """Raised from the progress callback: the upload is cut off there (a crash, a lost link)."""


async def _client(server: NatsServer) -> Any:
    return await connect(ConnectOptions(servers=(server.url,), token=TOKEN), name="test")


def _uploader(js: Any, nuids: list[str], **kw: Any) -> ObjectUploader:
    def new_nuid() -> str:  # unique like a real NUID: a random part
        nuids.append(f"N{os.urandom(8).hex()}")
        return nuids[-1]

    return ObjectUploader(js, "wrtfd", chunk_bytes=CHUNK, window=4, new_nuid=new_nuid, **kw)


def _entry(path: Path, name: str = "rig/a.wrtf") -> UploadEntry:
    return UploadEntry(id="e1", path=str(path), object=name, queued_us=1)


class Saved:
    def __init__(self) -> None:
        self.entries: list[UploadEntry] = []

    async def __call__(self, entry: UploadEntry) -> UploadEntry:
        self.entries.append(entry)
        return entry


async def _read_back(js: Any, name: str) -> bytes:
    store = await js.object_store("wrtfd")
    return bytes((await store.get(name)).data)


async def _count(js: Any, subject: str) -> int:
    info = await js.stream_info("OBJ_wrtfd", subjects_filter=subject)
    return int((info.state.subjects or {}).get(subject, 0))


def _read(path: Path) -> bytes:
    return path.read_bytes()


def _read_stat(path: Path) -> os.stat_result:
    return path.stat()


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


@pytest.fixture
async def js(nats_server: NatsServer) -> AsyncIterator[Any]:
    """A JetStream context on a connection of its own to the test server, closed after the test."""
    nc = await _client(nats_server)
    try:
        yield nc.jetstream()
    finally:
        await nc.close()


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "a.wrtf"
    path.write_bytes(os.urandom(20 * CHUNK + 123))  # 21 chunks, the last one short
    return path


async def test_an_upload_is_an_ordinary_object_with_the_files_checksum(js: Any, data_file: Path) -> None:
    saved = Saved()
    result = await _uploader(js, []).upload(_entry(data_file), headers={"Wrtfd-Rig": "rig"}, save=saved)
    content = _read(data_file)
    sha = hashlib.sha256(content).hexdigest()
    assert result.sha256 == sha and result.size == len(content) and result.resumed_at_chunk == 0
    # the verifying read-back's consumer is gone at once (idle consumers slow every later publish)
    assert (await js.stream_info("OBJ_wrtfd")).state.consumer_count == 0
    assert await _read_back(js, "rig/a.wrtf") == content  # nats-py's own get checks the digest too
    info = await (await js.object_store("wrtfd")).get_info("rig/a.wrtf")
    assert info.headers["Wrtfd-Sha256"] == [sha]
    assert info.headers["Wrtfd-Rig"] == ["rig"]
    assert info.chunks == 21
    assert saved.entries[0].nuid is not None  # the nuid was on disk before the first chunk went
    assert await _count(js, chunk_subject("wrtfd", saved.entries[0].nuid)) == 21


async def test_an_interrupted_upload_resumes_where_the_server_is(
    nats_server: NatsServer, data_file: Path
) -> None:
    nc = await _client(nats_server)
    js = nc.jetstream()
    saved = Saved()
    seen: list[int] = []

    def cut(sent: int, size: int) -> None:
        seen.append(sent)
        if sent >= 9 * CHUNK:
            raise Stop

    with pytest.raises(Stop):
        await _uploader(js, []).upload(_entry(data_file), headers={}, save=saved, progress=cut)
    entry = saved.entries[-1]
    assert entry.nuid is not None
    on_server = await _count(js, chunk_subject("wrtfd", entry.nuid))
    assert 9 <= on_server < 21
    store = await js.object_store("wrtfd")
    from nats.js.errors import ObjectNotFoundError

    with pytest.raises(ObjectNotFoundError):  # no info yet: readers never see a partial object
        await store.get_info("rig/a.wrtf")
    # a new process (new connection, new uploader) with the entry from disk
    await nc.close()
    nc = await _client(nats_server)
    js = nc.jetstream()
    result = await _uploader(js, []).upload(entry, headers={}, save=Saved())
    assert result.resumed_at_chunk == on_server
    assert result.sent_bytes == len(_read(data_file)) - on_server * CHUNK
    assert await _read_back(js, "rig/a.wrtf") == _read(data_file)
    assert await _count(js, chunk_subject("wrtfd", entry.nuid)) == 21  # nothing twice
    await nc.close()


async def test_chunks_that_are_not_a_clean_prefix_start_over(js: Any, data_file: Path) -> None:
    up = _uploader(js, [])
    await up.ensure_bucket()
    content = _read(data_file)
    subject = chunk_subject("wrtfd", "GAPPY")
    for i in (0, 1, 3):  # chunk 2 lost on the way (a connection that dropped), 3 arrived
        await js.publish(subject, content[i * CHUNK : (i + 1) * CHUNK], headers={CHUNK_HEADER: str(i)})
    entry = replace(
        _entry(data_file),
        nuid="GAPPY",
        size=len(content),
        mtime_ns=_read_stat(data_file).st_mtime_ns,
        chunk_bytes=CHUNK,
    )
    saved = Saved()
    result = await up.upload(entry, headers={}, save=saved)
    assert result.entry.nuid != "GAPPY" and result.resumed_at_chunk == 0
    assert await _count(js, subject) == 0  # the bad chunks are purged
    assert await _read_back(js, "rig/a.wrtf") == content


async def test_a_file_already_uploaded_is_confirmed_not_sent_again(js: Any, data_file: Path) -> None:
    first = await _uploader(js, []).upload(_entry(data_file), headers={}, save=Saved())
    messages = (await js.stream_info("OBJ_wrtfd")).state.messages
    # the log of done uploads was lost (a crash right after the info went out): queued again
    again = await _uploader(js, []).upload(replace(_entry(data_file), id="e2"), headers={}, save=Saved())
    assert again.resumed_at_chunk == -1 and again.sent_bytes == 0 and again.sha256 == first.sha256
    assert (await js.stream_info("OBJ_wrtfd")).state.messages == messages


async def test_a_changed_file_or_a_new_version_replaces_the_old_chunks(js: Any, data_file: Path) -> None:
    saved = Saved()
    await _uploader(js, []).upload(_entry(data_file), headers={}, save=saved)
    old_nuid = saved.entries[-1].nuid
    assert old_nuid is not None
    _write(data_file, os.urandom(5 * CHUNK))  # repaired, re-recorded...: new content
    entry = saved.entries[-1]  # still carries the old size, time and nuid
    saved2 = Saved()
    result = await _uploader(js, []).upload(entry, headers={}, save=saved2)
    assert result.entry.nuid != old_nuid
    assert await _read_back(js, "rig/a.wrtf") == _read(data_file)
    assert await _count(js, chunk_subject("wrtfd", old_nuid)) == 0
    info = await js.stream_info("OBJ_wrtfd")
    assert info.state.messages == 5 + 1  # the new chunks and one info message


async def test_verification_compares_what_the_server_holds(js: Any, data_file: Path) -> None:
    saved = Saved()
    up = _uploader(js, [])
    result = await up.upload(_entry(data_file), headers={}, save=saved)
    nuid = saved.entries[-1].nuid
    assert nuid is not None
    size = result.size
    good = bytes.fromhex(result.sha256)
    await up._verify("rig/a.wrtf", nuid, size, 21, good)  # passes on the real object
    with pytest.raises(UploadError, match="not the upload's"):
        await up._verify("rig/a.wrtf", nuid, size, 21, hashlib.sha256(b"other").digest())
    with pytest.raises(UploadError, match="not in the bucket"):
        await up._verify("rig/none.wrtf", nuid, size, 21, good)


async def test_content_verification_reads_the_chunks_not_the_claims(js: Any, data_file: Path) -> None:
    """An object whose info claims the file's digest, size and chunk count over other bytes."""
    import json

    from nats.js.api import ObjectInfo

    from wrtfd.fleet.upload import digest_text, meta_subject

    up = _uploader(js, [])
    await up.ensure_bucket()
    content = _read(data_file)
    for i in range(21):
        await js.publish(
            chunk_subject("wrtfd", "FORGED"), os.urandom(len(content[i * CHUNK : (i + 1) * CHUNK]))
        )
    digest = hashlib.sha256(content).digest()
    info = ObjectInfo(name="rig/f.wrtf", bucket="wrtfd", nuid="FORGED", size=len(content), chunks=21)
    info.digest = digest_text(digest)
    await js.publish(meta_subject("wrtfd", "rig/f.wrtf"), json.dumps(info.as_dict()).encode())
    with pytest.raises(UploadError, match="content read back"):
        await up._verify("rig/f.wrtf", "FORGED", len(content), 21, digest)
    up.verify = "info"  # what `verify = "info"` trusts: the claims
    await up._verify("rig/f.wrtf", "FORGED", len(content), 21, digest)


async def test_a_vanished_file_is_reported_as_gone(js: Any, tmp_path: Path) -> None:
    with pytest.raises(FileGoneError):
        await _uploader(js, []).upload(_entry(tmp_path / "nope.wrtf"), headers={}, save=Saved())


async def test_the_rate_limit_holds_the_upload_back(js: Any, tmp_path: Path) -> None:
    import time

    path = tmp_path / "b.wrtf"
    path.write_bytes(os.urandom(8 * CHUNK))
    t0 = time.monotonic()
    await _uploader(js, [], rate_bytes_s=64 * 1024).upload(_entry(path), headers={}, save=Saved())
    # 128 KiB at 64 KiB/s: the last chunk may go after 7 chunks' worth of time at the earliest
    assert time.monotonic() - t0 >= 7 * CHUNK / (64 * 1024) * 0.9
