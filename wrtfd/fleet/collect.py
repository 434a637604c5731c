"""``wrtfd collect``: mirror the team's object store bucket into a directory.

Atomic per file: an object is written to ``.<name>.part`` beside its target, its SHA-256 checked
against the object's digest (and the rig's ``Wrtfd-Sha256`` header), fsynced, then renamed into
place; a failed or interrupted download leaves no file under the target name. Idempotent: an
index (``.wrtfd-collect.json`` in the directory) remembers what each local file was downloaded
from (object nuid, digest, size, mtime), so a second run downloads nothing and hashes nothing;
a local file the index does not know is hashed once and kept if it already matches.

Object names and infos come from the server and are untrusted: only relative names of safe
components (``[-_=.a-zA-Z0-9]``, no ``.``/``..``, bounded length and depth) are written, and only
infos whose fields have their types are read; others are skipped and counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wrtfd.fleet.client import FleetError, connect, describe_error
from wrtfd.fleet.config import ConnectOptions
from wrtfd.fleet.queue import write_atomic
from wrtfd.fleet.untrusted import loads

__all__ = [
    "INDEX_NAME",
    "CollectReport",
    "Collector",
    "collect",
    "object_info",
    "safe_relative",
]

INDEX_NAME = ".wrtfd-collect.json"
#: Following: a failed download is tried again after this long.
RETRY_S = 10.0
#: An object info not acknowledged within this long is delivered again.
INFO_ACK_WAIT_S = 5.0
#: Following: the server's list of objects is compared with what was seen this often.
RECONCILE_S = 15.0
#: Downloads in flight at once.
DOWNLOADS_AT_ONCE = 4
#: Following: the index is saved this often (and at the end); it only saves hashing next time.
INDEX_SAVE_S = 5.0
MAX_INDEX_BYTES = 64 << 20
MAX_NAME = 1024
MAX_DEPTH = 8
_COMPONENT = re.compile(r"^[-_=.a-zA-Z0-9]{1,255}$")

Progress = Callable[[str, int, int], None]


def safe_relative(name: str) -> Path | None:
    """The object name as a relative path, or None when it cannot be one safely."""
    if not name or len(name) > MAX_NAME or name.startswith("/"):
        return None
    parts = name.split("/")
    if len(parts) > MAX_DEPTH:
        return None
    for part in parts:
        if part in (".", "..") or not _COMPONENT.fullmatch(part) or part.startswith("."):
            return None
    return Path(*parts)


@dataclass(slots=True)
class CollectReport:
    downloaded: list[str] = field(default_factory=list)
    downloaded_bytes: int = 0
    present: int = 0
    skipped_names: list[str] = field(default_factory=list)
    #: Objects whose info is not a well-formed one (forged, damaged): skipped.
    malformed_infos: int = 0
    failed: list[str] = field(default_factory=list)


class _FileSink:
    def __init__(self, f: Any) -> None:
        self.f = f
        self.hash = hashlib.sha256()
        self.size = 0
        self.on_write: Callable[[int], None] = lambda n: None

    def write(self, b: Any) -> int:
        self.f.write(b)
        self.hash.update(b)
        self.size += len(b)
        self.on_write(self.size)
        return len(b)


def _header_sha(info: Any) -> str | None:
    value = (info.headers or {}).get("Wrtfd-Sha256")
    if isinstance(value, list) and value:
        value = value[0]
    return value.lower() if isinstance(value, str) else None


def _sha_file(path: Path) -> bytes:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.digest()


#: The types an object info's fields may have (``size`` and ``chunks``: a count or None).
_INFO_TYPES: dict[str, tuple[type, ...]] = {
    "name": (str,),
    "nuid": (str,),
    "digest": (str, type(None)),
    "deleted": (bool, type(None)),
    "headers": (dict, type(None)),
    "options": (dict, type(None)),
}


def object_info(data: bytes | None) -> Any:
    """An object's info from its meta message, None when it is not a well-formed one: the bucket's
    stream is untrusted (any client can write it), and nats-py trusts every field's type."""
    from nats.js.api import ObjectInfo

    try:
        doc = loads(data or b"{}")
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    if any(not isinstance(doc.get(key), types) for key, types in _INFO_TYPES.items()):
        return None
    for key in ("size", "chunks"):
        count = doc.get(key)
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
            return None
    link = (doc.get("options") or {}).get("link")
    if link is not None and not isinstance(link, dict):
        return None
    try:
        return ObjectInfo.from_response(doc)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def _load_index(path: Path) -> dict[str, dict[str, Any]]:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_INDEX_BYTES + 1)
        doc = loads(data) if len(data) <= MAX_INDEX_BYTES else {}
    except (OSError, ValueError):
        return {}
    objects = doc.get("objects") if isinstance(doc, dict) else None
    return {k: v for k, v in objects.items() if isinstance(v, dict)} if isinstance(objects, dict) else {}


