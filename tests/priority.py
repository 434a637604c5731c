"""Scheduling priority in the test run (tests/conftest.py): where the workers may raise a child's
priority again (root, as in CI), they run at :data:`WORKER_NICENESS` and the processes they start
at the usual 0, but for the checking tools (:data:`BATCH_TOOLS`: mypy, ruff, installers), which
stay at the workers' niceness. The subjects of the end-to-end tests (daemons, simulators,
servers, the browser) work against the clock; a daemon or a simulator starved behind a CPU-bound
test or tool drops late samples or stalls its feed, as it should, and fails a test about
something else. The tests of a bound that holds only on time (the crash-state test, the live GNSS
lap) run the daemon at the unit's ``Nice=`` (:func:`as_the_service`), as it is deployed.
Elsewhere nothing changes."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["SERVICE_NICENESS", "WORKER_NICENESS", "as_the_service", "run_subjects_ahead", "usual_priority"]

WORKER_NICENESS = 10

#: Commands (an argument's last path part, or ``-m MODULE``) that take CPU without working against
#: the clock: they run at the workers' niceness, behind the subjects.
BATCH_TOOLS = frozenset({"mypy", "ruff", "lint-imports", "uv", "pip", "venv"})


#: The daemon's niceness as the shipped unit runs it (``Nice=``, docs/daemon.md "Priority").
SERVICE_NICENESS = int(
    re.search(
        r"^Nice=(-?\d+)$",
        (Path(__file__).parents[1] / "wrtfd" / "service" / "units" / "wrtfd.service").read_text(),
        re.M,
    ).group(1)  # type: ignore[union-attr]
)


def as_the_service() -> None:
    """In a child between fork and exec: the unit's niceness where this may raise it (root, as in
    CI), else as it is. For the tests of what holds only on time (the crash bound)."""
    with contextlib.suppress(PermissionError):
        os.setpriority(os.PRIO_PROCESS, 0, SERVICE_NICENESS)


def _is_batch(args: Any) -> bool:
    argv = [args] if isinstance(args, str | bytes | os.PathLike) else list(args)
    return any(os.path.basename(os.fsdecode(a)) in BATCH_TOOLS for a in argv[:3])


def _subject_priority() -> None:
    """In a child between fork and exec: back to the usual priority."""
    os.setpriority(os.PRIO_PROCESS, 0, 0)


def run_subjects_ahead() -> None:
    """In a test process: the processes it starts at 0, itself at :data:`WORKER_NICENESS`."""
    if os.geteuid() != 0 or os.getpriority(os.PRIO_PROCESS, 0) != 0:
        return
    original = subprocess.Popen.__init__

    def popen_init(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
        if kwargs.get("preexec_fn") is None and not _is_batch(args[0] if args else kwargs.get("args", ())):
            kwargs["preexec_fn"] = _subject_priority
        original(self, *args, **kwargs)

    subprocess.Popen.__init__ = popen_init  # type: ignore[method-assign]
    os.nice(WORKER_NICENESS)


@contextlib.contextmanager
def usual_priority() -> Iterator[None]:
    """The calling thread at the usual priority for a while (a feeder whose timing is part of
    what the test measures: the crash-state recordings' datagrams, sent at their pace)."""
    before = os.getpriority(os.PRIO_PROCESS, 0)  # Linux: the calling thread's
    if before == 0:
        yield
        return
    try:
        os.setpriority(os.PRIO_PROCESS, 0, 0)
    except PermissionError:
        yield
        return
    try:
        yield
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, before)
