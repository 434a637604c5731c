"""The rule every command that writes a file (``-o OUT``) follows before it writes.

An existing OUT is refused unless ``--force`` (one line naming ``--force``), and an OUT that is
one of the command's inputs (the same file, whatever the path says: a symlink, ``./``, a hard
link) is refused always: the command would otherwise replace the recording it is reading.
What is then written goes beside OUT and is renamed into place on success
(:class:`~wrtfd.exporters.atomic.AtomicOutputs`), so an error leaves nothing behind.

Commands: export, plot, compare, track show, repair -o, write (import checks its many output
names itself, :mod:`wrtfd.importers.output`).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from wrtfd.errors import WrtfdError

__all__ = [
    "MAX_IMAGE_PX",
    "MIN_IMAGE_PX",
    "add_force_option",
    "check_image_width",
    "check_output",
    "output_guard",
    "same_file",
]

#: The image sizes plot, compare and track show accept (pixels).
MIN_IMAGE_PX = 100
MAX_IMAGE_PX = 10_000


def add_force_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--force", action="store_true", help="overwrite OUT if it exists")


def same_file(a: Path | str, b: Path | str) -> bool:
    """Whether ``a`` and ``b`` name one existing file (device and inode; False if either is absent)."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def check_output(output: Path, inputs: Iterable[Path | str] = (), *, force: bool) -> None:
    """Refuse to write ``output``: when it is one of ``inputs``, always; when it exists, unless
    ``force``.

    :raises WrtfdError: one line saying which.
    """
    for src in inputs:
        if same_file(output, src):
            raise WrtfdError(f"{output} is the input {src}: give another output file")
    if os.path.lexists(output):
        if output.is_dir():
            raise WrtfdError(f"{output} is a folder: give a file name")
        if not force:
            raise WrtfdError(f"{output} exists; use --force to overwrite it")


def output_guard(inputs: Iterable[Path | str] = (), *, force: bool) -> Callable[[Path], None]:
    """:func:`check_output` for every file a command writes (an export may write several)."""
    sources = list(inputs)

    def guard(target: Path) -> None:
        check_output(target, sources, force=force)

    return guard


def check_image_width(width: int) -> None:
    """Refuse a ``--width`` outside ``MIN_IMAGE_PX..MAX_IMAGE_PX`` (0 or less cannot be drawn;
    100000 would take matplotlib minutes and gigabytes).

    :raises WrtfdError: one line with the range.
    """
    if not MIN_IMAGE_PX <= width <= MAX_IMAGE_PX:
        raise WrtfdError(f"--width must be {MIN_IMAGE_PX} to {MAX_IMAGE_PX} pixels, got {width}")
