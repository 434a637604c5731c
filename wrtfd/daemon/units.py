"""Check the shipped systemd unit files with ``systemd-analyze verify``.

``python -m wrtfd.daemon.units verify systemd/wrtfd.service systemd/wrtfd@.service``

The units name the installed binary (``/usr/local/bin/wrtfd``), which a checkout or CI machine
does not have, and ``systemd-analyze`` refuses a unit whose ``ExecStart`` binary is missing. So
each unit is verified from a temporary copy in which only that path is replaced by the ``wrtfd``
this Python runs; everything else is checked as shipped. A template (``name@.service``) is
verified as the instance ``name@example.service``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "INSTALLED_BINARY",
    "VerifyResult",
    "local_wrtfd",
    "main",
    "verify_units",
]

INSTALLED_BINARY = "/usr/local/bin/wrtfd"
EXAMPLE_INSTANCE = "example"

_EXEC_LINE = re.compile(r"^(Exec\w+=[-@:+!]*)" + re.escape(INSTALLED_BINARY) + r"(\s|$)", re.MULTILINE)


class VerifyResult:
    """What systemd-analyze said about a set of units."""

    def __init__(self, returncode: int, output: str) -> None:
        self.returncode = returncode
        self.output = output

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.output.strip()


def local_wrtfd() -> str:
    """The ``wrtfd`` entry point next to this interpreter (a venv), else on PATH."""
    candidate = Path(sys.executable).parent / "wrtfd"
    if candidate.is_file():
        return str(candidate)
    found = shutil.which("wrtfd")
    if found is None:
        raise FileNotFoundError("no wrtfd executable next to this Python or on PATH (pip install -e .)")
    return found


def _instance_name(name: str) -> str:
    stem, sep, suffix = name.partition("@.")
    return f"{stem}@{EXAMPLE_INSTANCE}.{suffix}" if sep else name


def verify_units(paths: Sequence[Path], *, analyze: str = "systemd-analyze") -> VerifyResult:
    """Run ``systemd-analyze verify`` on copies of ``paths``; raises FileNotFoundError without it."""
    binary = shutil.which(analyze)
    if binary is None:
        raise FileNotFoundError(f"{analyze} not found (apt-get install systemd)")
    exe = local_wrtfd()
    with tempfile.TemporaryDirectory(prefix="wrtfd-units-") as tmp:
        copies = []
        for path in paths:
            text = path.read_text()
            text = _EXEC_LINE.sub(lambda m: m.group(1) + exe + m.group(2), text)
            copy = Path(tmp) / _instance_name(path.name)
            copy.write_text(text)
            copies.append(str(copy))
        proc = subprocess.run(
            [binary, "verify", "--man=no", *copies],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    output = (proc.stdout + proc.stderr).replace(tmp + "/", "")
    return VerifyResult(proc.returncode, output)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[0] != "verify":
        sys.stderr.write("usage: python -m wrtfd.daemon.units verify UNIT...\n")
        return 2
    try:
        result = verify_units([Path(a) for a in args[1:]])
    except (FileNotFoundError, OSError, subprocess.TimeoutExpired) as exc:
        sys.stderr.write(f"units: {exc}\n")
        return 2
    if result.output.strip():
        sys.stderr.write(result.output if result.output.endswith("\n") else result.output + "\n")
    if result.ok:
        sys.stdout.write(f"units: {len(args) - 1} unit file(s) verified\n")
        return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
