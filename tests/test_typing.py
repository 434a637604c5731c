"""mypy over the package and the tests (``[tool.mypy]`` in pyproject.toml), as part of the suite:
in a module of its own, so a test worker runs it beside the other tests, not after them.

Its cache lives outside the clone, in the user's cache directory (as uv's and pip's do), so a
fresh clone on a machine that ran the suite before checks only what changed: mypy validates each
cached module by its content's hash, so a cache written by another clone or commit is reused
only where the source is the same. Cold, it is 50 s of CPU; warm, under a second."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def mypy_cache_dir() -> Path:
    """``$MYPY_CACHE_DIR`` if set, else ``wrtfd/mypy`` under ``$XDG_CACHE_HOME`` (``~/.cache``)."""
    if os.environ.get("MYPY_CACHE_DIR"):
        return Path(os.environ["MYPY_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "wrtfd" / "mypy"


def test_mypy_is_clean() -> None:
    env = dict(os.environ, MYPY_CACHE_DIR=str(mypy_cache_dir()))
    r = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=REPO, env=env, capture_output=True, text=True, timeout=900
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("Success: no issues found"), r.stdout
