"""``wrtfd import CAPTURE.pcapng``: the UDP games in a pcap or pcapng capture -> WRTF files.

Each datagram goes to a *source* the way the daemon would have received it, then through that
source's decoder, the scheduler and the recorder, driven by the capture's timestamps:

* ``--config DAEMON.toml``: the config's UDP sources (port, host, protocol, decoder options,
  mapping, track, recording group) and its ``[recorder]`` policy, built by the daemon's own
  wiring without binding anything (an :class:`~wrtfd.importers.plan.ImportPlan`). A datagram
  to a port no source listens on is dropped (``no_source``), as the daemon never receives it.
  Each recording group holds all its sources, so the frame layout is the live file's. The raw
  tap's serial interfaces (link type USER0, named after their source) are fed to that serial
  line source's framer and decoder, chunk by chunk, as the live source was
  (:class:`~wrtfd.decoders.lines.LineFeed`; a u-blox source's UBX frames:
  :class:`~wrtfd.decoders.ubx.UbxFeed`). So a raw tap of the daemon replays into the
  recording the daemon made.
* without ``--config``: the built-in default (every game on its usual port, each game its own
  recording group). ``--protocol NAME`` says every datagram is NAME; ``--protocol PORT=NAME``
  names the game on one port. A datagram to any other port is recognised by its content: each
  protocol's registered test (:attr:`~wrtfd.protocols.ProtocolInfo.sniff`: size, magic,
  header fields, never a decode) must accept every datagram of the flow seen so far, and the
  flow (destination port) gets the one protocol left. Flows that no protocol, or more than one,
  accepts are dropped (``unknown_protocol``, ``ambiguous_protocol``: use ``--protocol``).

Several games in one capture become several recordings, one file (or more, with rotation) per
recording group. Drops are counted by reason: the capture's (``truncated_block``...), the
packets' (``ip_fragment``, ``not_udp``, ``bad_timestamp`` for a time before 1980 or after
2200: a damaged timestamp), routing, and each source's decoder (``f1: wrong_size``), as the
daemon's status would show them.
"""

from __future__ import annotations

import argparse
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wrtfd.decoders import registry
from wrtfd.decoders.base import Sample
from wrtfd.decoders.lines import LineFeed
from wrtfd.decoders.ubx import UbxDecoder, UbxFeed
from wrtfd.defaults import SANE_TIME_US
from wrtfd.errors import ConfigError, DecodeError, ImportFormatError
from wrtfd.importers.output import check_output, place_outputs, staging_dir
from wrtfd.importers.plan import ImportPlan, PlanSource, add_groups, default_plan, udp_source
from wrtfd.importers.replay import GroupPlan, GroupReplay
from wrtfd.importers.report import ImportReport, Progress
from wrtfd.pcap.links import IPV4_UDP, LINKTYPE_USER0, SUPPORTED_LINK_TYPES, ipv4_udp_offset, parse_udp
from wrtfd.pcap.reader import CaptureReader

__all__ = ["SANE_TIME_NS", "SNIFF_MAX_DATAGRAMS", "import_capture", "parse_protocol_options", "run_import"]

#: Datagrams of an unknown flow held while its protocol is still ambiguous.
SNIFF_MAX_DATAGRAMS = 64
_ANY_HOST = frozenset({"0.0.0.0", "::"})


class _Route:
    """One source of the import: what the daemon's UdpSource does with a datagram, minus the socket."""

    __slots__ = (
        "allows",
        "decode",
        "delivered",
        "group",
        "last_key",
        "last_ns",
        "max_bytes",
        "name",
        "transform",
    )

    def __init__(self, source: PlanSource) -> None:
        if source.decoder is None:  # pragma: no cover - UDP sources always have a decoder
            raise ConfigError(f"source {source.name!r} has no decoder")
        self.name = source.name
        self.group = source.group
        self.decode: Callable[[bytes], Any] = source.decoder.decode
        self.transform = source.transform
        self.allows = source.allows
        self.max_bytes = source.max_datagram_bytes
        self.last_key: object = None
        self.last_ns = -1  # the source's newest receive time (its samples never go back in time)
        self.delivered = 0


