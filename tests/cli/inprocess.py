"""``wrtfd ARGS`` through the CLI's ``main`` in the test's own process, returned as a subprocess
result (exit code, stdout, stderr), for tests about a command's work rather than the process: a
fresh interpreter per command (imports, definitions) was most of such a module's CPU. Tests about
the process itself (the entry point, signals, an interpreter without an extra) start one."""

from __future__ import annotations

import contextlib
import io
import subprocess
from pathlib import Path

from wrtfd.cli.main import main

__all__ = ["wrtfd_main"]


def wrtfd_main(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``wrtfd ARGS`` (from ``cwd`` if given); argparse's exit is its exit code. Any other
    exception is not caught: it fails the test, as a traceback on stderr would."""
    out, err = io.StringIO(), io.StringIO()
    where = contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext()
    with where, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess(["wrtfd", *args], code, out.getvalue(), err.getvalue())
