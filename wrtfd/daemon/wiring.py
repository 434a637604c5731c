"""Turn a validated config into live objects: decoders, sources, their definitions, the recorder.

Everything that can fail because of the config happens here, before the daemon creates a
directory, binds a socket or opens a file; failures are :class:`ConfigError` naming the file and
the key (``FILE: sources[1].options: ...``), so ``wrtfd run`` exits 2 and leaves nothing behind.

A source with a ``track`` also gets the lap-channel plug-in (:mod:`wrtfd.tracks.lapchannels`):
the track file is loaded and validated, and the position channels are checked against what the
source records (after ``mapping``), so a typo fails at start instead of as a per-frame error.
"""

from __future__ import annotations

import inspect
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import numpy as np
import yaml
from pydantic import ValidationError

from wrtfd.daemon.config import (
    AccSourceConfig,
    AssettoCorsaSourceConfig,
    DdsSourceConfig,
    Gt7SourceConfig,
    LoadedConfig,
    SerialSourceConfig,
    SourceConfig,
    UbxLinkConfig,
    UdpSourceConfig,
)
from wrtfd.daemon.mapping import SampleTransform, apply_mapping
from wrtfd.daemon.pipeline import BuiltSource, Pipeline, SourceHandle
from wrtfd.daemon.supervise import Backoff
from wrtfd.daemon.tap import build_tap
from wrtfd.decoders.base import Decoder, Sample
from wrtfd.errors import ConfigError, WrtfdError
from wrtfd.format.check import with_check
from wrtfd.format.schema import Schema, layout_difference
from wrtfd.recorder.groups import RecorderGroups
from wrtfd.recorder.observe import ObserverHub
from wrtfd.sources.base import SampleSink, Source

if TYPE_CHECKING:
    from wrtfd.fleet.lapref import RefTarget
    from wrtfd.protocols import LapFacts
    from wrtfd.recorder.live import LiveRecorder
    from wrtfd.tracks.circuit import Circuit
    from wrtfd.tracks.gnsslaps import GnssFields, GnssLapChannels
    from wrtfd.tracks.lapchannels import LapChannels, PositionFields

__all__ = [
    "BuiltSource",
    "build_fleet",
    "build_gnss_laps",
    "build_lap_channels",
    "build_source",
    "build_sources",
    "check_buildable",
    "check_output_dir",
    "check_pinned_schema",
    "composed_schemas",
    "fleet_reference_targets",
    "gnss_lap_plugins",
    "lap_metadata",
    "mapped_sink",
    "prepare",
    "resolve_option_paths",
]

log = logging.getLogger("wrtfd")

#: Decoder option keys that name files: relative values are taken from the config file's directory.
PATH_OPTION_KEYS = frozenset({"dbc", "definition", "schema", "layout", "structure"})


def resolve_option_paths(options: Mapping[str, Any], base_dir: Path) -> dict[str, Any]:
    out = dict(options)
    for key, value in options.items():
        is_path_key = key in PATH_OPTION_KEYS or key.endswith(("_file", "_path"))
        if is_path_key and isinstance(value, str) and value and not os.path.isabs(value):
            out[key] = str(base_dir / value)
    return out


def _where(loaded: LoadedConfig, index: int) -> str:
    return f"{loaded.origin}: sources[{index}]"


P = ParamSpec("P")
T = TypeVar("T")
D = TypeVar("D", bound=Decoder)

#: What a constructor may raise about the values it was given: our own errors (a bad DBC, a
#: track file's :class:`~wrtfd.errors.TrackError`), pydantic's, a named file that cannot be read,
#: and the ``ValueError`` of an argument check (``parity must be one of ...``). Anything else
#: (a ``TypeError`` or ``AttributeError`` inside our code) is a bug and surfaces as one.
CONFIG_COMPLAINTS: tuple[type[Exception], ...] = (WrtfdError, ValidationError, OSError, ValueError)


