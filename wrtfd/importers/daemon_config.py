"""A daemon config's sources and recording groups, built for an import (``--config``).

The daemon's own wiring builds every source (decoder with its options, definition after
``mapping``, lap-channel plug-in for a ``track``) without binding a socket or opening a device,
and its ``[recorder]`` section gives the policy. Each recording group becomes a
:class:`~wrtfd.importers.replay.GroupPlan` with *all* its sources, as the daemon records it:
a source the imported file does not feed is simply never delivered (its channels stay NaN), so
the frame layout is the live file's.

This module is the importers' one door into :mod:`wrtfd.daemon` (imported lazily).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from wrtfd.importers.replay import GroupPlan, GroupReplay

__all__ = ["ConfigGroups", "load_daemon_config"]


def load_daemon_config(path: Path) -> Any:
    """The validated config (:class:`~wrtfd.daemon.config.LoadedConfig`).

    :raises ConfigError: unreadable or invalid, naming the file and key.
    """
    from wrtfd.daemon.config import load_config

    return load_config(path)


class ConfigGroups:
    """Every source of ``loaded`` (``built``: source name -> BuiltSource) and its groups in
    ``groups``; ``rate_hz`` overrides the config's frame rate."""

    def __init__(
        self,
        loaded: Any,
        groups: GroupReplay,
        *,
        staging: Path,
        rate_hz: int | None,
        metadata: Mapping[str, str],
    ) -> None:
        from wrtfd.daemon.recorder_port import recorder_policy
        from wrtfd.daemon.wiring import build_sources

        self.loaded = loaded
        self.groups = groups
        policy = recorder_policy(loaded, staging)
        self.policy = dataclasses.replace(policy, rate_hz=rate_hz) if rate_hz else policy
        self.metadata = dict(metadata)
        built = build_sources(loaded)
        self.built: dict[str, Any] = {b.source.name: b for b in built}
        members: dict[str, list[Any]] = {}
        for b in built:
            members.setdefault(b.config.group_name, []).append(b)
        for group, group_built in members.items():
            self.add_group(group, group_built)

    def add_group(self, group: str, group_built: list[Any]) -> None:
        """A recording group of built sources (lap channels and ``Track`` as the daemon adds them)."""
        from wrtfd.daemon.recorder_port import source_specs

        derived = [b.laps for b in group_built if b.laps is not None]
        metadata = dict(self.metadata)
        if derived and "Track" not in self.loaded.config.recorder.metadata:
            metadata["Track"] = derived[0].track.name
        self.groups.add(GroupPlan(group, source_specs(group_built), self.policy, derived, metadata))

    def add_source(self, data: Mapping[str, Any]) -> Any:
        """Build one more source from config-shaped ``data`` into a group of its own (an import
        that found a game the config does not name); returns its BuiltSource."""
        from wrtfd.daemon.config import UdpSourceConfig
        from wrtfd.daemon.wiring import build_source

        src = UdpSourceConfig.model_validate(dict(data))
        built = build_source(self.loaded, len(self.built), src)
        self.built[built.source.name] = built
        self.add_group(src.group_name, [built])
        return built

    def of_protocol(self, *protocols: str) -> list[Any]:
        """The built sources speaking one of ``protocols``, in config order."""
        return [b for b in self.built.values() if b.config.protocol in protocols]
