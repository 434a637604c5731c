"""Resumable, verified uploads of finished files into a JetStream object store bucket.

The objects are ordinary object store objects (any NATS client reads them: ``nats object get``,
nats-py's ``ObjectStore.get``): chunks on ``$O.<bucket>.C.<nuid>``, then the object's info on
``$O.<bucket>.M.<name in base64url>`` with a rollup header, its ``digest`` the SHA-256 of the
content. What nats-py's ``ObjectStore.put`` does not do, and this module does, is survive a
crash or a lost connection in the middle of a big file:

* every chunk carries ``Wrtfd-Chunk: <index>`` and ``Nats-Msg-Id: <nuid>.<index>`` (the server
  drops a repeated chunk within its duplicate window), and the entry on disk knows the ``nuid``
  before the first chunk goes out;
* on every (re)start of an upload the server is asked how many messages the chunk subject holds
  and which index the last one has. ``count == last index + 1`` (and the last chunk's bytes equal
  the local file's there) means the chunks on the server are exactly the first ``count`` chunks:
  the upload goes on from there. Anything else (a gap after a lost connection, a file that
  changed) purges those chunks and starts over under a new ``nuid``;
* the info message is published last, so a reader never sees a partial object; an object of the
  same name uploaded before (same digest) is not uploaded again;
* the upload counts as done only after it is verified against the server: the info read back
  has our nuid, size, chunk count and digest, the subject holds exactly that many chunks, and
  with ``verify = "content"`` the object is read back and its SHA-256 compared with the file's.

Chunks are pipelined (``window`` in flight) for throughput; the order on the connection is the
order in the stream, which is what the resume check relies on.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import logging
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from wrtfd.errors import WrtfdError
from wrtfd.fleet.queue import UploadEntry

__all__ = [
    "CHUNK_HEADER",
    "FileChangedError",
    "FileGoneError",
    "ObjectUploader",
    "UploadError",
    "UploadResult",
    "cancel_quietly",
    "chunk_subject",
    "digest_text",
    "drop_consumer",
    "meta_subject",
    "object_digest",
    "pull_consumer",
    "read_chunks",
    "stream_name",
]

log = logging.getLogger("wrtfd.fleet")

CHUNK_HEADER = "Wrtfd-Chunk"
#: The local file's SHA-256 in hex, in the object's headers (the ``digest`` has it in base64url).
SHA_HEADER = "Wrtfd-Sha256"
READ_TIMEOUT_S = 10.0
#: Verifying by reading back: the time allowed is this plus the size at this rate.
VERIFY_MIN_RATE_BYTES_S = 1 << 20
#: Chunks asked for at once when reading an upload back (16 MiB of 128 KiB chunks).
READ_BACK_BATCH = 128


class UploadError(WrtfdError):
    """An upload attempt failed (it is retried; the message says why)."""


class FileGoneError(UploadError):
    """The local file is no longer there (deleted or moved by someone else): nothing to upload."""


class FileChangedError(UploadError):
    """The local file changed during the upload (it starts over)."""


def stream_name(bucket: str) -> str:
    return f"OBJ_{bucket}"


def chunk_subject(bucket: str, nuid: str) -> str:
    return f"$O.{bucket}.C.{nuid}"


def object_digest(info: Any) -> bytes | None:
    """The SHA-256 an object's info gives (None: none, or not one)."""
    text = info.digest if isinstance(info.digest, str) else ""
    if not text.upper().startswith("SHA-256="):
        return None
    try:
        digest = base64.urlsafe_b64decode(text[len("SHA-256=") :])
    except ValueError:
        return None
    return digest if len(digest) == 32 else None


def meta_subject(bucket: str, name: str) -> str:
    return f"$O.{bucket}.M.{base64.urlsafe_b64encode(name.encode()).decode()}"


def digest_text(sha256: bytes) -> str:
    """The object store's digest form: ``SHA-256=`` + base64url."""
    return "SHA-256=" + base64.urlsafe_b64encode(sha256).decode()


@dataclass(frozen=True, slots=True)
class UploadResult:
    entry: UploadEntry
    sha256: str
    size: int
    mtime_ns: int
    #: First chunk sent in this attempt (>0: resumed); -1: already on the server, nothing sent.
    resumed_at_chunk: int
    sent_bytes: int


class _HashSink:
    """Where a verifying read-back goes: hashed and counted, not kept."""

    def __init__(self) -> None:
        self.hash = hashlib.sha256()
        self.size = 0

    def write(self, b: Any) -> int:
        self.hash.update(b)
        self.size += len(b)
        return len(b)


def _read_hash(fd: int, offset: int, size: int, hasher: Any) -> bytes:
    data = os.pread(fd, size, offset)
    if len(data) != size:
        raise FileChangedError(f"file shorter than expected at byte {offset}")
    hasher.update(data)
    return data


