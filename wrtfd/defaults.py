"""Default values of the tunables that more than one layer (or the docs) quote.

Stdlib only, no imports from the package: the pure layers (scheduler, decoders), the I/O layers
(sources, recorder), the importers (``wrtfd import`` without a config records as the daemon's
built-in default would) and the daemon's config models all read their defaults from here, so a
default lives in one place. What they mean is in ``docs/timing.md``; ``tests/test_docs.py``
checks that the numbers the docs state equal these (and the config models' own defaults).
"""

from __future__ import annotations

__all__ = [
    "ARRIVAL_BUNCH_S",
    "BATCH_S",
    "CLOCK_DRIFT_WINDOW_S",
    "CLOCK_OFFSET_STEP_S",
    "ENGINE_CLOSE_S",
    "ENGINE_TICK_S",
    "FLEET_STOP_UPLOAD_S",
    "FSYNC_INTERVAL_S",
    "INFO_WAIT_S",
    "RAW_TAP_MAX_BYTES",
    "RECORDER_RATE_HZ",
    "SESSION_IDLE_S",
    "SETTLE_S",
    "SYNC_EARLY_S",
    "TICK_JITTER_S",
    "UDP_MAX_DATAGRAM_BYTES",
    "UDP_READ_INTERVAL_S",
]

#: How long a tick stays open after its end for late or bunched samples (``jitter_s``).
TICK_JITTER_S = 0.1
#: The arrival delay an arrival-stamped source may build up before a gap is a pause (``bunch_s``).
ARRIVAL_BUNCH_S = 0.035
#: A source clock's offset moves only in steps of at least this much.
CLOCK_OFFSET_STEP_S = 0.002
#: A source clock's offset follows the least delay of the last one to two of these windows.
CLOCK_DRIFT_WINDOW_S = 5.0
#: Batched reads: how often a steady UDP feed's socket is read (seconds; 0: on arrival).
UDP_READ_INTERVAL_S = 0.2
#: Frames per second of a recording (``recorder.rate_hz``).
RECORDER_RATE_HZ = 60
#: A pause in every driving source longer than this ends the session (``recorder.session_idle_s``).
SESSION_IDLE_S = 30.0
#: Written data is fsynced at least this often (``recorder.fsync_interval_s``).
FSYNC_INTERVAL_S = 1.0
#: A UDP source drops larger datagrams as ``too_large`` (``max_datagram_bytes``).
UDP_MAX_DATAGRAM_BYTES = 2048
#: All raw tap files together stay under this many bytes (``recorder.raw_tap_max_bytes``, 1 GiB).
RAW_TAP_MAX_BYTES = 1 << 30
#: At stop, the fleet finishes queued uploads for at most this long (``fleet.stop_upload_s``):
#: within the unit's ``TimeoutStopSec=10s`` together with the recorder's 2 s.
FLEET_STOP_UPLOAD_S = 5.0

# The durability bound's parts (docs/durability.md; wrtfd.recorder.durability computes the bound).
#: How often the live engine hands frames to the writer thread.
BATCH_S = 0.1
#: How long a session's first samples are watched before its tick grid is fixed.
SETTLE_S = 0.5
#: How long (session time) a session's header waits for the session info (the track) that a
#: source promises (``recorder.info_wait_s``): its frames are held meanwhile.
INFO_WAIT_S = 3.0
#: The live engine's step grid, and its longest pause while ticks, a session or data wait.
ENGINE_TICK_S = 0.1
ENGINE_CLOSE_S = 0.1
#: The live driver wakes to fsync this long before ``fsync_interval_s`` runs out (the hop to
#: the writer thread and a busy event loop), so two fsyncs are never further apart than it.
SYNC_EARLY_S = 0.05

#: Sane times (1980 to 2200, microseconds since 1970): a capture's packets stamped outside are
#: dropped (``bad_timestamp``), and ``wrtfd import --start-timestamp`` takes none from 2200 on (a
#: damaged or mistyped time would place a recording where no file can be named).
SANE_TIME_US = (315_532_800 * 10**6, 7_258_118_400 * 10**6)
