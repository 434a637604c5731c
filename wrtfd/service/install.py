"""``wrtfd service install`` and ``uninstall``: the systemd service in one idempotent command.

Install, in order (each step prints one line; ``--dry-run`` prints them without doing them):

1. the account: ``/etc/sysusers.d/wrtfd.conf`` (user and group ``wrtfd``, member of
   ``dialout``), applied with ``systemd-sysusers`` when the account is not complete yet;
2. the config (with ``--config``): checked as ``wrtfd config check`` does, installed as
   ``/etc/wrtfd/wrtfd.toml`` (``/etc/wrtfd/NAME.toml`` for ``--instance NAME``) with the files it
   names by relative path beside it. An existing, different file is kept unless ``--force``,
   which backs it up first. The config the service will start with is checked in any case;
3. the units ``wrtfd.service`` and ``wrtfd@.service`` in ``/etc/systemd/system``, as shipped
   (hardening, ``StateDirectory=``, ``ConfigurationDirectory=``) with ``ExecStart=`` running this
   wrtfd (:mod:`wrtfd.service.command`); a changed unit is rewritten and the changed lines shown;
4. the venv's bytecode, compiled when modules lack it (:mod:`wrtfd.service.bytecode`): the
   service cannot write it, and would compile them at every start;
5. ``systemctl daemon-reload`` when a unit changed, ``try-restart`` when anything changed (a
   running service picks up the new unit or config), ``enable --now`` unless already enabled
   and running.

With ``--root DIR`` every file goes under DIR (an image, a test), the account is written into
DIR's ``/etc/passwd`` and ``/etc/group`` by ``systemd-sysusers --root``, and the unit is enabled
with ``systemctl --root`` (links under DIR; nothing is started). The running system is not
touched.

Uninstall stops and disables the unit, removes the unit files once no wrtfd unit is enabled any
more, and keeps the recordings, the account that owns them and (unless ``--purge-config``) the
config.
"""

from __future__ import annotations

import importlib.resources
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from wrtfd.daemon.config import LoadedConfig, load_config
from wrtfd.daemon.units import with_command
from wrtfd.daemon.wiring import check_buildable
from wrtfd.errors import ConfigError, ServiceError
from wrtfd.service.accounts import GROUP_SERIAL, SYSUSERS_NAME, SYSUSERS_TEXT, USER, account_state
from wrtfd.service.bytecode import (
    COMPILE_TIMEOUT_S,
    compile_command,
    compiles,
    missing_bytecode,
    venv_site_packages,
)
from wrtfd.service.command import (
    INSTALL_HINT,
    Hidden,
    command_paths,
    hidden_by,
    hidden_paths,
    reachability_problems,
    service_command,
)
from wrtfd.service.configfiles import Reference, absolute_references, relative_references
from wrtfd.service.steps import Steps, query

__all__ = ["UNIT_FILES", "ServiceRequest", "install", "packaged_unit", "uninstall", "unit_hidden_paths"]

UNIT_DIR = "/etc/systemd/system"
CONFIG_DIR = "/etc/wrtfd"
SYSUSERS_DIR = "/etc/sysusers.d"
STATE_DIR = "/var/lib/wrtfd"
UNIT_FILES = ("wrtfd.service", "wrtfd@.service")
#: An instance name is part of a unit name and of a file name in /etc/wrtfd.
INSTANCE_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True, slots=True)
class ServiceRequest:
    root: Path
    instance: str | None = None
    config: Path | None = None
    dry_run: bool = False
    force: bool = False
    purge_config: bool = False

    @property
    def live(self) -> bool:
        """Whether this changes the running system (``--root /`` or no ``--root``)."""
        return self.root == Path("/")

    @property
    def unit(self) -> str:
        return "wrtfd.service" if self.instance is None else f"wrtfd@{self.instance}.service"

    @property
    def config_target(self) -> str:
        name = "wrtfd.toml" if self.instance is None else f"{self.instance}.toml"
        return f"{CONFIG_DIR}/{name}"

    @property
    def state_dir(self) -> str:
        return STATE_DIR if self.instance is None else f"{STATE_DIR}/{self.instance}"

    def systemctl(self, *args: str) -> list[str]:
        return ["systemctl", *([] if self.live else [f"--root={self.root}"]), *args]


def packaged_unit(name: str) -> str:
    """A unit file as shipped in the package (``ExecStart=/usr/local/bin/wrtfd ...``)."""
    return importlib.resources.files("wrtfd.service").joinpath("units", name).read_text(encoding="utf-8")


