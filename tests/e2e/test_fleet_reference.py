"""The team's best lap as the live delta's reference, end to end: a real nats-server and two real
daemons (rig A and rig B), ``wrtfd simulate`` driving each on the game's clock.

Rig A drives; its best lap is cut into a lap file and put in the object store. Rig B, with
``reference = "fleet:best"``, fetches it: at each of B's line crossings the recorded
``laps.last_delta`` (and the lap's last ``laps.delta``) equals B's lap time minus A's best lap
time within one tick. A then drives a faster lap; B's reference follows and B's next laps are
measured against the new best. Restarted with the server gone, B takes the cached lap at once.
The oracle is the simulators' own lap times (``--json``).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.e2e.test_daemon_harness import FOLLOW_SIMULATOR, Daemon, recordings, wait_for
from tests.e2e.test_fleet import OVAL, connected, fleet, fleet_daemon, restarted, start_connected
from tests.fleet.nats_server import NatsServer
from wrtfd.format import Reader

pytestmark = pytest.mark.slow

WAIT_S = 60.0
TICK_S = 1 / 60
SPEED_SCALE = 6


def drive(d: Daemon, *, seed: int, lane: int) -> dict[str, Any]:
    """Two simulated laps into ``d``; the simulator's summary once the daemon read every datagram."""
    port = d.ports[0]  # type: ignore[attr-defined]
    before = int(d.status()["sources"]["forza"]["received"])
    sim = subprocess.run(
        [
            *(sys.executable, "-m", "wrtfd", "simulate", "--protocol", "forza", "--track", str(OVAL)),
            *("--to", f"127.0.0.1:{port}", "--laps", "2", "--seed", str(seed), "--lane", str(lane)),
            *("--speed-scale", str(SPEED_SCALE), "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert sim.returncode == 0, sim.stderr
    summary: dict[str, Any] = json.loads(sim.stdout)
    assert summary["send_errors"] == 0
    want = before + summary["datagrams"]
    wait_for(lambda: d.status()["sources"]["forza"]["received"] == want, "every datagram read", WAIT_S)
    return summary


def reference_of(d: Daemon) -> dict[str, Any]:
    refs = fleet(d).get("references") or [{}]
    return dict(refs[0])


def follows(d: Daemon, time_s: float) -> dict[str, Any] | None:
    ref = reference_of(d)
    t = ref.get("lap_time_s")
    return ref if ref.get("rig") == "rig-a" and t is not None and abs(t - time_s) < TICK_S else None


def lap_channels(out: Path) -> list[np.ndarray]:
    """Every session's lap channels, in order."""
    sessions: list[np.ndarray] = []
    for path in recordings(out):
        with Reader(path) as r:
            sessions.extend(r.frames(i)["laps"] for i in range(len(r.sessions)))
    return [s for s in sessions if (s["lap_number"] >= 1).any()]


def test_rig_b_drives_against_rig_as_best_lap_and_follows_when_it_improves(tmp_path: Path) -> None:
    server = NatsServer(tmp_path / "nats").start()
    rec = FOLLOW_SIMULATOR
    a = fleet_daemon(tmp_path, "rig-a", server, recorder_extra=rec, fleet_extra="live_hz = 2\n")
    b = fleet_daemon(
        tmp_path,
        "rig-b",
        server,
        recorder_extra=rec,
        fleet_extra="live_hz = 2\nreference_poll_s = 0.5\n",
        source_extra='reference = "fleet:best"\nrcvbuf_bytes = 4194304\n',
    )
    try:
        start_connected((a, b))
        assert reference_of(b)["state"] == "waiting"  # nothing fetched yet: the session's best

        first_a = drive(a, seed=2, lane=0)
        best_1 = min(lap["time_s"] for lap in first_a["laps"])
        got = wait_for(lambda: follows(b, best_1), "rig-b: rig-a's best lap as its reference", WAIT_S)
        assert got["state"] == "fetched" and got["reference"] == "fleet:best"
        first_b = drive(b, seed=4, lane=0)
        assert min(lap["time_s"] for lap in first_b["laps"]) > best_1 + 2 * TICK_S  # B is slower

        second_a = drive(a, seed=2, lane=1)  # the inner lane: faster laps, a new team best
        best_2 = min(lap["time_s"] for lap in second_a["laps"])
        assert best_2 < best_1 - 10 * TICK_S
        wait_for(lambda: follows(b, best_2), "rig-b: rig-a's new best as its reference", WAIT_S)
        second_b = drive(b, seed=4, lane=0)

        b.signal(signal.SIGTERM)
        assert b.wait_exit() == 0, b.stderr
        sessions = lap_channels(b.tmp_path / "rec")
        assert len(sessions) == 2, [len(s) for s in sessions]
        for laps, summary, best in ((sessions[0], first_b, best_1), (sessions[1], second_b, best_2)):
            number = laps["lap_number"].astype(np.int64)
            done = {int(number[i - 1]): int(i) for i in np.flatnonzero(np.diff(number) == 1) + 1}
            for lap in summary["laps"]:
                n, want = lap["lap"], lap["time_s"] - best
                i = done[n]
                assert float(laps["last_delta"][i]) == pytest.approx(want, abs=TICK_S), (n, best)
                assert float(laps["delta"][i - 1]) == pytest.approx(want, abs=TICK_S), (n, best)
            assert np.isnan(laps["delta"][number == 0]).all()  # before the first crossing: none
        # the lap file B drove against is in its cache (a restart without the server uses it)
        (cached,) = (b.tmp_path / "rec" / ".fleet" / "refs").glob("*.wrtf")  # the older ones pruned
        with Reader(cached) as r:
            record = json.loads(r.metadata["wrtfd.lap.record"])
            assert record["rig"] == "rig-a" and abs(record["time_s"] - best_2) < TICK_S
            assert r.metadata["Track"] == "Small oval track" and len(r.sessions) == 1
        assert "reference fleet:best is fleet" in b.stderr

        # restarted with the server gone: the cached lap is the reference at once
        server.stop()
        b = restarted(b).start()
        b.wait_ready()
        ref = wait_for(lambda: follows(b, best_2), "rig-b offline: the cached reference", WAIT_S)
        assert ref["state"] == "cached" and not connected(b)
    finally:
        for d in (a, b):
            d.stop()
        server.stop()
