"""The pit-wall page in a real browser (Debian's headless chromium, driven by Playwright), served
by the real daemon while ``wrtfd simulate`` drives a car round the oval.

The speed shown changes, the lap times appear after a lap, the MARK button puts a marker in the
file at that moment (read back from the file), a phone-sized screenshot is saved (and copied to
``$WRTFD_ARTIFACTS`` when set), and the page reconnects by itself when the daemon restarts.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_daemon_harness import (
    FOLLOW_SIMULATOR,
    Daemon,
    free_port,
    recordings,
    udp_source,
    wait_for,
)

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
OVAL = REPO / "config" / "tracks" / "oval.trk"
CHROMIUM = Path("/usr/bin/chromium")
BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
PHONE = {"width": 412, "height": 915}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (.ci/run installs it: apt-get install chromium)")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright (the test extra) is not installed"
    )
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
        try:
            yield b
        finally:
            b.close()


def simulate(port: int, laps: int = 200, scale: float = 4.0) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "wrtfd", "simulate", "--protocol", "forza", "--track", str(OVAL)),
            *("--to", f"127.0.0.1:{port}", "--laps", str(laps), "--speed-scale", str(scale)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def save_artifact(path: Path) -> None:
    target = os.environ.get("WRTFD_ARTIFACTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(target) / path.name)


def speed_text(page: Any) -> str:
    return str(page.locator('[data-group="forza"] .gauge.speed .gval').inner_text())


# Playwright's own event loop (the module's browser fixture) keeps the executor thread it starts
# during the test ('asyncio_0') until the fixture closes: its thread, not one of ours.
@pytest.mark.allow_leaks
def test_page_live_laps_mark_screenshot_and_reconnect(browser: Any, tmp_path: Path) -> None:
    forza_port, status_port = free_port(socket.SOCK_DGRAM), free_port()
    out = tmp_path / "rec"
    config = (
        udp_source("forza", "forza", forza_port, f'group = "forza"\ntrack = "{OVAL}"\n')
        + f'[recorder]\noutput_dir = "{out}"\n[status]\nport = {status_port}\n[logging]\nformat = "text"\n'
    )
    url = f"http://127.0.0.1:{status_port}/"
    d = Daemon(tmp_path, config, status_port=status_port).start()
    sim = None
    d2 = None
    # bypass_csp: the test's own wait predicates are evaluated strings, which the page's CSP forbids
    context = browser.new_context(
        viewport=PHONE, device_scale_factor=2, is_mobile=True, has_touch=True, bypass_csp=True
    )
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        d.wait_ready()
        sim = simulate(forza_port)
        page.goto(url)
        page.wait_for_function("document.getElementById('conn').textContent === 'live'", timeout=20_000)
        page.wait_for_function(
            "document.querySelector('[data-group=\"forza\"] .gauge.speed .gval') !== null", timeout=20_000
        )
        first = speed_text(page)
        wait_for(lambda: speed_text(page) not in (first, "–"), "the speed shown to change")
        assert page.locator('[data-group="forza"] .state').inner_text() == "RECORDING"
        assert page.locator("#team-card").is_hidden()  # no fleet: no team panel
        # the lap time appears once a lap is done (the last-lap row has a time, the best one too)
        last_lap_js = "(document.querySelector('[data-group=\"forza\"] .laprow.last .v') || {}).textContent"
        page.wait_for_function(f"{last_lap_js} && !{last_lap_js}.startsWith('–')", timeout=60_000)
        last_lap = page.locator('[data-group="forza"] .laprow.last .v').inner_text()
        assert ":" in last_lap or "." in last_lap
        # MARK, with a note
        page.fill("#note", "browser mark")
        clicked_us = time.time_ns() // 1000
        page.click("#mark")
        page.wait_for_function("document.getElementById('markmsg').textContent.startsWith('marked')")
        page.wait_for_function(
            "Array.from(document.querySelectorAll('#events li.marker'))"
            ".some(li => li.textContent.includes('browser mark'))",
            timeout=20_000,
        )
        shot = tmp_path / "pitwall-phone.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
        save_artifact(shot)

        # the daemon restarts: the page says so, then reconnects by itself
        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 0, d.stderr
        page.wait_for_function("document.getElementById('conn').textContent !== 'live'", timeout=20_000)
        d2 = Daemon(tmp_path, config, status_port=status_port).start()
        d2.wait_ready()
        page.wait_for_function("document.getElementById('conn').textContent === 'live'", timeout=30_000)
        again = speed_text(page)
        wait_for(lambda: speed_text(page) != again, "the speed to move again after the restart")
        assert errors == []
    finally:
        context.close()
        if sim is not None:
            sim.kill()
            sim.wait(timeout=10)
        for daemon in (d, d2):
            if daemon is not None:
                daemon.stop()

    # the marker is in the file of the first run, at the moment of the click
    from wrtfd.format import Reader
    from wrtfd.format.markers import read_markers

    found = []
    for path in recordings(out):
        with Reader(path) as r:
            for i in range(len(r.sessions)):
                times = r.frame_times_us(i)
                ticks = r.ticks(i)
                for m in read_markers(r, i):
                    at = int(times[min(len(ticks) - 1, int(ticks.searchsorted(m.tick)))])
                    found.append((m.note, m.wall_us, at))
    (marker,) = [f for f in found if f[0] == "browser mark"]
    _, wall_us, frame_us = marker
    assert abs(wall_us - clicked_us) < 2_000_000  # the click reached the daemon within 2 s
    assert abs(frame_us - wall_us) < 500_000  # and the marker sits at the frame of that moment


#: What the page shows of the delta, read in one go with the update it was drawn from.
DELTA_JS = """() => {
  const box = document.querySelector('[data-group="forza"] .delta');
  if (!box || !lastUpdate) return null;
  const lap = (((lastUpdate.live || {}).groups || {}).forza || {}).lap || null;
  const val = box.querySelector('.dval');
  return {
    text: val.textContent,
    cls: box.className,
    color: getComputedStyle(val).color,
    predicted: box.querySelector('.dpred').textContent,
    delta_s: lap ? lap.delta_s : null,
    predicted_s: lap ? lap.predicted_s : null,
  };
}"""
GREEN, RED = "rgb(0, 224, 96)", "rgb(255, 48, 48)"  # --ok and --bad of app.css


@pytest.mark.allow_leaks
def test_page_shows_the_delta_green_gaining_red_losing(browser: Any, tmp_path: Path) -> None:
    """The big delta on the page is the recorded ``laps.delta`` pushed to it, signed, with two
    decimals; green (class ``gain``) below zero, red (``loss``) above; the predicted lap time under
    it. Laps are driven on the game's clock, eight times faster than real time."""
    forza_port, status_port = free_port(socket.SOCK_DGRAM), free_port()
    out = tmp_path / "rec"
    config = (
        udp_source("forza", "forza", forza_port, f'group = "forza"\ntrack = "{OVAL}"\n')
        + f'[recorder]\noutput_dir = "{out}"\n{FOLLOW_SIMULATOR}'
        + f'[status]\nport = {status_port}\n[logging]\nformat = "text"\n'
    )
    d = Daemon(tmp_path, config, status_port=status_port).start()
    sim = None
    context = browser.new_context(viewport=PHONE, bypass_csp=True)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    seen: dict[str, dict[str, Any]] = {}

    def look() -> bool:
        shown = page.evaluate(DELTA_JS)
        if shown is None:
            return False
        cls = shown["cls"].split()[-1]
        seen.setdefault(cls, shown)
        return "gain" in seen and "loss" in seen

    try:
        d.wait_ready()
        sim = simulate(forza_port, laps=40, scale=8.0)
        page.goto(f"http://127.0.0.1:{status_port}/")
        page.wait_for_function("document.getElementById('conn').textContent === 'live'", timeout=20_000)
        wait_for(look, "the page to show a gaining and a losing delta", timeout_s=120)
        shot = tmp_path / "pitwall-delta.png"
        page.screenshot(path=str(shot), full_page=True)
        save_artifact(shot)
        assert errors == []
    finally:
        context.close()
        if sim is not None:
            sim.kill()
            sim.wait(timeout=10)
        d.stop()
    # before a reference lap exists: a dash, neither colour
    if "none" in seen:
        assert seen["none"]["text"] == "–" and seen["none"]["color"] not in (GREEN, RED)
    for cls, colour, sign in (("gain", GREEN, "−"), ("loss", RED, "+")):
        shown = seen[cls]
        delta = shown["delta_s"]
        assert delta is not None and (delta < 0) == (cls == "gain"), shown
        assert shown["text"] == f"{sign}{abs(delta):.2f}", shown
        assert shown["color"] == colour, shown
        assert shown["predicted"].startswith("predicted ") and shown["predicted_s"] is not None
        seconds = float(shown["predicted"].removeprefix("predicted ").split(":")[-1])
        assert seconds == pytest.approx(shown["predicted_s"] % 60, abs=0.0015), shown
