"""The files a config refers to by a relative path, which must travel with it to ``/etc/wrtfd``.

Relative paths in a config (a DBC, a track, a WRTF definition, a DDS topic map, a pinned frame
schema) are relative to the config file. Installing the config alone into ``/etc/wrtfd`` would
leave them dangling, so the installer copies each one to the same relative place beside the
installed config. Absolute paths stay as written (the service must be able to read them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from wrtfd.daemon.config import DdsSourceConfig, LoadedConfig
from wrtfd.daemon.wiring import resolve_option_paths
from wrtfd.errors import ServiceError

__all__ = ["Reference", "absolute_references", "relative_references"]


@dataclass(frozen=True, slots=True)
class Reference:
    """A file named in a config: where (key path), as written, and where it is on this machine."""

    key: str
    written: str
    path: Path


def _is_path_option(key: str) -> bool:
    """Whether the daemon reads decoder option ``key`` as a path (``dbc``, ``*_file``, ...)."""
    return resolve_option_paths({key: "x"}, Path("/"))[key] != "x"


def _all_references(loaded: LoadedConfig) -> list[Reference]:
    refs: list[Reference] = []
    for i, src in enumerate(loaded.config.sources):
        named: dict[str, Path | None] = {"definition": src.definition, "track": src.track}
        if isinstance(src, DdsSourceConfig):
            named["topic_map"] = src.topic_map
        for key, value in named.items():
            if value is not None:
                refs.append(Reference(f"sources[{i}].{key}", str(value), loaded.resolve(value)))
        for key, value in src.options.items():
            if isinstance(value, str) and value and _is_path_option(key):
                refs.append(Reference(f"sources[{i}].options.{key}", value, loaded.resolve(Path(value))))
    fleet = loaded.config.fleet
    if fleet is not None:  # the credentials and TLS files of [fleet]
        for key in ("creds", "tls_ca", "tls_cert", "tls_key"):
            value = getattr(fleet, key)
            if value is not None:
                refs.append(Reference(f"fleet.{key}", str(value), loaded.resolve(value)))
    pinned = loaded.config.recorder.frame_schema
    pins = pinned if isinstance(pinned, dict) else {} if pinned is None else {"": pinned}
    for group, path in pins.items():
        key = "recorder.schema" + (f".{group}" if group else "")
        refs.append(Reference(key, str(path), loaded.resolve(path)))
    return refs


def relative_references(loaded: LoadedConfig) -> list[Reference]:
    """The files to copy beside the installed config.

    :raises ServiceError: a relative path leaving the config's directory (``../x``): it has no
        place under ``/etc/wrtfd``.
    """
    out = []
    for ref in _all_references(loaded):
        written = PurePosixPath(ref.written)
        if written.is_absolute():
            continue
        if ".." in written.parts:
            raise ServiceError(
                f"{loaded.origin}: {ref.key}: {ref.written!r} leaves the config's directory, so it "
                "cannot be installed beside it; move the file next to the config or use an absolute path"
            )
        out.append(ref)
    return out


def absolute_references(loaded: LoadedConfig) -> list[Reference]:
    """The files the installed config names by absolute path (used where they are)."""
    return [r for r in _all_references(loaded) if PurePosixPath(r.written).is_absolute()]
