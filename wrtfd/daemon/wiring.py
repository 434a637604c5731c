"""Turn a validated config into live objects: decoders, sources, their definitions, the recorder.

Everything that can fail because of the config happens here, before the daemon creates a
directory, binds a socket or opens a file; failures are :class:`ConfigError` naming the file and
the key (``FILE: sources[1].options: ...``), so ``wrtfd run`` exits 2 and leaves nothing behind.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from wrtfd.daemon.config import (
    AssettoCorsaSourceConfig,
    DdsSourceConfig,
    LoadedConfig,
    SerialSourceConfig,
    SourceConfig,
    UdpSourceConfig,
)
from wrtfd.daemon.mapping import SampleTransform, apply_mapping
from wrtfd.daemon.supervise import Backoff
from wrtfd.decoders.base import Sample
from wrtfd.errors import ConfigError, WrtfdError
from wrtfd.sources.base import SampleSink, Source

__all__ = ["BuiltSource", "build_source", "check_buildable", "mapped_sink", "prepare", "resolve_option_paths"]

#: Decoder option keys that name files: relative values are taken from the config file's directory.
PATH_OPTION_KEYS = frozenset({"dbc", "definition", "schema", "layout"})


@dataclass(frozen=True, slots=True)
class BuiltSource:
    """A source ready to run and what the recorder must know about it."""

    config: SourceConfig
    source: Source
    definition: dict[str, Any]
    transform: SampleTransform | None
    address: str


def resolve_option_paths(options: Mapping[str, Any], base_dir: Path) -> dict[str, Any]:
    out = dict(options)
    for key, value in options.items():
        is_path_key = key in PATH_OPTION_KEYS or key.endswith(("_file", "_path"))
        if is_path_key and isinstance(value, str) and value and not os.path.isabs(value):
            out[key] = str(base_dir / value)
    return out


def _where(loaded: LoadedConfig, index: int) -> str:
    return f"{loaded.origin}: sources[{index}]"


def _call(where: str, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Build something from config values; any complaint becomes a ConfigError at ``where``."""
    try:
        return fn(*args, **kwargs)
    except ConfigError as exc:
        raise ConfigError(f"{where}.{what}: {exc}") from None
    except (TypeError, ValueError, WrtfdError, OSError) as exc:
        raise ConfigError(f"{where}.{what}: {exc}") from None


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


def _decoder(loaded: LoadedConfig, index: int, src: SourceConfig) -> Any:
    from wrtfd.decoders import registry

    where = _where(loaded, index)
    options = resolve_option_paths(src.options, loaded.base_dir)
    return _call(where, "options", registry.make_decoder, src.protocol, **options)


def _decoder_definition(decoder: Any, loaded: LoadedConfig, index: int, src: SourceConfig) -> dict[str, Any]:
    from wrtfd.decoders import registry

    where = _where(loaded, index)
    path = loaded.definition_path(src)
    if path is not None:  # the config's own definition wins (units, descriptions of a custom feed)
        return _load_definition_file(path, where)
    definition = getattr(decoder, "definition", None)
    if isinstance(definition, Mapping):
        return dict(definition)
    info = registry.get(src.protocol)
    if info.schema_file:
        return _load_definition_file(registry.SCHEMA_DIR / info.schema_file, where)
    raise ConfigError(f"{where}.definition: protocol {src.protocol!r} needs a WRTF definition file")


def _serial_source(src: SerialSourceConfig, decoder: Any, where: str) -> Source:
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
        from wrtfd.sources.slcan import SlcanSource

        return _call(where, "link_options", SlcanSource, src.source_name, settings, decoder, **opts)
    if src.protocol == "obd":
        from wrtfd.sources.elm327 import Elm327Source

        return _call(where, "link_options", Elm327Source, src.source_name, settings, decoder, **opts)
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
            )
            address = f"udp {src.host}:{port}"
        elif isinstance(src, AssettoCorsaSourceConfig):
            from wrtfd.sources import assetto_corsa

            source = _call(
                where, "host", assetto_corsa.AssettoCorsaSource, name, decoder, host=src.host, port=src.port
            )
            address = f"udp peer {src.host}:{src.port}"
        else:
            source = _serial_source(src, decoder, where)
            address = f"serial {src.device} {src.baudrate} baud"
    definition, transform = apply_mapping(definition, src.mapping, f"{where}.mapping")
    return BuiltSource(config=src, source=source, definition=definition, transform=transform, address=address)


def mapped_sink(sink: SampleSink, transform: SampleTransform | None) -> SampleSink:
    if transform is None:
        return sink

    def mapped(sample: Sample) -> None:
        sink(transform(sample))

    return mapped


def check_buildable(loaded: LoadedConfig) -> None:
    """What ``wrtfd config check`` adds to validation: every decoder, source and policy builds."""
    from wrtfd.daemon.recorder_port import build_recorder

    built = [build_source(loaded, i, src) for i, src in enumerate(loaded.config.sources)]
    build_recorder(loaded, built, loaded.output_dir())


def prepare(loaded: LoadedConfig, env: Mapping[str, str] | None = None) -> Any:
    """Build every part of the daemon; raises ConfigError before anything is created on disk."""
    from wrtfd.daemon.app import Daemon, SourceHandle
    from wrtfd.daemon.recorder_port import build_recorder

    built = [build_source(loaded, i, src) for i, src in enumerate(loaded.config.sources)]
    output_dir = loaded.output_dir(env)
    recorder = build_recorder(loaded, built, output_dir, env)
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
    return Daemon(loaded, handles, recorder, output_dir, env=env)
