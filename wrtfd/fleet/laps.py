"""Lap records to the team's server: store and forward from ``laps.jsonl``, each record once.

The daemon writes every completed lap to ``<recordings>/laps.jsonl`` (:mod:`wrtfd.daemon.laprecords`)
whether or not there is a fleet. This module, in the fleet thread, sends that file's new lines
to a JetStream key-value bucket (``wrtfd-laps`` by default), key ``<rig>.<record id>``, and keeps
how far it got in ``<queue_dir>/laps.offset`` (written atomically after the server acknowledged).
So a lap made while the server is down is sent when it is back, and after a ``kill -9`` the
lines after the saved offset are sent again: the key is the record's id, and the bucket keeps one
value per key (and the server drops a repeated ``Nats-Msg-Id`` within its window), so a lap is
in the bucket once however often it was sent.

:func:`read_records` reads a bucket back (``wrtfd laps --fleet``, tests): every key's value.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, overload

from wrtfd.fleet.queue import write_atomic
from wrtfd.fleet.untrusted import loads

__all__ = [
    "DEFAULT_LAPS_BUCKET",
    "MAX_RECORD_BYTES",
    "LapForwarder",
    "kv_stream",
    "read_records",
    "record_key",
]

log = logging.getLogger("wrtfd.fleet")

DEFAULT_LAPS_BUCKET = "wrtfd-laps"
#: A line of laps.jsonl longer than this is not a lap record: skipped and counted.
MAX_RECORD_BYTES = 16 * 1024
#: Lines sent before the offset is saved (and at the end of what there is).
BATCH = 64
#: Without a lap completed, how often ``laps.jsonl`` is looked at (a line a wake missed).
POLL_S = 5.0
#: After a lap completed, its line is looked for this often, this many times, until it is sent.
WOKEN_RETRY_S = 0.2
WOKEN_TRIES = 10
_ID = re.compile(r"^[0-9a-f]{8,64}$")


def kv_stream(bucket: str) -> str:
    return f"KV_{bucket}"


def record_key(rig: str, record_id: str) -> str:
    return f"{rig}.{record_id}"


@dataclass(slots=True)
class _Counters:
    sent: int = 0
    bad_lines: int = 0
    last_error: str | None = None


class LapForwarder:
    """Sends new lines of ``laps_path`` to the bucket; one instance per rig, in the fleet thread."""

    def __init__(
        self,
        laps_path: Path,
        offset_path: Path,
        *,
        rig: str,
        bucket: str = DEFAULT_LAPS_BUCKET,
        replicas: int = 1,
        timeout_s: float = 10.0,
        on_sent: Callable[[dict[str, Any]], object] | None = None,
    ) -> None:
        self.laps_path = laps_path
        #: Called with each record the server acknowledged (the best-lap uploader's feed).
        self.on_sent = on_sent
        self.offset_path = offset_path
        self.rig = rig
        self.bucket = bucket
        self.replicas = replicas
        self.timeout_s = timeout_s
        self.counters = _Counters()
        self.offset = self._load_offset()
        self.pending_bytes = 0

    def _load_offset(self) -> int:
        try:
            doc = loads(self.offset_path.read_bytes()[:4096])
            value = doc.get("offset") if isinstance(doc, dict) else None
            return value if isinstance(value, int) and value >= 0 else 0
        except (OSError, ValueError):
            return 0

    async def ensure_bucket(self, js: Any) -> None:
        """The key-value bucket, created (one value per key, file storage, ``replicas``) if missing."""
        from nats.js.api import KeyValueConfig, StorageType
        from nats.js.errors import BucketNotFoundError

        try:
            await js.key_value(self.bucket)
        except BucketNotFoundError:
            config = KeyValueConfig(
                bucket=self.bucket,
                description="wrtfd: one record per completed lap of every rig",
                history=1,
                storage=StorageType.FILE,
                replicas=self.replicas,
            )
            await js.create_key_value(config=config)

    def _read_new(self) -> tuple[list[bytes], int]:
        """Complete lines after the offset (at most :data:`BATCH`) and the offset after them."""
        try:
            size = os.stat(self.laps_path).st_size
        except FileNotFoundError:
            return [], self.offset
        if size < self.offset:  # replaced or cut by someone: send it all again (the keys dedupe)
            log.warning("fleet: %s is shorter than what was sent; sending it again", self.laps_path)
            self.offset = 0
        self.pending_bytes = size - self.offset
        if size == self.offset:
            return [], self.offset
        with open(self.laps_path, "rb") as f:
            f.seek(self.offset)
            data = f.read(min(size - self.offset, BATCH * MAX_RECORD_BYTES))
        end = data.rfind(b"\n")
        if end < 0:
            if len(data) >= MAX_RECORD_BYTES:  # one endless line: skip it
                self.counters.bad_lines += 1
                return [], self.offset + len(data)
            return [], self.offset  # a line being written
        lines = data[: end + 1].split(b"\n")[:-1][:BATCH]
        used = sum(len(line) + 1 for line in lines)
        return lines, self.offset + used

    def _save(self, offset: int) -> None:
        self.offset_path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.offset_path, json.dumps({"offset": offset}).encode())

    async def forward(self, js: Any) -> int:
        """Send what is new; returns how many records were sent (raises on a NATS failure: the
        offset then stays where the last acknowledged batch left it)."""
        sent = 0
        while True:
            lines, offset = await asyncio.to_thread(self._read_new)
            if not lines:
                if offset != self.offset:
                    await asyncio.to_thread(self._save, offset)
                    self.offset = offset
                return sent
            for line in lines:
                doc = self._record_of(line)
                if doc is None:
                    self.counters.bad_lines += 1
                    continue
                record_id = doc["id"]
                key = record_key(self.rig, record_id)
                ack = await js.publish(
                    f"$KV.{self.bucket}.{key}",
                    line,
                    headers={"Nats-Msg-Id": key},
                    timeout=self.timeout_s,
                )
                if ack.stream != kv_stream(self.bucket):
                    raise RuntimeError(f"lap record stored in stream {ack.stream!r}")
                sent += 1
                self.counters.sent += 1
                if self.on_sent is not None:
                    self.on_sent(doc)
            await asyncio.to_thread(self._save, offset)
            self.offset = offset

    @staticmethod
    def _record_of(line: bytes) -> dict[str, Any] | None:
        """The record of a line (a dict with a well-formed ``id``), else None."""
        if not line.strip() or len(line) > MAX_RECORD_BYTES:
            return None
        try:
            doc = loads(line)
        except ValueError:
            return None
        rid = doc.get("id") if isinstance(doc, dict) else None
        return doc if isinstance(rid, str) and _ID.fullmatch(rid) else None

    async def run(
        self,
        js_of: Callable[[], Any],
        online: Callable[[], bool],
        wake: asyncio.Event,
        *,
        poll_s: float = POLL_S,
    ) -> None:
        """Forever (a task of the fleet thread): forward whenever the link is up and something is
        new; woken by ``wake`` (a lap was completed: its line is looked for every
        :data:`WOKEN_RETRY_S` for :data:`WOKEN_TRIES` tries, the lap book's thread may write it a
        moment later) or every ``poll_s``; a failure waits and tries again from the saved offset."""
        ready = False
        retry_s = 1.0
        tries = 0
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), WOKEN_RETRY_S if tries else poll_s)
            if wake.is_set():
                tries = WOKEN_TRIES
            wake.clear()
            tries = max(0, tries - 1)
            if not online():
                ready = False
                continue
            try:
                js = js_of()
                if not ready:
                    await self.ensure_bucket(js)
                    ready = True
                if await self.forward(js):
                    tries = 0
                self.counters.last_error = None
                retry_s = 1.0
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                from wrtfd.fleet.client import describe_error

                self.counters.last_error = describe_error(exc)
                ready = False
                await asyncio.sleep(retry_s)
                retry_s = min(30.0, retry_s * 2)

    def snapshot(self) -> dict[str, Any]:
        return {
            "bucket": self.bucket,
            "sent": self.counters.sent,
            "pending_bytes": self.pending_bytes,
            "bad_lines": self.counters.bad_lines,
            "last_error": self.counters.last_error,
        }


@overload
async def read_records(
    js: Any, bucket: str = ..., *, keyed: Literal[False] = ...
) -> list[dict[str, Any]]: ...


@overload
async def read_records(js: Any, bucket: str = ..., *, keyed: Literal[True]) -> dict[str, dict[str, Any]]: ...


async def read_records(
    js: Any, bucket: str = DEFAULT_LAPS_BUCKET, *, keyed: bool = False
) -> list[dict[str, Any]] | dict[str, dict[str, Any]]:
    """Every lap record in the bucket (the latest value of each key), as dicts (``keyed``: by
    the subject each was stored under); lines that are not records are skipped. Reads the
    bucket's stream with a short-lived consumer."""
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
    from nats.js.errors import NotFoundError

    from wrtfd.fleet.upload import drop_consumer, pull_consumer

    stream = kv_stream(bucket)
    try:
        info = await js.stream_info(stream)
    except NotFoundError:
        return {} if keyed else []
    if not info.state.messages:
        return {} if keyed else []
    subject = f"$KV.{bucket}.>"
    config = ConsumerConfig(
        ack_policy=AckPolicy.NONE,
        deliver_policy=DeliverPolicy.ALL,
        inactive_threshold=30.0,
        mem_storage=True,
    )
    psub = await pull_consumer(js, stream, subject, config)
    latest: dict[str, dict[str, Any]] = {}
    try:
        pending = int((await psub.consumer_info()).num_pending or 0)
        while pending > 0:
            msgs = await psub.fetch(batch=min(256, pending), timeout=10.0)
            for msg in msgs:
                pending -= 1
                if (msg.headers or {}).get("KV-Operation") in ("DEL", "PURGE"):
                    latest.pop(msg.subject, None)
                    continue
                if len(msg.data or b"") > MAX_RECORD_BYTES:
                    continue
                try:
                    doc = loads(msg.data)
                except ValueError:
                    continue
                if isinstance(doc, dict):
                    latest[msg.subject] = doc
    finally:
        await drop_consumer(js, stream, psub)
    return latest if keyed else list(latest.values())
