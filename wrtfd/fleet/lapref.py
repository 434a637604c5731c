"""The team's best lap as the live delta's reference (docs/lap-records.md, "the team's best lap").

Two halves, both in the fleet thread (never in the sample path):

* :class:`BestLapUploader`, on every rig: when a lap record it sent is its own best for a
  (track, car, driver), the lap's frames are cut from the recording into a small WRTF lap file
  (:func:`cut_lap`) and put in an object store bucket under :func:`ref_object_name`.
* :class:`ReferenceFollower`, on a rig with ``reference = "fleet:best"`` (or
  ``"fleet:driver=NAME"``): it follows the laps bucket (a plain subscription to its subjects, the
  records stored so far read once), picks the team's best lap for its track and car
  (:func:`pick_record`), fetches that lap file (a pick not put yet: again every
  ``reference_poll_s``) into a local cache (``<queue_dir>/refs/``) and offers it to the source's
  predictive delta, which takes it at its next lap start. The cache survives a restart: the
  last reference is used again offline.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from wrtfd.errors import WrtfdError
from wrtfd.fleet.laps import MAX_RECORD_BYTES, read_records
from wrtfd.fleet.leaderboard import lap_time, leaderboard
from wrtfd.fleet.queue import write_atomic
from wrtfd.fleet.untrusted import loads, number

__all__ = [
    "DEFAULT_BEST_LAPS_BUCKET",
    "MAX_LAP_FILE_BYTES",
    "BestLapUploader",
    "LapCutError",
    "LapNotOnDiskError",
    "RefTarget",
    "ReferenceFollower",
    "cut_lap",
    "pick_record",
    "ref_object_name",
]

log = logging.getLogger("wrtfd.fleet")

DEFAULT_BEST_LAPS_BUCKET = "wrtfd-best-laps"
#: A fetched lap file larger than this is refused (a lap at 1 kHz of 1 KiB frames for 10 min).
MAX_LAP_FILE_BYTES = 64 * 1024 * 1024
#: Lap records a follower keeps in memory (about 1 KiB each); past it, only the picks change.
MAX_RECORDS = 100_000
#: Objects refused remembered (a bound: the memo is cleared when full).
MAX_REFUSED = 256
#: Metadata key of a lap file holding its lap record (JSON).
RECORD_KEY = "wrtfd.lap.record"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.()-]+|\.\.+")


class LapCutError(WrtfdError):
    """The lap cannot be cut from its recording (no such file, session or frames)."""


class LapNotOnDiskError(LapCutError):
    """The lap's frames (and the one after it) are not all in the file yet: try again later."""


def _token(value: object) -> str:
    text = value if isinstance(value, str) and value else "-"
    return _UNSAFE.sub("_", text)[:64].strip(".") or "_"  # no "/", no ".." in a name's part


def ref_object_name(record: Mapping[str, Any]) -> str:
    """``<track>/<car>/<driver>/<rig>.<id>.wrtf``: listing ``<track>/<car>/`` gives every driver's
    best there, ``<track>/<car>/<driver>/`` one driver's (a record without a driver: ``(rig)``)."""
    driver = record.get("driver") or f"({record.get('rig') or '?'})"
    return "/".join(
        (
            _token(record.get("track")),
            _token(record.get("car")),
            _token(driver),
            f"{_token(record.get('rig'))}.{_token(record.get('id'))}.wrtf",
        )
    )


def pick_record(
    records: Iterable[Mapping[str, Any]], *, track: str | None, car: str | None, driver: str | None = None
) -> Mapping[str, Any] | None:
    """The team's best lap record for ``track`` and ``car`` (of ``driver`` when given), as the
    leaderboard ranks them (an unknown car: any car on the track); None when there is none."""
    if track is None:
        return None
    board = leaderboard(records, track=track, car=car, driver=driver)
    return board.rows[0].best if board.rows else None


