"""``wrtfd status`` (a real subprocess) against a real running daemon: the table, the exit codes.

The daemon records two groups: Forza with lap channels on the oval, driven by ``wrtfd simulate``
at ten times real speed (two laps in a few seconds; the laps are counted from positions, so
the count does not depend on the pace), and a required ``struct`` feed sent from a thread.
While the feed runs the daemon is healthy (exit 0); once it stops, the required source goes
silent and the daemon unhealthy (exit 1, /healthz 503); once the daemon is stopped, exit 2.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_daemon_harness import (
    OVAL,
    BackgroundFeed,
    Daemon,
    feed_records,
    forza_and_feed,
    free_port,
    run_cli,
    wait_for,
)

pytestmark = pytest.mark.slow


def status(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "wrtfd", "status", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=full_env,
    )


def table(text: str, header: str) -> dict[str, list[str]]:
    """The rows (split on blanks) of the table whose header line starts with ``header``."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(header + " "))
    rows: dict[str, list[str]] = {}
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        rows[line.split()[0]] = line.split()
    return rows


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    setup = forza_and_feed(
        tmp_path_factory.mktemp("status_cmd"),
        forza=f'group = "forza"\ntrack = "{OVAL}"\n',
        feed='group = "feed"\nrequired = true\nsilent_after_s = 1\n',
    )
    d = setup.daemon().start()
    feed = BackgroundFeed(setup.feed_port, feed_records(), rate_hz=50)
    try:
        d.wait_ready()
        feed.__enter__()
        sim = run_cli(
            *("simulate", "--protocol", "forza", "--track", str(OVAL)),
            *("--to", f"127.0.0.1:{setup.forza_port}", "--laps", "2", "--speed-scale", "10"),
        )
        assert sim.returncode == 0, sim.stderr

        def laps() -> dict[str, Any] | None:
            derived = d.status()["recorder"]["groups"]["forza"].get("derived") or {}
            found = derived.get("laps") or {}
            return found if found.get("lap_count", 0) >= 1 else None

        wait_for(laps, "a lap counted live")
        yield {"daemon": d, "feed": feed, "url": setup.url, "out": setup.out}
    finally:
        feed.__exit__()
        d.stop()


def test_healthy_table_shows_groups_sources_file_session_laps_disk(daemon: dict[str, Any]) -> None:
    d: Daemon = daemon["daemon"]
    wait_for(lambda: d.status()["healthy"], "the daemon healthy while the feed runs")
    result = status("--url", daemon["url"])
    snap = d.status()
    assert result.returncode == 0, result.stdout + result.stderr
    text = result.stdout
    assert "\x1b" not in text  # not a terminal: no colour, no cursor moves
    assert text.splitlines()[0] == f"● wrtfd {snap['version']}: healthy"
    assert f"  config  {d.config_path}" in text
    assert d.proc is not None
    assert f"pid {d.proc.pid}, up " in text and f"status {daemon['url']}/status" in text
    assert f"  disk    {daemon['out']}: " in text and "free of" in text

    groups = snap["recorder"]["groups"]
    group_rows = table(text, "GROUP")
    assert list(group_rows) == ["forza", "feed"]
    forza = group_rows["forza"]
    assert forza[:3] == ["forza", "ok", Path(groups["forza"]["file"]).name]
    assert forza[5] == f"#{groups['forza']['session']}"
    laps = groups["forza"]["derived"]["laps"]
    assert laps["lap_count"] >= 1
    assert forza[9] == str(laps["lap_count"])
    if laps["best_lap_ms"]:
        assert forza[10].count(":") == 1 and forza[11:] == ["(lap", f"{laps['best_lap_number']})"]
    feed = group_rows["feed"]
    assert feed[:3] == ["feed", "ok", Path(groups["feed"]["file"]).name]
    assert feed[9:] == ["-", "-"]  # no track on the feed's group: no laps

    sources = table(text, "SOURCE")
    assert {name: r[1:3] for name, r in sources.items()} == {
        "forza": ["udp/forza", "receiving"],
        "feed": ["udp/struct", "receiving"],
    }
    shown = int(sources["feed"][5].replace(",", ""))
    assert 0 < shown <= snap["sources"]["feed"]["samples"]  # snap was read after the command
    assert "required; from 127.0.0.1:" in text
    assert "PROBLEMS" not in text

    # The same daemon found from its config file instead of a URL.
    assert status("--config", str(d.config_path)).returncode == 0

    raw = status("--url", daemon["url"], "--json")
    assert raw.returncode == 0
    document = json.loads(raw.stdout)
    assert document["healthy"] is True and set(document["sources"]) == {"forza", "feed"}


