"""``wrtfd import --config DAEMON.toml``: the daemon's sources and groups, as an import's plan.

The daemon's own wiring builds every source (decoder with its options, definition after
``mapping``, lap-channel plug-in for a ``track``) without binding a socket or opening a device,
and its ``[recorder]`` section gives the policy. The result is handed to the importers as plain
data (:class:`~wrtfd.importers.plan.ImportPlan`): they never import the daemon. Each recording
group holds *all* its sources, as the daemon records it: a source the imported file does not
feed is never delivered (its channels stay NaN), so the frame layout is the live file's.
"""

from __future__ import annotations

from pathlib import Path

from wrtfd.daemon.config import (
    AssettoCorsaSourceConfig,
    LoadedConfig,
    SerialSourceConfig,
    UdpSourceConfig,
    load_config,
)
from wrtfd.daemon.pipeline import BuiltSource
from wrtfd.daemon.recorder_port import recorder_policy, source_specs
from wrtfd.daemon.wiring import build_sources, lap_metadata
from wrtfd.importers.plan import ImportPlan, PlanSource
from wrtfd.importers.replay import GroupPlan
from wrtfd.recorder import SourceSpec

__all__ = ["build_import_plan", "plan_of"]


def build_import_plan(path: Path) -> ImportPlan:
    """The plan of the config file at ``path``.

    :raises ConfigError: unreadable or invalid, naming the file and key.
    """
    return plan_of(load_config(path))


def plan_of(loaded: LoadedConfig) -> ImportPlan:
    """The plan of a validated config (see the module docstring)."""
    built = build_sources(loaded)
    policy = recorder_policy(loaded, loaded.output_dir())
    members: dict[str, list[BuiltSource]] = {}
    for b in built:
        members.setdefault(b.config.group_name, []).append(b)
    groups = []
    for group, group_built in members.items():
        derived = [d for b in group_built if (d := b.derived) is not None]
        metadata = lap_metadata(loaded, derived)
        groups.append(GroupPlan(group, source_specs(group_built), policy, derived, metadata))
    specs: dict[str, SourceSpec] = {spec.name: spec for g in groups for spec in g.sources}
    return ImportPlan(
        loaded.origin, tuple(_plan_source(b, specs[b.source.name]) for b in built), tuple(groups), policy
    )


def _plan_source(b: BuiltSource, spec: SourceSpec) -> PlanSource:
    from wrtfd.decoders import registry

    src, source = b.config, b.source
    kind: str = src.kind
    host, port, allows, max_bytes, lines, ubx = "0.0.0.0", None, None, 65507, None, False
    if isinstance(src, UdpSourceConfig):
        allow = getattr(source, "allow", None)
        host, max_bytes = src.host, src.max_datagram_bytes
        port = src.port if src.port is not None else registry.get(src.protocol).default_port
        allows = None if allow is None else allow.allows
    elif isinstance(src, AssettoCorsaSourceConfig):  # its datagrams come from the game's address
        kind, host, port = "peer", src.host, src.port
        max_bytes = getattr(source, "max_datagram_bytes", max_bytes)
    elif isinstance(src, SerialSourceConfig):
        lines = _line_framing(source)
        ubx = src.protocol == "ubx"
    return PlanSource(
        source.name,
        src.group_name,
        kind,
        src.protocol,
        getattr(source, "decoder", None),
        spec,
        b.transform,
        host=host,
        port=port,
        allows=allows,
        max_datagram_bytes=max_bytes,
        lines=lines,
        ubx=ubx,
    )


def _line_framing(source: object) -> tuple[bytes, int] | None:
    """A serial line source's ``(delimiters, max_line_bytes)``; None for others (ELM327)."""
    from wrtfd.sources.serial import SerialLineSource

    if isinstance(source, SerialLineSource):
        return source.feed.delimiters, source.feed.max_line_bytes
    return None