def cut_lap(
    source: Path,
    session: int,
    first_tick: int,
    last_tick: int,
    dest: Path,
    *,
    metadata: Mapping[str, str] | None = None,
    lap: int | None = None,
) -> int:
    """Write the lap's frames (``first_tick`` .. ``last_tick`` of ``session``) and the frame either
    side of them (the line crossings are interpolated from those) into ``dest``: one session, the
    source's header, frame definition and frames byte for byte, its metadata without the frame
    check's keys plus ``metadata``. Returns the number of frames.

    With ``lap``, the frames must be that lap of the lap channels (``laps.lap_number``): the
    frame before another lap, the lap's own all ``lap``, the one after ``lap + 1``.

    :raises LapNotOnDiskError: the frame after the lap is not in the file yet.
    :raises LapCutError: no such session, no frame of the lap, frames of another lap.
    :raises FormatError: the source is not a readable WRTF file.
    """
    from wrtfd.format import Reader, Writer
    from wrtfd.format.writer import copied_metadata

    with Reader(source) as r:
        if not 0 <= session < len(r.sessions):
            raise LapNotOnDiskError(f"{source}: no session {session} yet (the file has {len(r.sessions)})")
        frames = r.frames(session)
        ticks = np.asarray(frames["tick"])
        a = int(np.searchsorted(ticks, first_tick, "left"))
        b = int(np.searchsorted(ticks, last_tick, "right"))
        if b >= len(ticks):
            raise LapNotOnDiskError(f"{source}: the frames after tick {last_tick} are not on disk yet")
        if a >= b:
            raise LapCutError(f"{source}: no frame between ticks {first_tick} and {last_tick}")
        if a == 0:
            raise LapCutError(f"{source}: the lap began before session {session} of the file (a rotation)")
        part = frames[a - 1 : b + 1]
        if lap is not None:
            _check_lap(part, lap, source)
        meta = copied_metadata(r.metadata)
        meta.update(metadata or {})
        tmp = dest.with_name(f".{dest.name}.tmp")
        with Writer(
            tmp,
            r.schema,
            rate_hz=r.rate_hz,
            start_timestamp_us=r.start_timestamp_us,
            metadata=meta,
            exist_ok=True,
            fsync_on_close=False,
        ) as w:
            w.begin_session(r.sessions[session].header)
            w.write_frames(part)
            w.end_session()
        os.replace(tmp, dest)
        return len(part)


def _check_lap(part: np.ndarray, lap: int, source: Path) -> None:
    names = part.dtype.names or ()
    if "laps" not in names or "lap_number" not in (part.dtype["laps"].names or ()):
        return  # no lap channels to check against
    numbers = np.asarray(part["laps"]["lap_number"], dtype=np.int64)
    if numbers[0] == lap or numbers[-1] != lap + 1 or not (numbers[1:-1] == lap).all():
        raise LapCutError(f"{source}: the frames between the ticks are not lap {lap}")


def _lap_metadata(record: Mapping[str, Any]) -> dict[str, str]:
    meta = {RECORD_KEY: json.dumps(dict(record), sort_keys=True)}
    for key, label in (("track", "Track"), ("car", "Car"), ("driver", "Driver")):
        value = record.get(key)
        if isinstance(value, str) and value:
            meta[label] = value
    return meta