def unit_hidden_paths() -> tuple[Hidden, ...]:
    """What the shipped units hide from the service, read from the units themselves."""
    found: dict[Path, Hidden] = {}
    for name in UNIT_FILES:
        for entry in hidden_paths(packaged_unit(name)):
            found.setdefault(entry.path, entry)
    return tuple(found.values())


def _preflight(req: ServiceRequest, problems: list[str] | None = None) -> None:
    """Refuse before any change; ``problems`` (the service could not run this wrtfd) stop a
    live install, right after the root check."""
    if req.instance is not None and not INSTANCE_PATTERN.fullmatch(req.instance):
        raise ServiceError(
            f"--instance {req.instance!r}: use letters, digits, '_', '.' and '-' (up to 64), "
            "starting with a letter or digit"
        )
    if not req.root.is_dir():
        raise ServiceError(f"--root {req.root}: not a directory")
    if req.dry_run:
        return
    if req.live:
        if os.geteuid() != 0:
            raise ServiceError(
                "must run as root (sudo); --dry-run shows every step without changing anything"
            )
        if problems:
            raise ServiceError(f"{problems[0]}; {INSTALL_HINT}")
        if not Path("/run/systemd/system").is_dir():
            raise ServiceError(
                "systemd is not running on this machine (no /run/systemd/system); "
                "--root DIR prepares a system image instead"
            )
    for tool in ("systemctl", "systemd-sysusers"):
        if shutil.which(tool) is None:
            raise ServiceError(f"{tool} not found: the service needs systemd (apt-get install systemd)")


def _unit_state(req: ServiceRequest) -> tuple[bool, bool]:
    """(enabled, active) of the request's unit; both False when systemctl cannot tell."""
    enabled = query(req.systemctl("is-enabled", req.unit))
    is_enabled = enabled is not None and enabled.stdout.strip() == "enabled"
    if not req.live:
        return is_enabled, False
    active = query(req.systemctl("is-active", req.unit))
    return is_enabled, active is not None and active.stdout.strip() == "active"


# --- install ---------------------------------------------------------------------------------------


def install(req: ServiceRequest, out: Callable[[str], None]) -> int:
    """Install (see the module docstring); returns the exit code, raises ServiceError/ConfigError."""
    command = service_command()
    hidden = unit_hidden_paths()
    problems = reachability_problems(command_paths(command), hidden)
    _preflight(req, problems)
    steps = Steps(req.root, dry_run=req.dry_run, out=out)
    where = "the running system" if req.live else str(req.root)
    out(
        f"{'dry run: ' if req.dry_run else ''}installing {req.unit} into {where}; "
        f"ExecStart runs {' '.join(command)}"
    )
    for problem in problems:
        out(
            f"warning: {problem}: the service could not start from this wrtfd on this machine; {INSTALL_HINT}"
        )

    _install_config(req, steps)
    _install_account(req, steps)
    units_changed = False
    for name in UNIT_FILES:
        text = with_command(packaged_unit(name), command)
        exec_line = next(ln for ln in text.splitlines() if ln.startswith("ExecStart="))
        summary = f"{len(text.splitlines())} lines, {exec_line}, User={USER}, hardening as shipped"
        units_changed |= (
            steps.write(f"{UNIT_DIR}/{name}", text.encode(), what="unit", summary=summary) != "unchanged"
        )
    _install_bytecode(steps)
    out(
        f"state directory {req.state_dir} and config directory {CONFIG_DIR}: created by systemd "
        f"when the service starts (StateDirectory=, ConfigurationDirectory=), owned by {USER}"
    )
    _enable(req, steps, units_changed=units_changed)

    if not steps.changes:
        out(f"nothing changed: {req.unit} was already installed as asked")
    elif req.dry_run:
        out(f"dry run: {len(steps.changes)} step(s) would change something; nothing was changed")
    else:
        after = "" if not req.live else f"; see `wrtfd status`, `journalctl -u {req.unit} -f`"
        out(f"installed {req.unit}: {len(steps.changes)} change(s){after}")
    return 0