class _LineRoute:
    """A serial line (or UBX) source fed the raw chunks of its tap interface, as its live source was."""

    __slots__ = ("feed", "last_ns", "name", "sink")

    def __init__(
        self, source: PlanSource, lines: tuple[bytes, int] | None, push: Callable[[Sample], None]
    ) -> None:
        if source.decoder is None:  # pragma: no cover - serial sources always have a decoder
            raise ConfigError(f"source {source.name!r} has no decoder")
        self.name = source.name
        self.feed: LineFeed | UbxFeed
        if source.ubx:
            if not isinstance(source.decoder, UbxDecoder):  # pragma: no cover - the wiring checks it
                raise ConfigError(f"source {source.name!r}: ubx needs the UBX decoder")
            self.feed = UbxFeed(source.name, source.decoder)  # the set-up's answers are skipped
        else:
            assert lines is not None
            delimiters, max_line_bytes = lines
            self.feed = LineFeed(
                source.name, source.decoder, delimiters=delimiters, max_line_bytes=max_line_bytes
            )
        self.last_ns = -1
        transform = source.transform
        self.sink: Callable[[Sample], None] = (
            push if transform is None else (lambda sample: push(transform(sample)))
        )


class _Flow:
    """A destination port without a source: its protocol is being recognised by content."""

    __slots__ = ("candidates", "pending", "route")

    def __init__(self, candidates: set[str]) -> None:
        self.candidates = candidates
        self.pending: list[tuple[int, bytes, bytes]] = []  # (ts_ns, sender address, payload)
        self.route: _Route | None = None


def parse_protocol_options(values: list[str]) -> tuple[str | None, dict[int, str]]:
    """``--protocol NAME`` (every datagram) or ``--protocol PORT=NAME`` (repeatable).

    :raises ConfigError: a malformed value, or NAME mixed with PORT=NAME.
    """
    every: str | None = None
    ports: dict[int, str] = {}
    for value in values:
        port_text, eq, name = value.rpartition("=")
        if not eq:
            every = value
            continue
        try:
            port = int(port_text)
        except ValueError:
            port = -1
        if not 1 <= port <= 65535 or not name:
            raise ConfigError(f"--protocol {value!r}: expected NAME or PORT=NAME (port 1-65535)")
        ports[port] = name
    if every is not None and (ports or len([v for v in values if "=" not in v]) > 1):
        raise ConfigError("--protocol NAME (every datagram) cannot be combined with other --protocol values")
    return every, ports