def _write_cache(path: Path, data: bytes) -> None:
    """Whole or not at all under its name, but not fsynced: a cache (a file a power cut spoilt is
    not read as a lap, and is fetched again)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


async def _store(js: Any, bucket: str, replicas: int, *, create: bool) -> Any:
    from nats.js.api import ObjectStoreConfig, StorageType
    from nats.js.errors import BucketNotFoundError

    try:
        return await js.object_store(bucket)
    except BucketNotFoundError:
        if not create:
            return None
        config = ObjectStoreConfig(
            description="wrtfd: each rig's best lap per track, car and driver",
            storage=StorageType.FILE,
            replicas=replicas,
        )
        return await js.create_object_store(bucket, config=config)


def _best_key(record: Mapping[str, Any]) -> str:
    return "|".join(str(record.get(k) or "").casefold() for k in ("track", "car", "driver"))


class BestLapUploader:
    """This rig's best lap per (track, car, driver) into the object store (see the module docstring).

    What was put is kept in ``state_path`` (JSON, written atomically), so a restart neither puts
    a lap again nor forgets the best it has to beat.
    """

    def __init__(
        self, output_dir: Path, state_path: Path, *, bucket: str = DEFAULT_BEST_LAPS_BUCKET, replicas: int = 1
    ) -> None:
        self.output_dir = output_dir
        self.state_path = state_path
        self.bucket = bucket
        self.replicas = replicas
        self.best: dict[str, dict[str, Any]] = self._load()
        self.put = 0
        self.failed = 0
        self.last_error: str | None = None
        #: The last lap file put (record id, bytes): a rig following its own best lap takes it
        #: from here instead of fetching it back.
        self.last_put: tuple[str, bytes] | None = None

    def local_lap(self, record_id: str) -> bytes | None:
        last = self.last_put
        return last[1] if last is not None and last[0] == record_id else None

    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            doc = loads(self.state_path.read_bytes()[: 1 << 20])
        except (OSError, ValueError):
            return {}
        if not isinstance(doc, dict):
            return {}
        return {
            k: v
            for k, v in doc.items()
            if isinstance(v, dict) and isinstance(v.get("record"), dict) and lap_time(v["record"]) is not None
        }

    def _save(self) -> None:
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.state_path, json.dumps(self.best, sort_keys=True).encode())

    def consider(self, record: Mapping[str, Any]) -> bool:
        """A lap record this rig sent; True when it is a new best to put."""
        t = lap_time(record)
        if t is None or record.get("valid") is False or record.get("pit") is not None:
            return False
        if not record.get("track") or not record.get("id"):
            return False
        if not isinstance(record.get("file"), str) or not isinstance(record.get("session"), int):
            return False
        key = _best_key(record)
        known = self.best.get(key) or {}
        beaten = known.get("state") != "failed" and lap_time(known.get("record", {})) is not None
        if beaten and t >= known["record"]["time_s"]:
            return False
        # the object this one replaces: the last put (a pending or failed lap has none of its own)
        previous = known.get("object") or known.get("previous")
        self.best[key] = {"record": dict(record), "state": "pending", "previous": previous}
        try:  # kept before the put: a restart still puts it (the record will not be sent again)
            self._save()
        except OSError as exc:
            self.last_error = f"{self.state_path}: {exc}"
        return True

    def pending(self) -> bool:
        return any(v.get("state") == "pending" for v in self.best.values())

    def _cut(self, record: Mapping[str, Any], dest: Path) -> bytes:
        name = Path(str(record["file"]))
        if name.is_absolute() or ".." in name.parts:
            raise LapCutError(f"{name}: not a file of the recording directory")
        source = self.output_dir / name
        if not source.is_file():
            raise LapCutError(f"{source}: not there (deleted or moved)")
        cut_lap(
            source,
            int(record["session"]),
            int(record["first_tick"]),
            int(record["last_tick"]),
            dest,
            metadata=_lap_metadata(record),
            lap=int(record["lap"]),
        )
        try:
            return dest.read_bytes()
        finally:
            with contextlib.suppress(OSError):
                dest.unlink()

    async def put_pending(self, js: Any) -> int:
        """Cut and put every pending best lap; a lap whose frames are not on disk yet stays
        pending. Raises on a NATS failure (the lap then stays pending)."""
        done = 0
        store = None
        for key, entry in list(self.best.items()):
            if entry.get("state") != "pending":
                continue
            record = entry["record"]
            scratch = self.state_path.with_name(f".cut-{_token(record.get('id'))}.wrtf")
            try:
                data = await asyncio.to_thread(self._cut, record, scratch)
            except LapNotOnDiskError:
                continue
            except (WrtfdError, OSError, KeyError, ValueError, TypeError) as exc:
                entry["state"] = "failed"  # not a best to beat: the next lap may be put
                entry["error"] = str(exc)
                self.failed += 1
                self.last_error = str(exc)
                log.warning("fleet: best lap %s not put: %s", record.get("id"), exc)
                await asyncio.to_thread(self._save)
                continue
            if store is None:
                store = await _store(js, self.bucket, self.replicas, create=True)
            from nats.js.api import ObjectMeta

            name = ref_object_name(record)
            headers = {"Wrtfd-Lap-Time": f"{record['time_s']:.6f}", "Wrtfd-Record-Id": str(record["id"])}
            await store.put(name, data, meta=ObjectMeta(name=name, headers=headers))
            previous = entry.get("previous")
            entry.update(state="put", object=name, previous=None)
            self.last_put = (str(record["id"]), data)
            self.put += 1
            done += 1
            await asyncio.to_thread(self._save)
            log.info("fleet: best lap %s %.3f s put as %s", key, record["time_s"], name)
            if previous and previous != name:  # the best it replaces (a rig fetching it retries)
                with contextlib.suppress(Exception):
                    await store.delete(previous)
        return done

    def snapshot(self) -> dict[str, Any]:
        return {"bucket": self.bucket, "put": self.put, "failed": self.failed, "last_error": self.last_error}


@dataclass(slots=True)
class RefTarget:
    """A source whose delta follows the team's best (``reference = "fleet:..."``)."""

    source: str
    group: str
    spec: str
    #: None: the team's best; a name: that driver's best.
    driver: str | None
    #: The track (the plug-in's track or circuit name); None until known (an auto-picked circuit).
    track: str | None
    car: str | None
    #: The lap length (a track file's lane), None to take the lap file's own (GNSS).
    length_m: float | None
    #: Called (from the fleet thread) with the new reference.
    offer: Callable[[Any], None]
    current: dict[str, Any] | None = None
    #: The record picked (the team's best known), fetched and offered when it is not ``current``.
    wanted: Mapping[str, Any] | None = None
    #: Pick again from every record (the car became known).
    repick: bool = False
    state: str = "waiting"
    error: str | None = None
    track_of: Callable[[], str | None] | None = field(default=None, repr=False)

    def key(self) -> str:
        """The cache's key: the last reference this source used on this track (whatever the car:
        at start the car is often not known yet)."""
        return f"{self.source}|{self.spec}|{self.track or ''}"


