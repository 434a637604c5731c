"""ruff (lint and format) and import-linter's layering contracts, as part of the suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CHECKED = ("wrtfd", "tests", "bench", "tools")
BIN = Path(sys.executable).parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), cwd=REPO, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("command", [("check",), ("format", "--check")], ids=["check", "format"])
def test_ruff_is_clean(command: tuple[str, ...]) -> None:
    r = run(sys.executable, "-m", "ruff", *command, *CHECKED)
    assert r.returncode == 0, r.stdout + r.stderr


def test_import_contracts_are_kept() -> None:
    r = run(str(BIN / "lint-imports"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout, r.stdout
