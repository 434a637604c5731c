"""The raw tap of a config (``raw_tap``, ``recorder.raw_tap``): which sources, which interfaces.

:func:`build_tap` makes the :class:`~wrtfd.recorder.tap.RawTap` of the tapped sources (None when
no source is tapped), hands each of them its sink and makes the tap an observer of the
recorder's file events, so tap files follow WRTF files. Nothing is opened yet: the daemon starts
the tap's thread before the sources run and closes it after the recorder has closed its files.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from wrtfd.daemon.config import DdsSourceConfig, LoadedConfig, SerialSourceConfig
from wrtfd.daemon.pipeline import BuiltSource
from wrtfd.recorder.observe import ObserverHub

if TYPE_CHECKING:
    from wrtfd.recorder.tap import RawTap, TapInterface

__all__ = ["build_tap", "tap_interfaces"]


def tap_interfaces(loaded: LoadedConfig, built: Sequence[BuiltSource]) -> list[TapInterface]:
    """The tap's interface of every tapped source: UDP datagrams with their addresses, or the
    raw bytes of a serial port or a TCP stream; the description says where and what."""
    out = []
    for b in built:
        src = b.config
        if not loaded.tapped(src):
            continue
        # the tap's pcapng writer (dpkt) is loaded only by a daemon that taps a source
        from wrtfd.recorder.tap import TapInterface

        kind = "raw" if isinstance(src, SerialSourceConfig | DdsSourceConfig) else "udp"
        description = f"wrtfd source {b.source.name}: {b.address}, protocol {src.protocol}"
        out.append(TapInterface(b.source.name, src.group_name, kind, description))
    return out


def build_tap(
    loaded: LoadedConfig,
    built: Sequence[BuiltSource],
    output_dir: Path,
    hub: ObserverHub,
    *,
    wall_offset_ns: int | None = None,
) -> RawTap | None:
    """The tap, its sinks set on the tapped sources and its observer on ``hub``; None: no tap.
    ``wall_offset_ns``: wall = monotonic + this, the recordings' offset (None: its own)."""
    interfaces = tap_interfaces(loaded, built)
    if not interfaces:
        return None
    from wrtfd.recorder.tap import RawTap

    rc = loaded.config.recorder
    tap = RawTap(
        interfaces,
        output_dir=output_dir,
        max_bytes=rc.raw_tap_max_bytes,
        fsync_interval_s=rc.fsync_interval_s,
        wall_offset_ns=wall_offset_ns,
    )
    tapped = {iface.source for iface in interfaces}
    for b in built:
        if b.source.name in tapped:
            b.source.raw_sink = tap.sink_for(b.source.name)  # type: ignore[attr-defined]
    hub.add(tap, frames=False)  # file events only: no frame copies for the tap
    return tap
