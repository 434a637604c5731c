"""Atomic outputs: every file of an export appears complete, or not at all.

Each output is written to a temporary file beside its target (same directory, so the final
``os.replace`` is a rename on one filesystem) and renamed into place only when the whole export
succeeded. Any exception, Ctrl-C included, removes the temporary files; a target that existed
before is left as it was.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from types import TracebackType

__all__ = ["AtomicOutputs"]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


class AtomicOutputs:
    """Context manager handing out temporary paths for targets; commits them all on success."""

    def __init__(self) -> None:
        self._pending: list[tuple[Path, Path]] = []

    def path(self, target: Path) -> Path:
        """A new empty temporary file beside ``target``, with the same suffix (some writers
        insist on it)."""
        target = Path(target)
        fd, tmp = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=f".partial{target.suffix}", dir=target.parent or Path(".")
        )
        try:
            os.fchmod(fd, 0o666 & ~_umask())  # what open() would have given the target
        finally:
            os.close(fd)
        self._pending.append((Path(tmp), target))
        return Path(tmp)

    @property
    def targets(self) -> list[Path]:
        return [t for _, t in self._pending]

    def discard(self) -> None:
        """Remove every temporary file not yet committed."""
        for tmp, _ in self._pending:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        self._pending = []

    def commit(self) -> list[Path]:
        """Rename every temporary file onto its target; returns the targets."""
        done: list[Path] = []
        try:
            for tmp, target in self._pending:
                os.replace(tmp, target)
                done.append(target)
        finally:
            self._pending = self._pending[len(done) :]
            self.discard()
        return done

    def __enter__(self) -> AtomicOutputs:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()
