"""The pit-wall page's team panel: the team's best laps at the current track, from the laps bucket.

A task of the fleet thread (never the recording's path) follows the bucket: a plain subscription
delivers each record as it is stored (:meth:`TeamBoard.add`), and the bucket's stream is read from
where it stopped (the first time from the start) at the task's start and after each reconnect
(:meth:`TeamBoard.read`). It keeps a compact copy of each lap record (at most
:data:`MAX_TEAM_RECORDS`; the oldest go first), and when they changed ranks the laps at the track
the rig is on with the leaderboard of ``wrtfd laps --fleet`` (:mod:`wrtfd.fleet.leaderboard`):
the top ``team_rows`` drivers and where this rig's driver stands. The page reads the result in
``/status`` under ``fleet.team`` (docs/web.md).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from wrtfd.fleet.laps import MAX_RECORD_BYTES, kv_stream
from wrtfd.fleet.leaderboard import leaderboard
from wrtfd.fleet.untrusted import loads

__all__ = ["MAX_FETCH", "MAX_NAME", "MAX_TEAM_RECORDS", "TeamBoard", "compact"]

#: Lap records kept in memory for the panel (about 200 bytes each); beyond it the oldest go.
MAX_TEAM_RECORDS = 50_000
#: Messages fetched from the bucket's stream per read (the rest at the next one).
MAX_FETCH = 2_000
#: Names shown on the panel are cut to this many characters (records come from any client).
MAX_NAME = 48
_KEEP = ("rig", "driver", "car", "track", "time_s", "sectors_s", "valid", "pit", "lap", "id")


def compact(doc: Mapping[str, Any]) -> dict[str, Any]:
    """What the panel needs of a record (the leaderboard checks the values)."""
    return {k: doc[k] for k in _KEEP if k in doc}


def _track_key(rec: Mapping[str, Any]) -> str:
    track = rec.get("track")
    return track.casefold() if isinstance(track, str) else ""


class TeamBoard:
    """The records of the laps bucket and the panel made of them (see the module docstring)."""

    def __init__(self, bucket: str, *, rows: int, rig: str, driver: str | None) -> None:
        self.bucket = bucket
        self.rows = rows
        self.rig = rig
        #: This rig's driver as the records name it (``[recorder.metadata] Driver``, else the rig).
        self.me = driver or f"({rig})"
        self.track: str | None = None
        self.records: OrderedDict[str, dict[str, Any]] = OrderedDict()
        #: The same records by track (casefolded): a ranking looks at its track's only.
        self._by_track: dict[str, dict[str, dict[str, Any]]] = {}
        self._ranked: tuple[int, str | None] | None = None  # (changes, track) of the last rank
        self._changes = 0
        self.last_seq = 0
        self.reads = 0
        self.dropped = 0
        self.last_error: str | None = None
        self.updated_mono: float | None = None
        self._view: dict[str, Any] | None = None

    def add(self, subject: str, data: bytes, deleted: bool = False) -> None:
        """One message of the bucket's stream."""
        if deleted:
            self._forget(subject)
            return
        if len(data) > MAX_RECORD_BYTES:
            return
        try:
            doc = loads(data)
        except ValueError:
            return
        if not isinstance(doc, dict):
            return
        self._forget(subject)
        rec = self.records[subject] = compact(doc)
        self._by_track.setdefault(_track_key(rec), {})[subject] = rec
        self._changes += 1
        while len(self.records) > MAX_TEAM_RECORDS:
            self._forget(next(iter(self.records)))
            self.dropped += 1

    def _forget(self, subject: str) -> None:
        old = self.records.pop(subject, None)
        if old is not None:
            self._changes += 1
            same = self._by_track.get(_track_key(old))
            if same is not None:
                same.pop(subject, None)
                if not same:
                    del self._by_track[_track_key(old)]

    async def read(self, js: Any) -> int:
        """The stream's messages after the last one read (at most :data:`MAX_FETCH`); returns
        how many. Raises on a NATS failure (the caller counts it and tries again later)."""
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
        from nats.js.errors import NotFoundError

        from wrtfd.fleet.upload import drop_consumer, pull_consumer

        stream = kv_stream(self.bucket)
        try:
            info = await js.stream_info(stream)
        except NotFoundError:
            return 0
        last = int(info.state.last_seq or 0)
        if last < self.last_seq:  # the bucket was made again: start over
            self.records.clear()
            self._by_track.clear()
            self._changes += 1
            self.last_seq = 0
        if last <= self.last_seq or not info.state.messages:
            return 0
        config = ConsumerConfig(
            ack_policy=AckPolicy.NONE,
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=self.last_seq + 1,
            inactive_threshold=30.0,
            mem_storage=True,
        )
        psub = await pull_consumer(js, stream, f"$KV.{self.bucket}.>", config)
        got = 0
        try:
            pending = min(MAX_FETCH, int((await psub.consumer_info()).num_pending or 0))
            while pending > 0:
                for msg in await psub.fetch(batch=min(256, pending), timeout=10.0):
                    pending -= 1
                    got += 1
                    # past this message first: one that cannot be read is not read again
                    self.last_seq = max(self.last_seq, int(msg.metadata.sequence.stream))
                    op = (msg.headers or {}).get("KV-Operation")
                    self.add(msg.subject, msg.data or b"", op in ("DEL", "PURGE"))
        finally:
            await drop_consumer(js, stream, psub)
        self.reads += 1
        return got

    def rank(self) -> None:
        """The panel for the current track, from its records held (pure; the fleet thread's
        worker, while nothing else changes the records); nothing to do when nothing changed."""
        track = self.track
        if self._ranked == (self._changes, track) and self._view is not None:
            self.updated_mono = time.monotonic()
            return
        self._ranked = (self._changes, track)
        view: dict[str, Any] = {"track": track, "rows": [], "me": None, "drivers": 0}
        if track is not None:
            board = leaderboard(self._by_track.get(track.casefold(), {}).values(), track=track)
            view["drivers"] = len(board.rows)
            view["rows"] = [
                {
                    "pos": i,
                    "driver": r.driver[:MAX_NAME],
                    "car": ", ".join(r.cars)[:MAX_NAME] or None,
                    "best_s": r.best_s,
                    "gap_s": round(r.gap_s, 6),
                    "laps": r.laps,
                    "rigs": [g[:MAX_NAME] for g in r.rigs[:4]],
                }
                for i, r in enumerate(board.rows[: self.rows], 1)
            ]
            for i, r in enumerate(board.rows, 1):
                if r.driver.casefold() == self.me.casefold():
                    view["me"] = {
                        "pos": i,
                        "driver": r.driver,
                        "best_s": r.best_s,
                        "gap_s": round(r.gap_s, 6),
                    }
                    break
        self.updated_mono = time.monotonic()
        self._view = view

    def snapshot(self) -> dict[str, Any]:
        """``fleet.team`` of ``/status``."""
        view = self._view or {"track": self.track, "rows": [], "me": None, "drivers": 0}
        return {
            **view,
            "driver": self.me,
            "records": len(self.records),
            "updated_age_s": None
            if self.updated_mono is None
            else round(time.monotonic() - self.updated_mono, 1),
            "last_error": self.last_error,
        }
