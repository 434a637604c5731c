"""The venv's bytecode, compiled at install: the service cannot write it.

The unit's ``ProtectSystem=strict`` makes the venv read-only for the service, so a module
without bytecode is compiled again at every start (twice the start and 5 MB more: figures in
docs/daemon.md, "Bytecode"). Only a venv's own site-packages holding this wrtfd is compiled: a
system Python's packages belong to their installer, and a wrtfd run from a source tree caches
its bytecode where it is run from.
"""

from __future__ import annotations

import importlib.util
import sys
import sysconfig
from pathlib import Path

import wrtfd

__all__ = ["COMPILE_TIMEOUT_S", "compile_command", "compiles", "missing_bytecode", "venv_site_packages"]

#: A small computer compiles a daemon's venv in a minute or two; longer is reported as failed.
COMPILE_TIMEOUT_S = 900.0


def venv_site_packages() -> tuple[Path | None, str]:
    """The venv site-packages that holds this wrtfd; (None, why not) when it is not one."""
    if sys.prefix == sys.base_prefix:
        return None, "wrtfd is not installed in a venv (a system Python's packages are its installer's)"
    package = Path(wrtfd.__file__).resolve().parent
    for key in ("purelib", "platlib"):
        site = Path(sysconfig.get_paths()[key]).resolve()
        if package.is_relative_to(site):
            return site, ""
    return None, f"wrtfd runs from {package.parent}, not from its venv's site-packages"


def missing_bytecode(site: Path) -> list[Path]:
    """Modules under ``site`` whose cached bytecode Python would not use (missing, or made from
    another version of the source)."""
    return [source for source in site.rglob("*.py") if not _fresh(source)]


def _fresh(source: Path) -> bool:
    """Importlib's own test of a timestamp ``.pyc`` (PEP 552): this Python's magic number, and
    the source's modification time and size as it recorded them; a hash-based one is taken."""
    cached = Path(importlib.util.cache_from_source(str(source)))
    try:
        with cached.open("rb") as f:
            header = f.read(16)
        stat = source.stat()
    except OSError:
        return False
    if len(header) < 16 or header[:4] != importlib.util.MAGIC_NUMBER:
        return False
    if int.from_bytes(header[4:8], "little") & 1:
        return True
    mtime, size = int.from_bytes(header[8:12], "little"), int.from_bytes(header[12:16], "little")
    return mtime == int(stat.st_mtime) & 0xFFFFFFFF and size == stat.st_size & 0xFFFFFFFF


def compiles(source: Path) -> bool:
    """Whether Python compiles ``source`` (a package's test data may be Python 2, or not code):
    such a file never has bytecode, and must not make every install compile again."""
    try:
        compile(source.read_bytes(), str(source), "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, OSError):
        return False
    return True


def compile_command(site: Path) -> list[str]:
    """What compiles ``site`` (every core; up-to-date modules are skipped)."""
    return [sys.executable, "-m", "compileall", "-q", "-j", "0", str(site)]