class ReferenceFollower:
    """Picks, fetches, caches and offers the team's best lap to each :class:`RefTarget`."""

    def __init__(
        self,
        targets: list[RefTarget],
        cache_dir: Path,
        *,
        laps_bucket: str,
        bucket: str = DEFAULT_BEST_LAPS_BUCKET,
        poll_s: float = 5.0,
        local_lap: Callable[[str], bytes | None] | None = None,
    ) -> None:
        self.targets = targets
        #: This rig's own lap files just put (no fetch of what it has).
        self.local_lap = local_lap
        self.cache_dir = cache_dir
        self.laps_bucket = laps_bucket
        self.bucket = bucket
        self.poll_s = poll_s
        self.index_path = cache_dir / "current.json"
        self.fetched = 0
        #: Objects whose info or bytes were refused: (name, nuid, digest) -> why.
        self._refused: dict[tuple[str, str, str], str] = {}
        self.last_error: str | None = None
        #: The laps bucket's records (key -> record), as the watch delivered them.
        self.records: dict[str, dict[str, Any]] = {}

    # --- the cache -----------------------------------------------------------------------

    def _index(self) -> dict[str, Any]:
        try:
            doc = loads(self.index_path.read_bytes()[: 1 << 20])
        except (OSError, ValueError):
            return {}
        return doc if isinstance(doc, dict) else {}

    def _cached_path(self, record: Mapping[str, Any]) -> Path:
        return self.cache_dir / f"{_token(record.get('id'))}.wrtf"

    def _load(self, target: RefTarget, record: Mapping[str, Any], path: Path) -> Any:
        from wrtfd.tracks.delta import Reference

        ref = Reference.from_file(path, length_m=target.length_m, track_name=target.track)
        who = record.get("driver") or f"({record.get('rig')})"
        return Reference(
            ref.times_s,
            ref.step_m,
            ref.length_m,
            ref.lap_time_s,
            int(record.get("lap") or ref.number),
            f"fleet {who} on {record.get('rig')} lap {record.get('lap')}",
        )

    def load_cached(self) -> int:
        """At start (before any network): each target's last reference from the cache."""
        index = self._index()
        n = 0
        for target in self.targets:
            record = index.get(target.key())
            if not isinstance(record, dict):
                continue
            used = record.get("car")
            if target.car and isinstance(used, str) and used.casefold() != target.car.casefold():
                continue  # the last reference was another car's
            try:
                ref = self._load(target, record, self._cached_path(record))
            except (WrtfdError, OSError) as exc:
                log.warning("fleet: cached reference for %s not usable: %s", target.source, exc)
                continue
            self._use(target, record, ref, "cached")
            n += 1
        return n

    def _use(self, target: RefTarget, record: Mapping[str, Any], ref: Any, how: str) -> None:
        target.offer(ref)
        target.current = dict(record)
        target.state = how
        target.error = None
        log.info(
            "source %s: reference %s is %s (%.3f s, %s)",
            target.source,
            target.spec,
            ref.origin,
            ref.lap_time_s,
            how,
        )

    def _prune(self, index: Mapping[str, Any]) -> None:
        """Lap files no target uses any more are deleted (the cache holds the current ones)."""
        keep = {self._cached_path(r).name for r in index.values() if isinstance(r, dict)}
        for path in self.cache_dir.glob("*.wrtf"):
            if path.name not in keep:
                with contextlib.suppress(OSError):
                    path.unlink()

    # --- the network ---------------------------------------------------------------------

    async def _fetch(self, js: Any, record: Mapping[str, Any], path: Path) -> None:
        store = await _store(js, self.bucket, 1, create=False)
        if store is None:
            raise LapCutError(f"no bucket {self.bucket!r} on the server yet")
        from nats.js.errors import ObjectNotFoundError

        from wrtfd.fleet.upload import chunk_subject, object_digest, read_chunks, stream_name

        name = ref_object_name(record)
        try:
            info = await store.get_info(name)
        except ObjectNotFoundError:
            raise LapCutError(f"{name}: not in bucket {self.bucket!r} (yet)") from None
        # The object's info is untrusted too: the chunks are read against its size and digest,
        # never more than MAX_LAP_FILE_BYTES (nats-py's get() would read whatever is there).
        # An object refused once is not read again while its info is the same (a forged one
        # would otherwise be read at every poll).
        seen = (name, str(info.nuid), str(info.digest))
        refused = self._refused.get(seen)
        if refused is not None:
            raise LapCutError(refused)
        size = number(info.size, 0, MAX_LAP_FILE_BYTES)
        chunks = number(info.chunks, 0, max(1, size or 0))
        digest = object_digest(info)
        data = bytearray()
        try:
            if size is None or chunks is None or digest is None or not isinstance(info.nuid, str):
                raise LapCutError(f"{name}: not a lap file of at most {MAX_LAP_FILE_BYTES} bytes")

            def take(chunk: bytes) -> None:
                data.extend(chunk)
                if len(data) > size:
                    raise LapCutError(f"{name}: more than its {int(size)} bytes")

            subject = chunk_subject(self.bucket, info.nuid)
            await read_chunks(js, stream_name(self.bucket), subject, int(chunks), take)
            if len(data) != size or hashlib.sha256(data).digest() != digest:
                raise LapCutError(f"{name}: the bytes are not the object's (size or SHA-256)")
        except LapCutError as exc:
            if len(self._refused) >= MAX_REFUSED:
                self._refused.clear()
            self._refused[seen] = str(exc)
            raise
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(_write_cache, path, bytes(data))

    async def refresh(self, js: Any) -> int:
        """Read every lap record once, pick and settle (tests, and a follower without a watch)."""
        self.records = await read_records(js, self.laps_bucket, keyed=True)
        self._repick()
        return await self._settle(js)

    def _repick(self) -> None:
        """Every target's pick from all records known (at the watch's start, another car)."""
        for target in self.targets:
            if target.track is None and target.track_of is not None:
                target.track = target.track_of()
            target.wanted = pick_record(
                self.records.values(), track=target.track, car=target.car, driver=target.driver
            )
            target.repick = False

    def _take(self, key: str, value: bytes | None) -> None:
        """One update of the laps bucket: only a record faster than a target's pick changes it."""
        if value is None or len(value) > MAX_RECORD_BYTES:
            self.records.pop(key, None)
            return
        try:
            record = loads(value)
        except ValueError:
            return
        if not isinstance(record, dict):
            return
        if len(self.records) < MAX_RECORDS or key in self.records:
            self.records[key] = record
        for target in self.targets:
            if target.repick:
                continue
            both = [r for r in (target.wanted, record) if r is not None]
            target.wanted = pick_record(both, track=target.track, car=target.car, driver=target.driver)

    async def _settle(self, js: Any) -> int:
        """Fetch and offer each target's pick when it is not the reference in use (a failure, such
        as the lap file not put yet, keeps the current one and is tried again later)."""
        changed = 0
        for target in self.targets:
            if target.repick or (target.track is None and target.track_of is not None):
                self._repick()
            best = target.wanted
            if best is None:
                continue
            if target.current is not None and target.current.get("id") == best.get("id"):
                continue
            path = self._cached_path(best)
            try:
                if not path.is_file():
                    own = self.local_lap(str(best.get("id"))) if self.local_lap is not None else None
                    if own is not None:
                        self.cache_dir.mkdir(parents=True, exist_ok=True)
                        await asyncio.to_thread(_write_cache, path, own)
                    else:
                        await self._fetch(js, best, path)
                ref = await asyncio.to_thread(self._load, target, best, path)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # not there yet, a bad file: the current reference stays
                from wrtfd.fleet.client import describe_error

                target.error = describe_error(exc) if not isinstance(exc, WrtfdError) else str(exc)
                with contextlib.suppress(OSError):
                    path.unlink()
                continue
            self._use(target, best, ref, "fetched")
            index = self._index()
            index[target.key()] = dict(best)
            await asyncio.to_thread(_write_cache, self.index_path, json.dumps(index, sort_keys=True).encode())
            await asyncio.to_thread(self._prune, index)
            self.fetched += 1
            changed += 1
        return changed

    async def watch(self, js: Any, nc: Any) -> None:
        """Follow the laps bucket: a plain subscription to its subjects (each new record as it is
        stored, no consumer and no heartbeats), then every record stored so far read once. Every
        ``poll_s`` without news a pick not fetched yet is tried again. Returns after a reconnect
        (what was stored meanwhile is read again by the next call); raises when it fails (no
        bucket yet): :meth:`run` calls it again."""
        import nats.errors

        reconnects = nc.stats.get("reconnects", 0)
        sub = await nc.subscribe(f"$KV.{self.laps_bucket}.>", pending_msgs_limit=4096)
        try:
            records = await read_records(js, self.laps_bucket, keyed=True)
            self.records = dict(list(records.items())[:MAX_RECORDS])
            self._repick()
            self.last_error = None
            while nc.stats.get("reconnects", 0) == reconnects:
                await self._settle(js)
                try:
                    msg = await sub.next_msg(timeout=self.poll_s)
                except nats.errors.TimeoutError:
                    continue
                deleted = (msg.headers or {}).get("KV-Operation") in ("DEL", "PURGE")
                self._take(msg.subject, None if deleted else bytes(msg.data or b""))
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    def saw_lap(self, group: str, info: Mapping[str, str]) -> None:
        """This rig's own lap: its track and car (what the game or the metadata says)."""
        for target in self.targets:
            if target.group != group:
                continue
            car = info.get("car")
            if car and car != target.car:
                target.car = car
                target.repick = True
            if target.track is None and info.get("track"):
                target.track = info["track"]

    async def run(
        self,
        js_of: Callable[[], Any],
        online: Callable[[], bool],
        wake: asyncio.Event,
        nc_of: Callable[[], Any],
    ) -> None:
        """Forever (a task of the fleet thread): follow the laps bucket while the link is up;
        after a failure, again ``poll_s`` later."""
        while True:
            if online():
                try:
                    await self.watch(js_of(), nc_of())
                    continue  # a reconnect: read what was stored meanwhile
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    from wrtfd.fleet.client import describe_error

                    self.last_error = describe_error(exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), self.poll_s)
            wake.clear()

    def snapshot(self) -> list[dict[str, Any]]:
        out = []
        for t in self.targets:
            cur = t.current or {}
            out.append(
                {
                    "source": t.source,
                    "reference": t.spec,
                    "track": t.track,
                    "car": t.car,
                    "state": t.state,
                    "lap_time_s": cur.get("time_s"),
                    "rig": cur.get("rig"),
                    "driver": cur.get("driver"),
                    "lap": cur.get("lap"),
                    "error": t.error or self.last_error,
                }
            )
        return out
