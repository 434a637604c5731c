"""wrtfd: record live racing telemetry into WRTF files, and read them back.

The library for notebooks and scripts (numpy and PyYAML only; pandas for DataFrames)::

    import wrtfd

    with wrtfd.open("run.wrtf") as r:
        frames = r.frames(0)                          # zero-copy numpy view of session 0
        lap = r.frames_between(0, start_us, end_us)   # frames by time (N9)
        df = r.to_dataframe(0)                        # needs pandas
        for names, columns in wrtfd.iter_columns(r):  # flat columns, chunk by chunk
            ...

Names are loaded on first use, so ``import wrtfd`` stays cheap (the CLI imports it on every
command). The daemon (``wrtfd run``) is the ``daemon`` extra and is not part of this API.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wrtfd.errors import (
        ConfigError,
        CorruptFileError,
        DecodeError,
        FormatError,
        MissingDependencyError,
        SchemaError,
        WrtfdError,
    )
    from wrtfd.format import Reader, RepairReport, Schema, SessionInfo, Writer, repair_file, validate_file
    from wrtfd.format.columns import iter_columns

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "CorruptFileError",
    "DecodeError",
    "FormatError",
    "MissingDependencyError",
    "Reader",
    "RepairReport",
    "Schema",
    "SchemaError",
    "SessionInfo",
    "Writer",
    "WrtfdError",
    "__version__",
    "iter_columns",
    "open",
    "repair_file",
    "validate_file",
]

#: Public name -> the module that defines it (imported when the name is first used).
_LAZY: dict[str, str] = {
    "ConfigError": "wrtfd.errors",
    "CorruptFileError": "wrtfd.errors",
    "DecodeError": "wrtfd.errors",
    "FormatError": "wrtfd.errors",
    "MissingDependencyError": "wrtfd.errors",
    "SchemaError": "wrtfd.errors",
    "WrtfdError": "wrtfd.errors",
    "Reader": "wrtfd.format.reader",
    "SessionInfo": "wrtfd.format.reader",
    "RepairReport": "wrtfd.format.repair",
    "repair_file": "wrtfd.format.repair",
    "Schema": "wrtfd.format.schema",
    "validate_file": "wrtfd.format.validate",
    "Writer": "wrtfd.format.writer",
    "iter_columns": "wrtfd.format.columns",
}


def open(path: str | Path, schema: Schema | None = None) -> Reader:
    """Open a WRTF file for reading (a :class:`Reader`; use it as a context manager).

    ``schema`` is for files without an embedded definition (N5).

    :raises FormatError: the file is not a readable WRTF file (:class:`CorruptFileError` with
        the byte offset when its bytes contradict the format).
    :raises OSError: the file cannot be opened.
    """
    from wrtfd.format.reader import Reader

    return Reader(path, schema)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is an ordinary attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
