"""Every public module says what it exports (anyio's test_all_attributes idea).

For each module of the package whose name has no ``_`` part: it has ``__all__``; every name in it
exists; and every public class or function the module itself defines is in it. A public name
left out on purpose goes into :data:`NOT_EXPORTED` with the reason.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest

import wrtfd

#: module -> names it defines publicly but does not export, and why.
NOT_EXPORTED: dict[str, set[str]] = {}


def _public_modules() -> list[str]:
    names = ["wrtfd"]
    for info in pkgutil.walk_packages(wrtfd.__path__, "wrtfd."):
        parts = info.name.split(".")
        if any(p.startswith("_") for p in parts[1:]):
            continue
        names.append(info.name)
    return sorted(names)


MODULES = _public_modules()


def _defined_here(module: ModuleType) -> set[str]:
    out = set()
    for name, obj in vars(module).items():
        if name.startswith("_"):
            continue
        if (inspect.isclass(obj) or inspect.isfunction(obj)) and obj.__module__ == module.__name__:
            out.add(name)
    return out


def test_the_walk_finds_the_package() -> None:
    assert {"wrtfd.format.reader", "wrtfd.daemon.app", "wrtfd.cli.main"} <= set(MODULES)
    assert len(MODULES) > 100


@pytest.mark.parametrize("name", MODULES)
def test_all_lists_what_the_module_defines(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert isinstance(exported, list | tuple), f"{name} has no __all__"
    missing = [n for n in exported if not hasattr(module, n)]
    assert missing == [], f"{name}.__all__ names what it does not have"
    assert len(set(exported)) == len(exported), f"{name}.__all__ repeats a name"
    unlisted = _defined_here(module) - set(exported) - NOT_EXPORTED.get(name, set())
    assert unlisted == set(), f"{name} defines public names that are not in __all__"
