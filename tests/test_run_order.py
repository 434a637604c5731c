"""How tests/conftest.py lays out the parallel run: the long modules first, the cache warmed once."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import LONG_MODULES, REPO, collection_halves


def test_every_long_module_exists_once() -> None:
    # a renamed module would silently lose its place at the front
    assert sorted(set(LONG_MODULES)) == sorted(LONG_MODULES)
    assert [m for m in LONG_MODULES if not (REPO / m).is_file()] == []


def test_the_warm_up_halves_cover_every_test_module_once() -> None:
    tests = REPO / "tests"
    first, second = collection_halves(tests)
    assert first and second and not set(first) & set(second)

    def modules(parts: list[Path]) -> set[Path]:
        return {f for p in parts for f in ([p] if p.is_file() else p.rglob("test_*.py"))}

    assert modules(first) | modules(second) == set(tests.rglob("test_*.py"))

    def size(parts: list[Path]) -> int:
        return sum(f.stat().st_size for f in modules(parts))

    biggest = max(sum(f.stat().st_size for f in modules([p])) for p in first + second)
    assert abs(size(first) - size(second)) <= biggest  # balanced up to one directory