def _install_bytecode(steps: Steps) -> None:
    """Compile the venv the unit runs, which the service cannot write (wrtfd.service.bytecode)."""
    site, why_not = venv_site_packages()
    if site is None:
        steps.out(f"unchanged: bytecode: {why_not}")
        return
    missing = missing_bytecode(site)
    if not any(compiles(source) for source in missing):  # stops at the first one that compiles
        steps.out(f"unchanged: bytecode of {site}: every module compiled")
        return
    why = (
        f"{len(missing)} module(s) without bytecode, which the service cannot write: compiled at every start"
    )
    proc = steps.command(compile_command(site), why=why, timeout_s=COMPILE_TIMEOUT_S)
    if proc is None:
        return
    left = missing_bytecode(site)
    if left:  # files no Python 3 compiles (a package's test data): they never reach the daemon
        steps.out(
            f"bytecode: {len(left)} file(s) of {site} are not Python this interpreter compiles "
            f"(compileall exit {proc.returncode}); left as they are"
        )


def _install_account(req: ServiceRequest, steps: Steps) -> None:
    steps.write(
        f"{SYSUSERS_DIR}/{SYSUSERS_NAME}",
        SYSUSERS_TEXT.encode(),
        what="account declaration",
        summary=f"system user and group {USER}, member of {GROUP_SERIAL}, home {STATE_DIR}, no login",
    )
    if account_state(req.root).complete:
        steps.out(f"unchanged: user {USER} exists, member of {GROUP_SERIAL}")
        return
    argv = ["systemd-sysusers", *([] if req.live else [f"--root={req.root}"]), SYSUSERS_NAME]
    steps.run(argv, why=f"create user {USER}, group {USER}, membership of {GROUP_SERIAL}")
    if not req.dry_run and not account_state(req.root).complete:
        raise ServiceError(
            f"systemd-sysusers ran, but {req.root / 'etc/passwd'} has no complete {USER} account"
        )


def _install_config(req: ServiceRequest, steps: Steps) -> None:
    """Check, then install the config; every check comes before the first change."""
    target = req.config_target
    keep = False
    refs: list[Reference] = []
    if req.config is not None:
        loaded = load_config(req.config)
        check_buildable(loaded)
        names = ", ".join(f"{s.source_name} ({s.kind}/{s.protocol})" for s in loaded.config.sources)
        steps.out(f"checked: {req.config}: {len(loaded.config.sources)} source(s): {names}")
        _warn_about_paths(loaded, steps, absolute_references(loaded), unit_hidden_paths())
        refs = relative_references(loaded)
        old = steps.read(target)
        keep = old is not None and old != req.config.read_bytes() and not req.force
    if req.config is None or keep:
        _check_installed(req, steps)  # what the service will start with is what is there
    if req.config is None:
        return
    _install_file(req, steps, target, req.config, "config")
    base = str(Path(target).parent)
    for ref in refs:
        _install_file(req, steps, f"{base}/{ref.written}", ref.path, f"file of {ref.key}")
    if not keep and not req.dry_run:
        _check_installed(req, steps)  # the copy, with the files it names beside it


def _check_installed(req: ServiceRequest, steps: Steps) -> None:
    target = req.config_target
    current = steps.at(target)
    if not current.is_file():
        if req.instance is not None:
            raise ServiceError(f"--instance {req.instance} needs --config FILE: there is no {target} yet")
        steps.out(f"no {target}: the service records with the built-in default (every game's usual UDP port)")
        return
    try:
        check_buildable(load_config(current))
    except ConfigError as exc:
        raise ConfigError(f"{exc} (the service would not start with {target})") from None
    steps.out(f"checked: {target}, the config the service starts with")


def _install_file(req: ServiceRequest, steps: Steps, system_path: str, source: Path, what: str) -> None:
    """Install ``source`` at ``system_path`` unless a different file is there (``--force``:
    replace it, backed up)."""
    content = source.read_bytes()
    old = steps.read(system_path)
    if old is not None and old != content:
        if not req.force:
            steps.out(
                f"kept: {what} {system_path}, which differs from {source} "
                "(--force replaces it, keeping a backup)"
            )
            return
        steps.backup(system_path, what=what)
    steps.write(system_path, content, what=what, summary=f"from {source}, {len(content)} bytes")


