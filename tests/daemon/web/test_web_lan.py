"""Bound to a non-loopback address, changes need the token; reading too unless public_read.

This machine's only non-loopback address belongs to its network, which tests must not use; so the
server runs in a private network namespace (``unshare -n``, as root: CI runs as root) with a
veth pair addressed 198.51.100.7 (TEST-NET-2): a real non-loopback interface whose traffic never
leaves the namespace. Skips with the reason where namespaces cannot be made.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ADDRESS = "198.51.100.7"
REPO = Path(__file__).resolve().parents[3]
SETUP = (
    "ip link set lo up && ip link add veth0 type veth peer name veth1 && "
    f"ip addr add {ADDRESS}/24 dev veth0 && ip link set veth0 up && ip link set veth1 up"
)


def _namespace_available() -> str | None:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "unshare or ip (util-linux, iproute2) not installed"
    probe = subprocess.run(["unshare", "-n", "sh", "-c", SETUP], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"cannot make a network namespace with a veth pair here: {probe.stderr.strip()}"
    return None


def test_changes_need_the_token_off_loopback() -> None:
    why = _namespace_available()
    if why is not None:
        pytest.skip(why)
    probe = Path(__file__).with_name("lan_probe.py")
    run = subprocess.run(
        ["unshare", "-n", "sh", "-c", f'{SETUP} && exec "$0" "$1" "$2"', sys.executable, str(probe), ADDRESS],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO,
    )
    assert run.returncode == 0, run.stderr
    found = json.loads(run.stdout.strip().splitlines()[-1])
    # without the token nothing is read or changed
    for key in (
        "status_without_token",
        "page_without_token",
        "events_without_token",
        "csrf_without_token",
        "mark_without_token",
        "session_without_token",
        "mark_wrong_token",
    ):
        assert found[key] == 401, (key, found[key])
    assert found["marks_before_token"] == []
    # the CLI's bearer token, or the page's cookie plus its CSRF token
    assert found["mark_bearer"] == 200
    code, location, cookie = found["login"]
    assert (
        (code, location) == (303, "/")
        and "httponly" in cookie.lower()
        and "samesite=strict" in cookie.lower()
    )
    assert found["status_with_cookie"] == 200
    assert found["mark_cookie_without_csrf"] == 403
    assert found["mark_cookie_with_csrf"] == 200
    assert found["cli_without_token"][0] == 2 and "token" in found["cli_without_token"][1]
    assert found["cli_with_token"] == [0, "marked main at tick 103 ('cli note')"]
    assert found["marks"] == ["from the LAN", "from the LAN", "cli note"]
    # a loopback peer (a page on this machine) is told it may mark, and may
    can_write, status_line = found["loopback_peer"]
    assert (can_write, status_line.split()[1]) == (True, "200"), found["loopback_peer"]
    # public_read opens reading only
    assert (found["public_status"], found["public_page"]) == (200, 200)
    assert found["public_mark_without_token"] == 401