class Collector:
    """One connection, one bucket, one directory."""

    def __init__(
        self, js: Any, store: Any, bucket: str, into: Path, *, rig: str | None, progress: Progress | None
    ) -> None:
        self.js = js
        self.store = store
        self.bucket = bucket
        self.into = into
        self.rig = rig
        self.progress = progress
        self.index_path = into / INDEX_NAME
        self.index = _load_index(self.index_path)
        self.report = CollectReport()
        #: Called with each failure as it happens (``--follow`` prints them at once).
        self.on_failure: Callable[[str], None] | None = None

    def _known(self, info: Any, target: Path) -> bool:
        entry = self.index.get(info.name)
        try:
            st = target.stat()
        except OSError:
            return False
        seen = None if entry is None else (entry.get("digest"), entry.get("size"), entry.get("mtime_ns"))
        return seen == (info.digest, st.st_size, st.st_mtime_ns)

    async def one(self, info: Any) -> str | None:
        """Mirror one object; returns ``downloaded``, ``present``, a failure line, or None
        (not ours to mirror: deleted, a link, another rig's, an unsafe name)."""
        if info.deleted or (info.options is not None and info.options.link is not None):
            return None
        if self.rig is not None and not info.name.startswith(f"{self.rig}/"):
            return None
        rel = safe_relative(info.name)
        if rel is None:
            self.report.skipped_names.append(info.name)
            return None
        target = self.into / rel
        if self._known(info, target):
            self.report.present += 1
            return "present"
        from wrtfd.fleet.upload import object_digest

        want = object_digest(info)
        if want is None:
            return self._failed(f"{info.name}: no SHA-256 digest")
        same_size = target.is_file() and target.stat().st_size == info.size
        if same_size and await asyncio.to_thread(_sha_file, target) == want:  # there, not indexed
            self._remember(info, target)
            self.report.present += 1
            return "present"
        try:
            await self._download(info, target, want)
        except (OSError, FleetError) as exc:
            return self._failed(f"{info.name}: {exc}")
        self.report.downloaded.append(info.name)
        self.report.downloaded_bytes += int(info.size or 0)
        return "downloaded"

    def _failed(self, line: str) -> str:
        self.report.failed.append(line)
        if self.on_failure is not None:
            self.on_failure(line)
        return line

    def _remember(self, info: Any, target: Path) -> None:
        st = target.stat()
        self.index[info.name] = {
            "nuid": info.nuid,
            "digest": info.digest,
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
        }

    async def _download(self, info: Any, target: Path, want: bytes) -> None:
        from wrtfd.fleet.upload import UploadError, chunk_subject, read_chunks, stream_name

        await asyncio.to_thread(target.parent.mkdir, parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.part")
        size = int(info.size or 0)
        try:
            with await asyncio.to_thread(open, tmp, "wb") as f:
                sink = _FileSink(f)
                if self.progress is not None:
                    progress = self.progress
                    sink.on_write = lambda n: progress(info.name, n, size)
                subject = chunk_subject(self.bucket, str(info.nuid))
                reading = read_chunks(
                    self.js, stream_name(self.bucket), subject, int(info.chunks or 0), sink.write
                )
                try:
                    await asyncio.wait_for(reading, 60.0 + size / (1 << 20))
                except UploadError as exc:
                    raise FleetError(str(exc)) from None
                except TimeoutError:
                    raise FleetError("download timed out") from None
                except Exception as exc:
                    if isinstance(exc, FleetError | OSError):
                        raise
                    raise FleetError(describe_error(exc)) from None
                f.flush()
                os.fsync(f.fileno())
            got = sink.hash.digest()
            if sink.size != size or got != want:
                raise FleetError(f"got {sink.size} bytes with another SHA-256 than the object's")
            header = _header_sha(info)
            if header is not None and header != got.hex():
                raise FleetError("content does not match the rig's Wrtfd-Sha256 header")
            os.replace(tmp, target)
            with contextlib.suppress(OSError):
                fd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        self._remember(info, target)

    def save_index(self) -> None:
        doc = {"v": 1, "objects": self.index}
        write_atomic(self.index_path, json.dumps(doc, separators=(",", ":")).encode())


async def _open_store(js: Any, bucket: str, *, wait: bool = False) -> Any:
    """The bucket; ``wait``: until a rig creates it (``--follow`` on a new server)."""
    from nats.js.errors import BucketNotFoundError

    while True:
        try:
            return await js.object_store(bucket)
        except BucketNotFoundError:
            if not wait:
                raise FleetError(f"no bucket {bucket!r} on the server (no rig has uploaded yet?)") from None
        await asyncio.sleep(2.0)


async def collect(
    options: ConnectOptions,
    bucket: str,
    into: Path,
    *,
    rig: str | None = None,
    follow: bool = False,
    progress: Progress | None = None,
    on_file: Callable[[str, CollectReport], None] | None = None,
    on_failure: Callable[[str], None] | None = None,
) -> CollectReport:
    """Mirror ``bucket`` into ``into``; with ``follow`` keep mirroring new objects until cancelled
    (a failed download is tried again every :data:`RETRY_S`)."""
    await asyncio.to_thread(into.mkdir, parents=True, exist_ok=True)
    nc = await connect(options, name="wrtfd collect")
    try:
        js = nc.jetstream(timeout=10.0)
        try:
            store = await _open_store(js, bucket, wait=follow)
            watcher = _InfoReader(js, bucket)
            await watcher.open()
        except FleetError:
            raise
        except Exception as exc:
            raise FleetError(f"{options.shown}: {describe_error(exc)}") from None
        collector = Collector(js, store, bucket, into, rig=rig, progress=progress)
        collector.on_failure = on_failure
        try:
            await _mirror(watcher, collector, follow, on_file)
        finally:
            collector.save_index()
            collector.report.malformed_infos = len(watcher.malformed)
            await watcher.close()
        return collector.report
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(nc.close(), 2.0)


class _InfoReader:
    """Every object's latest info, then (following) each new one: a pull consumer on the
    bucket's info subjects from the start (info messages are rollups: the stream keeps only the
    latest per object, so "all" is "the last of each").

    Not ``DeliverLastPerSubject``: with it, nats-server 2.9 skips some later messages (about one
    in a hundred here under load; fixed in later servers: nats-server PR 7005). Each info is
    acknowledged as it is received, so one lost on the way comes again after
    :data:`INFO_ACK_WAIT_S`; one that comes twice finds its file already there."""

    def __init__(self, js: Any, bucket: str) -> None:
        from wrtfd.fleet.upload import stream_name

        self.js = js
        self.stream = stream_name(bucket)
        self.subject = f"$O.{bucket}.M.>"
        self.psub: Any = None
        #: Infos of the listing still to come (then None marks its end).
        self.listing = 0
        self._queue: list[Any] = []
        self._listed_marker = False
        #: Info subjects whose message is not a well-formed info (each object counted once).
        self.malformed: set[str] = set()

    def _info(self, msg: Any) -> Any:
        info = object_info(msg.data)
        if info is None:
            self.malformed.add(msg.subject)
        return info

    async def open(self) -> None:
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        config = ConsumerConfig(
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=INFO_ACK_WAIT_S,
            max_ack_pending=1024,
            deliver_policy=DeliverPolicy.ALL,
            filter_subject=self.subject,
            inactive_threshold=60.0,
            mem_storage=True,
        )
        from wrtfd.fleet.upload import pull_consumer

        self.psub = await pull_consumer(self.js, self.stream, self.subject, config)
        self.listing = int((await self.psub.consumer_info()).num_pending or 0)
        self._listed_marker = self.listing == 0

    async def updates(self, wait_s: float) -> Any:
        """The next info; None once, at the end of the listing; TimeoutError when none came.

        During the listing exactly what is pending is asked for (an open-ended batch waits out
        its whole expiry on some servers); then one at a time, as they come."""

        while not self._queue:
            if self._listed_marker:
                self._listed_marker = False
                return None
            msgs = await self.psub.fetch(batch=min(64, self.listing) or 1, timeout=wait_s)
            for msg in msgs:
                with contextlib.suppress(Exception):
                    await msg.ack()
                try:
                    info = self._info(msg)
                    if info is not None:
                        self._queue.append(info)
                finally:
                    if self.listing:
                        self.listing -= 1
                        if self.listing == 0:
                            self._listed_marker = True
        return self._queue.pop(0)

    async def missed(self, seen: set[str]) -> list[Any]:
        """The latest info of every object on the server whose name is not in ``seen``."""
        import base64

        from nats.js.errors import NotFoundError

        info = await self.js.stream_info(self.stream, subjects_filter=self.subject)
        prefix = self.subject[:-1]
        out = []
        for subject in sorted(info.state.subjects or {}):
            try:
                name = base64.urlsafe_b64decode(subject[len(prefix) :]).decode()
            except (ValueError, UnicodeDecodeError):
                continue
            if name in seen:
                continue
            try:
                msg = await self.js.get_last_msg(self.stream, subject)
            except NotFoundError:
                continue
            info = self._info(msg)
            if info is not None:
                out.append(info)
        return out

    async def close(self) -> None:
        if self.psub is None:
            return
        from wrtfd.fleet.upload import drop_consumer

        await drop_consumer(self.js, self.stream, self.psub)


async def _mirror(
    watcher: _InfoReader,
    collector: Collector,
    follow: bool,
    on_file: Callable[[str, CollectReport], None] | None,
) -> None:
    """Download what the watcher lists, :data:`DOWNLOADS_AT_ONCE` at a time (a download is
    mostly waiting: the server's answers, fsync). After the listing, and every
    :data:`RECONCILE_S` while following, the bucket's list of objects on the server is compared
    with what was seen, and anything missed is fetched by name: completeness never depends on
    a consumer delivering every message. Following, failed downloads are tried again."""
    loop = asyncio.get_running_loop()
    slots = asyncio.Semaphore(DOWNLOADS_AT_ONCE)
    busy: set[str] = set()
    seen: set[str] = set()
    retry: dict[str, Any] = {}  # objects to try again (failed, or updated while downloading)
    listed = False
    retry_at = saved_at = reconciled_at = loop.time()

    async def one(info: Any) -> None:
        try:
            outcome = await collector.one(info)
            if outcome not in (None, "present", "downloaded") and follow:
                retry[info.name] = info
            if outcome == "downloaded" and on_file is not None:
                on_file(info.name, collector.report)
        finally:
            busy.discard(info.name)
            slots.release()

    async with asyncio.TaskGroup() as tg:

        async def start(info: Any) -> None:
            seen.add(info.name)
            if info.name in busy:
                retry[info.name] = info
                return
            await slots.acquire()
            busy.add(info.name)
            tg.create_task(one(info))

        while True:
            try:
                info = await watcher.updates(RETRY_S if listed else 10.0)
            except TimeoutError:
                if not listed:
                    raise FleetError("the server did not list the bucket in time") from None
                info = None
            if info is not None:
                await start(info)
            elif not listed:
                listed = True
                reconciled_at = loop.time()
                for missed in await watcher.missed(seen):
                    await start(missed)
                if not follow:
                    break
            now = loop.time()
            if listed and now - reconciled_at >= RECONCILE_S:
                reconciled_at = now
                for missed in await watcher.missed(seen):
                    await start(missed)
            if retry and now >= retry_at:
                retry_at = now + RETRY_S
                for again in list(retry.values()):
                    retry.pop(again.name, None)
                    await start(again)
            if listed and now - saved_at >= INDEX_SAVE_S:
                saved_at = now
                collector.save_index()
