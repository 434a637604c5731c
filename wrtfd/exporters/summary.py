"""What an export reports back, and how it reports progress."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ExportSummary", "FramesProgress"]

#: progress(frames done, frames in total)
FramesProgress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class ExportSummary:
    """The files an export wrote (final names), the frames it exported, and a short note."""

    paths: list[Path] = field(default_factory=list)
    frames: int = 0
    detail: str = ""
