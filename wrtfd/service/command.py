"""Which command the service's ``ExecStart=`` runs: *this* wrtfd, wherever it was installed.

A venv (``python -m venv /opt/wrtfd``), pipx (``/opt/pipx/venvs/wrtfd``) and a system-wide pip
install all put a ``wrtfd`` script in the scripts directory of the interpreter's install scheme
(``sysconfig.get_path("scripts")``: the venv's ``bin``, or ``/usr/local/bin``), whose ``#!`` line
names that interpreter. That script is used when its ``#!`` is this interpreter (pipx's link in
``PIPX_BIN_DIR`` is not needed: the venv's own script is the real file); otherwise, e.g. when
run from a checkout with ``python -m wrtfd``, the unit runs ``<this python> -m wrtfd``.

The unit runs as the ``wrtfd`` user in a sandbox that hides directories (``ProtectHome=yes``:
``/home``, ``/root``, ``/run/user``; ``PrivateTmp=yes``: ``/tmp``, ``/var/tmp``; and whatever
``InaccessiblePaths=`` or ``TemporaryFileSystem=`` name), so everything the command needs (the
script, the interpreter, the package) must be outside those and readable by others. The hidden
directories are read from the unit itself (:func:`hidden_paths`), so the check follows the
unit. A venv in a home directory or under ``/tmp`` is the usual mistake;
:func:`reachability_problems` names the path and the option that hides it, and the installer
stops with the fix instead of leaving a unit that fails at start (status 203/EXEC).
"""

from __future__ import annotations

import os
import stat
import sys
import sysconfig
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "HIDDEN_BY_PROTECT_HOME",
    "INSTALL_HINT",
    "Hidden",
    "command_paths",
    "hidden_by",
    "hidden_by_protect_home",
    "hidden_paths",
    "reachability_problems",
    "resolve_command",
    "service_command",
]

#: What ``ProtectHome=yes`` (or ``tmpfs``) makes inaccessible to the service.
HIDDEN_BY_PROTECT_HOME = (Path("/home"), Path("/root"), Path("/run/user"))
#: What ``PrivateTmp=yes`` replaces with the service's own empty directories.
HIDDEN_BY_PRIVATE_TMP = (Path("/tmp"), Path("/var/tmp"))

_TRUE = frozenset({"yes", "true", "on", "1"})


@dataclass(frozen=True, slots=True)
class Hidden:
    """A directory the service cannot see, and the unit line that hides it."""

    path: Path
    option: str


def hidden_paths(unit_text: str) -> tuple[Hidden, ...]:
    """The directories a unit's sandboxing hides from its service (systemd.exec(5)).

    ``ProtectHome=yes|tmpfs`` and ``PrivateTmp=yes`` hide fixed directories;
    ``InaccessiblePaths=`` and ``TemporaryFileSystem=`` name theirs (``-``/``+`` prefixes and
    ``:options`` dropped). ``ProtectHome=read-only`` and ``ProtectSystem=`` only make paths
    read-only, which running a program does not mind. An empty assignment resets a list, as
    systemd reads it.
    """
    protect_home = private_tmp = ""
    listed: dict[Path, str] = {}
    section = ""
    for raw in unit_text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        if section != "Service" or "=" not in line:
            continue
        key, value = (part.strip() for part in line.split("=", 1))
        if key == "ProtectHome":
            protect_home = value.lower()
        elif key == "PrivateTmp":
            private_tmp = value.lower()
        elif key in ("InaccessiblePaths", "TemporaryFileSystem"):
            if not value:
                listed = {p: o for p, o in listed.items() if not o.startswith(key + "=")}
            for word in value.split():
                path = word.lstrip("-+")
                if key == "TemporaryFileSystem":
                    path = path.split(":", 1)[0]
                if path.startswith("/"):
                    listed[Path(path)] = f"{key}={word}"
    found: list[Hidden] = []
    if protect_home in _TRUE or protect_home == "tmpfs":
        found += [Hidden(p, f"ProtectHome={protect_home}") for p in HIDDEN_BY_PROTECT_HOME]
    if private_tmp in _TRUE:
        found += [Hidden(p, f"PrivateTmp={private_tmp}") for p in HIDDEN_BY_PRIVATE_TMP]
    found += [Hidden(p, option) for p, option in listed.items()]
    return tuple(found)