class _CaptureImport:
    """The routing state of one import (see the module docstring)."""

    def __init__(
        self,
        plan: ImportPlan,
        *,
        every: str | None,
        staging: Path,
        rate_hz: int | None,
        report: ImportReport,
        groups: GroupReplay,
    ) -> None:
        self.report = report
        self.every = every
        self.groups = groups
        self.metadata = {"import.file": report.source.name, "import.format": "capture"}
        self.policy = add_groups(plan, groups, staging=staging, rate_hz=rate_hz, metadata=self.metadata)
        self.names = {s.name for s in plan.sources}
        #: dst port -> routes (a host-bound source first, then the any-address one)
        self.by_port: dict[int, list[tuple[bytes | None, _Route]]] = {}
        #: the game's (src) port -> routes, for sources that contact the game (Assetto Corsa)
        self.by_game_port: dict[int, list[tuple[bytes | None, _Route]]] = {}
        #: the tap's raw interfaces, by name -> the serial line source of that name
        self.by_interface: dict[str, _LineRoute] = {}
        self.every_route: _Route | None = None
        self.by_name: dict[str, _Route] = {}
        self.held = 0
        for src in plan.sources:
            if src.kind == "udp":
                table = self.by_port
            elif src.kind == "peer":
                table = self.by_game_port
            else:
                if src.lines is not None or src.ubx:
                    self.by_interface[src.name] = _LineRoute(src, src.lines, groups.push)
                    continue
                report.notes.append(f"source {src.name!r} ({src.kind}) is not in a capture's UDP")
                continue
            route = _Route(src)
            self.by_name[route.name] = route
            if every is not None:
                self.every_route = route
            entries = table.setdefault(int(src.port or 0), [])
            entries.insert(0 if src.host not in _ANY_HOST else len(entries), (_packed(src.host), route))
        # --protocol PORT=NAME names those ports only: the others are still recognised by content
        self.sniffers = registry.sniffers("udp") if plan.by_content and every is None else {}
        self.push = groups.push
        self.flows: dict[int, _Flow] = {}

    # -- per datagram ------------------------------------------------------------------------------

    def route(self, src: bytes, sport: int, dst: bytes, dport: int) -> _Route | _Flow | None:
        if self.every_route is not None:
            return self.every_route
        for table, port, addr in ((self.by_port, dport, dst), (self.by_game_port, sport, src)):
            entries = table.get(port)
            if entries:
                for host, route in entries:
                    if host is None or host == addr:
                        return route
        if not self.sniffers:
            return None
        flow = self.flows.get(dport)
        if flow is None:
            flow = self.flows[dport] = _Flow(set(self.sniffers))
        return flow.route if flow.route is not None else flow

    def deliver(self, route: _Route, ts_ns: int, sender: bytes, payload: bytes) -> None:
        """What UdpSource's handler does with a datagram (clamp, allowlist, size, decode, session key)."""
        if ts_ns < route.last_ns:  # a merged or re-ordered capture: the source's time never goes back
            ts_ns = route.last_ns
            self.held += 1
        route.last_ns = ts_ns
        if route.allows is not None and not route.allows(_text(sender)):
            self.report.drop(f"{route.name}: sender_not_allowed")
            return
        if len(payload) > route.max_bytes:
            self.report.drop(f"{route.name}: too_large")
            return
        try:
            decoded = route.decode(payload)
        except DecodeError as exc:
            self.report.drop(f"{route.name}: {exc.reason}")
            return
        except Exception:  # a decoder bug: counted like the live source does, never fatal
            self.report.drop(f"{route.name}: decoder_error")
            return
        if decoded is None:
            return
        key = decoded.session_key
        changed = False
        if key is not None and key != route.last_key:
            changed = route.last_key is not None
            route.last_key = key
        sample = Sample(
            route.name,
            ts_ns,
            decoded.values,
            decoded.source_time_ns,
            changed or decoded.new_session,
            decoded.session_info,
        )
        if route.transform is not None:
            sample = route.transform(sample)
        route.delivered += 1
        self.push(sample)

    def feed_lines(self, route: _LineRoute, ts_ns: int, data: bytes) -> int:
        """Raw serial bytes of the tap, to their line source; returns the samples it made."""
        if ts_ns < route.last_ns:
            ts_ns = route.last_ns
            self.held += 1
        route.last_ns = ts_ns
        return route.feed.feed(ts_ns, data, route.sink)[1]

    def sniff(self, flow: _Flow, dport: int, ts_ns: int, sender: bytes, payload: bytes) -> None:
        """Narrow the flow's candidates with one more datagram; decide when one is left."""
        if not flow.candidates:
            self.report.drop("unknown_protocol")
            return
        flow.candidates = {name for name in flow.candidates if self.sniffers[name](payload)}
        flow.pending.append((ts_ns, sender, payload))
        if len(flow.candidates) == 1:
            flow.route = self._new_route(next(iter(flow.candidates)), dport)
            pending, flow.pending = flow.pending, []
            for item in pending:
                self.deliver(flow.route, *item)
        elif not flow.candidates:
            self.report.drop("unknown_protocol", len(flow.pending))
            flow.pending = []
        elif len(flow.pending) >= SNIFF_MAX_DATAGRAMS:
            self._ambiguous(dport, flow)
            flow.candidates = set()

    def finish(self) -> None:
        """Flows still undecided at the end of the capture: their datagrams are dropped; the line
        sources' drops are counted under their names."""
        for dport, flow in self.flows.items():
            if flow.pending:
                self._ambiguous(dport, flow)
        for line_route in self.by_interface.values():
            for reason, n in line_route.feed.drops.as_dict().items():
                self.report.drop(f"{line_route.name}: {reason}", n)

    def _ambiguous(self, dport: int, flow: _Flow) -> None:
        self.report.drop("ambiguous_protocol", len(flow.pending))
        self.report.notes.append(
            f"port {dport}: {' or '.join(sorted(flow.candidates))}? use --protocol {dport}=NAME"
        )
        flow.pending = []

    def _new_route(self, protocol: str, port: int) -> _Route:
        """The source of a recognised flow: the default's source of that game when it has had
        no datagram (the game sends to another port than usual), else a new one, built like a
        configured one, in a group of its own."""
        self.report.notes.append(f"port {port}: recognised as {protocol} by its content")
        idle = self.by_name.get(protocol)
        if idle is not None and idle.delivered == 0:
            return idle
        name = protocol if protocol not in self.names else f"{protocol}_{port}"
        self.names.add(name)
        source = udp_source(name, protocol, port)
        self.groups.add(GroupPlan(name, [source.spec], self.policy, (), dict(self.metadata)))
        route = self.by_name[name] = _Route(source)
        return route


