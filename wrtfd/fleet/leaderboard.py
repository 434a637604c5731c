"""The team's leaderboard from lap records (``wrtfd laps --fleet``): pure, records in, rows out.

Records are untrusted (any client can write the bucket): every field is checked and a record
that is not a lap (no positive finite time under a day, sectors that are not numbers) is skipped
and counted. Sectors that cannot be the lap's (one not positive, or a sum more than 1% plus 0.1 s
from the lap time) are left out of the theoretical best: the lap counts without them.
A lap the source marked invalid (``valid: false``) counts only with ``include_invalid``; unknown
validity (``null``) always counts. A lap through the pit lane (``pit``: ``"in"``, ``"out"``,
``"in-out"``, GNSS laps on a circuit with pit lines) never counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from wrtfd.fleet.untrusted import number

__all__ = ["Board", "DriverRow", "lap_time", "leaderboard"]


@dataclass(frozen=True, slots=True)
class DriverRow:
    driver: str
    laps: int
    best_s: float
    best: Mapping[str, Any]
    #: The sum of the driver's best sector times (laps with as many sectors as the best lap).
    theoretical_s: float | None
    gap_s: float
    cars: tuple[str, ...]
    rigs: tuple[str, ...]


@dataclass(slots=True)
class Board:
    rows: list[DriverRow] = field(default_factory=list)
    #: The team's theoretical best: every sector's best time, whoever drove it.
    theoretical_s: float | None = None
    skipped: int = 0
    #: Laps left out because the source marked them invalid (0 with ``include_invalid``).
    invalid: int = 0
    #: Laps left out because they went through the pit lane (in-laps, out-laps).
    pit: int = 0


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def lap_time(record: Mapping[str, Any]) -> float | None:
    """The record's lap time when it can be one (a number, more than 0, less than a day)."""
    t = number(record.get("time_s"), 0.0, 86400.0)
    return t if t is not None and 0.0 < t < 86400.0 else None


def _lap(record: Mapping[str, Any]) -> tuple[float, tuple[float, ...]] | None:
    t = lap_time(record)
    raw = record.get("sectors_s")
    if t is None or not isinstance(raw, list):
        return None
    sectors: list[float] = []
    for value in raw:
        sector = number(value, 0.0, 86400.0)
        if sector is None:
            return None
        sectors.append(sector)
    if 0.0 in sectors or (sectors and abs(sum(sectors) - t) > 0.01 * t + 0.1):
        return t, ()  # not this lap's sectors: the lap counts without them
    return t, tuple(sectors)


def _same(a: str | None, b: str | None) -> bool:
    return b is None or (a is not None and a.casefold() == b.casefold())


def _best_sectors(laps: Iterable[tuple[float, ...]], n: int) -> float | None:
    best: list[float] | None = None
    for sectors in laps:
        if len(sectors) != n:
            continue
        best = list(sectors) if best is None else [min(x, y) for x, y in zip(best, sectors, strict=True)]
    return None if best is None or n == 0 else sum(best)


def leaderboard(
    records: Iterable[Mapping[str, Any]],
    *,
    track: str | None = None,
    car: str | None = None,
    driver: str | None = None,
    include_invalid: bool = False,
) -> Board:
    """Best lap per driver (a record without a driver counts as its rig's), fastest first, with
    the gap to the fastest and each driver's theoretical best; filters compare case-insensitively."""
    board = Board()
    per: dict[str, list[tuple[float, tuple[float, ...], Mapping[str, Any]]]] = {}
    for rec in records:
        lap = _lap(rec)
        if lap is None:
            board.skipped += 1
            continue
        if not (_same(_text(rec.get("track")), track) and _same(_text(rec.get("car")), car)):
            continue
        who = _text(rec.get("driver")) or f"({_text(rec.get('rig')) or '?'})"
        if not _same(who, driver):
            continue
        if rec.get("valid") is False and not include_invalid:
            board.invalid += 1
            continue
        if rec.get("pit") is not None:
            board.pit += 1
            continue
        per.setdefault(who, []).append((lap[0], lap[1], rec))
    rows = []
    for who, laps in per.items():
        best_t, best_sectors, best = min(laps, key=lambda x: x[0])
        n = len(best_sectors)
        rows.append(
            (
                who,
                len(laps),
                best_t,
                best,
                _best_sectors((s for _, s, _ in laps), n),
                tuple(sorted({c for _, _, r in laps if (c := _text(r.get("car")))})),
                tuple(sorted({g for _, _, r in laps if (g := _text(r.get("rig")))})),
            )
        )
    rows.sort(key=lambda r: (r[2], r[0]))
    lead = rows[0][2] if rows else 0.0
    board.rows = [DriverRow(w, n, t, b, th, t - lead, cars, rigs) for w, n, t, b, th, cars, rigs in rows]
    if rows:  # sectors as many as the fastest lap has
        n = len(min(per[rows[0][0]], key=lambda x: x[0])[1])
        board.theoretical_s = _best_sectors((s for laps in per.values() for _, s, _ in laps), n)
    return board
