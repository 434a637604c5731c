"""The dates of a session's frames, for the formats that date them (.ld, .mf4, .mcap, .vbo, .gpx).

A session's times come from its header: a damaged header can put them anywhere in 64 bits, which
no datetime (year 9999), no MDF header and no MCAP log time (ns in a uint64) holds. Such a
session is refused with one line rather than exported under a made-up date.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np

from wrtfd.errors import ExportError

__all__ = ["MAX_DATED_US", "check_dated", "session_start"]

#: The latest time an export takes: ns in an int64 (2262-04-11; numpy's and pandas' limit too).
MAX_DATED_US = (2**63 - 1) // 1000


def check_dated(path: Path, session: int, times_us: np.ndarray) -> None:
    """Every one of ``times_us`` (since 1970, ascending) can be dated.

    :raises ExportError: one before 1970 or after :data:`MAX_DATED_US`.
    """
    if len(times_us):
        _check_span(path, session, int(times_us[0]), int(times_us[-1]))


def session_start(path: Path, session: int, start_us: int, *, tz: dt.tzinfo | None = None) -> dt.datetime:
    """``start_us`` (since 1970) as a datetime (``tz`` None: local time, as MoTeC shows it).

    :raises ExportError: before 1970 or after :data:`MAX_DATED_US`.
    """
    _check_span(path, session, start_us, start_us)
    return dt.datetime.fromtimestamp(start_us / 1e6, tz=tz)


def _check_span(path: Path, session: int, first_us: int, last_us: int) -> None:
    if not (first_us >= 0 and last_us <= MAX_DATED_US):
        raise ExportError(
            f"{path}: session {session} runs from {first_us} to {last_us} us since 1970,"
            " not dates an export can hold (a damaged session header?)"
        )