def _packed(host: str) -> bytes | None:
    if host in _ANY_HOST:
        return None
    return socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)


def _text(raw: bytes) -> str:
    return socket.inet_ntop(socket.AF_INET if len(raw) == 4 else socket.AF_INET6, raw)


def import_capture(
    path: Path,
    output: Path,
    *,
    plan: ImportPlan | None = None,
    protocols: list[str] | None = None,
    rate_hz: int | None = None,
    start_timestamp_us: int | None = None,
    force: bool = False,
) -> ImportReport:
    """Import a pcap/pcapng capture; see the module docstring. ``plan``: a daemon config's
    (``--config``, built by :func:`wrtfd.daemon.import_plan.build_import_plan`); None: the
    built-in default, with ``protocols`` (``--protocol``) applied.

    :raises ImportFormatError: not a capture, nothing importable, an output that exists.
    :raises ConfigError: a bad ``--protocol``, or one given with a plan.
    :raises OSError: reading the capture or writing the output.
    """
    if output.suffix == ".wrtf":
        check_output(output, force=force)
    if rate_hz is not None and rate_hz <= 0:
        raise ImportFormatError(f"--rate must be a positive number of Hz, not {rate_hz}")
    every, ports = parse_protocol_options(protocols or [])
    if plan is None:
        plan = default_plan(every, ports)
    elif every is not None or ports:
        raise ConfigError("--protocol and --config: the config already says which port is which game")
    report = ImportReport(path, "datagrams")
    first_ns: list[int] = []

    def wall_ns(rx_ns: int) -> int:
        if start_timestamp_us is None:
            return rx_ns
        return start_timestamp_us * 1000 + rx_ns - first_ns[0]

    with CaptureReader(path) as reader, staging_dir(output) as staging:
        groups = GroupReplay(wall_ns=wall_ns)
        try:
            state = _CaptureImport(
                plan, every=every, staging=staging, rate_hz=rate_hz, report=report, groups=groups
            )
            _run(reader, state, report, first_ns)
            written = groups.finish()
        except BaseException:
            groups.close()
            raise
        for reason, n in reader.drops.as_dict().items():
            report.drop(reason, n)
        report.check_any()
        report.outputs = place_outputs(output, written, force=force)
    return report


#: Packets stamped outside these times (1980 to 2200, ns since 1970) are ``bad_timestamp``
#: drops: an edited or damaged timestamp (resolution, offset) would place a recording where no
#: file can be named or started.
SANE_TIME_NS = (SANE_TIME_US[0] * 1000, SANE_TIME_US[1] * 1000)


