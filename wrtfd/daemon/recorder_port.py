"""Build the recorder's live driver from the config (policy, source specs, debug wedge hook).

The wedge hook exists to test the watchdog against a *real* stall: with
``WRTFD_DEBUG_WEDGE_FIFO=/path/to/fifo`` the writer thread opens that FIFO for writing after each
batch. While some process holds the FIFO open for reading, that ``open()`` returns at once; when
nobody does, it blocks in the kernel exactly like a write to a hung disk, the recorder's pending
write ages past ``daemon.stall_after_s`` and the daemon withholds ``WATCHDOG=1``. Debug only:
never set it in production.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wrtfd.daemon.config import LoadedConfig
from wrtfd.daemon.pipeline import BuiltSource
from wrtfd.errors import ConfigError
from wrtfd.recorder.observe import ObserverHub

if TYPE_CHECKING:
    from wrtfd.recorder import LiveRecorder
    from wrtfd.recorder.derived import DerivedChannels
    from wrtfd.recorder.recorder import Recorder

__all__ = ["WEDGE_ENV", "build_recorder", "recorder_policy", "source_specs", "wedge_hook"]

log = logging.getLogger("wrtfd")

WEDGE_ENV = "WRTFD_DEBUG_WEDGE_FIFO"


def wedge_hook(fifo: str) -> Callable[[Recorder, bool], None]:
    """After each batch: open ``fifo`` for writing (blocks while it has no reader), then close it."""

    def on_batch(_recorder: Recorder, _synced: bool) -> None:
        fd = os.open(fifo, os.O_WRONLY | os.O_CLOEXEC)
        os.close(fd)

    return on_batch


#: Source kinds whose samples carry the time the daemon read them (no kernel receive time)
#: and whose own clocks do not stop (GNSS time, a CAN adapter's counter). Not ``dds``: its
#: stream is read on arrival too, but a paused simulation's clock stops, and a pause must
#: still show as the time it lasted (docs/timing.md, "A stalled daemon").
STAMPED_ON_READ = frozenset({"serial"})


def source_specs(built: Sequence[Any]) -> list[Any]:
    """The recorder's :class:`~wrtfd.recorder.SourceSpec` of each built source (config order)."""
    from wrtfd.decoders.base import awaited_info
    from wrtfd.recorder import SourceSpec

    return [
        SourceSpec(
            name=b.source.name,
            definition=b.definition,
            drives_frames=b.config.drives_frames,
            stale_after_s=b.config.stale_after_s,
            stamped_on_read=b.config.kind in STAMPED_ON_READ,
            awaits_info=awaited_info(getattr(b.source, "decoder", None)),
        )
        for b in built
    ]


def recorder_policy(loaded: LoadedConfig, output_dir: Path) -> Any:
    """The :class:`~wrtfd.recorder.RecorderPolicy` of the config's ``[recorder]`` section
    (what the daemon records with, and what ``wrtfd import --config`` replays with)."""
    from wrtfd.recorder import RecorderPolicy
    from wrtfd.recorder.files import DEFAULT_TEMPLATE

    rc = loaded.config.recorder
    return RecorderPolicy(
        output_dir=output_dir,
        rate_hz=rc.rate_hz,
        file_template=rc.file_template or DEFAULT_TEMPLATE,
        session_idle_s=rc.session_idle_s,
        info_wait_s=rc.info_wait_s,
        max_session_s=rc.max_session_s,
        rotate_bytes=rc.rotate_bytes,
        rotate_s=rc.rotate_s,
        rotate_sessions=rc.rotate_sessions,
        fsync_interval_s=rc.fsync_interval_s,
        jitter_s=rc.jitter_s,
        metadata=dict(rc.metadata),
    )


def build_recorder(
    loaded: LoadedConfig,
    built: Sequence[BuiltSource],
    output_dir: Path,
    env: Mapping[str, str] | None = None,
    *,
    derived: Sequence[DerivedChannels] = (),
    metadata: Mapping[str, str] | None = None,
    hub: ObserverHub | None = None,
    group: str = "",
    wall_offset_ns: int | None = None,
) -> LiveRecorder:
    """The :class:`wrtfd.recorder.LiveRecorder` for ``built`` sources (nothing touches disk yet).

    ``derived`` are plug-ins such as lap channels; ``metadata`` is added to the files' own;
    ``wall_offset_ns``: wall = monotonic + this (the daemon's one offset, its tap's too).
    """
    from wrtfd.recorder import LiveRecorder
    from wrtfd.recorder.trigger import TriggerPolicy

    cfg = loaded.config
    rc = cfg.recorder
    specs = source_specs(built)
    if not any(s.drives_frames for s in specs):
        raise ConfigError(f"{loaded.origin}: sources: at least one source needs drives_frames = true")
    policy = recorder_policy(loaded, output_dir)

    gc = cfg.group_config(group)
    trigger = None
    if gc.record == "triggered":
        trigger = TriggerPolicy(
            pre_s=gc.pre_trigger_s,
            post_s=gc.post_trigger_s,
            condition=gc.trigger,
            on_marker=gc.trigger_on_marker,
            on_session=gc.trigger_on_session,
            max_buffer_bytes=gc.pre_trigger_max_bytes,
        )
    environ = os.environ if env is None else env
    fifo = environ.get(WEDGE_ENV)
    if fifo:
        log.warning("%s is set: the writer thread opens %s after each batch (debug only)", WEDGE_ENV, fifo)
    try:
        return LiveRecorder(
            specs,
            policy,
            derived,
            metadata=metadata,
            intake_capacity=rc.queue_size,
            tick_s=rc.engine_tick_s,
            stall_after_s=cfg.daemon.stall_after_s,
            # leave a margin inside the daemon's own deadline for the final close
            stop_timeout_s=max(0.1, cfg.daemon.shutdown_timeout_s * 0.9),
            on_batch=wedge_hook(fifo) if fifo else None,
            hub=hub,
            group=group,
            source_clock=rc.clock == "source",
            trigger=trigger,
            wall_offset_ns=wall_offset_ns,
        )
    except ConfigError as exc:
        where = (
            f"groups.{group}: "
            if trigger is not None and str(exc).startswith(("trigger", "pre_", "post_", "a triggered"))
            else ""
        )
        raise ConfigError(f"{loaded.origin}: {where}{exc}") from None