def hidden_by(path: Path, hidden: Iterable[Hidden]) -> Hidden | None:
    """The entry of ``hidden`` that ``path`` is in (or is), if any."""
    for entry in hidden:
        if path == entry.path or entry.path in path.parents:
            return entry
    return None


#: Longest ``#!`` line read from a script (bounded input).
_SHEBANG_MAX_BYTES = 512

INSTALL_HINT = (
    "install wrtfd where a system service can run it, e.g. "
    "`sudo python3 -m venv /opt/wrtfd && sudo /opt/wrtfd/bin/pip install .` or "
    "`sudo PIPX_HOME=/opt/pipx PIPX_BIN_DIR=/usr/local/bin pipx install .` (docs/daemon.md)"
)


def _shebang(path: Path) -> str | None:
    try:
        with path.open("rb") as f:
            head = f.read(_SHEBANG_MAX_BYTES)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    line = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    return line.split()[0] if line else None


def resolve_command(executable: str, scripts_dir: Path) -> list[str]:
    """The ``ExecStart=`` command (without ``run``) for the interpreter ``executable`` whose
    install scheme puts scripts in ``scripts_dir``."""
    script = scripts_dir / "wrtfd"
    interpreter = _shebang(script) if script.is_file() else None
    if interpreter is not None and _same_interpreter(interpreter, executable):
        return [str(script)]
    return [executable, "-m", "wrtfd"]


def _same_interpreter(a: str, b: str) -> bool:
    """``python3`` and ``python`` of one venv (or of /usr/bin) are the same interpreter; the
    base interpreter a venv links to is not the venv's."""
    pa, pb = Path(a), Path(b)
    return pa.parent == pb.parent and os.path.realpath(pa) == os.path.realpath(pb)


def service_command() -> list[str]:
    """The command for this process's wrtfd (see the module docstring)."""
    return resolve_command(sys.executable, Path(sysconfig.get_path("scripts")))


def command_paths(command: Sequence[str]) -> list[Path]:
    """What the service must be able to read to run ``command``: the command, this
    interpreter and the installed package."""
    import wrtfd

    paths = [Path(command[0]), Path(sys.executable), Path(wrtfd.__file__).parent]
    return list(dict.fromkeys(paths))


def reachability_problems(paths: Iterable[Path], hidden: Iterable[Hidden] | None = None) -> list[str]:
    """Why the service user could not reach ``paths`` (empty: it can).

    Each path is checked as written and with its symlinks resolved (a venv's ``python`` links
    to the base interpreter; ``/usr/local/bin/wrtfd`` may link into a pipx venv): outside the
    directories the unit hides (``hidden``, from :func:`hidden_paths`; by default
    ``ProtectHome=yes``'s), every directory on the way searchable by others (``o+x``) and the
    file itself readable by others (``o+r``).
    """
    hides = (
        tuple(hidden)
        if hidden is not None
        else tuple(Hidden(p, "ProtectHome=yes") for p in HIDDEN_BY_PROTECT_HOME)
    )
    problems: list[str] = []
    for path in paths:
        for candidate in dict.fromkeys([Path(os.path.abspath(path)), Path(os.path.realpath(path))]):
            entry = hidden_by(candidate, hides)
            if entry is not None:
                shown = str(path) if candidate == Path(os.path.abspath(path)) else f"{path} (-> {candidate})"
                problems.append(
                    f"{shown} is under {entry.path}, which the service cannot see ({entry.option})"
                )
                break
            problem = _mode_problem(path, candidate)
            if problem is not None:
                problems.append(problem)
                break
    return problems


def hidden_by_protect_home(path: Path) -> Path | None:
    """The directory of :data:`HIDDEN_BY_PROTECT_HOME` that ``path`` is in, if any."""
    for hidden in HIDDEN_BY_PROTECT_HOME:
        if path == hidden or hidden in path.parents:
            return hidden
    return None


def _mode_problem(path: Path, candidate: Path) -> str | None:
    try:
        st = candidate.stat()
    except OSError as exc:
        return f"{candidate}: {exc.strerror or exc}"
    if not st.st_mode & stat.S_IROTH:
        mode = stat.S_IMODE(st.st_mode)
        return f"{candidate} is not readable by other users (mode {mode:04o}): the wrtfd user cannot use it"
    for parent in candidate.parents:
        mode = stat.S_IMODE(parent.stat().st_mode)
        if not mode & stat.S_IXOTH:
            return (
                f"{parent} is not searchable by other users (mode {mode:04o}): "
                f"the wrtfd user cannot reach {path}"
            )
    return None
