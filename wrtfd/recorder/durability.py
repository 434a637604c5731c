"""The durability bound: how much of the newest data a crash or a power cut can lose.

This module is the one home of the defaults the bound depends on; the recorder's policy, the
live driver and the daemon's config take them from here, and ``docs/durability.md`` (which
states the bound) is checked against :func:`loss_bound` by a test.

A sample received at time t reaches the recorder at once, or at its source's next batched read
(UDP, ``read_interval_s``); its tick closes ``1/rate_hz + jitter_s`` after t at the latest (a
tick stays open for late samples) and is closed by the engine's next step, at most ``step_s``
later (``max(tick_s, close_s, read_interval_s)``: the engine steps after every batched read and
every ``close_s`` while a session is open); the frame is handed to the writer thread within
``batch_s`` and written (``write()``: it survives a crash of the process) at once. Written
data is fsynced within ``fsync_interval_s``: the live driver wakes for it on a timer of its
own, ``SYNC_EARLY_S`` early, so the gap between two fsyncs never exceeds it. So:

* **crash** (``kill -9``, an exception): at most ``jitter_s + 1/rate_hz + step_s + batch_s``
  of the newest data;
* **power cut**: at most that plus ``fsync_interval_s`` (and the time one fsync takes on the
  device);
* in the first ``settle_s`` of a session (its tick grid is fixed only then) add ``settle_s``.

Nothing older is ever at risk: files are created durable (header, metadata, directory entry),
every frame carries the frame check so nothing unverified is read after a power cut, a failed
write is truncated back, and a session that ends on idle closes its file (fsynced).
"""

from __future__ import annotations

from dataclasses import dataclass

from wrtfd import defaults

__all__ = [
    "BATCH_S",
    "CLOSE_S",
    "FSYNC_INTERVAL_S",
    "JITTER_S",
    "RATE_HZ",
    "READ_INTERVAL_S",
    "SETTLE_S",
    "SYNC_EARLY_S",
    "TICK_S",
    "LossBound",
    "default_loss_bound",
    "loss_bound",
]

# The defaults live in wrtfd.defaults (one home for every layer's tunables); their names here.
RATE_HZ = defaults.RECORDER_RATE_HZ
JITTER_S = defaults.TICK_JITTER_S
BATCH_S = defaults.BATCH_S
FSYNC_INTERVAL_S = defaults.FSYNC_INTERVAL_S
SETTLE_S = defaults.SETTLE_S
TICK_S = defaults.ENGINE_TICK_S
CLOSE_S = defaults.ENGINE_CLOSE_S
READ_INTERVAL_S = defaults.UDP_READ_INTERVAL_S
SYNC_EARLY_S = defaults.SYNC_EARLY_S


@dataclass(frozen=True, slots=True)
class LossBound:
    """Seconds of the newest data a crash or a power cut can lose (see module docstring)."""

    #: ``kill -9`` or a crash of wrtfd: frames not yet handed to ``write()``.
    crash_s: float
    #: A power cut: also what was written but not yet fsynced (plus one fsync's duration).
    power_cut_s: float
    #: Added in the first moments of a session (``settle_s``).
    session_start_s: float
    #: The parts: name -> seconds.
    parts: tuple[tuple[str, float], ...]


def loss_bound(
    *,
    rate_hz: int = RATE_HZ,
    jitter_s: float = JITTER_S,
    batch_s: float = BATCH_S,
    fsync_interval_s: float = FSYNC_INTERVAL_S,
    settle_s: float = SETTLE_S,
    tick_s: float = TICK_S,
    close_s: float = CLOSE_S,
    read_interval_s: float = READ_INTERVAL_S,
) -> LossBound:
    """The bound for a recorder configured with these values (defaults: the built-in ones)."""
    step_s = max(tick_s, close_s, read_interval_s)
    parts = (
        ("jitter_s", jitter_s),
        ("1/rate_hz", 1.0 / rate_hz),
        ("step_s", step_s),
        ("batch_s", batch_s),
    )
    crash = sum(v for _, v in parts)
    return LossBound(
        crash_s=crash,
        power_cut_s=crash + fsync_interval_s,
        session_start_s=settle_s,
        parts=(*parts, ("fsync_interval_s", fsync_interval_s)),
    )


def default_loss_bound() -> LossBound:
    """The bound with every default (what ``docs/durability.md`` quotes)."""
    return loss_bound()
