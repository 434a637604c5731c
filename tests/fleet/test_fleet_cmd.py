"""``wrtfd watch`` and ``wrtfd fleet status`` against a real nats-server holding hostile rigs'
messages: every one of these (found by testing against a real server) killed both commands for
as long as it sat in the ``WRTFD_STATE`` stream, or hid the real rigs."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest

from tests.cli.inprocess import wrtfd_main
from tests.fleet.nats_server import TOKEN, NatsServer
from wrtfd.fleet.client import LastError, ensure_streams
from wrtfd.fleet.watch import MAX_RIGS, FleetView


def _status(rig: str, **extra: Any) -> bytes:
    doc = {
        "v": 1,
        "rig": rig,
        "state": "recording",
        "status_interval_s": 2,
        "groups": {"main": {"in_session": True}},
        "fleet": {"state": "connected", "uploads": {"queued": 1, "queued_bytes": 100, "done": 3}},
        **extra,
    }
    return json.dumps(doc).encode()


def _publish(server: NatsServer, messages: list[tuple[str, bytes]], *, stream: bool = True) -> None:
    import nats

    async def run() -> None:
        nc = await nats.connect(server.url, token=TOKEN)
        try:
            js = nc.jetstream()
            await ensure_streams(js)
            for subject, payload in messages:
                if stream:
                    await js.publish(subject, payload)
                else:
                    await nc.publish(subject, payload)
            await nc.flush()
        finally:
            await nc.close()

    asyncio.run(run())


def _watch(server: NatsServer, *args: str) -> Any:
    return wrtfd_main("watch", "--url", server.url, "--token", TOKEN, *args)


def _fleet_status(server: NatsServer, *args: str) -> Any:
    return wrtfd_main("fleet", "status", "--url", server.url, "--token", TOKEN, *args)


def _first_words(text: str) -> set[str]:
    return {line.split()[0] for line in text.splitlines() if line.strip()}


HOSTILE_LAYOUT = {
    "v": 1,
    "group": "main",
    "layout_id": 1,
    "rate_hz": 10,
    "frame_bytes": 16,
    "fields": [["tick", 0, "<u8", [], ""], ["x.speed", 8, "<f4", [], "m/s"]],
    "definition": "",
}


def _layout(rig: str, **change: Any) -> tuple[str, bytes]:
    doc = {**HOSTILE_LAYOUT, "rig": rig, **change}
    return f"wrtfd.{rig}.main.layout", json.dumps(doc).encode()


def test_hostile_statuses_and_layouts_in_the_stream_leave_both_views_working(nats_server: NatsServer) -> None:
    big = json.loads(_status("bigint"))
    big["fleet"]["uploads"] = {"queued": 10**400, "queued_bytes": 10**400, "done": 10**400}
    big["status_interval_s"] = 10**400
    messages = [
        ("wrtfd.rig-1.status", _status("rig-1")),
        ("wrtfd.deep.status", b'{"rig": "deep", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}"),
        ("wrtfd.bigint.status", json.dumps(big).encode()),
        (
            "wrtfd.nonfinite.status",
            _status("nonfinite", uptime_s=1.0).replace(b"1.0", b"1e400")[:-1] + b', "n": NaN}',
        ),
        (
            "wrtfd.m[/].status",
            _status("m[/]", problems=["disk [/red] full"], groups={"g[b]": {"in_session": True}}),
        ),
        _layout("inf", layout_id=1e400),
        _layout("shape", fields=[["tick", 0, "<u8", [], ""], ["x.speed", 8, "<f4", [-1], ""]]),
        _layout("obj", fields=[["tick", 0, "<u8", [], ""], ["x.speed", 8, "O", [], ""]]),
    ]
    _publish(nats_server, messages)

    watch = _watch(nats_server, "--seconds", "0")
    assert (watch.returncode, watch.stderr) == (0, ""), watch.stderr
    assert {"rig-1", "bigint", "nonfinite", "m[/]"} <= _first_words(watch.stdout), watch.stdout
    assert ["m[/]", "g[b]", "recording"] in [line.split()[:3] for line in watch.stdout.splitlines()]
    assert "(4 message(s) dropped)" in watch.stdout  # deep, and the three layouts

    status = _fleet_status(nats_server)
    assert (status.returncode, status.stderr) == (0, ""), status.stderr
    assert {"rig-1", "bigint", "nonfinite", "m[/]"} <= _first_words(status.stdout), status.stdout
    assert "disk [/red] full" in status.stdout and "g[b]" in status.stdout

    as_json = _fleet_status(nats_server, "--json")
    assert (as_json.returncode, as_json.stderr) == (0, "")

    def strict(name: str) -> None:
        raise AssertionError(f"{name} is not JSON")

    doc = json.loads(as_json.stdout, parse_constant=strict)
    assert set(doc["rigs"]) == {"rig-1", "bigint", "nonfinite", "m[/]"}  # deep: not JSON for us
    assert (doc["rigs"]["nonfinite"]["uptime_s"], doc["rigs"]["nonfinite"]["n"]) == (None, None)


def test_made_up_rigs_that_went_quiet_do_not_hide_a_real_one(nats_server: NatsServer) -> None:
    fakes = [
        (f"wrtfd.fake{i}.status", json.dumps({"rig": f"fake{i}", "state": "idle"}).encode())
        for i in range(300)
    ]
    _publish(nats_server, [*fakes, ("wrtfd.rig-1.status", _status("rig-1"))])

    status = _fleet_status(nats_server)
    assert status.returncode == 0, status.stderr
    assert f"{MAX_RIGS} rig(s) ({300 + 1 - MAX_RIGS} more heard from longer ago not shown)" in status.stdout
    rigs = _first_words(status.stdout)
    assert "rig-1" in rigs and "fake299" in rigs and "fake0" not in rigs

    watch = _watch(nats_server, "--seconds", "0")
    assert watch.returncode == 0, watch.stderr
    assert "rig-1" in _first_words(watch.stdout) and f"{MAX_RIGS} rig(s)" in watch.stdout


def test_a_view_that_raises_on_a_flood_counts_drops_and_keeps_no_errors(
    nats_server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception escaping the subscription's callback went to the error callback, which kept
    every one (with its traceback and message) for the connection's life."""
    feed = FleetView.feed

    def fragile(self: FleetView, subject: str, payload: bytes, now_s: float) -> None:
        if subject.startswith("wrtfd.evil."):
            raise RuntimeError("a bug the messages of evil find")
        feed(self, subject, payload, now_s)

    monkeypatch.setattr(FleetView, "feed", fragile)
    _publish(nats_server, [("wrtfd.rig-1.status", _status("rig-1"))])

    def flood() -> None:
        time.sleep(1.5)
        _publish(nats_server, [("wrtfd.evil.events", b"x" * 1000)] * 50, stream=False)

    thread = threading.Thread(target=flood)
    thread.start()
    try:
        watch = _watch(nats_server, "--seconds", "4", "--interval", "0.5")
    finally:
        thread.join()
    assert (watch.returncode, watch.stderr) == (0, ""), watch.stderr
    last = watch.stdout.rsplit("--- ", 1)[-1]
    assert "wrtfd fleet: 1 rig(s)" in last and "(50 message(s) dropped)" in last, watch.stdout


def test_the_connections_error_callback_keeps_the_last_error_only() -> None:
    errors = LastError()
    sent = [ValueError(i) for i in range(1000)]

    async def report() -> None:
        for exc in sent:
            await errors.record(exc)

    asyncio.run(report())
    assert (errors.last, errors.count) == (sent[-1], 1000)
    assert not any(isinstance(v, list) for v in (getattr(errors, s) for s in LastError.__slots__))


@pytest.mark.parametrize("flags", [("--interval", "nan"), ("--interval", "inf"), ("--seconds", "nan")])
def test_watch_refuses_non_finite_times_in_one_line(flags: tuple[str, str]) -> None:
    """``--interval nan`` was taken (``nan <= 0`` is False) and watch never ended."""
    result = wrtfd_main("watch", "--url", "nats://127.0.0.1:1", *flags)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("wrtfd: error: --interval"), (
        result.stderr
    )
