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
    "security_exposure",
    "systemd_quote",
    "verify_units",
    "with_command",
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


def systemd_quote(arg: str) -> str:
    """One ``ExecStart=`` argument as systemd reads it back: ``%`` and ``$`` are escaped,
    and an argument with blanks, quotes or backslashes is double-quoted."""
    arg = arg.replace("%", "%%").replace("$", "$$")
    if arg and not any(ch.isspace() or ch in "\"'\\;" for ch in arg):
        return arg
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def with_command(unit_text: str, command: Sequence[str]) -> str:
    """``unit_text`` with the shipped :data:`INSTALLED_BINARY` of its ``Exec*=`` lines replaced
    by ``command`` (e.g. ``["/opt/wrtfd/bin/wrtfd"]`` or ``[python, "-m", "wrtfd"]``)."""
    quoted = " ".join(systemd_quote(a) for a in command)
    return _EXEC_LINE.sub(lambda m: m.group(1) + quoted + m.group(2), unit_text)


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
        copies = _copies(paths, Path(tmp), exe)
        proc = subprocess.run(
            [binary, "verify", "--man=no", *copies],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    output = (proc.stdout + proc.stderr).replace(tmp + "/", "")
    return VerifyResult(proc.returncode, output)


def _copies(paths: Sequence[Path], tmp: Path, exe: str) -> list[str]:
    """Copies of ``paths`` in ``tmp`` running ``exe``; templates named as an example instance."""
    copies = []
    for path in paths:
        copy = tmp / _instance_name(path.name)
        copy.write_text(with_command(path.read_text(), [exe]))
        copies.append(str(copy))
    return copies


_EXPOSURE = re.compile(r"Overall exposure level for (\S+): (\d+(?:\.\d+)?)")


def security_exposure(paths: Sequence[Path], *, analyze: str = "systemd-analyze") -> dict[str, float]:
    """``systemd-analyze security --offline=true`` of each unit file: unit name -> exposure
    (0.0 best, 10.0 worst). Offline, so it needs no running systemd; a template is rated as
    its example instance. Raises FileNotFoundError without systemd-analyze, ValueError when its
    output has no overall level."""
    binary = shutil.which(analyze)
    if binary is None:
        raise FileNotFoundError(f"{analyze} not found (apt-get install systemd)")
    exe = local_wrtfd()
    scores: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="wrtfd-units-") as tmp:
        for copy in _copies(paths, Path(tmp), exe):
            proc = subprocess.run(
                [binary, "security", "--offline=true", "--no-pager", copy],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            found = _EXPOSURE.search(proc.stdout + proc.stderr)
            if found is None:
                raise ValueError(f"systemd-analyze security {Path(copy).name}: {proc.stderr.strip()}")
            scores[found.group(1)] = float(found.group(2))
    return scores


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
