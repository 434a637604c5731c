"""Carry out an install's steps, or (dry run) print what each would do: one code path for both.

Every step prints one line: ``created``/``updated``/``removed`` a file (with a summary of its
content, or of the lines that changed), ``ran`` a command, ``unchanged`` when there was nothing
to do. Files go to ``root`` + their system path, written atomically (temporary file, fsync,
rename) so an interrupted install never leaves half a unit. Commands that only read
(``systemctl is-enabled``) run in a dry run too; nothing that changes the system does.
"""

from __future__ import annotations

import difflib
import os
import shlex
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from wrtfd.errors import ServiceError

__all__ = ["COMMAND_TIMEOUT_S", "Steps", "changed_lines", "query"]

#: A systemctl or systemd-sysusers call that takes longer than this is reported as failed.
COMMAND_TIMEOUT_S = 120.0
#: Changed lines listed for an updated file; the rest are counted.
MAX_CHANGED_LINES = 6
#: Files the installer compares are configs and units; a bigger one is refused (bounded input).
MAX_FILE_BYTES = 4 << 20


def changed_lines(old: str, new: str, *, limit: int = MAX_CHANGED_LINES) -> str:
    """``-old line; +new line; ...`` for the lines that differ (a few, then a count)."""
    diff = [
        line
        for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    text = "; ".join(diff[:limit])
    if len(diff) > limit:
        text += f"; ... {len(diff) - limit} more changed lines"
    return text


class Steps:
    """The steps of one install or uninstall into ``root`` (``/`` is the running system)."""

    def __init__(self, root: Path, *, dry_run: bool, out: Callable[[str], None]) -> None:
        self.root = root
        self.dry_run = dry_run
        self.out = out
        #: What changed (or would change, in a dry run), one short phrase each.
        self.changes: list[str] = []

    def at(self, system_path: str) -> Path:
        """Where ``/etc/...`` is under the root."""
        return self.root / system_path.lstrip("/")

    def read(self, system_path: str) -> bytes | None:
        target = self.at(system_path)
        try:
            with target.open("rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
        except FileNotFoundError:
            return None
        if len(data) > MAX_FILE_BYTES:
            raise ServiceError(f"{target}: larger than {MAX_FILE_BYTES} bytes; not a file wrtfd installed")
        return data

    def write(self, system_path: str, content: bytes, *, what: str, summary: str, mode: int = 0o644) -> str:
        """Create or update a file; returns ``"created"``, ``"updated"`` or ``"unchanged"``."""
        old = self.read(system_path)
        if old == content:
            self.out(f"unchanged: {what} {system_path}")
            return "unchanged"
        if old is None:
            self._report("create", "created", f"{what} {system_path} ({summary})")
        else:
            detail = changed_lines(old.decode("utf-8", "replace"), content.decode("utf-8", "replace"))
            self._report("update", "updated", f"{what} {system_path} ({detail or summary})")
        if not self.dry_run:
            _atomic_write(self.at(system_path), content, mode)
        return "created" if old is None else "updated"

    def backup(self, system_path: str, *, what: str) -> str:
        """Copy an existing file aside (``NAME.YYYYmmdd-HHMMSS.bak``) before it is replaced."""
        old = self.read(system_path)
        if old is None:
            return ""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        copy = f"{system_path}.{stamp}.bak"
        self._report("back up", "backed up", f"{what} {system_path} to {copy}")
        if not self.dry_run:
            _atomic_write(self.at(copy), old, 0o600)
        return copy

    def remove(self, system_path: str, *, what: str) -> bool:
        target = self.at(system_path)
        if not target.exists() and not target.is_symlink():
            self.out(f"unchanged: {what} {system_path} is not there")
            return False
        self._report("remove", "removed", f"{what} {system_path}")
        if not self.dry_run:
            target.unlink()
        return True

    def run(self, argv: Sequence[str], *, why: str) -> None:
        """Run a command that changes the system (only printed in a dry run)."""
        proc = self.command(argv, why=why)
        if proc is not None and proc.returncode != 0:
            lines = (proc.stderr or proc.stdout).strip().splitlines()
            reason = lines[-1] if lines else "no output"
            raise ServiceError(f"{shlex.join(argv)} failed (exit {proc.returncode}): {reason}")

    def command(
        self, argv: Sequence[str], *, why: str, timeout_s: float = COMMAND_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str] | None:
        """Run a command that changes the system and hand back its result, whatever its exit
        (the caller judges it); None in a dry run."""
        self._report("run", "ran", f"{shlex.join(argv)} ({why})")
        if self.dry_run:
            return None
        proc = query(argv, timeout_s=timeout_s)
        if proc is None:
            raise ServiceError(f"{argv[0]}: command not found")
        return proc

    def _report(self, would: str, did: str, text: str) -> None:
        self.changes.append(f"{would} {text}")
        self.out(f"would {would} {text}" if self.dry_run else f"{did} {text}")


def query(
    argv: Sequence[str], *, timeout_s: float = COMMAND_TIMEOUT_S
) -> subprocess.CompletedProcess[str] | None:
    """Run ``argv`` and return its result (None when the program is not installed)."""
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False)
    except FileNotFoundError:
        return None
    except subprocess.TimeoutExpired:
        raise ServiceError(f"{shlex.join(argv)} did not finish within {timeout_s:.0f} s") from None


def _atomic_write(target: Path, content: bytes, mode: int) -> None:
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
    tmp = target.with_name(f".{target.name}.wrtfd-tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
