"""``wrtfd service install/uninstall`` into a temporary root, with the real systemd tools.

``--root DIR`` makes ``systemd-sysusers --root`` write DIR's /etc/passwd and /etc/group and
``systemctl --root`` enable the unit with links under DIR, exactly as on an image; nothing of
the running machine is touched. The written units are checked with ``systemd-analyze verify``
and ``systemd-analyze security --offline``.
"""

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

from wrtfd.cli.main import main
from wrtfd.daemon.config import load_config
from wrtfd.daemon.units import security_exposure, verify_units
from wrtfd.daemon.wiring import check_buildable
from wrtfd.service.command import service_command
from wrtfd.service.install import UNIT_FILES, packaged_unit

REPO = Path(__file__).resolve().parents[2]
INCAR = REPO / "config" / "incar.toml"
SIMRIG = REPO / "config" / "simrig.toml"

pytestmark = pytest.mark.skipif(
    any(shutil.which(t) is None for t in ("systemctl", "systemd-sysusers", "systemd-analyze")),
    reason="systemd tools not installed (apt-get install systemd)",
)


def shipped_lines(unit: str) -> int:
    """Lines of a unit as shipped (the file in the tree, read here)."""
    return len((REPO / "wrtfd" / "service" / "units" / unit).read_text().splitlines())


