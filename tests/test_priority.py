"""The test run's priority policy (tests/priority.py): subjects and real-time tests ahead of the
CPU-bound rest, the checking tools behind them."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.priority import WORKER_NICENESS, _is_batch

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="the policy applies where the run may raise priorities (root)"
)


@pytest.mark.parametrize(
    ("argv", "batch"),
    [
        ([sys.executable, "-m", "mypy"], True),
        (["/venv/bin/lint-imports"], True),
        ([sys.executable, "-m", "ruff", "check", "wrtfd"], True),
        (["/tools/bin/uv", "pip", "install", "x"], True),
        ([sys.executable, "-m", "venv", "/tmp/v"], True),
        ([sys.executable, "-m", "wrtfd", "run", "--config", "mypy"], False),
        ([sys.executable, "-m", "wrtfd", "simulate"], False),
        ("nats-server", False),
    ],
)
def test_checking_tools_are_batch_and_subjects_are_not(argv: list[str] | str, batch: bool) -> None:
    assert _is_batch(argv) is batch


def _child_niceness(*argv: str) -> int:
    code = "import os; print(os.getpriority(os.PRIO_PROCESS, 0))"
    done = subprocess.run([*argv, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    return int(done.stdout)


@needs_root
def test_a_cpu_bound_test_runs_behind_and_starts_its_subjects_ahead() -> None:
    assert os.getpriority(os.PRIO_PROCESS, 0) == WORKER_NICENESS
    assert _child_niceness(sys.executable) == 0


@needs_root
async def test_an_async_test_runs_at_the_usual_priority() -> None:
    assert os.getpriority(os.PRIO_PROCESS, 0) == 0


@needs_root
@pytest.mark.realtime
def test_a_realtime_test_runs_at_the_usual_priority() -> None:
    assert os.getpriority(os.PRIO_PROCESS, 0) == 0