def _hash_range(fd: int, end: int, hasher: Any) -> None:
    offset = 0
    while offset < end:
        n = min(1 << 20, end - offset)
        _read_hash(fd, offset, n, hasher)
        offset += n


class ObjectUploader:
    """Uploads entries of the queue into one bucket over one JetStream context."""

    def __init__(
        self,
        js: Any,
        bucket: str,
        *,
        chunk_bytes: int = 128 * 1024,
        window: int = 8,
        rate_bytes_s: int | None = None,
        verify: str = "content",
        new_nuid: Callable[[], str],
        timeout_s: float = 10.0,
        replicas: int = 1,
    ) -> None:
        self.js = js
        self.replicas = replicas
        self.bucket = bucket
        self.stream = stream_name(bucket)
        self.chunk_bytes = chunk_bytes
        self.window = max(1, window)
        self.rate_bytes_s = rate_bytes_s
        self.verify = verify
        self.new_nuid = new_nuid
        self.timeout_s = timeout_s
        self._store: Any = None
        self._next_send = 0.0

    async def ensure_bucket(self) -> None:
        """Bind to the bucket, creating it (file storage, no limits, ``replicas`` copies) if the
        server has none."""
        from nats.js.api import ObjectStoreConfig, StorageType
        from nats.js.errors import BucketNotFoundError

        try:
            self._store = await self.js.object_store(self.bucket)
        except BucketNotFoundError:
            config = ObjectStoreConfig(
                description="wrtfd recordings", storage=StorageType.FILE, replicas=self.replicas
            )
            self._store = await self.js.create_object_store(self.bucket, config=config)

    async def _object_info(self, name: str) -> Any:
        from nats.js.errors import ObjectNotFoundError

        try:
            return await self._store.get_info(name)
        except ObjectNotFoundError:
            return None

    async def _subject_state(self, subject: str) -> tuple[int, Any]:
        """(messages on the subject, its last message or None)."""
        from nats.js.errors import NotFoundError

        info = await self.js.stream_info(self.stream, subjects_filter=subject)
        count = int((info.state.subjects or {}).get(subject, 0))
        if count == 0:
            return 0, None
        try:
            last = await self.js.get_last_msg(self.stream, subject)
        except NotFoundError:
            return 0, None
        return count, last

    async def _purge(self, subject: str) -> None:
        await self.js.purge_stream(self.stream, subject=subject)

    async def upload(
        self,
        entry: UploadEntry,
        *,
        headers: Mapping[str, str],
        save: Callable[[UploadEntry], Awaitable[UploadEntry]],
        progress: Callable[[int, int], None] = lambda sent, size: None,
    ) -> UploadResult:
        """Upload (or resume, or confirm) ``entry``; raises UploadError or NATS errors to retry.

        ``save`` persists a changed entry (its nuid) before any chunk of that nuid is sent.
        """
        loop = asyncio.get_running_loop()
        if self._store is None:
            await self.ensure_bucket()
        try:
            fd = await loop.run_in_executor(None, os.open, entry.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise FileGoneError(f"{entry.path}: no longer there") from None
        except OSError as exc:
            raise UploadError(f"{entry.path}: cannot open: {exc.strerror or exc}") from None
        try:
            return await self._upload_fd(fd, entry, headers, save, progress)
        finally:
            os.close(fd)

    async def _upload_fd(
        self,
        fd: int,
        entry: UploadEntry,
        headers: Mapping[str, str],
        save: Callable[[UploadEntry], Awaitable[UploadEntry]],
        progress: Callable[[int, int], None],
    ) -> UploadResult:
        loop = asyncio.get_running_loop()
        st = os.fstat(fd)
        size, mtime_ns = st.st_size, st.st_mtime_ns
        chunk = self.chunk_bytes
        n_chunks = -(-size // chunk)
        changed = entry.nuid is not None and (
            entry.size != size or entry.mtime_ns != mtime_ns or entry.chunk_bytes != chunk
        )
        if changed and entry.nuid is not None:
            log.info("fleet: %s changed since its upload began; starting over", entry.path)
            await self._purge(chunk_subject(self.bucket, entry.nuid))
            entry = await save(_with(entry, nuid=None))

        existing = await self._object_info(entry.object)
        if existing is not None and not existing.deleted and existing.size == size:
            # Uploaded before (a crash after the info was published, or a re-queued file).
            hasher = hashlib.sha256()
            await loop.run_in_executor(None, _hash_range, fd, size, hasher)
            if existing.digest == digest_text(hasher.digest()):
                await self._verify(entry.object, existing.nuid, size, existing.chunks or 0, hasher.digest())
                if entry.nuid is not None and entry.nuid != existing.nuid:
                    await self._purge(chunk_subject(self.bucket, entry.nuid))
                return UploadResult(entry, hasher.hexdigest(), size, mtime_ns, -1, 0)

        if entry.nuid is None:
            entry = await save(
                _with(entry, nuid=self.new_nuid(), size=size, mtime_ns=mtime_ns, chunk_bytes=chunk)
            )
        nuid = str(entry.nuid)
        subject = chunk_subject(self.bucket, nuid)
        start = await self._resume_point(fd, subject, n_chunks, size)
        if start < 0:  # the chunks there are not a clean prefix: start over under a new nuid
            await self._purge(subject)
            nuid = self.new_nuid()
            entry = await save(_with(entry, nuid=nuid))
            subject = chunk_subject(self.bucket, nuid)
            start = 0
        if start:
            log.info(
                "fleet: resuming the upload of %s at chunk %d of %d (byte %d of %d)",
                entry.path,
                start,
                n_chunks,
                start * chunk,
                size,
            )
        hasher = hashlib.sha256()
        await loop.run_in_executor(None, _hash_range, fd, min(start * chunk, size), hasher)
        sent = await self._send_chunks(fd, nuid, subject, start, n_chunks, size, hasher, progress)

        st2 = os.fstat(fd)
        if (st2.st_size, st2.st_mtime_ns) != (size, mtime_ns):
            raise FileChangedError(f"{entry.path} changed during its upload")
        digest = hasher.digest()
        await self._publish_info(entry, size, n_chunks, digest, headers)
        if existing is not None and not existing.deleted and existing.nuid != nuid:
            await self._purge(chunk_subject(self.bucket, existing.nuid))
        await self._verify(entry.object, nuid, size, n_chunks, digest)
        return UploadResult(entry, digest.hex(), size, mtime_ns, start, sent)

    async def _resume_point(self, fd: int, subject: str, n_chunks: int, size: int) -> int:
        """How many chunks the server already holds as a clean prefix; -1: not a clean prefix."""
        count, last = await self._subject_state(subject)
        if count == 0:
            return 0
        try:
            index = int((last.headers or {}).get(CHUNK_HEADER, -1))
        except (TypeError, ValueError):
            index = -1
        if index != count - 1 or count > n_chunks:
            log.warning(
                "fleet: the server holds %d chunk(s) of %s with last index %d: not a clean prefix",
                count,
                subject,
                index,
            )
            return -1
        offset = index * self.chunk_bytes
        want = os.pread(fd, min(self.chunk_bytes, size - offset), offset)
        if bytes(last.data or b"") != want:
            log.warning("fleet: chunk %d on the server differs from the file; starting over", index)
            return -1
        return count

    async def _throttle(self, n: int) -> None:
        if not self.rate_bytes_s:
            return
        now = time.monotonic()
        self._next_send = max(self._next_send, now)
        wait = self._next_send - now
        self._next_send += n / self.rate_bytes_s
        if wait > 0:
            await asyncio.sleep(wait)

    async def _send_chunks(
        self,
        fd: int,
        nuid: str,
        subject: str,
        start: int,
        n_chunks: int,
        size: int,
        hasher: Any,
        progress: Callable[[int, int], None],
    ) -> int:
        loop = asyncio.get_running_loop()
        chunk = self.chunk_bytes
        inflight: deque[asyncio.Future[Any]] = deque()
        sent = 0
        try:
            for i in range(start, n_chunks):
                offset = i * chunk
                n = min(chunk, size - offset)
                data = await loop.run_in_executor(None, _read_hash, fd, offset, n, hasher)
                await self._throttle(n)
                hdr = {"Nats-Msg-Id": f"{nuid}.{i}", CHUNK_HEADER: str(i)}
                fut = await self.js.publish_async(subject, data, headers=hdr, wait_stall=self.timeout_s)
                inflight.append(fut)
                while len(inflight) >= self.window:
                    await self._ack(inflight.popleft())
                sent += n
                progress(offset + n, size)
            while inflight:
                await self._ack(inflight.popleft())
        finally:
            for fut in inflight:
                fut.cancel()
        return sent

    async def _ack(self, fut: asyncio.Future[Any]) -> None:
        ack = await asyncio.wait_for(fut, self.timeout_s)
        if ack.stream != self.stream:
            raise UploadError(f"chunk stored in stream {ack.stream!r}, expected {self.stream!r}")

    async def _publish_info(
        self, entry: UploadEntry, size: int, n_chunks: int, sha: bytes, headers: Mapping[str, str]
    ) -> None:
        import json

        from nats.js.api import Header, ObjectInfo, ObjectMetaOptions

        assert entry.nuid is not None
        info = ObjectInfo(
            name=entry.object,
            bucket=self.bucket,
            nuid=entry.nuid,
            size=size,
            mtime=datetime.now(UTC).isoformat(),
            chunks=n_chunks,
            digest=digest_text(sha),
            description=f"wrtfd recording {os.path.basename(entry.path)}",
            # Header values are lists, as the Go client's object headers are.
            headers={**{k: [v] for k, v in headers.items()}, SHA_HEADER: [sha.hex()]},
            options=ObjectMetaOptions(max_chunk_size=self.chunk_bytes),
        )
        payload = json.dumps(info.as_dict()).encode()
        ack = await self.js.publish(
            meta_subject(self.bucket, entry.object),
            payload,
            headers={Header.ROLLUP: "sub"},
            timeout=self.timeout_s,
        )
        if ack.stream != self.stream:
            raise UploadError(f"object info stored in stream {ack.stream!r}, expected {self.stream!r}")

    async def _verify(self, name: str, nuid: str, size: int, n_chunks: int, sha: bytes) -> None:
        info = await self._object_info(name)
        if info is None or info.deleted:
            raise UploadError(f"{name}: not in the bucket after its upload")
        if (info.nuid, info.size, info.chunks or 0, info.digest) != (nuid, size, n_chunks, digest_text(sha)):
            raise UploadError(
                f"{name}: the server's object info (nuid {info.nuid}, {info.size} bytes,"
                f" {info.chunks} chunks) is not the upload's ({nuid}, {size} bytes, {n_chunks} chunks)"
            )
        count, _ = await self._subject_state(chunk_subject(self.bucket, nuid))
        if count != n_chunks:
            raise UploadError(f"{name}: the server holds {count} chunks, the object has {n_chunks}")
        if self.verify != "content" or size == 0:
            return
        sink = _HashSink()
        await asyncio.wait_for(
            read_chunks(self.js, self.stream, chunk_subject(self.bucket, nuid), n_chunks, sink.write),
            30.0 + size / VERIFY_MIN_RATE_BYTES_S,
        )
        if sink.size != size or sink.hash.digest() != sha:
            raise UploadError(f"{name}: the content read back ({sink.size} bytes) is not the file's")


async def read_chunks(
    js: Any, stream: str, subject: str, n_chunks: int, write: Callable[[bytes], Any], timeout_s: float = 10.0
) -> None:
    """Every chunk of an object (``subject``) in stream order, to ``write``, through a
    short-lived pull consumer (batches of :data:`READ_BACK_BATCH`; nothing acknowledged)."""
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    config = ConsumerConfig(
        ack_policy=AckPolicy.NONE,
        deliver_policy=DeliverPolicy.ALL,
        filter_subject=subject,
        inactive_threshold=30.0,
        mem_storage=True,
    )
    psub = await pull_consumer(js, stream, subject, config)
    try:
        got = 0
        while got < n_chunks:
            for msg in await psub.fetch(batch=min(READ_BACK_BATCH, n_chunks - got), timeout=timeout_s):
                index = (msg.headers or {}).get(CHUNK_HEADER)
                if index is not None and index != str(got):
                    raise UploadError(f"{subject}: chunk {index} read where chunk {got} belongs")
                write(msg.data)
                got += 1
    finally:
        await drop_consumer(js, stream, psub)


#: Creating a short-lived consumer: each attempt may take this long, and this many are made.
CONSUMER_CREATE_S = 3.0
CONSUMER_ATTEMPTS = 8


async def pull_consumer(js: Any, stream: str, subject: str, config: Any) -> Any:
    """An ephemeral pull consumer on ``subject`` of ``stream``, created again after a timeout.

    In a cluster that has just lost a node, a new consumer can be placed on the lost node for a
    while (seconds: until the others mark it offline) and its creation is never answered; the
    next attempt usually lands on a live one (measured on nats-server 2.9 with three nodes)."""
    config.filter_subject = subject
    last: Exception | None = None
    for _ in range(CONSUMER_ATTEMPTS):
        config.name = js._nc._nuid.next().decode()
        try:
            await js._jsm.add_consumer(stream, config=config, timeout=CONSUMER_CREATE_S)
        except TimeoutError as exc:  # nats-py's timeout error is a TimeoutError too
            last = exc
            continue
        return await js.pull_subscribe_bind(stream=stream, name=config.name)
    assert last is not None
    raise last


async def drop_consumer(js: Any, stream: str, psub: Any) -> None:
    """Unsubscribe a :func:`pull_consumer` and delete it on the server, each as far as it goes
    (a lost connection, a consumer already gone): at once, not after its inactive_threshold,
    because idle consumers slow every later publish."""
    with contextlib.suppress(Exception):
        await psub.unsubscribe()
    with contextlib.suppress(Exception):
        await js.delete_consumer(stream, psub._consumer)


def _with(entry: UploadEntry, **changes: Any) -> UploadEntry:
    from dataclasses import replace

    return replace(entry, **changes)


async def cancel_quietly(task: asyncio.Task[Any] | None) -> None:
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