def service(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    code = main(["service", *args])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


def tree(root: Path) -> dict[str, tuple[str, bytes, int]]:
    """Every file and link under root: kind, content (or link target), mtime."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        if path.is_symlink():
            out[rel] = ("link", os.readlink(path).encode(), 0)
        elif path.is_file():
            out[rel] = ("file", path.read_bytes(), path.stat().st_mtime_ns)
        else:
            out[rel] = ("dir", b"", 0)
    return out


def directives(text: str) -> list[tuple[str, str]]:
    return [
        tuple(line.split("=", 1))  # type: ignore[misc]
        for line in text.splitlines()
        if "=" in line and not line.startswith("#")
    ]


def exec_start(args: str) -> str:
    return "ExecStart=" + " ".join(service_command()) + f" {args}"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    r.mkdir()
    return r


def test_dry_run_prints_every_step_and_writes_nothing(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, err = service(capsys, "install", "--root", str(root), "--config", str(INCAR), "--dry-run")
    assert code == 0, err
    assert tree(root) == {}
    text = "\n".join(lines)
    for expected in (
        "would create account declaration /etc/sysusers.d/wrtfd.conf",
        f"would run systemd-sysusers --root={root} wrtfd.conf",
        f"checked: {INCAR}: 2 source(s): gps (serial/nmea), can (serial/slcan)",
        "would create config /etc/wrtfd/wrtfd.toml",
        "would create file of sources[1].options.dbc /etc/wrtfd/example-car.dbc",
        f"would create unit /etc/systemd/system/wrtfd.service ({shipped_lines('wrtfd.service')} lines,"
        f" {exec_start('run')}",
        "would create unit /etc/systemd/system/wrtfd@.service "
        f"({shipped_lines('wrtfd@.service')} lines, {exec_start('run --config %E/wrtfd/%i.toml')}",
        f"would run systemctl --root={root} enable wrtfd.service",
        "dry run: 7 step(s) would change something; nothing was changed",
    ):
        assert expected in text, expected
    assert lines[0].startswith("dry run: installing wrtfd.service into ")


def test_install_into_root_writes_everything(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, err = service(capsys, "install", "--root", str(root), "--config", str(INCAR))
    assert code == 0, err
    assert lines[-1] == "installed wrtfd.service: 7 change(s)"

    units = root / "etc/systemd/system"
    for name in UNIT_FILES:
        written = (units / name).read_text()
        shipped = packaged_unit(name)
        # Everything as shipped (hardening, StateDirectory=, ConfigurationDirectory=) but ExecStart.
        assert [d for d in directives(written) if d[0] != "ExecStart"] == [
            d for d in directives(shipped) if d[0] != "ExecStart"
        ]
    assert exec_start("run") in (units / "wrtfd.service").read_text().splitlines()
    assert (units / "multi-user.target.wants/wrtfd.service").is_symlink()
    assert not (units / "multi-user.target.wants/wrtfd@.service").exists()

    assert (root / "etc/wrtfd/wrtfd.toml").read_bytes() == INCAR.read_bytes()
    assert (root / "etc/wrtfd/example-car.dbc").read_bytes() == (REPO / "config/example-car.dbc").read_bytes()
    # The installed copy resolves its relative DBC beside itself and passes the config check.
    installed = load_config(root / "etc/wrtfd/wrtfd.toml")
    assert {b.config.source_name for b in check_buildable(installed)} == {"gps", "can"}

    passwd = {ln.split(":")[0]: ln.split(":") for ln in (root / "etc/passwd").read_text().splitlines()}
    group = {ln.split(":")[0]: ln.split(":") for ln in (root / "etc/group").read_text().splitlines()}
    user = passwd["wrtfd"]
    assert user[5:] == ["/var/lib/wrtfd", "/usr/sbin/nologin"]
    assert group["wrtfd"][2] == user[3]  # primary group wrtfd
    assert "wrtfd" in group["dialout"][3].split(",")
    assert int(user[2]) < 1000  # a system account
    assert (root / "etc/sysusers.d/wrtfd.conf").read_text().startswith("# wrtfd's system account")


def test_second_run_changes_nothing_and_says_so(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert service(capsys, "install", "--root", str(root), "--config", str(INCAR))[0] == 0
    before = tree(root)
    code, lines, _ = service(capsys, "install", "--root", str(root), "--config", str(INCAR))
    assert code == 0
    assert tree(root) == before  # same files, same contents, not even rewritten (mtimes)
    assert lines[-1] == "nothing changed: wrtfd.service was already installed as asked"
    assert not [ln for ln in lines if ln.startswith(("created", "updated", "ran", "removed"))]
    assert "unchanged: user wrtfd exists, member of dialout" in lines
    assert "unchanged: wrtfd.service is enabled" in lines


def test_upgrade_rewrites_a_changed_unit_and_says_what_changed(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert service(capsys, "install", "--root", str(root))[0] == 0
    unit = root / "etc/systemd/system/wrtfd.service"
    good = unit.read_text()
    unit.write_text(good.replace(exec_start("run"), "ExecStart=/old/venv/bin/wrtfd run"))
    code, lines, _ = service(capsys, "install", "--root", str(root))
    assert code == 0
    assert unit.read_text() == good
    changed = [ln for ln in lines if ln.startswith("updated")]
    assert changed == [
        "updated unit /etc/systemd/system/wrtfd.service "
        f"(-ExecStart=/old/venv/bin/wrtfd run; +{exec_start('run')})"
    ]
    assert lines[-1] == "installed wrtfd.service: 1 change(s)"


def test_a_different_config_is_kept_unless_forced_then_backed_up(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert service(capsys, "install", "--root", str(root), "--config", str(INCAR))[0] == 0
    target = root / "etc/wrtfd/wrtfd.toml"
    edited = INCAR.read_text().replace("rate_hz = 50", "rate_hz = 25")
    target.write_text(edited)
    code, lines, _ = service(capsys, "install", "--root", str(root), "--config", str(INCAR))
    assert code == 0 and target.read_text() == edited
    assert any(ln.startswith("kept: config /etc/wrtfd/wrtfd.toml, which differs from") for ln in lines)

    code, lines, _ = service(capsys, "install", "--root", str(root), "--config", str(INCAR), "--force")
    assert code == 0 and target.read_bytes() == INCAR.read_bytes()
    backups = list(target.parent.glob("wrtfd.toml.*.bak"))
    assert len(backups) == 1 and backups[0].read_text() == edited
    assert "updated config /etc/wrtfd/wrtfd.toml (-rate_hz = 25; +rate_hz = 50)" in lines


def test_an_invalid_kept_config_stops_the_install(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (root / "etc/wrtfd").mkdir(parents=True)
    (root / "etc/wrtfd/wrtfd.toml").write_text(
        '[[sources]]\nkind = "udp"\nprotocol = "forza"\nport = "5300"\n'
    )
    code, _, err = service(capsys, "install", "--root", str(root))
    assert code == 2
    assert err.splitlines() == [
        f'wrtfd: error: {root}/etc/wrtfd/wrtfd.toml: sources[0].port: expected integer, got "5300" '
        "(the service would not start with /etc/wrtfd/wrtfd.toml)"
    ]
    assert [p for p, (kind, _, _) in tree(root).items() if kind != "dir"] == ["etc/wrtfd/wrtfd.toml"]


def test_invalid_config_is_one_error_line_and_nothing_written(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        '[[sources]]\nkind = "serial"\nprotocol = "slcan"\ndevice = "/dev/null"\n'
        'options = { dbc = "missing.dbc" }\n'
    )
    code, _, err = service(capsys, "install", "--root", str(root), "--config", str(bad))
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith(f"wrtfd: error: {bad}: sources[0]")
    assert "missing.dbc" in err
    assert tree(root) == {}  # checked before the first change


def test_relative_path_outside_the_config_dir_is_refused(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    shutil.copy(REPO / "config/example-car.dbc", tmp_path / "car.dbc")
    cfg = conf / "car.toml"
    cfg.write_text(INCAR.read_text().replace('"example-car.dbc"', '"../car.dbc"'))
    code, _, err = service(capsys, "install", "--root", str(root), "--config", str(cfg), "--dry-run")
    assert code == 2
    assert "sources[1].options.dbc: '../car.dbc' leaves the config's directory" in err


@pytest.mark.parametrize(
    ("out_dir", "why"),
    [
        ("/tmp/rec", "under /tmp, which the service does not see (PrivateTmp=yes)"),
        ("/home/pi/rec", "under /home, which the service does not see (ProtectHome=yes)"),
    ],
)
def test_an_output_dir_the_sandbox_hides_is_named_for_what_it_is(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], out_dir: str, why: str
) -> None:
    """It said read-only and suggested ReadWritePaths=, which cannot show a private /tmp or /home."""
    cfg = tmp_path / "car.toml"
    shutil.copy(REPO / "config/example-car.dbc", tmp_path / "example-car.dbc")
    text = INCAR.read_text()
    assert "[recorder]\n" in text
    cfg.write_text(text.replace("[recorder]\n", f'[recorder]\noutput_dir = "{out_dir}"\n', 1))
    code, lines, _ = service(capsys, "install", "--root", str(root), "--config", str(cfg), "--dry-run")
    assert code == 0
    (warning,) = [ln for ln in lines if "recorder.output_dir" in ln]
    assert warning.startswith(f"warning: recorder.output_dir {out_dir} is {why}")
    assert "ReadWritePaths" not in warning and "use a relative path" in warning
    assert ("deleted when it stops" in warning) == out_dir.startswith("/tmp")


def test_instance_install_and_uninstall_keeps_recordings(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert service(capsys, "install", "--root", str(root), "--config", str(INCAR))[0] == 0
    code, lines, err = service(
        capsys, "install", "--root", str(root), "--instance", "rig1", "--config", str(SIMRIG)
    )
    assert code == 0, err
    units = root / "etc/systemd/system"
    assert (root / "etc/wrtfd/rig1.toml").read_bytes() == SIMRIG.read_bytes()
    assert (units / "multi-user.target.wants/wrtfd@rig1.service").is_symlink()
    recording = root / "var/lib/wrtfd/2026-05-01_run.wrtf"
    recording.parent.mkdir(parents=True)
    recording.write_bytes(b"WRTF recording")
    (root / "var/lib/wrtfd/rig1").mkdir()
    (root / "var/lib/wrtfd/rig1/rig.wrtf").write_bytes(b"WRTF rig")

    code, lines, _ = service(capsys, "uninstall", "--root", str(root))
    assert code == 0
    assert not (units / "multi-user.target.wants/wrtfd.service").exists()
    assert "kept: unit files, still used by wrtfd@rig1.service" in lines
    assert (units / "wrtfd@.service").is_file() and (units / "wrtfd.service").is_file()
    assert "kept: recordings in /var/lib/wrtfd (uninstall never removes recordings)" in lines
    assert (root / "etc/wrtfd/wrtfd.toml").is_file()  # no --purge-config

    code, lines, _ = service(capsys, "uninstall", "--root", str(root), "--instance", "rig1", "--purge-config")
    assert code == 0
    assert not (units / "wrtfd@.service").exists() and not (units / "wrtfd.service").exists()
    assert not list(units.glob("*.wants/*"))
    assert not (root / "etc/wrtfd/rig1.toml").exists()
    assert (root / "etc/wrtfd/wrtfd.toml").is_file()  # another unit's config
    assert "kept: recordings in /var/lib/wrtfd/rig1 (uninstall never removes recordings)" in lines
    assert recording.read_bytes() == b"WRTF recording"
    assert (root / "var/lib/wrtfd/rig1/rig.wrtf").read_bytes() == b"WRTF rig"
    assert "wrtfd:" in (root / "etc/passwd").read_text()  # the account owning them stays

    code, lines, _ = service(capsys, "uninstall", "--root", str(root), "--instance", "rig1")
    assert code == 0 and lines[-1] == "nothing changed: wrtfd@rig1.service was not installed"


def test_uninstall_purge_config_removes_the_files_it_installed(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert service(capsys, "install", "--root", str(root), "--config", str(INCAR))[0] == 0
    before = tree(root)
    code, lines, _ = service(capsys, "uninstall", "--root", str(root), "--purge-config", "--dry-run")
    assert code == 0 and tree(root) == before
    assert "would remove config /etc/wrtfd/wrtfd.toml" in lines
    code, lines, _ = service(capsys, "uninstall", "--root", str(root), "--purge-config")
    assert code == 0
    assert list((root / "etc/wrtfd").iterdir()) == []
    assert "removed file of sources[1].options.dbc /etc/wrtfd/example-car.dbc" in lines


def test_instance_needs_a_config(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = service(capsys, "install", "--root", str(root), "--instance", "rig2", "--dry-run")
    assert code == 2
    assert err == "wrtfd: error: --instance rig2 needs --config FILE: there is no /etc/wrtfd/rig2.toml yet\n"
    code, _, err = service(capsys, "install", "--root", str(root), "--instance", "../x", "--dry-run")
    assert code == 2 and "--instance '../x': use letters, digits" in err


def test_written_units_verify_and_keep_their_security_score(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert service(capsys, "install", "--root", str(root))[0] == 0
    written = [root / "etc/systemd/system" / name for name in UNIT_FILES]
    result = verify_units(written)
    assert result.ok, result.output
    scores = security_exposure(written)
    assert scores.keys() == {"wrtfd.service", "wrtfd@example.service"}
    # systemd-analyze's exposure: 0.0 (locked down) to 10.0; the shipped units score 1.7.
    assert all(score <= 2.0 for score in scores.values()), scores
    assert scores == security_exposure([REPO / "systemd" / name for name in UNIT_FILES])


def test_install_on_this_machine_without_systemd_is_one_clear_error() -> None:
    if Path("/run/systemd/system").is_dir():
        pytest.skip("systemd runs here: a real install would change this machine")
    if os.geteuid() != 0:
        pytest.skip("needs root to get past the root check")
    # From a wrtfd the service could run (a refusal to install from an unreachable one comes
    # first): a venv under /opt on the distribution's Python, which is outside /root.
    base = "/usr/bin/python3"
    same = f"import sys; sys.exit(sys.version_info[:2] != {tuple(sys.version_info[:2])!r})"
    if not Path(base).is_file() or subprocess.run([base, "-c", same]).returncode != 0:
        pytest.skip(f"no {base} of this Python version to make a venv the service could run")
    python = make_venv("/opt", base)
    try:
        done = run_wrtfd(python, "service", "install")
    finally:
        shutil.rmtree(python.parents[2])
    assert done.returncode == 2
    assert done.stderr == (
        "wrtfd: error: systemd is not running on this machine (no /run/systemd/system); "
        "--root DIR prepares a system image instead\n"
    )
    assert done.stdout == ""


def test_install_as_a_user_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The interpreter here lives under /root, which no other user may run, so a real non-root
    # process cannot be started for this check; the uid is the only thing faked.
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    code, _, err = service(capsys, "install")
    assert code == 2
    assert (
        err == "wrtfd: error: must run as root (sudo); --dry-run shows every step without changing anything\n"
    )


def test_systemd_dir_links_to_the_packaged_units() -> None:
    for name in UNIT_FILES:
        link = REPO / "systemd" / name
        assert link.read_text() == packaged_unit(name)


def make_venv(parent: str, base_python: str = sys.executable) -> Path:
    """A venv in a new directory under ``parent`` that runs this checkout's wrtfd: its
    ``python`` (no pip, no script) sees this venv's packages; returns that ``python``."""
    base = Path(tempfile.mkdtemp(prefix="wrtfd-venv-", dir=parent))
    os.chmod(base, 0o755)
    subprocess.run([base_python, "-m", "venv", "--without-pip", str(base / "venv")], check=True)
    site = next((base / "venv" / "lib").glob("python3*/site-packages"))
    ours = sysconfig.get_path("purelib")
    (site / "wrtfd-test.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    return base / "venv" / "bin" / "python"


@pytest.fixture
def var_tmp_venv() -> Iterator[Path]:
    """A venv under /var/tmp, which ``PrivateTmp=yes`` hides from the service."""
    python = make_venv("/var/tmp")
    try:
        yield python
    finally:
        shutil.rmtree(python.parents[2])


def run_wrtfd(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-m", "wrtfd", *args], capture_output=True, text=True, timeout=120, cwd=REPO
    )


def test_from_var_tmp_root_and_dry_run_warn_that_the_unit_cannot_start(
    var_tmp_venv: Path, root: Path
) -> None:
    hidden = f"{var_tmp_venv} is under /var/tmp, which the service cannot see (PrivateTmp=yes)"
    for args in (["--root", str(root)], ["--dry-run"]):
        done = run_wrtfd(var_tmp_venv, "service", "install", *args)
        assert done.returncode == 0, done.stderr
        warnings = [ln for ln in done.stdout.splitlines() if ln.startswith("warning: ")]
        assert (
            f"warning: {hidden}: the service could not start from this wrtfd on this machine; "
            in "\n".join(warnings)
        ), done.stdout
    unit = (root / "etc/systemd/system/wrtfd.service").read_text()
    assert f"ExecStart={var_tmp_venv} -m wrtfd run" in unit.splitlines()


def test_from_var_tmp_a_live_install_is_refused(var_tmp_venv: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to get past the root check")
    if Path("/run/systemd/system").is_dir():
        pytest.skip("systemd runs here: a wrong answer would change this machine")
    done = run_wrtfd(var_tmp_venv, "service", "install")
    assert done.returncode == 2
    assert done.stderr.startswith(
        f"wrtfd: error: {var_tmp_venv} is under /var/tmp, which the service cannot see (PrivateTmp=yes); "
        "install wrtfd where a system service can run it"
    ), done.stderr
    assert done.stdout == ""
