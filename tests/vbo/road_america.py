"""The real Road America VBOX log (../shared/data/trackday), imported once per test module."""

from __future__ import annotations

from pathlib import Path

import pytest

from wrtfd.cli.main import main

ROAD_AMERICA = "trackday/vbo/vbo-parser__25IR05_RdAm_FP1_Run04_KO.vbo"


def imported_road_america(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``wrtfd import`` of the log into a fresh directory; the WRTF file's path."""
    out = tmp_path_factory.mktemp("vbo") / "ra.wrtf"
    assert main(["import", str(shared_data / ROAD_AMERICA), "-o", str(out)]) == 0
    return out
