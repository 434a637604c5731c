"""Writing an import's output files: refuse to overwrite, then replace atomically.

Importers replay their samples through the recorder into a temporary directory beside the
output and rename the files into place only once all are complete, so a failed or interrupted
import (an error, Ctrl-C) never leaves a half-written file under a requested name, nor the
folders it made for the output (only those it made, and only while empty). A single-file
import (CARLA, .zddsrec) uses :func:`replay_into_file`; one that may write several files (a
capture holding several games) uses :func:`staging_dir` and :func:`place_outputs`.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from wrtfd.decoders.base import Sample
from wrtfd.errors import ImportFormatError, WrtfdError
from wrtfd.recorder.files import sanitize_component

__all__ = ["check_output", "output_names", "place_outputs", "replay_into_file", "staging_dir"]


def check_output(output: Path, *, force: bool) -> None:
    """:raises ImportFormatError: ``output`` exists and ``force`` is not set."""
    if output.exists() and not force:
        raise ImportFormatError(f"{output} exists; use --force to overwrite it")


def replay_into_file(
    samples: Iterable[Sample],
    *,
    output: Path,
    source: Any,
    rate_hz: int,
    start_timestamp_us: int,
    metadata: Mapping[str, str],
    derived: Sequence[Any] = (),
    policy_options: Mapping[str, Any] | None = None,
) -> None:
    """Replay ``samples`` of one source into exactly one WRTF file at ``output``.

    :raises WrtfdError: the recorder split the import into several files.
    """
    from wrtfd.recorder import RecorderPolicy, replay

    with (
        _made_folders(output.parent),
        tempfile.TemporaryDirectory(prefix=".wrtfd-import-", dir=output.parent) as tmp,
    ):
        policy = RecorderPolicy(output_dir=Path(tmp), rate_hz=rate_hz, **(policy_options or {}))
        paths = replay(
            samples,
            sources=[source],
            policy=policy,
            start_timestamp_us=start_timestamp_us,
            metadata=dict(metadata),
            derived=list(derived),
        )
        if len(paths) != 1:
            raise WrtfdError(f"the recorder wrote {len(paths)} files for one import; expected one")
        os.replace(paths[0], output)  # same directory, so same filesystem: atomic


@contextmanager
def staging_dir(output: Path) -> Iterator[Path]:
    """A temporary directory on the output's file system, removed on the way out (with whatever
    an interrupted import left in it): the recorder writes there, :func:`place_outputs` moves."""
    parent = output if _is_directory_target(output) else output.parent
    with _made_folders(parent), tempfile.TemporaryDirectory(prefix=".wrtfd-import-", dir=parent) as tmp:
        yield Path(tmp)


@contextmanager
def _made_folders(folder: Path) -> Iterator[None]:
    """``folder`` and its missing parents, made now; on an error (Ctrl-C too) the ones made here
    are removed again, deepest first, each only if it is empty."""
    made: list[Path] = []
    missing = folder
    while not missing.exists() and missing != missing.parent:
        made.append(missing)
        missing = missing.parent
    folder.mkdir(parents=True, exist_ok=True)
    try:
        yield
    except BaseException:
        for d in made:  # deepest first
            with contextlib.suppress(OSError):  # not empty, or gone: leave it
                d.rmdir()
        raise


def _is_directory_target(output: Path) -> bool:
    return output.is_dir() or output.suffix != ".wrtf"


def output_names(output: Path, written: Mapping[str, Sequence[Path]]) -> dict[Path, Path]:
    """Where each written file goes: ``written`` is the files per recording group, in order.

    ``-o DIR`` (an existing directory, or a name without ``.wrtf``): the recorder's own file
    names, in DIR. ``-o OUT.wrtf``: OUT.wrtf when the import wrote one file, else
    ``OUT.<group>.wrtf`` (and ``OUT.<group>-2.wrtf``... for a group's later files).
    """
    if _is_directory_target(output):
        return {p: output / p.name for paths in written.values() for p in paths}
    total = sum(len(paths) for paths in written.values())
    if total == 1:
        return {next(p for paths in written.values() for p in paths): output}
    names: dict[Path, Path] = {}
    for group, paths in written.items():
        for i, p in enumerate(paths):
            suffix = "" if i == 0 else f"-{i + 1}"
            names[p] = output.with_name(f"{output.stem}.{sanitize_component(group)}{suffix}.wrtf")
    return names


def place_outputs(output: Path, written: Mapping[str, Sequence[Path]], *, force: bool) -> list[Path]:
    """Move the files an import wrote (in a :func:`staging_dir`) to their final names.

    Every name is checked before any file moves, so a refused import leaves nothing behind.

    :raises ImportFormatError: nothing was written (no source that delivered drives frames), or
        a final name exists and ``force`` is not set.
    """
    if not any(written.values()):
        raise ImportFormatError(
            f"{output}: no frame was recorded (do the sources this file feeds drive frames?)"
        )
    names = output_names(output, written)
    if not force:
        taken = [str(dst) for dst in names.values() if dst.exists()]
        if taken:
            raise ImportFormatError(f"{taken[0]} exists; use --force to overwrite it")
    for src, dst in names.items():
        os.replace(src, dst)  # same file system: atomic per file
    return list(names.values())
