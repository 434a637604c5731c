"""Atomic outputs: every file of an export appears complete, or not at all.

Each output is written to a temporary file beside its target (same directory, so the final
``os.replace`` is a rename on one filesystem) and renamed into place only when the whole export
succeeded. Any exception, Ctrl-C included, removes the temporary files; a target that existed
before is left as it was. A ``guard`` sees every target before anything is written for it (the
CLI's refuses an existing file without ``--force``, and an input: :mod:`wrtfd.cli.output_path`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

__all__ = ["AtomicOutputs"]


def _is_utf8(name: str) -> bool:
    """A file name of other bytes (decoded with surrogate escapes) is not: some writers (pyarrow)
    take only UTF-8 paths, and the temporary file is the one they open, so its name is kept
    UTF-8; the rename onto the target takes any name."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class AtomicOutputs:
    """Context manager handing out temporary paths for targets; commits them all on success."""

    def __init__(self, guard: Callable[[Path], None] | None = None) -> None:
        self._pending: list[tuple[Path, Path]] = []
        self._guard = guard

    def path(self, target: Path) -> Path:
        """A new empty temporary file beside ``target``, with the same suffix (some writers
        insist on it).

        The name is registered before the file is created, so a Ctrl-C at any moment leaves
        nothing behind (``discard`` removes what exists of it).
        """
        target = Path(target)
        if self._guard is not None:
            self._guard(target)  # raises: nothing of this target exists yet
        directory = target.parent or Path(".")
        for _ in range(100):
            name = target.name if _is_utf8(target.name) else "wrtfd-export"
            suffix = target.suffix if _is_utf8(target.suffix) else ""
            tmp = directory / f".{name}.{secrets.token_hex(4)}.partial{suffix}"
            self._pending.append((tmp, target))
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
            except FileExistsError:
                self._pending.pop()  # somebody else's: never remove it
                continue
            os.close(fd)  # created with 0o666 & ~umask, what open() would give the target
            return tmp
        raise FileExistsError(f"{directory}: no free temporary name for {target.name}")

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