def _decoder_as(decoder: Decoder, cls: type[D], where: str, needs: str) -> D:
    """``decoder`` as the one a kind of source talks to; ConfigError ``needs`` when it is another."""
    if not isinstance(decoder, cls):
        raise ConfigError(f"{where}.protocol: {needs}")
    return decoder


def _call(where: str, what: str, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Build something from config values; a complaint about them becomes a ConfigError at ``where``.

    Options the callee does not take (a misspelt key) are found by binding them to its signature
    first, so a ``TypeError`` raised while it runs is never mistaken for a config error.
    """
    try:
        inspect.signature(fn).bind(*args, **kwargs)
    except TypeError as exc:
        raise ConfigError(f"{where}.{what}: {exc}") from None
    except ValueError:
        pass  # no signature to check against (a builtin): the call itself will tell
    try:
        return fn(*args, **kwargs)
    except CONFIG_COMPLAINTS as exc:
        raise ConfigError(f"{where}.{what}: {exc}") from exc


def _load_definition_file(path: Path, where: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"{where}.definition: cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}.definition: {path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{where}.definition: {path} is not a WRTF definition (expected a mapping)")
    return data


def _decoder(loaded: LoadedConfig, index: int, src: SourceConfig) -> Decoder:
    from wrtfd.decoders import registry

    where = _where(loaded, index)
    options = resolve_option_paths(src.options, loaded.base_dir)
    cls = _call(where, "protocol", registry.decoder_class, src.protocol)
    decoder: Decoder = _call(where, "options", cls, **options)
    return decoder


def _decoder_definition(
    decoder: Decoder, loaded: LoadedConfig, index: int, src: SourceConfig
) -> dict[str, Any]:
    from wrtfd.decoders import registry

    where = _where(loaded, index)
    path = loaded.definition_path(src)
    if path is not None:  # the config's own definition wins (units, descriptions of a custom feed)
        return _load_definition_file(path, where)
    definition = getattr(decoder, "definition", None)
    if isinstance(definition, Mapping):
        return dict(definition)
    info = registry.get(src.protocol)
    if isinstance(info.schema_file, str):
        return _load_definition_file(registry.SCHEMA_DIR / info.schema_file, where)
    raise ConfigError(f"{where}.definition: protocol {src.protocol!r} needs a WRTF definition file")


def _serial_source(src: SerialSourceConfig, decoder: Decoder, where: str) -> Source:
    from wrtfd.sources.serial import SerialLineSource, SerialSettings

    settings = _call(
        where,
        "device",
        SerialSettings,
        path=src.device,
        baudrate=src.baudrate,
        parity=src.parity,
        idle_timeout_s=src.idle_timeout_s,
    )
    opts = dict(src.link_options)
    if src.protocol == "slcan":
        from wrtfd.decoders.slcan import SlcanDecoder
        from wrtfd.sources.slcan import SlcanSource

        slcan = _decoder_as(
            decoder, SlcanDecoder, where, f"slcan needs the SLCAN decoder, got {type(decoder).__name__}"
        )
        return _call(where, "link_options", SlcanSource, src.source_name, settings, slcan, **opts)
    if src.protocol == "obd":
        from wrtfd.decoders.obd import ObdDecoder
        from wrtfd.sources.elm327 import Elm327Source

        obd = _decoder_as(decoder, ObdDecoder, where, "obd needs the OBD decoder")
        return _call(where, "link_options", Elm327Source, src.source_name, settings, obd, **opts)
    if src.protocol == "ubx":
        from wrtfd.decoders.ubx import UbxDecoder
        from wrtfd.sources.ubx import UbxSource

        ubx = _decoder_as(decoder, UbxDecoder, where, "ubx needs the UBX decoder")
        link = (src.ubx or UbxLinkConfig()).model_dump()
        return _call(where, "ubx", UbxSource, src.source_name, settings, ubx, **link, **opts)
    return _call(where, "link_options", SerialLineSource, src.source_name, settings, decoder, **opts)


def build_source(loaded: LoadedConfig, index: int, src: SourceConfig) -> BuiltSource:
    """Decoder + source + (mapped) definition for ``sources[index]``."""
    where = _where(loaded, index)
    name = src.source_name
    source: Source
    if isinstance(src, DdsSourceConfig):
        from wrtfd.sources.dds import DdsSource
        from wrtfd.zddsrec.mapping import load_mapping

        topic_map = _call(where, "topic_map", load_mapping, loaded.resolve(src.topic_map))
        definition = dict(topic_map.definition())
        source = _call(
            where, "port", DdsSource, name, mapping=topic_map, host=src.host, port=src.port, mode=src.mode
        )
        address = f"tcp {src.host}:{src.port} ({src.mode})"
    else:
        decoder = _decoder(loaded, index, src)
        definition = _decoder_definition(decoder, loaded, index, src)
        if isinstance(src, UdpSourceConfig):
            from wrtfd.decoders import registry
            from wrtfd.sources.udp import UdpSource

            port = src.port if src.port is not None else registry.get(src.protocol).default_port
            if port is None:
                raise ConfigError(f"{where}.port: required: {src.protocol!r} has no usual port")
            source = _call(
                where,
                "port",
                UdpSource,
                name,
                decoder,
                host=src.host,
                port=port,
                allow_from=src.allow_from,
                max_datagram_bytes=src.max_datagram_bytes,
                rcvbuf_bytes=src.rcvbuf_bytes,
                read_interval_s=src.read_interval_s,
            )
            address = f"udp {src.host}:{port}"
        elif isinstance(src, AssettoCorsaSourceConfig):
            from wrtfd.decoders.assetto_corsa import AssettoCorsaDecoder
            from wrtfd.sources import assetto_corsa

            ac = _decoder_as(
                decoder, AssettoCorsaDecoder, where, "kind assetto_corsa needs the Assetto Corsa decoder"
            )
            source = _call(
                where, "host", assetto_corsa.AssettoCorsaSource, name, ac, host=src.host, port=src.port
            )
            address = f"udp peer {src.host}:{src.port}"
        elif isinstance(src, AccSourceConfig):
            from wrtfd.decoders.acc import AccDecoder
            from wrtfd.sources.acc import AccSource

            acc = _decoder_as(decoder, AccDecoder, where, "kind acc needs the ACC broadcasting decoder")
            source = _call(
                where,
                "host",
                AccSource,
                name,
                acc,
                host=src.host,
                port=src.port,
                password=src.password,
                command_password=src.command_password,
                display_name=src.display_name,
                update_interval_ms=src.update_interval_ms,
            )
            address = f"udp peer {src.host}:{src.port} (acc broadcasting)"
        elif isinstance(src, Gt7SourceConfig):  # issue 14: GT7 heartbeats the console
            from wrtfd.decoders.gt7 import Gt7Decoder
            from wrtfd.sources.gt7 import Gt7Source

            gt7 = _decoder_as(decoder, Gt7Decoder, where, "kind gt7 needs the Gran Turismo 7 decoder")
            source = _call(
                where,
                "console",
                Gt7Source,
                name,
                gt7,
                console=src.console,
                console_port=src.console_port,
                host=src.host,
                port=src.port,
                variant=src.variant,
                heartbeat_interval_s=src.heartbeat_interval_s,
                probe_s=src.probe_s,
                stream_timeout_s=src.stream_timeout_s,
                rcvbuf_bytes=src.rcvbuf_bytes,
                read_interval_s=src.read_interval_s,
            )
            address = f"udp {src.host}:{src.port}, heartbeat to {src.console}:{src.console_port}"
        else:
            source = _serial_source(src, decoder, where)
            address = f"serial {src.device} {src.baudrate} baud"
    definition, transform = apply_mapping(definition, src.mapping, f"{where}.mapping")
    laps = build_lap_channels(loaded, index, src, definition)
    gnss_laps = build_gnss_laps(loaded, index, src, definition)
    return BuiltSource(
        config=src,
        source=source,
        definition=definition,
        transform=transform,
        address=address,
        laps=laps,
        gnss_laps=gnss_laps,
    )


def _recorded_channels(definition: Mapping[str, Any], where: str) -> np.dtype[Any]:
    """The numpy dtype of the source's frame (its channels as recorded), for type checks."""
    from wrtfd.format import Schema

    return _call(where, "definition", Schema.from_dict, definition).frame_dtype


def _position_fields(src: SourceConfig, definition: Mapping[str, Any], where: str) -> PositionFields:
    """The plug-in's position fields: ``track_position`` or the protocol's defaults (renamed by
    ``mapping`` like the channels themselves), each checked to be a recorded numeric channel."""
    from wrtfd.tracks.lapchannels import POSITION_FIELDS, PositionFields

    base = POSITION_FIELDS.get(src.protocol)
    rename = src.mapping.rename
    if src.track_position is not None:
        x, z = src.track_position
    elif base is not None:
        x, z = rename.get(base.x, base.x), rename.get(base.z, base.z)
    else:
        raise ConfigError(
            f"{where}.track_position: required with a track: protocol {src.protocol!r} has no known"
            f" position channels (known for: {', '.join(sorted(POSITION_FIELDS))}); name the channels"
            ' holding the track\'s x and z, e.g. track_position = ["pos_x", "pos_z"]'
        )
    dtype = _recorded_channels(definition, where)
    channels = [n for n in dtype.names or () if n != "tick"]
    for name in (x, z):
        if name not in channels:
            if src.track_position is None and src.mapping.include is not None:
                raise ConfigError(
                    f"{where}.mapping: the lap channels need the position channel {name!r}, which the"
                    " mapping leaves out"
                )
            listed = ", ".join(channels[:20]) + (" ..." if len(channels) > 20 else "")
            raise ConfigError(f"{where}.track_position: no channel {name!r}; channels are: {listed}")
        if dtype[name].shape != () or dtype[name].kind not in "fiu":
            raise ConfigError(
                f"{where}.track_position: position channel {name!r} is not a number ({dtype[name]})"
            )
    active = None
    if base is not None and base.active is not None:
        candidate = rename.get(base.active, base.active)
        active = candidate if candidate in channels else None  # without it: positions alone decide
    z_sign = float(src.track_z_sign) if src.track_z_sign is not None else (base.z_sign if base else 1.0)
    return PositionFields(x, z, z_sign, active)


def build_lap_channels(
    loaded: LoadedConfig, index: int, src: SourceConfig, definition: Mapping[str, Any]
) -> LapChannels | None:
    """The lap-channel plug-in for ``sources[index]`` (None without a ``track``).

    ``definition`` is the source's definition after ``mapping`` (what the file records).
    """
    if src.track is None:
        return None
    from wrtfd.tracks import load_track, validate_track
    from wrtfd.tracks.lapchannels import LapChannels

    where = _where(loaded, index)
    path = loaded.resolve(src.track)
    track = _call(where, "track", load_track, path)  # its errors start with the path
    findings = validate_track(track)
    if findings:
        more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
        raise ConfigError(
            f"{where}.track: {path}: invalid track: {findings[0]}{more}; see `wrtfd track check {path}`"
        )
    if src.track_lane >= len(track.lanes):
        raise ConfigError(f"{where}.track_lane: {path} has {len(track.lanes)} lane(s), numbered from 0")
    position = _position_fields(src, definition, where)
    reference = None
    if src.reference is not None and not _fleet_reference(src, where):
        from wrtfd.tracks import LanePath
        from wrtfd.tracks.delta import Reference, parse_reference

        file, session, lap = _call(where, "reference", parse_reference, src.reference)
        reference = _call(
            where,
            "reference",
            Reference.from_file,
            loaded.resolve(Path(file)),
            lap,
            session=session,
            length_m=LanePath(track, src.track_lane).length_m,
            track_name=track.name,
        )
    return _call(
        where,
        "track",
        LapChannels,
        track,
        source=src.source_name,
        position=position,
        lane=src.track_lane,
        reference=reference,
        facts=_lap_facts(src, definition),
    )


def _lap_facts(src: SourceConfig, definition: Mapping[str, Any]) -> LapFacts | None:
    """The protocol's lap validity and condition fields (renamed by ``mapping``), those of them
    recorded as plain numbers; None when none is."""
    from wrtfd.protocols import LapFacts, all_protocols

    info = all_protocols().get(src.protocol)
    facts = None if info is None else info.lap_facts
    if facts is None:
        return None
    rename = src.mapping.rename
    dtype = _recorded_channels(definition, "")  # already read once for the position fields

    def recorded(name: str) -> str | None:
        name = rename.get(name, name)
        names = dtype.names or ()
        return name if name in names and dtype[name].shape == () and dtype[name].kind in "fiub" else None

    invalid = None if facts.invalid is None else recorded(facts.invalid)
    conditions = {k: n for k, f in facts.conditions.items() if (n := recorded(f)) is not None}
    if invalid is None and not conditions:
        return None
    return LapFacts(invalid, conditions, facts.weather)


def _fleet_reference(src: SourceConfig, where: str) -> bool:
    """``reference = "fleet:..."``: the team's best lap, fetched by the fleet (not a file)."""
    from wrtfd.tracks.delta import parse_fleet_reference

    assert src.reference is not None
    return _call(where, "reference", parse_fleet_reference, src.reference) is not None


def fleet_reference_targets(loaded: LoadedConfig, built: list[BuiltSource]) -> list[RefTarget]:
    """The sources with ``reference = "fleet:best"`` or ``"fleet:driver=NAME"``: what the fleet
    feeds with the team's best lap (wrtfd.fleet.lapref)."""
    from wrtfd.fleet.lapref import RefTarget
    from wrtfd.tracks.delta import parse_fleet_reference

    targets = []
    car = loaded.config.recorder.metadata.get("Car") or None
    for b in built:
        spec = b.config.reference
        if spec is None:
            continue
        kind = parse_fleet_reference(spec)
        plugin: Any = b.laps or b.gnss_laps
        if kind is None or plugin is None:
            continue
        track: str | None
        length: float | None
        track_of: Callable[[], str | None] | None
        if b.laps is not None:
            track, length, track_of = b.laps.track.name, b.laps.path.length_m, None
        else:
            gnss = b.gnss_laps
            track = gnss.circuit.name if gnss is not None and gnss.circuit is not None else None
            length = None

            def circuit_name(gnss: Any = gnss) -> str | None:
                return gnss.circuit.name if gnss.circuit is not None else None

            track_of = circuit_name

        targets.append(
            RefTarget(
                source=b.config.source_name,
                group=b.config.group_name,
                spec=spec.strip(),
                driver=None if kind is True else str(kind),
                track=track,
                car=car,
                length_m=length,
                offer=plugin.delta.offer,
                track_of=track_of,
            )
        )
    return targets


def build_gnss_laps(
    loaded: LoadedConfig, index: int, src: SourceConfig, definition: Mapping[str, Any]
) -> GnssLapChannels | None:
    """The GNSS lap-channel plug-in for ``sources[index]`` (None without ``circuit``/``circuits``).

    ``circuit = FILE`` is loaded now; ``"auto"`` (or a ``circuits`` folder) loads the folder and
    the shipped library, and the plug-in picks the nearest at the first fix, which the journal
    tells (``source gps: circuit Hillside picked, 0.2 km from the first fix``).
    """
    if src.circuit is None and src.circuits is None:
        return None
    from wrtfd.tracks.circuit import circuits_in, load_circuit
    from wrtfd.tracks.gnsslaps import GnssLapChannels

    where = _where(loaded, index)
    fields = _gnss_fields(src, definition, where)
    reference = None
    # a GNSS lap's own length: the recorded samples place the line
    if src.reference is not None and not _fleet_reference(src, where):
        from wrtfd.tracks.delta import Reference, parse_reference

        file, session, lap = _call(where, "reference", parse_reference, src.reference)
        reference = _call(
            where, "reference", Reference.from_file, loaded.resolve(Path(file)), lap, session=session
        )
    if not src.auto_circuit:
        assert src.circuit is not None
        circuit = _call(where, "circuit", load_circuit, loaded.resolve(src.circuit))
        return _call(
            where,
            "circuit",
            GnssLapChannels,
            circuit,
            source=src.source_name,
            fields=fields,
            reference=reference,
            refine_lag_s=src.refine_lag_s or None,
        )
    folders = [loaded.resolve(src.circuits)] if src.circuits is not None else []
    for folder in folders:
        if not folder.is_dir():
            raise ConfigError(f"{where}.circuits: {folder} is not a folder")
    candidates, problems = _call(where, "circuits", circuits_in, folders)
    for problem in problems[:5]:
        log.warning("%s.circuits: skipped %s", where, problem)
    # the journal's listener is added with the recorder's hub (see _recorder)
    return GnssLapChannels(
        None,
        source=src.source_name,
        fields=fields,
        candidates=candidates,
        pick_m=src.circuit_pick_m,
        reference=reference,
        refine_lag_s=src.refine_lag_s or None,
    )


def _gnss_fields(src: SourceConfig, definition: Mapping[str, Any], where: str) -> GnssFields:
    """The fix channels (renamed by ``mapping`` like the channels themselves), checked to be recorded."""
    from wrtfd.tracks.gnsslaps import GnssFields

    rename = src.mapping.rename
    base = GnssFields()
    dtype = _recorded_channels(definition, where)
    channels = [n for n in dtype.names or () if n != "tick"]

    def named(field: str | None) -> str | None:
        return None if field is None else rename.get(field, field)

    fields = GnssFields(
        named(base.lat) or base.lat,
        named(base.lon) or base.lon,
        named(base.time_us),
        named(base.speed),
        named(base.course),
        named(base.vel_n),
        named(base.vel_e),
        named(base.fix_mode),
    )
    for name in (fields.lat, fields.lon):
        if name not in channels or dtype[name].kind != "f":
            listed = ", ".join(channels[:20]) + (" ..." if len(channels) > 20 else "")
            raise ConfigError(
                f"{where}.circuit: GNSS lap timing needs the latitude/longitude channel {name!r}"
                f" (degrees) in what protocol {src.protocol!r} records; channels are: {listed}"
            )
    return fields.present(channels)


def mapped_sink(sink: SampleSink, transform: SampleTransform | None) -> SampleSink:
    if transform is None:
        return sink

    def mapped(sample: Sample) -> None:
        sink(transform(sample))

    return mapped


def _recorder(
    loaded: LoadedConfig,
    built: Sequence[BuiltSource],
    output_dir: Path,
    env: Mapping[str, str] | None = None,
    *,
    check_pins: bool = True,
    hub: ObserverHub | None = None,
    wall_offset_ns: int | None = None,
) -> RecorderGroups:
    """One live recorder per recording group, behind the single-recorder interface.

    A group's recorder gets the lap-channel plug-in of its source with a track, and the file
    metadata then gets ``Track`` (the track's name) unless ``recorder.metadata`` sets it.
    """
    from wrtfd.daemon.recorder_port import build_recorder

    members: dict[str, list[BuiltSource]] = {}
    for b in built:
        members.setdefault(b.config.group_name, []).append(b)
    groups: dict[str, LiveRecorder] = {}
    for group, group_built in members.items():
        derived = [d for b in group_built if (d := b.derived) is not None]
        metadata = lap_metadata(loaded, derived)
        if hub is not None:
            for d in gnss_lap_plugins(derived):
                d.pick_listeners.append(_pick_teller(hub, d.source))
        groups[group] = build_recorder(
            loaded,
            group_built,
            output_dir,
            env,
            derived=derived,
            metadata=metadata,
            hub=hub,
            group=group,
            wall_offset_ns=wall_offset_ns,
        )
        if check_pins:
            check_pinned_schema(loaded, group, groups[group].recorder.schema)
    return RecorderGroups(groups, {b.source.name: b.config.group_name for b in built})


def gnss_lap_plugins(derived: Sequence[Any]) -> list[GnssLapChannels]:
    """The GNSS lap plug-ins among ``derived``. None can exist before their module is loaded
    (only a GNSS source with a circuit loads it), so a daemon without one never imports it."""
    module = sys.modules.get("wrtfd.tracks.gnsslaps")
    if module is None:
        return []
    return [d for d in derived if isinstance(d, module.GnssLapChannels)]


def lap_metadata(loaded: LoadedConfig, derived: Sequence[Any]) -> dict[str, str]:
    """File metadata for a group's lap plug-in: ``Track`` (its name) for a track, ``Circuit`` and
    ``CircuitLines`` for a circuit file (``wrtfd laps`` re-times from it), unless
    ``recorder.metadata`` sets them."""
    if not derived:
        return {}
    first = derived[0]
    given = loaded.config.recorder.metadata
    found = first.file_metadata() if gnss_lap_plugins([first]) else {"Track": first.track.name}
    return {k: v for k, v in found.items() if k not in given}


def _pick_teller(hub: ObserverHub, source: str) -> Callable[[Circuit, str], None]:
    """The journal line of a circuit picked by position or laid by a mark (a source event, like
    ``first sample``)."""
    import time

    from wrtfd.recorder.observe import SourceStateChanged

    def tell(circuit: Circuit, how: str) -> None:
        hub.publish(SourceStateChanged(source, f"circuit {circuit.name} {how}", time.time_ns() // 1000))

    return tell


def check_pinned_schema(loaded: LoadedConfig, group: str, composed: Schema) -> None:
    """``recorder.schema``: the group's composed frame must have the pinned layout, byte for byte.

    Both with the frame check the files carry (a pin written before it existed matches too).
    """
    path = loaded.schema_path(group)
    if path is None:
        return
    where = f"{loaded.origin}: recorder.schema"
    try:
        pinned = Schema.load(path)
    except (WrtfdError, OSError) as exc:
        raise ConfigError(f"{where}: {exc}") from None
    difference = layout_difference(with_check(pinned).frame_dtype, with_check(composed).frame_dtype)
    if difference is not None:
        raise ConfigError(
            f"{where}: the frame of recording group {group!r} does not match {path}: {difference}"
            " (`wrtfd config schema` prints the frame this config records)"
        )


def build_sources(loaded: LoadedConfig) -> list[BuiltSource]:
    """Every configured source, in config order (nothing bound or opened yet)."""
    return [build_source(loaded, i, src) for i, src in enumerate(loaded.config.sources)]


def check_output_dir(loaded: LoadedConfig, output_dir: Path) -> None:
    """``recorder.output_dir`` is, or can become, a directory: it and every parent that exists
    are directories (looked at only: creating it is the daemon's job, at start).

    :raises ConfigError: naming the key and the part that is not a directory.
    """
    for part in (output_dir, *output_dir.parents):
        if os.path.isdir(part):
            return
        if os.path.lexists(part):
            what = (
                "is not a directory"
                if part == output_dir
                else f"cannot be created: {part} is not a directory"
            )
            raise ConfigError(f"{loaded.origin}: recorder.output_dir: {output_dir} {what}")


def check_buildable(loaded: LoadedConfig) -> list[BuiltSource]:
    """What ``wrtfd config check`` adds to validation: every decoder, source and policy builds."""
    check_output_dir(loaded, loaded.output_dir())
    built = build_sources(loaded)
    _recorder(loaded, built, loaded.output_dir())
    if loaded.config.foxglove.enabled:  # [foxglove]: its extra must be installed
        from wrtfd.daemon.foxglove_live import require_sdk

        require_sdk()
    build_fleet(loaded, loaded.output_dir())
    return built


def composed_schemas(loaded: LoadedConfig) -> dict[str, Schema]:
    """Per recording group, the frame definition its files have (``wrtfd config schema``): the
    composed frame and the frame check.

    Not checked against ``recorder.schema``: this is how a changed layout is pinned again.
    """
    built = build_sources(loaded)
    recorder = _recorder(loaded, built, loaded.output_dir(), check_pins=False)
    return {group: with_check(live.recorder.schema) for group, live in recorder.groups.items()}


def prepare(loaded: LoadedConfig, env: Mapping[str, str] | None = None) -> Pipeline:
    """Build every part of the daemon; raises ConfigError before anything is created on disk."""
    output_dir = loaded.output_dir(env)
    check_output_dir(loaded, output_dir)
    built = build_sources(loaded)
    hub = ObserverHub()
    # One wall-clock offset for every recording and the raw tap: the tap stamps each packet with
    # its receive time on the wall clock, and an import of the tap then finds the recordings'
    # session starts to the microsecond (two offsets read apart differ by microseconds).
    wall_offset_ns = time.time_ns() - time.monotonic_ns()
    recorder = _recorder(loaded, built, output_dir, env, hub=hub, wall_offset_ns=wall_offset_ns)
    tap = build_tap(loaded, built, output_dir, hub, wall_offset_ns=wall_offset_ns)
    handles = [
        SourceHandle(
            config=b.config,
            source=b.source,
            sink=mapped_sink(recorder.sink, b.transform),
            address=b.address,
            backoff=Backoff(b.config.restart_backoff_s, b.config.restart_backoff_max_s),
        )
        for b in built
    ]
    fleet = build_fleet(loaded, output_dir)
    if fleet is not None:
        hub.add(fleet)
        meta = loaded.config.recorder.metadata
        # the track the laps are timed on (a GNSS circuit once picked); the records say it later
        timed_on = [b.laps.track.name for b in built if b.laps is not None] + [
            b.gnss_laps.circuit.name
            for b in built
            if b.gnss_laps is not None and b.gnss_laps.circuit is not None
        ]
        fleet.team_hint(track=timed_on[0] if timed_on else meta.get("Track"), driver=meta.get("Driver"))
    targets = fleet_reference_targets(loaded, built)
    if targets and fleet is not None:
        fleet.follow_references(targets)
    for t in targets if fleet is None else ():
        log.warning(
            "source %s: reference %s needs [fleet]; the delta uses the session's best lap", t.source, t.spec
        )
    from wrtfd.daemon.laprecords import LapBook
    from wrtfd.fleet.config import default_rig

    laps = LapBook(
        output_dir,
        rig=fleet.rig if fleet is not None else default_rig(),
        fsync_interval_s=loaded.config.recorder.fsync_interval_s,
    )
    hub.add(laps, frames=False)
    return Pipeline(
        loaded=loaded,
        handles=handles,
        recorder=recorder,
        output_dir=output_dir,
        env=env,
        hub=hub,
        fleet=fleet,
        tap=tap,
        laps=laps,
    )


def build_fleet(loaded: LoadedConfig, output_dir: Path) -> Any:
    """The fleet publisher of ``[fleet]`` (None without one); ConfigError for bad files or no nats-py."""
    cfg = loaded.config.fleet
    if cfg is None:
        return None
    from wrtfd.fleet.client import FleetError, require_nats
    from wrtfd.fleet.config import fleet_settings
    from wrtfd.fleet.publisher import FleetPublisher

    where = f"{loaded.origin}: fleet"
    try:
        require_nats()
    except FleetError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    settings = fleet_settings(cfg, resolve=loaded.resolve, output_dir=output_dir, where=where)
    return FleetPublisher(settings, output_dir=output_dir)
