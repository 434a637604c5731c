"""``wrtfd config check FILE``, ``wrtfd config show [--config FILE]`` and ``wrtfd config schema``.

``check`` validates a config exactly as ``wrtfd run`` would at start (schema, key paths,
protocols) without opening any socket or file. ``show`` prints the effective config, defaults
filled in, as TOML: the file you would write to get the same behaviour. ``schema`` prints the
frame definition (WRTF YAML) a recording group records, the file ``recorder.schema`` pins.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["register"]


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "config",
        help="validate a daemon config, or show the effective one",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    check = sub.add_parser("check", help="validate FILE without running")
    check.add_argument("file", type=Path, help="TOML config file")
    check.set_defaults(func=_check)
    show = sub.add_parser("show", help="print the effective config with defaults, as TOML")
    show.add_argument("--config", type=Path, help="config file (default: as `wrtfd run` would choose)")
    show.set_defaults(func=_show)
    schema = sub.add_parser(
        "schema", help="print the frame definition the config records (what recorder.schema pins)"
    )
    schema.add_argument("--config", type=Path, help="config file (default: as `wrtfd run` would choose)")
    schema.add_argument("--group", help="recording group (needed when the config has several)")
    schema.add_argument("-o", "--output", type=Path, help="write to this file instead of stdout")
    schema.add_argument("--force", action="store_true", help="overwrite OUTPUT if it exists")
    schema.set_defaults(func=_schema)


def _check(args: argparse.Namespace) -> int:
    from wrtfd.daemon.config import load_config
    from wrtfd.daemon.wiring import check_buildable

    loaded = load_config(args.file)
    built = check_buildable(loaded)
    names = ", ".join(f"{s.source_name} ({s.kind}/{s.protocol})" for s in loaded.config.sources)
    laps = "".join(
        f"; lap channels from {b.config.source_name} on {b.laps.track.name!r}"
        f" ({b.laps.path.length_m:.1f} m lap)"
        + (
            f", delta to {b.laps.delta.fixed.origin} ({b.laps.delta.fixed.lap_time_s:.3f} s)"
            if b.laps.delta.fixed is not None
            else ""
        )
        for b in built
        if b.laps is not None
    ) + "".join(
        f"; GNSS lap channels from {b.config.source_name} on "
        + (
            repr(b.gnss_laps.circuit.name)
            if b.gnss_laps.circuit
            else f"the nearest of {len(b.gnss_laps.candidates)} circuits"
        )
        + (
            f", delta to {b.gnss_laps.delta.fixed.origin} ({b.gnss_laps.delta.fixed.lap_time_s:.3f} s)"
            if b.gnss_laps.delta.fixed is not None
            else ""
        )
        for b in built
        if b.gnss_laps is not None
    )
    sys.stdout.write(f"{loaded.origin}: ok: {len(loaded.config.sources)} source(s): {names}{laps}\n")
    return 0


def _show_token(loaded: Any, data: dict[str, Any]) -> None:
    """``[web] token``: the one changes need when the page listens off loopback (generated and
    kept beside the recordings if the config names none, as the daemon does)."""
    from wrtfd.daemon.web.access import resolve_token
    from wrtfd.errors import ConfigError

    cfg = loaded.config
    if not cfg.web.enabled:
        return
    try:
        token = resolve_token(cfg.web.token, cfg.status.host, loaded.output_dir())
    except ConfigError as exc:
        sys.stderr.write(f"wrtfd: note: {exc}\n")
        return
    if token is not None:
        data["web"]["token"] = token


def _resolved_reference(loaded: Any, spec: str) -> str:
    """``reference = "FILE[:LAP]"`` with FILE resolved like tracks (the lap part kept)."""
    from wrtfd.tracks.delta import parse_fleet_reference, parse_reference

    if parse_fleet_reference(spec) is not None:
        return spec.strip()  # the team's best lap: no file
    file, session, lap = parse_reference(spec)
    where = "" if lap is None else f":{lap}" if session is None else f":{session}.{lap}"
    return f"{loaded.resolve(Path(file))}{where}"


def _absolute_paths(loaded: Any, model: Any, data: dict[str, Any], where: str = "") -> None:
    """Every path of ``model`` (dumped as ``data``) made absolute the way the daemon resolves it,
    so what ``show`` prints means the same from any directory: each field that holds a path (or
    a table of paths: ``recorder.schema``) against the config file's directory, except the two
    that the daemon takes from elsewhere (``recorder.output_dir``: the state directory;
    ``fleet.queue_dir``: under it), and decoder ``options`` by the decoders' own rule
    (:func:`wrtfd.daemon.wiring.resolve_option_paths`). Nested tables and lists are walked."""
    from pydantic import BaseModel

    from wrtfd.daemon.wiring import resolve_option_paths

    out = loaded.output_dir()
    special = {"recorder.output_dir": lambda _p: out, "fleet.queue_dir": lambda p: out / p}
    for name, field in type(model).model_fields.items():
        key = field.alias or name
        value = getattr(model, name)
        if key not in data:
            continue
        dotted = f"{where}.{key}" if where else key
        if isinstance(value, Path):
            data[key] = str(special.get(dotted, loaded.resolve)(value))
        elif isinstance(value, BaseModel) and isinstance(data[key], dict):
            _absolute_paths(loaded, value, data[key], dotted)
        elif isinstance(value, dict) and value and all(isinstance(v, Path) for v in value.values()):
            data[key] = {k: str(loaded.resolve(v)) for k, v in value.items()}
        elif key == "options" and isinstance(value, dict):
            data[key] = resolve_option_paths(data[key], loaded.base_dir)
        elif isinstance(value, tuple | list) and isinstance(data[key], list):
            for item, dumped in zip(value, data[key], strict=False):
                if isinstance(item, BaseModel) and isinstance(dumped, dict):
                    _absolute_paths(loaded, item, dumped, dotted)


def _show(args: argparse.Namespace) -> int:
    from wrtfd.daemon.config import load_effective_config
    from wrtfd.daemon.toml_out import dumps

    loaded = load_effective_config(args.config)
    data = loaded.config.model_dump(mode="json", by_alias=True)
    _absolute_paths(loaded, loaded.config, data)  # definitions, tracks, DBCs, circuits, ...
    ordered = []
    for src, cfg in zip(data["sources"], loaded.config.sources, strict=True):
        src["name"] = cfg.source_name
        track = loaded.track_path(cfg)
        if track is not None:
            if cfg.reference is not None:
                src["reference"] = _resolved_reference(loaded, cfg.reference)
        else:  # the track's companion keys mean nothing without one: keep the listing short
            for key in ("track_position", "track_z_sign", "track_lane", "reference"):
                src.pop(key, None)
        head = {k: src.pop(k) for k in ("kind", "name", "protocol")}
        ordered.append({**head, **src})
    data["sources"] = ordered
    _show_token(loaded, data)
    sys.stdout.write(f"# effective wrtfd config (from: {loaded.origin})\n")
    sys.stdout.write(dumps(data))
    return 0


def _schema(args: argparse.Namespace) -> int:
    from wrtfd.daemon.config import load_effective_config
    from wrtfd.daemon.wiring import composed_schemas
    from wrtfd.errors import ConfigError

    loaded = load_effective_config(args.config)
    schemas = composed_schemas(loaded)
    group = args.group
    if group is None:
        if len(schemas) > 1:
            raise ConfigError(
                f"{loaded.origin}: {len(schemas)} recording groups ({', '.join(sorted(schemas))}):"
                " choose one with --group"
            )
        group = next(iter(schemas))
    if group not in schemas:
        raise ConfigError(
            f"{loaded.origin}: no recording group {group!r} (groups: {', '.join(sorted(schemas))})"
        )
    text = schemas[group].yaml_text
    if args.output is None:
        sys.stdout.write(text)
    else:
        from wrtfd.cli.output_path import check_output

        check_output(args.output, force=args.force)  # an existing file is refused without --force
        args.output.write_text(text, encoding="utf-8")
    return 0
