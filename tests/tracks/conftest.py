"""Paths of the track test files."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data"
REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "config" / "tracks"


@pytest.fixture(scope="session")
def mini_path() -> Path:
    return DATA / "mini.trk"
