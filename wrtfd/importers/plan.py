"""What an import replays into: sources, their decoders and their recording groups, as plain data.

An import records a file the way the daemon would have recorded its input. What the daemon
would have done is an :class:`ImportPlan`: every source (its decoder built with its options,
``mapping`` applied, where it listens or which game it talks to, how serial bytes are framed)
and every recording group (the sources' definitions, lap-channel plug-ins, the ``[recorder]``
policy). The importers only read a plan; they never import the daemon:

* ``--config DAEMON.toml``: the daemon builds the plan from its own config models and wiring
  (:mod:`wrtfd.daemon.import_plan`, loaded by ``wrtfd import`` only then);
* without a config: :func:`default_plan` builds the built-in default here (every game on its
  usual port, each game its own group: the routing of
  :func:`wrtfd.decoders.registry.usual_udp_ports`, the recorder defaults of
  :mod:`wrtfd.defaults`), so a core install (no pydantic, no anyio) imports a capture.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wrtfd.decoders import registry
from wrtfd.decoders.base import Decoder, Sample, awaited_info
from wrtfd.defaults import FSYNC_INTERVAL_S, RECORDER_RATE_HZ, SESSION_IDLE_S, UDP_MAX_DATAGRAM_BYTES
from wrtfd.errors import ConfigError
from wrtfd.importers.replay import GroupPlan, GroupReplay
from wrtfd.recorder import RecorderPolicy, SourceSpec

__all__ = [
    "BUILT_IN_DEFAULT",
    "PORT_OPTION",
    "ImportPlan",
    "PlanSource",
    "add_groups",
    "default_plan",
    "default_policy",
    "udp_source",
]

#: The origin of a plan built without a config file.
BUILT_IN_DEFAULT = "built-in default"
#: ... and of one built from ``--protocol`` options.
PORT_OPTION = "--protocol"


@dataclass(frozen=True, slots=True)
class PlanSource:
    """One source as an import replays it: what its live source does with its input, minus I/O.

    ``kind``: ``udp`` (listens on ``host:port``), ``peer`` (talks to the game at ``host:port``:
    its datagrams come *from* there), else the config's kind (``serial``, ``dds``, ``acc``).
    ``decoder``: None for a source without one (``dds``: its topic map decodes). ``allows``: the
    sender allowlist (``allow_from``; None: anyone). ``lines``: a serial line source's framing
    ``(delimiters, max_line_bytes)``, None for sources whose bytes are not lines. ``ubx``: a
    u-blox source, whose bytes are UBX frames (its decoder is a ``UbxDecoder``).
    """

    name: str
    group: str
    kind: str
    protocol: str
    decoder: Decoder | None
    spec: SourceSpec
    transform: Callable[[Sample], Sample] | None = None
    host: str = "0.0.0.0"
    port: int | None = None
    allows: Callable[[str], bool] | None = None
    max_datagram_bytes: int = UDP_MAX_DATAGRAM_BYTES
    lines: tuple[bytes, int] | None = None
    ubx: bool = False


@dataclass(frozen=True, slots=True)
class ImportPlan:
    """Sources (config order) and recording groups; ``policy`` is the config's recorder policy
    (its ``output_dir`` is replaced by the import's). ``origin``: the config file, or
    :data:`BUILT_IN_DEFAULT`."""

    origin: str
    sources: tuple[PlanSource, ...]
    groups: tuple[GroupPlan, ...]
    policy: RecorderPolicy
    notes: tuple[str, ...] = field(default=())

    @property
    def is_default(self) -> bool:
        return self.origin == BUILT_IN_DEFAULT

    @property
    def by_content(self) -> bool:
        """Ports no source listens on are recognised by content: the built-in default, with or
        without ``--protocol PORT=NAME`` (which names some ports, not all); never a config's."""
        return self.origin in (BUILT_IN_DEFAULT, PORT_OPTION)

    def of_protocol(self, *protocols: str) -> list[PlanSource]:
        """The sources speaking one of ``protocols``, in config order."""
        return [s for s in self.sources if s.protocol in protocols]


def default_policy(output_dir: Path) -> RecorderPolicy:
    """The recorder policy of a config whose ``[recorder]`` section sets nothing."""
    return RecorderPolicy(
        output_dir=output_dir,
        rate_hz=RECORDER_RATE_HZ,
        session_idle_s=SESSION_IDLE_S,
        fsync_interval_s=FSYNC_INTERVAL_S,
    )


def udp_source(name: str, protocol: str, port: int, *, group: str | None = None) -> PlanSource:
    """A UDP source of ``protocol`` on ``port`` with no options, as the built-in default has.

    :raises ConfigError: an unknown protocol, or one without a fixed frame definition.
    """
    decoder = registry.make_decoder(protocol)
    definition = getattr(decoder, "definition", None)
    if not isinstance(definition, Mapping):
        raise ConfigError(f"protocol {protocol!r} needs a WRTF definition file: give it in a --config")
    spec = SourceSpec(
        name=name, definition=dict(definition), drives_frames=True, awaits_info=awaited_info(decoder)
    )
    return PlanSource(name, group or name, "udp", protocol, decoder, spec, port=port)


def default_plan(every: str | None = None, ports: Mapping[int, str] | None = None) -> ImportPlan:
    """The built-in default, or ``--protocol NAME`` (every datagram is NAME) or ``--protocol
    PORT=NAME`` (the game on that port, instead of on its usual one).

    :raises ConfigError: an unknown protocol.
    """
    ports = dict(ports or {})
    routes: list[tuple[str, str, int]] = []  # (source name, protocol, port)
    if every is not None:
        routes.append((every, every, registry.get(every).default_port or 1))
    else:
        named = set(ports.values())  # the game is on the port given, not on its usual one
        for name, port in registry.usual_udp_ports(registry.all_protocols()):
            if port not in ports and name not in named:
                routes.append((name, name, port))
        for port, protocol in sorted(ports.items()):
            registry.get(protocol)  # an unknown name fails here, with the known ones
            taken = {r[0] for r in routes}
            routes.append((protocol if protocol not in taken else f"{protocol}_{port}", protocol, port))
    sources = tuple(udp_source(name, protocol, port) for name, protocol, port in routes)
    policy = default_policy(Path("recordings"))
    groups = tuple(GroupPlan(s.group, [s.spec], policy) for s in sources)
    origin = PORT_OPTION if every is not None or ports else BUILT_IN_DEFAULT
    return ImportPlan(origin, sources, groups, policy)


def add_groups(
    plan: ImportPlan,
    groups: GroupReplay,
    *,
    staging: Path,
    rate_hz: int | None,
    metadata: Mapping[str, str],
    only: Sequence[str] | None = None,
) -> RecorderPolicy:
    """Add the plan's recording groups (``only``: those names) to ``groups``, recording into
    ``staging`` at ``rate_hz`` (None: the plan's), with ``metadata`` added to each group's own;
    returns the policy they record with."""
    policy = dataclasses.replace(plan.policy, output_dir=staging)
    if rate_hz:
        policy = dataclasses.replace(policy, rate_hz=rate_hz)
    for group in plan.groups:
        if only is None or group.name in only:
            meta: dict[str, Any] = {**metadata, **group.metadata}
            groups.add(GroupPlan(group.name, group.sources, policy, group.derived, meta))
    return policy
