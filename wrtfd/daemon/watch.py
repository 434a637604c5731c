"""Turn what the daemon polls (sources' last sample times, free disk) into lifecycle events.

The recorder publishes its own events (sessions, files); the state of the sources and of the
disk is only known to the daemon's heartbeat, which checks it once a beat. :class:`LifecycleWatch`
remembers the previous state and publishes a :class:`SourceStateChanged` (``first_sample``,
``silent``, ``back``) or a :class:`DiskSpaceChanged` on the hub when it changes, for the journal
and any other observer. Pure apart from the hub: every time is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wrtfd.recorder.observe import DiskSpaceChanged, ObserverHub, SourceStateChanged

__all__ = ["LifecycleWatch"]


@dataclass(slots=True)
class _SourceState:
    silent_after_ns: int
    seen: bool = False
    #: The last sample time when it was found silent (None: not silent).
    silent_at_rx_ns: int | None = None


class LifecycleWatch:
    """Publishes source and disk state changes; ``silent_after_s`` per source name."""

    def __init__(self, hub: ObserverHub, silent_after_s: Mapping[str, float]) -> None:
        self.hub = hub
        self._sources = {name: _SourceState(round(s * 1e9)) for name, s in silent_after_s.items()}
        self._disk_low = False

    def check_sources(self, last_rx_ns: Mapping[str, int | None], now_ns: int, wall_us: int) -> None:
        """``last_rx_ns``: each source's last sample time (monotonic; None: never received)."""
        for name, rx in last_rx_ns.items():
            st = self._sources.get(name)
            if st is None or rx is None:
                continue  # a source that never delivered is not "silent": it never started
            if not st.seen:
                st.seen = True
                self.hub.publish(SourceStateChanged(name, "first_sample", wall_us))
            age_ns = now_ns - rx
            if st.silent_at_rx_ns is None:
                if age_ns > st.silent_after_ns:
                    st.silent_at_rx_ns = rx
                    self.hub.publish(SourceStateChanged(name, "silent", wall_us, round(age_ns / 1e9, 1)))
            elif rx != st.silent_at_rx_ns:
                gap_s = (rx - st.silent_at_rx_ns) / 1e9
                st.silent_at_rx_ns = None
                self.hub.publish(SourceStateChanged(name, "back", wall_us, round(gap_s, 1)))

    def check_disk(self, disk: Mapping[str, Any], wall_us: int) -> None:
        """``disk``: the daemon's disk snapshot (``free_bytes``, ``min_free_bytes``, ``path``)."""
        free = disk.get("free_bytes")
        if free is None:
            return
        minimum = int(disk.get("min_free_bytes", 0))
        low = free < minimum  # the same test as /healthz
        if low != self._disk_low:
            self._disk_low = low
            self.hub.publish(DiskSpaceChanged(str(disk.get("path", "")), low, int(free), minimum, wall_us))
