"""What ``ExecStart=`` runs (venv, pipx, system, checkout) and whether the service user can."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from wrtfd.daemon.units import systemd_quote, verify_units, with_command
from wrtfd.service.command import (
    Hidden,
    hidden_by,
    hidden_by_protect_home,
    hidden_paths,
    reachability_problems,
    resolve_command,
    service_command,
)
from wrtfd.service.install import packaged_unit

BASE_PYTHON = os.path.realpath(sys.executable)


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A directory other users can reach (pytest's own tmp_path is under a 0700 directory)."""
    path = Path(tempfile.mkdtemp(prefix="wrtfd-reach-", dir="/tmp"))
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def fake_env(bin_dir: Path, *, shebang: str | None = None) -> tuple[str, Path]:
    """A venv-like ``bin`` (python -> python3 -> the real interpreter) with a ``wrtfd`` script
    as pip writes it; returns (the ``python`` path, the script)."""
    bin_dir.mkdir(parents=True)
    (bin_dir / "python3").symlink_to(BASE_PYTHON)
    (bin_dir / "python").symlink_to("python3")
    script = bin_dir / "wrtfd"
    script.write_text(f"#!{shebang or bin_dir / 'python3'}\nimport sys\nfrom wrtfd.cli.main import main\n")
    script.chmod(0o755)
    return str(bin_dir / "python"), script


def test_venv_uses_its_own_script(tmp_path: Path) -> None:
    python, script = fake_env(tmp_path / "venv" / "bin")
    assert resolve_command(python, script.parent) == [str(script)]


def test_pipx_uses_the_venv_script_not_the_link(tmp_path: Path) -> None:
    # PIPX_HOME=/opt/pipx PIPX_BIN_DIR=/usr/local/bin: the link in the bin dir points into the venv.
    python, script = fake_env(tmp_path / "pipx" / "venvs" / "wrtfd" / "bin")
    link_dir = tmp_path / "usr-local-bin"
    link_dir.mkdir()
    (link_dir / "wrtfd").symlink_to(script)
    assert resolve_command(python, script.parent) == [str(script)]


def test_system_install_uses_the_scheme_script(tmp_path: Path) -> None:
    # pip install into /usr/local: interpreter /usr/bin/python3, script /usr/local/bin/wrtfd.
    usr_bin = tmp_path / "usr" / "bin"
    usr_bin.mkdir(parents=True)
    (usr_bin / "python3").symlink_to(BASE_PYTHON)
    scripts = tmp_path / "usr" / "local" / "bin"
    scripts.mkdir(parents=True)
    (scripts / "wrtfd").write_text(f"#!{usr_bin / 'python3'}\n")
    assert resolve_command(str(usr_bin / "python3"), scripts) == [str(scripts / "wrtfd")]


def test_another_interpreters_script_or_none_falls_back_to_dash_m(tmp_path: Path) -> None:
    python, script = fake_env(tmp_path / "venv" / "bin", shebang="/usr/bin/python3")
    assert resolve_command(python, script.parent) == [python, "-m", "wrtfd"]
    script.unlink()
    assert resolve_command(python, script.parent) == [python, "-m", "wrtfd"]


def test_this_venv_resolves_to_its_wrtfd_script() -> None:
    scripts = Path(sysconfig.get_path("scripts"))
    if not (scripts / "wrtfd").is_file():
        pytest.skip("wrtfd is not installed as a script here (pip install -e .)")
    assert service_command() == [str(scripts / "wrtfd")]
    version = subprocess.run([*service_command(), "--version"], capture_output=True, text=True, timeout=60)
    assert version.stdout.startswith("wrtfd ")


def test_protect_home_paths() -> None:
    assert hidden_by_protect_home(Path("/home/alice/.local/pipx/venvs/wrtfd/bin/wrtfd")) == Path("/home")
    assert hidden_by_protect_home(Path("/root/.pyenv/versions/3.11.7/bin/python3.11")) == Path("/root")
    assert hidden_by_protect_home(Path("/run/user/1000/x")) == Path("/run/user")
    assert hidden_by_protect_home(Path("/opt/wrtfd/bin/wrtfd")) is None
    assert hidden_by_protect_home(Path("/homestead/wrtfd")) is None