def test_colour_only_when_asked_for_a_terminal_and_never_with_no_color(daemon: dict[str, Any]) -> None:
    wait_for(lambda: daemon["daemon"].status()["healthy"], "the daemon healthy while the feed runs")
    coloured = status("--url", daemon["url"], env={"FORCE_COLOR": "1"})
    assert "\x1b[32m" in coloured.stdout or "\x1b[1;32m" in coloured.stdout  # green health and states
    plain = status("--url", daemon["url"], env={"FORCE_COLOR": "1", "NO_COLOR": "1"})
    assert "\x1b[3" not in plain.stdout and "\x1b[1;3" not in plain.stdout  # no colour (bold may stay)
    assert plain.stdout.splitlines()[0].endswith(": healthy")
    piped = status("--url", daemon["url"])
    assert "\x1b" not in piped.stdout and piped.stdout.splitlines()[0].endswith(": healthy")


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def status_on_a_terminal(columns: int, *args: str) -> str:
    """``wrtfd status`` with a real pseudo-terminal of ``columns`` columns as its output; the
    text without its colour codes."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES")}
    env["TERM"] = "xterm-256color"
    proc = subprocess.Popen(
        [sys.executable, "-m", "wrtfd", "status", *args],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
        close_fds=True,
    )
    os.close(follower)
    chunks = []
    try:
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(leader)
        proc.wait(timeout=60)
    return ANSI.sub("", b"".join(chunks).decode("utf-8", "replace")).replace("\r\n", "\n")


def assert_fits(text: str, width: int, d: Daemon) -> None:
    lines = text.splitlines()
    assert lines and lines[0].startswith("● wrtfd "), text
    assert "…" not in text and "..." not in text, text  # nothing cut with an ellipsis
    assert all(len(ln) <= width for ln in lines), [ln for ln in lines if len(ln) > width]
    assert all(ln == ln.rstrip() for ln in lines), [ln for ln in lines if ln != ln.rstrip()]
    labels = [ln.split()[0] for ln in lines[1:4]]
    assert labels == ["config", "daemon", "disk"], text
    # Everything is there, wrapped where it must be: the config's path, the sources' details.
    joined = "".join(text.split())
    assert "".join(str(d.config_path).split()) in joined
    for name, s in d.status()["sources"].items():
        assert name in joined and "".join(str(s["detail"]).split()) in joined


@pytest.mark.parametrize("columns", [80, 200])
def test_status_fits_a_terminal_without_cutting_or_padding(daemon: dict[str, Any], columns: int) -> None:
    d: Daemon = daemon["daemon"]
    wait_for(lambda: d.status()["healthy"], "the daemon healthy while the feed runs")
    assert_fits(status_on_a_terminal(columns, "--url", daemon["url"]), columns, d)


def test_status_in_a_pipe_is_neither_cut_nor_padded(daemon: dict[str, Any]) -> None:
    d: Daemon = daemon["daemon"]
    wait_for(lambda: d.status()["healthy"], "the daemon healthy while the feed runs")
    piped = status("--url", daemon["url"])
    assert "\x1b" not in piped.stdout
    assert_fits(piped.stdout, 200, d)


def test_unhealthy_when_a_required_source_goes_silent_then_unreachable(daemon: dict[str, Any]) -> None:
    d: Daemon = daemon["daemon"]
    daemon["feed"].__exit__()
    result = wait_for(
        lambda: (r := status("--url", daemon["url"])).returncode == 1 and r, "wrtfd status to exit 1", 30
    )
    assert (
        result.stdout.splitlines()[0].startswith("● wrtfd ") and "unhealthy (1 problem(s))" in result.stdout
    )
    problems = result.stdout.split("PROBLEMS\n", 1)[1].splitlines()
    assert len(problems) == 1 and problems[0].startswith("✗ source feed silent for ")
    code, body = d.get("/healthz")
    assert code == 503 and "source feed silent" in body

    # --watch refreshes until Ctrl-C; its exit code is the last refresh's.
    watch = subprocess.Popen(
        [sys.executable, "-m", "wrtfd", "status", "--url", daemon["url"], "--watch", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        seen: list[str] = []
        assert watch.stdout is not None
        while sum(ln.startswith("--- ") for ln in seen) < 3:
            line = watch.stdout.readline()
            assert line, watch.stderr.read() if watch.stderr else ""
            seen.append(line)
        watch.send_signal(signal.SIGINT)
        assert watch.wait(timeout=20) == 1
    finally:
        if watch.poll() is None:
            watch.kill()
    assert sum(ln.startswith("● wrtfd") for ln in seen) >= 2

    d.signal(signal.SIGTERM)
    assert d.wait_exit() == 0
    gone = status("--url", daemon["url"], "--timeout", "2")
    assert gone.returncode == 2 and gone.stdout == ""
    assert gone.stderr == f"wrtfd: error: {daemon['url']}/status: unreachable: Connection refused\n"
    assert status("--url", daemon["url"], "--json").returncode == 2


def test_status_of_nothing_listening_exits_2_quickly() -> None:
    started = time.monotonic()
    result = status("--url", f"127.0.0.1:{free_port()}", "--timeout", "2")
    assert result.returncode == 2 and "unreachable" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert time.monotonic() - started < 30
