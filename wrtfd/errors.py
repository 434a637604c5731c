"""Every error wrtfd raises on purpose derives from :class:`WrtfdError`.

::

    WrtfdError
     +-- FormatError            a WRTF file or definition is wrong
     |    +-- CorruptFileError  bytes on disk contradict the format (offset given)
     |    +-- SchemaError       a channel definition breaks a rule (path given)
     +-- DecodeError            a datagram / line / record could not be decoded (reason given)
     +-- SourceError            a source could not open or lost its device or socket
     +-- ConfigError            configuration is invalid (file and key path given)
     +-- TrackError             a track file is unreadable or invalid
     +-- ImportFormatError      a foreign recording (CARLA, .zddsrec) is unreadable
     +-- ServiceError           installing or removing the systemd service cannot go on
     +-- StatusError            a daemon's status endpoint is unreachable or answers nonsense
     +-- ExportError            an export cannot be written (missing extra, format limits)
     +-- MissingDependencyError an optional dependency is not installed (names the extra);
                                also an ImportError, so "skip what is not installed" still works

The CLI turns any of these into one line on stderr and a non-zero exit code.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "CorruptFileError",
    "DecodeError",
    "ExportError",
    "FormatError",
    "ImportFormatError",
    "MissingDependencyError",
    "SchemaError",
    "ServiceError",
    "SourceError",
    "StatusError",
    "TrackError",
    "WrtfdError",
]


class WrtfdError(Exception):
    """Root of all wrtfd errors."""


class FormatError(WrtfdError):
    """A WRTF file or definition does not follow the format."""


class CorruptFileError(FormatError):
    """The bytes of a file contradict the format.

    ``offset`` is the byte offset where the problem was found (None when unknown).
    """

    def __init__(self, message: str, *, offset: int | None = None) -> None:
        super().__init__(message if offset is None else f"{message} (at byte {offset})")
        self.offset = offset


class SchemaError(FormatError):
    """A channel definition breaks a rule of wrtf-schema.md; the message names the path."""


class DecodeError(WrtfdError, ValueError):
    """Input bytes could not be decoded.

    ``reason`` is a short stable slug (``wrong_size``, ``bad_checksum``, ``unknown_format``...)
    used as the key when sources count what they drop.
    """

    def __init__(self, message: str, *, reason: str = "decode_error") -> None:
        super().__init__(message)
        self.reason = reason


class SourceError(WrtfdError):
    """A source could not open, or lost, its socket or device."""


class ConfigError(WrtfdError):
    """Configuration is invalid; the message names the file and key path."""


class TrackError(WrtfdError):
    """A track file could not be parsed or is invalid."""


class ImportFormatError(WrtfdError):
    """A foreign recording (CARLA recorder, .zddsrec) could not be read."""


class ServiceError(WrtfdError):
    """``wrtfd service install/uninstall`` cannot go on (not root, no systemd, a step failed)."""


class StatusError(WrtfdError):
    """``wrtfd status`` got no usable answer from the daemon (unreachable, timeout, not JSON)."""


class ExportError(WrtfdError):
    """An export cannot be written: an optional dependency is missing, or the recording does
    not fit the target format (the message says which limit)."""


class MissingDependencyError(WrtfdError, ImportError):
    """An optional dependency is not installed; the message says which extra brings it.

    ``extra`` is the name in ``pip install 'wrtfd[EXTRA]'`` (``daemon``, ``parquet``, ...).
    """

    def __init__(self, message: str, *, extra: str) -> None:
        super().__init__(message)
        self.extra = extra
