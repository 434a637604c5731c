"""The pit-wall page's team panel in a real browser: a real daemon with a fleet on a real
nats-server; lap records of three rigs go into the laps bucket through the project's own
publisher (:class:`wrtfd.fleet.laps.LapForwarder` on a ``laps.jsonl`` written by
:class:`wrtfd.daemon.laprecords.LapBook`). The panel's rows, read from the page, equal the
leaderboard ``wrtfd laps --fleet --json`` prints for the track; this rig's driver's place too; a
faster lap put in later moves the panel. No game is driven: the daemon's track is its source's.
"""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_daemon_harness import run_cli, wait_for
from tests.e2e.test_fleet import OVAL, connected, fleet, fleet_daemon
from tests.e2e.test_web_page import PHONE, browser  # noqa: F401 - the browser fixture
from tests.fleet.nats_server import TOKEN, NatsServer
from wrtfd.daemon.laprecords import LapBook
from wrtfd.fleet.laps import LapForwarder
from wrtfd.recorder.observe import LapCompleted
from wrtfd.tracks import load_track
from wrtfd.tracks.laps import format_lap_time

pytestmark = pytest.mark.slow

TRACK = load_track(OVAL).name
START_US = 1_795_000_000_000_000


def _lap(
    n: int, time_s: float, *, driver: str, car: str, track: str = TRACK, valid: bool | None = True
) -> LapCompleted:
    third = time_s / 3
    info = (("car", car), ("driver", driver), ("track", track))
    start = 40.0 * n
    return LapCompleted(
        group="main",
        lap=n,
        time_s=time_s,
        sectors_s=(third, third, time_s - 2 * third),
        start_s=start,
        end_s=start + time_s,
        first_tick=round(start * 60),
        last_tick=round((start + time_s) * 60) - 1,
        session_start_us=START_US,
        wall_us=START_US + round((start + time_s) * 1e6),
        valid=valid,
        info=info,
    )


def _publish(tmp: Path, url: str, rig: str, laps: list[LapCompleted]) -> None:
    """The rig's records as the daemon writes them, sent by the daemon's own forwarder."""
    home = tmp / f"pub-{rig}"
    book = LapBook(home, rig=rig, fsync_interval_s=1.0)
    book.start()
    for lap in laps:
        book.notify(lap)
    book.close()
    assert book.records == len(laps)

    async def send() -> int:
        import nats

        nc = await nats.connect(url, token=TOKEN)
        try:
            js = nc.jetstream(timeout=10.0)
            fwd = LapForwarder(home / "laps.jsonl", home / "laps.offset", rig=rig)
            await fwd.ensure_bucket(js)
            return await fwd.forward(js)
        finally:
            await nc.close()

    # Playwright's sync API runs a loop in this thread: the client gets a thread of its own
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(asyncio.run, send()).result(timeout=60) == len(laps)


def _board(url: str) -> dict[str, Any]:
    out = run_cli("laps", "--fleet", "--track", TRACK, "--url", url, "--token", TOKEN, "--json")
    assert out.returncode == 0, out.stderr
    return dict(json.loads(out.stdout))


def _cli_rows(board: dict[str, Any]) -> list[list[str]]:
    return [
        [
            str(i),
            d["driver"],
            ", ".join(d["cars"]) or "–",
            format_lap_time(d["best_s"]),
            f"+{d['gap_s']:.3f}" if d["gap_s"] > 0 else "",
        ]
        for i, d in enumerate(board["drivers"], 1)
    ]


def _page_rows(page: Any) -> list[list[str]]:
    rows = page.locator("#team tbody tr")
    return [[c.strip() for c in rows.nth(i).locator("td").all_inner_texts()] for i in range(rows.count())]


@pytest.mark.allow_leaks  # Playwright's executor thread, as in test_web_page
def test_team_panel_rows_are_the_fleet_leaderboard(browser: Any, tmp_path: Path) -> None:  # noqa: F811
    server = NatsServer(tmp_path / "nats").start()
    d = fleet_daemon(
        tmp_path,
        "rig-a",
        server,
        recorder_extra='[recorder.metadata]\nDriver = "Ada"\n',
        fleet_extra="upload = false\nlive_hz = 0\nteam_refresh_s = 0.5\n",
    )
    context = browser.new_context(viewport=PHONE, bypass_csp=True)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        _publish(
            tmp_path,
            server.url,
            "rig-a",
            [_lap(1, 31.5, driver="Ada", car="GT3"), _lap(2, 31.2, driver="Ada", car="GT3")],
        )
        _publish(
            tmp_path,
            server.url,
            "rig-b",
            [
                _lap(1, 30.9, driver="Bob", car="GT3"),
                _lap(2, 29.0, driver="Bob", car="GT3", valid=False),  # the game said invalid
                _lap(3, 25.0, driver="Dee", car="GT3", track="Somewhere else"),
            ],
        )
        _publish(tmp_path, server.url, "rig-c", [_lap(1, 32.25, driver="Cy", car="LMP2", valid=None)])
        d.start()
        d.wait_ready()
        wait_for(lambda: connected(d), "the daemon connected")
        team = lambda: fleet(d).get("team") or {}  # noqa: E731
        wait_for(lambda: team().get("records") == 6, "the panel read the bucket's six records")
        page.goto(f"http://127.0.0.1:{d.status_port}/")
        page.wait_for_function("!document.getElementById('team-card').hidden", timeout=20_000)
        page.wait_for_function("document.querySelectorAll('#team tbody tr').length === 3", timeout=20_000)
        board = _board(server.url)
        assert [r["driver"] for r in board["drivers"]] == ["Bob", "Ada", "Cy"]  # Bob's invalid 29.0 left out
        assert _page_rows(page) == _cli_rows(board)
        assert page.locator("#team-track").inner_text() == f"· {TRACK}"
        assert (
            page.locator("#team-me").inner_text()
            == f"Ada: P2 of 3, +{board['drivers'][1]['gap_s']:.3f} to the best"
        )

        # a faster lap of Ada's arrives: the panel moves her to the top, as the leaderboard does
        _publish(tmp_path / "later", server.url, "rig-a", [_lap(3, 30.5, driver="Ada", car="GT3")])
        page.wait_for_function(
            "(document.querySelector('#team tbody tr td:nth-child(2)') || {}).textContent === 'Ada'",
            timeout=20_000,
        )
        board = _board(server.url)
        assert _page_rows(page) == _cli_rows(board)
        assert page.locator("#team-me").inner_text() == "Ada: P1, the team's best"
        assert errors == []
    finally:
        context.close()
        d.stop()
        server.stop()