def _warn_about_paths(
    loaded: LoadedConfig, steps: Steps, absolute: list[Reference], hidden: tuple[Hidden, ...]
) -> None:
    for ref in absolute:
        entry = hidden_by(ref.path, hidden)
        if entry is not None:
            steps.out(
                f"warning: {ref.key}: {ref.path} is under {entry.path}, which the service cannot read "
                f"({entry.option})"
            )
    out_dir = loaded.config.recorder.output_dir
    where = hidden_by(out_dir, hidden) if out_dir.is_absolute() else None
    if where is not None:  # PrivateTmp, ProtectHome: ReadWritePaths= would not show it either
        steps.out(
            f"warning: recorder.output_dir {out_dir} is under {where.path}, which the service does "
            f"not see ({where.option}): its recordings would go where nobody finds them"
            + (", and be deleted when it stops" if where.option.startswith("PrivateTmp") else "")
            + f"; use a relative path (under {STATE_DIR})"
        )
    elif out_dir.is_absolute() and Path(STATE_DIR) not in [out_dir, *out_dir.parents]:
        steps.out(
            f"warning: recorder.output_dir {out_dir} is read-only for the service (ProtectSystem=strict): "
            f"use a relative path (under {STATE_DIR}) or allow it with a drop-in "
            f"(`systemctl edit wrtfd`: [Service] ReadWritePaths={out_dir})"
        )


def _enable(req: ServiceRequest, steps: Steps, *, units_changed: bool) -> None:
    if req.live and units_changed:
        steps.run(req.systemctl("daemon-reload"), why="systemd reads the new unit files")
    if req.live and steps.changes:
        steps.run(req.systemctl("try-restart", req.unit), why="a running service picks up what changed")
    enabled, active = _unit_state(req)
    if req.live:
        if enabled and active:
            steps.out(f"unchanged: {req.unit} is enabled and running")
        else:
            steps.run(req.systemctl("enable", "--now", req.unit), why="start now and at every boot")
        return
    if enabled:
        steps.out(f"unchanged: {req.unit} is enabled")
    else:
        steps.run(req.systemctl("enable", req.unit), why="start at every boot of that system")
    steps.out(f"not started: {req.root} is not the running system")


# --- uninstall -------------------------------------------------------------------------------------


def _enabled_units(req: ServiceRequest) -> list[str]:
    """wrtfd units enabled under the root (links in ``*.wants``), as names."""
    found = set()
    for wants in (req.root / UNIT_DIR.lstrip("/")).glob("*.wants"):
        for link in wants.glob("wrtfd*.service"):
            if link.name == "wrtfd.service" or link.name.startswith("wrtfd@"):
                found.add(link.name)
    return sorted(found)


def uninstall(req: ServiceRequest, out: Callable[[str], None]) -> int:
    """Uninstall (see the module docstring); never removes recordings."""
    _preflight(req)
    steps = Steps(req.root, dry_run=req.dry_run, out=out)
    where = "the running system" if req.live else str(req.root)
    out(f"{'dry run: ' if req.dry_run else ''}uninstalling {req.unit} from {where}")
    enabled, active = _unit_state(req)
    if enabled or active:
        args = ("disable", "--now") if req.live else ("disable",)
        steps.run(req.systemctl(*args, req.unit), why="stop it and no longer start it at boot")
    else:
        out(f"unchanged: {req.unit} is not enabled")
    others = [u for u in _enabled_units(req) if u != req.unit]
    if others:
        out(f"kept: unit files, still used by {', '.join(others)}")
    else:
        removed = [steps.remove(f"{UNIT_DIR}/{name}", what="unit") for name in UNIT_FILES]
        if req.live and any(removed):
            steps.run(req.systemctl("daemon-reload"), why="systemd forgets the removed units")
    if req.purge_config:
        _purge_config(req, steps)
    else:
        out(f"kept: config {req.config_target} (--purge-config removes it)")
    out(f"kept: recordings in {req.state_dir} (uninstall never removes recordings)")
    out(f"kept: user {USER} (owns the recordings) and {SYSUSERS_DIR}/{SYSUSERS_NAME}")
    if not steps.changes:
        out(f"nothing changed: {req.unit} was not installed")
    elif req.dry_run:
        out(f"dry run: {len(steps.changes)} step(s) would change something; nothing was changed")
    else:
        out(f"uninstalled {req.unit}: {len(steps.changes)} change(s)")
    return 0


def _purge_config(req: ServiceRequest, steps: Steps) -> None:
    target = req.config_target
    refs = []
    if steps.at(target).is_file():
        try:
            refs = relative_references(load_config(steps.at(target)))
        except (ConfigError, ServiceError) as exc:
            steps.out(f"note: {target} does not load ({exc}); only the config file itself is removed")
    base = str(Path(target).parent)
    for ref in refs:
        steps.remove(f"{base}/{ref.written}", what=f"file of {ref.key}")
    steps.remove(target, what="config")
