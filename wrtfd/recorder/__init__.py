"""The recorder: sessions, files, durability; and the live driver the daemon runs.

Public names (the contract other modules code against)::

    from wrtfd.recorder import Recorder, RecorderPolicy, SourceSpec, replay, LiveRecorder

How timing works is documented in :mod:`wrtfd.scheduler.core`; file rotation, naming and I/O
errors in :mod:`wrtfd.recorder.files`; the durability bound in :mod:`wrtfd.recorder.live`; the
layout of a recording's definition in :mod:`wrtfd.recorder.compose`; the derived-channel
plug-in in :mod:`wrtfd.recorder.derived`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from wrtfd.recorder.compose import compose_definition as compose_definition
from wrtfd.recorder.derived import DerivedChannels as DerivedChannels
from wrtfd.recorder.files import render_name as render_name
from wrtfd.recorder.files import sanitize_component as sanitize_component
from wrtfd.recorder.recorder import Recorder as Recorder
from wrtfd.recorder.recorder import RecorderPolicy as RecorderPolicy
from wrtfd.recorder.recorder import Replayer as Replayer
from wrtfd.recorder.recorder import SourceSpec as SourceSpec
from wrtfd.recorder.recorder import replay as replay

if TYPE_CHECKING:
    from wrtfd.recorder.live import LiveRecorder as LiveRecorder

__all__ = [
    "DerivedChannels",
    "LiveRecorder",
    "Recorder",
    "RecorderPolicy",
    "Replayer",
    "SourceSpec",
    "compose_definition",
    "render_name",
    "replay",
    "sanitize_component",
]


def __getattr__(name: str) -> Any:
    # The live driver needs anyio (the daemon extra); offline users (replay, the importers,
    # `wrtfd simulate --record`) import this package without it.
    # (importlib: only a caller asking for it depends on it, not every importer of this package.)
    if name == "LiveRecorder":
        return importlib.import_module("wrtfd.recorder.live").LiveRecorder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
