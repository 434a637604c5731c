"""The recorder's operations: what its engine hands to the file sink (and the trigger gate between).

Kept apart from :mod:`wrtfd.recorder.recorder` so that the stages between the engine and the sink
(:mod:`wrtfd.recorder.trigger`) can build them without an import cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["BeginOp", "EndOp", "FramesOp", "Op", "PlacedMarker"]


@dataclass(frozen=True, slots=True)
class PlacedMarker:
    """A marker the engine wrote into frames: its session tick, wall time and (cleaned) note."""

    tick: int
    wall_us: int
    note: str


@dataclass(frozen=True, slots=True)
class BeginOp:
    header: Mapping[str, Any]
    start_us: int
    #: File metadata plug-ins learnt while recording (a circuit picked at the first fix): for
    #: the files opened from this session on.
    metadata: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class FramesOp:
    frames: np.ndarray
    summary: Mapping[str, Any] | None = None
    #: Markers whose record starts in these frames (for observers and triggers; the frames
    #: themselves carry them to the file).
    marks: tuple[PlacedMarker, ...] = ()


@dataclass(frozen=True, slots=True)
class EndOp:
    footer: Mapping[str, Any]


Op = BeginOp | FramesOp | EndOp
