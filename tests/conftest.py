"""Shared fixtures: where the real captures are, and skipping cleanly without them."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

# Tests never assert wall-clock time (benchmarks measure speed): hypothesis' per-example deadline
# is such an assertion, and a loaded machine (three test workers, other people's work) trips it.
settings.register_profile("wrtfd", deadline=None)
settings.load_profile("wrtfd")

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
SHARED_DATA = SHARED / "data"
SHARED_SPEC = SHARED / "spec"


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