def _run(reader: CaptureReader, state: _CaptureImport, report: ImportReport, first_ns: list[int]) -> None:
    progress = Progress(reader.path.name, reader.size)
    interfaces = reader.interfaces
    route_of = state.route
    deliver = state.deliver
    drop = report.drop
    cache: dict[tuple[bytes, int, bytes, int], Any] = {}
    lines_of = state.by_interface
    read = 0
    line_samples = 0

    def dispatch(ts_ns: int, src: bytes, sport: int, dst: bytes, dport: int, payload: bytes) -> None:
        """A datagram to its source's route (flows are sniffed until their protocol is known)."""
        if not first_ns:
            first_ns.append(ts_ns)
        key = (src, sport, dst, dport)
        route = cache.get(key)
        if route is None or isinstance(route, _Flow):
            route = route_of(*key)
            if len(cache) > 4096:
                cache.clear()
            cache[key] = route
        if route is None:
            drop("no_source")
        elif isinstance(route, _Route):
            deliver(route, ts_ns, src, payload)
        else:
            state.sniff(route, dport, ts_ns, src, payload)

    # Per interface: where a plain IPv4 header would start (None: parse_udp for every packet).
    ip_at: dict[int, int | None] = {}
    unpack_ipv4_udp = IPV4_UDP.unpack_from
    earliest, latest = SANE_TIME_NS
    for n, (ts_ns, index, data) in enumerate(reader.packets(), 1):
        if n & 0x3FFF == 0:
            progress.update(reader.position)
        if not earliest <= ts_ns < latest:
            drop("bad_timestamp")
            continue
        # The common packet (IPv4 without options or fragments, then UDP, lengths that agree)
        # in one unpack; anything else goes through parse_udp, which gives the same datagram or
        # the drop reason.
        at = ip_at.get(index, -1)
        if at == -1:
            linktype = interfaces[index].linktype
            at = ip_at[index] = None if linktype is None else ipv4_udp_offset(linktype)
        if (
            at is not None
            and len(data) >= at + 28
            and data[at] == 0x45
            and (at == 0 or data[12:14] == b"\x08\x00")
        ):
            total, frag, proto, src, dst, sport, dport, length = unpack_ipv4_udp(data, at)
            if (
                proto == 17
                and not frag & 0x3FFF
                and 28 <= total <= len(data) - at
                and 8 <= length <= total - 20
            ):
                read += 1
                dispatch(ts_ns, src, sport, dst, dport, data[at + 28 : at + 20 + length])
                continue
        interface = interfaces[index]
        linktype = interface.linktype
        if linktype is None or linktype not in SUPPORTED_LINK_TYPES:
            if linktype != LINKTYPE_USER0:
                drop("unsupported_link_type")
                continue
            line_route = lines_of.get(interface.name)
            if line_route is None:
                drop("raw_data")
                continue
            read += 1
            if not first_ns:
                first_ns.append(ts_ns)
            line_samples += state.feed_lines(line_route, ts_ns, data)
            continue
        datagram = parse_udp(linktype, data, ts_ns)
        if isinstance(datagram, str):
            drop(datagram)
            continue
        read += 1
        dispatch(ts_ns, datagram.src, datagram.src_port, datagram.dst, datagram.dst_port, datagram.payload)
    report.read = read
    state.finish()
    progress.done()
    report.samples = sum(r.delivered for r in state.by_name.values()) + line_samples
    if state.held:
        report.notes.append(
            f"{state.held} inputs stamped before their source's previous one were held at its time"
        )


def run_import(args: argparse.Namespace) -> int:
    """Entry point for ``wrtfd import CAPTURE`` (see ``wrtfd.cli.import_cmd``); ``args.plan``
    is the ``--config`` file's plan, built by the command."""
    if getattr(args, "track", None) is not None:
        raise ImportFormatError("--track with a capture: give the source a `track` in a --config file")
    report = import_capture(
        args.file,
        args.output,
        plan=getattr(args, "plan", None),
        protocols=args.protocol,
        rate_hz=args.rate,
        start_timestamp_us=args.start_timestamp,
        force=args.force,
    )
    report.write(sys.stderr)
    return 0
