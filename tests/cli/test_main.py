"""The command table: a command line naming a command imports that command's module only."""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
from pathlib import Path

from tests.format.samples import write_car_file
from wrtfd.cli.main import COMMAND_MODULES, COMMANDS

REPO = Path(__file__).resolve().parents[2]


def test_the_table_names_what_each_module_registers() -> None:
    registered: dict[str, str] = {}
    for name in COMMAND_MODULES:
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(name).register(sub)
        registered.update({command: name for command in sub.choices})
    assert registered == COMMANDS


def test_an_offline_command_loads_no_other_command(tmp_path: Path) -> None:
    """``wrtfd info FILE`` imports neither the other commands' modules nor the daemon's libraries."""
    write_car_file(tmp_path / "run.wrtf")
    code = (
        "import sys\nfrom wrtfd.cli.main import main\n"
        f"rc = main(['info', {str(tmp_path / 'run.wrtf')!r}])\n"
        "print(' '.join(sorted(sys.modules)), file=sys.stderr)\nsys.exit(rc)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    modules = set(proc.stderr.split())
    assert "wrtfd.cli.info" in modules
    others = {m for m in set(COMMANDS.values()) - {"wrtfd.cli.info"} if m in modules}
    assert not others
    assert not modules & {"anyio", "pydantic", "cantools", "rich", "wrtfd.tracks", "wrtfd.protocols"}
