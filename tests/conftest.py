"""Shared fixtures: where the real captures are, and skipping cleanly without them; and the
guards every test runs under (anyio's blockbuster and python-can's leak fixture, in our terms):

- an async test fails if the code that runs on the daemon's event loop (sources, the live
  recorder, the daemon) makes a blocking call (file or socket I/O, ``time.sleep``, a lock
  wait...) on the loop's thread (``blockbuster``). Synchronous library code a test calls
  directly from its body (building a decoder, an offline replay) is not what runs on the loop,
  so it is not watched;
- any test fails if it leaves a socket open, a thread running or an asyncio task unfinished.

A test that must keep something alive on purpose says so with ``@pytest.mark.allow_leaks``.
"""

from __future__ import annotations

import asyncio
import asyncio.runners
import inspect
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from blockbuster import blockbuster_ctx
from hypothesis import settings

from tests.priority import run_subjects_ahead, usual_priority

# Tests never assert wall-clock time (benchmarks measure speed): hypothesis' per-example deadline
# is such an assertion, and a loaded machine (six test workers, other people's work) trips it.
settings.register_profile("wrtfd", deadline=None)
settings.load_profile("wrtfd")

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
SHARED_DATA = SHARED / "data"
SHARED_SPEC = SHARED / "spec"


def _cache_bytecode() -> None:
    """Let this run and everything it starts keep compiled modules (``__pycache__``, ignored by
    git) where the environment says not to (``PYTHONDONTWRITEBYTECODE``, set on some CI
    machines): otherwise every worker compiles and assertion-rewrites the whole suite (10 s of
    CPU each, 3 s from the cache) and every daemon and CLI subprocess compiles wrtfd again."""
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
        sys.dont_write_bytecode = False


def _py_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in ([path] if path.is_file() else path.rglob("test*.py")))


def collection_halves(tests: Path) -> tuple[list[Path], list[Path]]:
    """The test directories and top-level test modules in two halves of about the same size."""
    halves: tuple[list[Path], list[Path]] = ([], [])
    loads = [0, 0]
    parts = [
        p for p in tests.iterdir() if p.name.startswith("test_") or (p.is_dir() and p.name != "__pycache__")
    ]
    sizes = {p: _py_bytes(p) for p in parts}
    for path in sorted(parts, key=sizes.__getitem__, reverse=True):
        half = loads.index(min(loads))
        halves[half].append(path)
        loads[half] += sizes[path]
    return halves