def test_reachability_names_the_closed_directory_or_file(open_tmp: Path) -> None:
    opened = open_tmp / "open"
    opened.mkdir(mode=0o755)
    exe = opened / "wrtfd"
    exe.write_text("#!/bin/sh\n")
    os.chmod(exe, 0o755)
    assert reachability_problems([exe]) == []
    os.chmod(exe, 0o750)
    assert reachability_problems([exe]) == [
        f"{exe} is not readable by other users (mode 0750): the wrtfd user cannot use it"
    ]
    os.chmod(exe, 0o755)
    os.chmod(opened, 0o700)
    assert reachability_problems([exe]) == [
        f"{opened} is not searchable by other users (mode 0700): the wrtfd user cannot reach {exe}"
    ]
    # A link is followed: a script that is fine where it is named can point somewhere closed.
    link = open_tmp / "link-to-wrtfd"
    link.symlink_to(exe)
    assert reachability_problems([link]) == [
        f"{opened} is not searchable by other users (mode 0700): the wrtfd user cannot reach {link}"
    ]


def test_reachability_of_a_venv_on_the_base_python_under_root(open_tmp: Path) -> None:
    if hidden_by_protect_home(Path(BASE_PYTHON)) is None:
        pytest.skip("this machine's Python is not under a home directory")
    python, _ = fake_env(open_tmp / "venv" / "bin")
    problems = reachability_problems([Path(python)])
    assert len(problems) == 1 and f"(-> {BASE_PYTHON}) is under " in problems[0]


def test_quoted_exec_start_is_read_back_by_systemd(tmp_path: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze not installed")
    odd = tmp_path / "my venv" / "bin"
    odd.mkdir(parents=True)
    (odd / "wrtfd").symlink_to(sys.executable)
    assert systemd_quote(str(odd / "wrtfd")) == f'"{odd}/wrtfd"'
    assert systemd_quote("/opt/100%/bin/wrtfd") == "/opt/100%%/bin/wrtfd"
    unit = tmp_path / "wrtfd.service"
    unit.write_text(with_command(packaged_unit("wrtfd.service"), [str(odd / "wrtfd")]))
    assert f'ExecStart="{odd}/wrtfd" run' in unit.read_text()
    # verify resolves ExecStart's binary: a wrongly split path would be "not found".
    result = verify_units([unit])
    assert result.ok, result.output
    unit.write_text(unit.read_text().replace(f'"{odd}/wrtfd"', f"{odd}/wrtfd"))
    assert not verify_units([unit]).ok


def test_hidden_paths_are_read_from_the_shipped_unit() -> None:
    hidden = {entry.path: entry.option for entry in hidden_paths(packaged_unit("wrtfd.service"))}
    assert hidden == {
        Path("/home"): "ProtectHome=yes",
        Path("/root"): "ProtectHome=yes",
        Path("/run/user"): "ProtectHome=yes",
        Path("/tmp"): "PrivateTmp=yes",
        Path("/var/tmp"): "PrivateTmp=yes",
    }
    assert hidden_paths(packaged_unit("wrtfd@.service")) == hidden_paths(packaged_unit("wrtfd.service"))


def test_hidden_paths_follow_every_sandboxing_option() -> None:
    unit = (
        "[Unit]\nInaccessiblePaths=/ignored/outside/service\n"
        "[Service]\nProtectHome=read-only\nPrivateTmp=no\n"
        "InaccessiblePaths=-/srv/secret +/mnt/data\n"
        "TemporaryFileSystem=/opt/hidden:ro /var/cache\n"
        "TemporaryFileSystem=\n"
        "TemporaryFileSystem=/media\n"
    )
    assert hidden_paths(unit) == (
        Hidden(Path("/srv/secret"), "InaccessiblePaths=-/srv/secret"),
        Hidden(Path("/mnt/data"), "InaccessiblePaths=+/mnt/data"),
        Hidden(Path("/media"), "TemporaryFileSystem=/media"),
    )
    tmpfs_home = {h.path for h in hidden_paths("[Service]\nProtectHome=tmpfs\nPrivateTmp=true\n")}
    assert tmpfs_home == {Path("/home"), Path("/root"), Path("/run/user"), Path("/tmp"), Path("/var/tmp")}


def test_a_venv_under_var_tmp_is_a_problem_for_the_shipped_unit() -> None:
    python, _ = fake_env(Path(tempfile.mkdtemp(prefix="wrtfd-reach-", dir="/var/tmp")) / "venv" / "bin")
    try:
        hidden = hidden_paths(packaged_unit("wrtfd.service"))
        problems = reachability_problems([Path(python)], hidden)
        assert problems[0] == (f"{python} is under /var/tmp, which the service cannot see (PrivateTmp=yes)")
        assert hidden_by(Path("/opt/wrtfd/bin/wrtfd"), hidden) is None
        assert hidden_by(Path("/tmpfoo/wrtfd"), hidden) is None
    finally:
        shutil.rmtree(Path(python).parents[2])
