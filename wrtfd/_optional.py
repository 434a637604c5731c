"""Optional dependencies: import one, or say in one line which extra installs it."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterable
from types import ModuleType

from wrtfd.errors import MissingDependencyError

__all__ = ["missing_dependency", "missing_modules", "require", "require_all"]


def _message(purpose: str, modules: Iterable[str], extra: str) -> str:
    return f"{purpose} needs {' and '.join(modules)}: install wrtfd[{extra}]"


def missing_dependency(module: str, *, extra: str, purpose: str) -> MissingDependencyError:
    """The error for a failed ``import module`` (raise it ``from`` the ImportError)."""
    return MissingDependencyError(_message(purpose, [module], extra), extra=extra)


def require(module: str, *, extra: str, purpose: str) -> ModuleType:
    """Import ``module``; raises :class:`MissingDependencyError` naming ``extra`` when absent."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if exc.name is not None and exc.name.split(".")[0] != module.split(".")[0]:
            raise  # the module is there but something it needs is broken: not ours to rename
        raise missing_dependency(module, extra=extra, purpose=purpose) from exc


def missing_modules(modules: Iterable[str]) -> list[str]:
    """Which of ``modules`` cannot be found (without importing any of them)."""
    return [name for name in modules if importlib.util.find_spec(name) is None]


def require_all(modules: Iterable[str], *, extra: str, purpose: str) -> None:
    """Check that every module is installed, importing none (cheap enough for a package import)."""
    missing = missing_modules(modules)
    if missing:
        raise MissingDependencyError(_message(purpose, missing, extra), extra=extra)