def _warm_the_cache(config: pytest.Config) -> None:
    """In a fresh clone every pytest-xdist worker assertion-rewrites and compiles the whole suite
    at the same time (13 s of CPU each, 4 s from the cache; six workers: 29 s before the first
    test, 19 s with this): the controller has it done once first, by two collect-only runs side
    by side that fill ``__pycache__``."""
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        return
    if any((REPO / "tests" / "__pycache__").glob("conftest.*-pytest-*.pyc")):
        return  # a run before this one left the cache
    collect = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    runs = [
        subprocess.Popen(
            [*collect, *map(str, half)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for half in collection_halves(REPO / "tests")
    ]
    for run in runs:
        run.wait()  # a collection error shows in the real run


def pytest_configure(config: pytest.Config) -> None:
    _cache_bytecode()
    run_subjects_ahead()
    _warm_the_cache(config)


#: Modules that take a minute or more of wall time, mostly waiting (a log replayed at its own
#: pace, a cluster's failover, fresh venvs, server outages): collected first,
#: so that pytest-xdist's ``loadscope`` hands them to the workers at the start and the rest of the
#: suite runs beside them instead of after them (one of them last added two minutes to a run; at
#: six workers the workers then end within 10 s of each other, 286-296 s, measured 2026-11-28).
#: Only those: every long module first (28, longest first) put the end-to-end tests' daemons and
#: simulators all at the start, together, and the run took longer (327 and 340 s against 311 s);
#: tests/sources/test_ubx_source.py (a minute of a simulated receiver's set-ups in the worker's own
#: process) comes last of them, so that it is a worker's second module, behind one of the first:
#: handed out at the run's busiest start it missed every probe twice in two runs, and handed out
#: last it ended a run alone (355 s).
LONG_MODULES = (
    "tests/e2e/test_gnss_kart_live.py",
    "tests/test_typing.py",
    "tests/fleet/test_cluster.py",
    "tests/e2e/test_trackday.py",
    "tests/test_packaging.py",
    "tests/e2e/test_fleet.py",
    "tests/importers/test_pcap_import.py",
    "tests/e2e/test_gnss_laps_live.py",
    "tests/sources/test_ubx_source.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The :data:`LONG_MODULES` first, everything else in collection order (a stable sort)."""
    rank = {name: i for i, name in enumerate(LONG_MODULES)}

    def key(item: pytest.Item) -> int:
        path = Path(item.path)
        if not path.is_relative_to(REPO):
            return len(rank)
        return rank.get(path.relative_to(REPO).as_posix(), len(rank))

    items.sort(key=key)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data``; tests that need real captures skip when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real captures not available: {SHARED_DATA} is absent (a fresh clone without ../shared)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def shared_spec() -> Path:
    if not SHARED_SPEC.is_dir():
        pytest.skip(f"specs not available: {SHARED_SPEC} is absent")
    return SHARED_SPEC


#: How long a test's threads and sockets get to wind down after it returned (daemon threads of
#: ``anyio.to_thread`` idle out on their own, so they are not counted).
SETTLE_S = 2.0


def _open_sockets() -> set[str]:
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed meanwhile (the listing's own fd)
        if target.startswith("socket:"):
            found.add(f"fd {fd} {target}")
    return found


def _live_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.is_alive() and not t.daemon}


def _is_async(request: pytest.FixtureRequest) -> bool:
    func = getattr(request, "function", None)
    return func is not None and inspect.iscoroutinefunction(func)


@pytest.fixture(autouse=True)
def realtime_at_usual_priority(request: pytest.FixtureRequest) -> Iterator[None]:
    """An async test runs sources and recorders on its own event loop, against the clock: at the
    usual priority, like the subjects the workers start (tests/priority.py); so does a test
    marked ``realtime``. The rest stays at the workers' niceness."""
    if _is_async(request) or request.node.get_closest_marker("realtime"):
        with usual_priority():
            yield
    else:
        yield


@pytest.fixture(autouse=True)
def no_leaks(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail the test if it leaks a socket, a (non-daemon) thread or a running asyncio task."""
    if request.node.get_closest_marker("allow_leaks"):
        yield
        return
    sockets = _open_sockets()
    threads = _live_threads()
    unfinished: list[str] = []
    cancel_all = getattr(asyncio.runners, "_cancel_all_tasks", None)
    if cancel_all is not None:
        # The test's event loop is closed by its runner after the test: whatever task is still
        # running then was started and never awaited or cancelled by the test.
        def record_then_cancel(loop: asyncio.AbstractEventLoop) -> Any:
            unfinished.extend(repr(t.get_coro()) for t in asyncio.all_tasks(loop) if not t.done())
            return cancel_all(loop)

        monkeypatch.setattr(asyncio.runners, "_cancel_all_tasks", record_then_cancel)
    yield
    deadline = time.monotonic() + SETTLE_S
    while True:
        new_sockets = _open_sockets() - sockets
        new_threads = _live_threads() - threads
        if not (new_sockets or new_threads) or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    problems = []
    if new_sockets:
        problems.append(f"sockets left open: {sorted(new_sockets)}")
    if new_threads:
        problems.append(f"threads left running: {sorted(t.name for t in new_threads)}")
    if unfinished:
        problems.append(f"asyncio tasks left running: {unfinished}")
    assert not problems, "; ".join(problems)


#: The packages whose code runs on the event loop: a blocking call with one of them on the stack
#: raises ``BlockingError``.
LOOP_PACKAGES = ["wrtfd.sources", "wrtfd.recorder.live", "wrtfd.recorder.groups", "wrtfd.daemon"]


#: Blocking that never happens on the running daemon's loop, allowed where a test reaches it from
#: the loop's thread: the packaged definitions are read once (cached) when a decoder is built,
#: which the daemon does before its loop starts.
MAY_BLOCK: list[tuple[str, str]] = [("wrtfd/decoders/_common.py", "_load_cached")]


@pytest.fixture(autouse=True)
def no_blocking_in_loop(request: pytest.FixtureRequest) -> Iterator[None]:
    """In an async test, a blocking call made on the loop by code that runs there raises."""
    if not _is_async(request) or request.node.get_closest_marker("allow_blocking"):
        yield
        return
    with blockbuster_ctx(LOOP_PACKAGES) as bb:
        for function in bb.functions.values():
            for filename, where in MAY_BLOCK:
                function.can_block_in(filename, where)
        yield
