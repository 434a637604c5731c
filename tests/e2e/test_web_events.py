"""The page's event feed (``/api/events``, Server-Sent Events) of a real ``wrtfd run``: every
event comes with the sentence the journal logs for it, and none goes by a Python class name.

The oracle is the daemon's own journal on stderr: the page and the journal word an event once,
so the sentence pushed to the page is a line the journal wrote.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_daemon_harness import OVAL, Daemon, free_port, udp_source, wait_for
from wrtfd.recorder.observe import EVENT_KINDS

pytestmark = pytest.mark.slow

JOURNAL = re.compile(r"^<\d>wrtfd\.journal: (.*)$")
CLASS_NAME = re.compile(r"^[A-Z][a-z]+(?:[A-Z][a-z]+)+$")


def feed_events(host: str, port: int, until: Any, timeout_s: float = 30.0) -> list[dict[str, Any]]:
    """The ``live.events`` of the updates pushed on /api/events, read until ``until(events)``."""
    conn = http.client.HTTPConnection(host, port, timeout=10)
    events: list[dict[str, Any]] = []
    try:
        conn.request("GET", "/api/events", headers={"Accept": "text/event-stream"})
        resp = conn.getresponse()
        assert resp.status == 200
        buf = b""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            buf += resp.read1(65536)
            *blocks, buf = buf.split(b"\n\n")
            for block in blocks:
                if not block.startswith(b"event: update\n"):
                    continue
                update = json.loads(block.split(b"data: ", 1)[1])
                events = list((update.get("live") or {}).get("events") or [])
            if until(events):
                return events
    finally:
        conn.close()
    raise AssertionError(f"the feed never had what was waited for: {events}")


def test_the_page_feed_words_events_as_the_journal_does(tmp_path: Path) -> None:
    forza_port, status_port = free_port(socket.SOCK_DGRAM), free_port()
    config = (
        udp_source("forza", "forza", forza_port, f'track = "{OVAL}"\n')
        + f'[recorder]\noutput_dir = "{tmp_path / "rec"}"\n[status]\nport = {status_port}\n'
        + '[logging]\nformat = "journal"\n'
    )
    d = Daemon(tmp_path, config, status_port=status_port).start()
    sim = None
    try:
        d.wait_ready()
        sim = subprocess.Popen(
            [
                *(sys.executable, "-m", "wrtfd", "simulate", "--protocol", "forza", "--track", str(OVAL)),
                *("--to", f"127.0.0.1:{forza_port}", "--laps", "1", "--speed-scale", "5"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

        def has_all(events: list[dict[str, Any]]) -> bool:
            kinds = {e.get("kind") for e in events}
            return {"session_started", "file_opened"} <= kinds and any(
                e.get("kind") == "source" or e.get("kind") == "SourceStateChanged" for e in events
            )

        events = feed_events("127.0.0.1", status_port, has_all)
        texts = {e.get("text") for e in events}

        def journal_lines() -> list[str] | None:
            lines = [m[1] for ln in list(d.lines) if (m := JOURNAL.match(ln))]
            return lines if len(lines) >= 3 and texts <= set(lines) else None

        # the page can tell an event before the journal's line of it has been read from stderr
        journal = wait_for(journal_lines, "a journal line for every event of the page")
    finally:
        if sim is not None:
            sim.kill()
            sim.wait()
        d.stop()

    assert not [e["kind"] for e in events if CLASS_NAME.match(str(e.get("kind")))], events
    assert {e["kind"] for e in events} <= set(EVENT_KINDS.values()), events
    source = next(e for e in events if e["kind"] in ("source", "SourceStateChanged"))
    assert source.get("text") == "source forza: first sample", source
    for e in events:  # every event has its sentence, the journal's own words
        assert e.get("text") in journal, (e, journal)
