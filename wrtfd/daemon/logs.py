"""Logging for a daemon whose stderr is usually the journal.

- One line per event: embedded newlines (and tracebacks) are folded into the line.
- Under systemd (``$JOURNAL_STREAM`` names our stderr) lines carry the syslog priority as a
  ``<N>`` prefix and no timestamp: journald adds both. Elsewhere they get a timestamp and level.
- Repeated events of one kind (drops, restarts) pass a :class:`RateLimiter` keyed by
  ``extra={"rate_key": ...}``: at most one line per interval, and the next line that passes says
  how many were suppressed. The lifecycle journal (:mod:`wrtfd.daemon.journal`) uses its own
  limiter with a small burst.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from typing import TextIO

__all__ = [
    "JournalFormatter",
    "RateLimitFilter",
    "RateLimiter",
    "TextFormatter",
    "configure_logging",
    "under_journal",
]

LOGGER_NAME = "wrtfd"

#: logging level -> syslog priority (sd-daemon(3) prefixes).
_PRIORITY = {logging.CRITICAL: 2, logging.ERROR: 3, logging.WARNING: 4, logging.INFO: 6, logging.DEBUG: 7}


def _priority(levelno: int) -> int:
    for level in (logging.CRITICAL, logging.ERROR, logging.WARNING, logging.INFO):
        if levelno >= level:
            return _PRIORITY[level]
    return 7


def _one_line(text: str) -> str:
    return text.replace("\r", "").replace("\n", " \\n ")


class JournalFormatter(logging.Formatter):
    """``<6>wrtfd: message``: journald parses the priority and stamps the time."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.exc_info:
            text += " | " + self.formatException(record.exc_info)
        return f"<{_priority(record.levelno)}>{record.name}: {_one_line(text)}"


class TextFormatter(logging.Formatter):
    """``2026-01-01T12:00:00 INFO wrtfd: message`` for terminals and files."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(record.created))
        text = record.getMessage()
        if record.exc_info:
            text += " | " + self.formatException(record.exc_info)
        return f"{stamp} {record.levelname} {record.name}: {_one_line(text)}"


class RateLimiter:
    """At most ``burst`` events per key in any ``interval_s``; counts what it held back (pure:
    the clock is given). ``burst`` is 1 for repeated problems (drops, restarts) and a few for the
    lifecycle journal, whose events come in small clusters (a session ends, the next starts)."""

    __slots__ = ("_burst", "_interval_s", "_passed", "_suppressed")

    def __init__(self, interval_s: float, burst: int = 1) -> None:
        self._interval_s = interval_s
        self._burst = max(1, burst)
        self._passed: dict[str, list[float]] = {}  # per key, the times of the last ``burst`` passed
        self._suppressed: dict[str, int] = {}

    def allow(self, key: str, now_s: float) -> tuple[bool, int]:
        """Whether an event with ``key`` at ``now_s`` may pass, and how many were held back before it."""
        burst = self._burst
        passed = self._passed.setdefault(key, [])
        if len(passed) >= burst and now_s - passed[-burst] < self._interval_s:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return False, 0
        passed.append(now_s)
        del passed[:-burst]
        return True, self._suppressed.pop(key, 0)

    def take_suppressed(self) -> dict[str, int]:
        """What was held back and not yet reported by a later line, per key (then forgotten)."""
        out, self._suppressed = self._suppressed, {}
        return out


class RateLimitFilter(logging.Filter):
    """Applies a :class:`RateLimiter` to records that carry a ``rate_key``."""

    def __init__(self, interval_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.limiter = RateLimiter(interval_s)
        self._clock = clock

    def filter(self, record: logging.LogRecord) -> bool:
        key = getattr(record, "rate_key", None)
        if key is None:
            return True
        allowed, suppressed = self.limiter.allow(str(key), self._clock())
        if allowed and suppressed:
            record.msg = f"{record.msg} ({suppressed} similar messages suppressed)"
        return allowed


def under_journal(stream: TextIO, env: Mapping[str, str]) -> bool:
    """True when ``stream`` is the journal stream systemd gave us (``$JOURNAL_STREAM`` = dev:inode)."""
    value = env.get("JOURNAL_STREAM", "")
    if not value:
        return False
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError):
        return False
    return value == f"{st.st_dev}:{st.st_ino}"


def configure_logging(
    *,
    level: str = "info",
    fmt: str = "auto",
    repeat_interval_s: float = 10.0,
    stream: TextIO | None = None,
    env: Mapping[str, str] | None = None,
) -> logging.Logger:
    """Set up the ``wrtfd`` logger once for the daemon; returns it."""
    out = sys.stderr if stream is None else stream
    environ = os.environ if env is None else env
    journal = fmt == "journal" or (fmt == "auto" and under_journal(out, environ))
    handler = logging.StreamHandler(out)
    handler.setFormatter(JournalFormatter() if journal else TextFormatter())
    handler.addFilter(RateLimitFilter(repeat_interval_s))
    logger = logging.getLogger(LOGGER_NAME)
    for old in list(logger.handlers):
        logger.removeHandler(old)
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False
    return logger
