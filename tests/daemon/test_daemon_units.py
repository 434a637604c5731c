"""The shipped systemd units pass ``systemd-analyze verify`` and carry what the issue asks for."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from wrtfd.daemon.units import verify_units

REPO = Path(__file__).resolve().parents[2]
UNITS = [REPO / "systemd" / "wrtfd.service", REPO / "systemd" / "wrtfd@.service"]

needs_analyze = pytest.mark.skipif(
    shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed (apt-get install systemd)"
)


def _directives(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "[")) and "=" in line:
            key, _, value = line.partition("=")
            out.setdefault(key, []).append(value)
    return out


@needs_analyze
def test_units_verify_clean() -> None:
    result = verify_units(UNITS)
    assert result.ok, result.output


@needs_analyze
def test_verify_catches_a_broken_unit(tmp_path: Path) -> None:
    broken = tmp_path / "wrtfd.service"
    broken.write_text(UNITS[0].read_text().replace("Type=notify", "Type=notifyy\nFrobnicate=yes"))
    result = verify_units([broken])
    assert not result.ok
    assert "Frobnicate" in result.output or "notifyy" in result.output


@pytest.mark.parametrize("unit", UNITS, ids=lambda p: p.name)
def test_unit_has_required_settings(unit: Path) -> None:
    d = _directives(unit)
    assert d["Type"] == ["notify"]
    assert d["Restart"] == ["on-failure"]
    assert float(d["WatchdogSec"][0].rstrip("s")) > 0
    assert d["StateDirectory"][0].startswith("wrtfd")
    assert d["ConfigurationDirectory"] == ["wrtfd"]
    assert d["User"] == ["wrtfd"] and d["SupplementaryGroups"] == ["dialout"]
    for key, value in [
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("CapabilityBoundingSet", ""),
    ]:
        assert d[key] == [value], key
    families = set(d["RestrictAddressFamilies"][0].split())
    assert families == {"AF_UNIX", "AF_INET", "AF_INET6"}
    assert d["ExecStart"][0].startswith("/usr/local/bin/wrtfd run")


def test_template_unit_uses_instance_config() -> None:
    d = _directives(UNITS[1])
    assert "%i.toml" in d["ExecStart"][0]
    assert d["StateDirectory"] == ["wrtfd/%i"]


@needs_analyze
def test_ci_entry_point(capsys: pytest.CaptureFixture[str]) -> None:
    from wrtfd.daemon.units import main

    assert main(["verify", *map(str, UNITS)]) == 0
    assert capsys.readouterr().out == "units: 2 unit file(s) verified\n"
    assert main(["check"]) == 2
