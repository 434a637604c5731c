"""End to end: ``wrtfd simulate`` (a real subprocess) sends 3 laps of the road course as Forza
Data Out over loopback UDP, ten times faster than real time, into a running recorder that
follows the game's clock (the real UDP source + live recorder with the lap-channel plug-in, in
this process); ``wrtfd laps`` then finds 3 complete laps whose times equal the simulator's own
within one tick, and ``wrtfd plot`` renders the session."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import numpy as np
import pytest

from tests.e2e.test_daemon_harness import (
    FOLLOW_SIMULATOR,
    FOLLOW_SIMULATOR_JITTER_S,
    record_simulation,
    recordings,
)
from tests.priority import usual_priority
from wrtfd.decoders.forza import ForzaDecoder
from wrtfd.format import Reader
from wrtfd.recorder import LiveRecorder, RecorderPolicy, SourceSpec
from wrtfd.sources.udp import UdpSource
from wrtfd.tracks import load_track
from wrtfd.tracks.lapchannels import lap_channels_for

REPO = Path(__file__).resolve().parents[2]
ROAD = REPO / "config" / "tracks" / "road.trk"
RATE_HZ = 60
TICK_S = 1 / RATE_HZ
# The recorder follows the game's clock (recorder.clock = "source"), so the feed can run ten times
# faster than real time and the file's lap times are still the simulator's (about 12 s instead of
# 2 minutes). tests/e2e/test_daemon_laps.py keeps the real-time path: the daemon at the game's pace.
SPEED_SCALE = 10.0
# The daemon subprocess's ticks close jitter_s (0.1 s) of the game's clock after their end, which
# at 10x is 10 ms of wall time: a loaded CI worker stalled it longer (samples late, a lap 15
# ticks long). At 4x it has 25 ms, as the lap-record tests.
DAEMON_SPEED_SCALE = 4.0

pytestmark = pytest.mark.slow


def wrtfd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wrtfd", *args], capture_output=True, text=True, cwd=REPO, timeout=300
    )


async def record_simulated_laps(out_dir: Path) -> tuple[dict, dict]:
    track = load_track(ROAD)
    decoder = ForzaDecoder()
    source = UdpSource("forza", decoder, host="127.0.0.1", port=0, rcvbuf_bytes=4 << 20)
    live = LiveRecorder(
        [SourceSpec("forza", decoder.definition)],
        RecorderPolicy(output_dir=out_dir, rate_hz=RATE_HZ, jitter_s=FOLLOW_SIMULATOR_JITTER_S),
        derived=[lap_channels_for(track, source="forza", protocol="forza")],
        source_clock=True,
    )
    async with anyio.create_task_group() as tg:
        await tg.start(live.run)
        await tg.start(source.run, live.sink)
        address = source.local_address
        assert address is not None
        proc = await anyio.run_process(
            [
                sys.executable,
                "-m",
                "wrtfd",
                "simulate",
                "--protocol",
                "forza",
                "--track",
                str(ROAD),
                "--to",
                f"127.0.0.1:{address[1]}",
                "--laps",
                "3",
                "--speed-scale",
                str(SPEED_SCALE),
                "--seed",
                "7",
                "--json",
            ],
            cwd=REPO,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr.decode()
        summary = json.loads(proc.stdout)
        # wait (bounded) until every datagram sent has been read from the socket
        with anyio.fail_after(20):
            while source.stats.received < summary["datagrams"]:  # noqa: ASYNC110 - the source has no such event
                await anyio.sleep(0.05)
        await live.stop()
        stats = {
            "received": source.stats.received,
            "dropped": source.stats.dropped.as_dict(),
            "recorder": live.stats_snapshot(),
        }
        tg.cancel_scope.cancel()
    return summary, stats


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, dict]:
    out_dir = tmp_path_factory.mktemp("e2e")
    with usual_priority():  # the recorder runs here, against the clock (tests/priority.py)
        summary, stats = anyio.run(record_simulated_laps, out_dir)
    files = sorted(out_dir.glob("*.wrtf"))
    assert len(files) == 1, files
    return summary, files[0], stats


def test_every_datagram_arrived_and_was_recorded(recorded: tuple[dict, Path, dict]) -> None:
    summary, path, stats = recorded
    assert summary["send_errors"] == 0
    assert stats["received"] == summary["datagrams"] and stats["dropped"] == {}
    with Reader(path) as r:
        assert r.complete
        frames = sum(s.frame_count for s in r.sessions)
    # one frame per simulated tick: placed by the game's clock, arrival jitter cannot merge two
    per_source = stats["recorder"]["per_source"]["forza"]
    assert per_source["late"] == 0 and per_source["superseded"] == 0
    assert frames == summary["ticks"]


def test_laps_redetected_from_positions(recorded: tuple[dict, Path, dict]) -> None:
    summary, path, _ = recorded
    r = wrtfd("laps", str(path), "--track", str(ROAD), "--json")
    assert r.returncode == 0, r.stderr
    laps = [lap for s in json.loads(r.stdout)["sessions"] for lap in s["laps"]]
    assert [lap["lap"] for lap in laps] == [1, 2, 3]
    for got, ref in zip(laps, summary["laps"], strict=True):
        assert got["time_s"] == pytest.approx(ref["time_s"], abs=TICK_S)
        assert got["sectors_s"] == pytest.approx(ref["sectors_s"], abs=TICK_S)


def test_live_lap_channels_and_footer(recorded: tuple[dict, Path, dict]) -> None:
    summary, path, _ = recorded
    r = wrtfd("laps", str(path), "--json")
    assert r.returncode == 0, r.stderr
    laps = [lap for s in json.loads(r.stdout)["sessions"] for lap in s["laps"]]
    assert [lap["time_s"] for lap in laps] == pytest.approx(
        [lap["time_s"] for lap in summary["laps"]], abs=TICK_S
    )
    with Reader(path) as rd:
        footers = [
            s.footer["laps"] for s in rd.sessions if s.footer is not None and s.footer["laps"]["lap_count"]
        ]
        assert len(footers) == 1
        assert int(footers[0]["lap_count"]) == 3
        assert int(footers[0]["best_lap_ms"]) == pytest.approx(
            summary["best_lap_s"] * 1000, abs=1000 * TICK_S
        )
        frames = np.concatenate([rd.frames(i) for i in range(len(rd.sessions))])
        assert set(np.unique(frames["laps"]["lap_number"])) == {0, 1, 2, 3, 4}
        assert set(np.unique(frames["laps"]["sector"])) == {0, 1, 2}


def test_plot_renders(recorded: tuple[dict, Path, dict], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib.image as mpimg

    _, path, _ = recorded
    with Reader(path) as rd:
        session = max(range(len(rd.sessions)), key=lambda i: rd.sessions[i].frame_count)
    out = tmp_path / "road.png"
    r = wrtfd("plot", str(path), "--track", str(ROAD), "--session", str(session), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 50_000
    img = mpimg.imread(out)
    assert img.shape[1] == 1600 and img.shape[0] > 600
    rgb = img[..., :3].reshape(-1, 3)
    assert len(np.unique(rgb.round(2), axis=0)) > 100 and (rgb.min(axis=1) < 0.9).mean() > 0.02


KART = REPO / "config" / "tracks" / "kart.trk"


def test_daemon_recording_redetected_after_the_fact(tmp_path: Path) -> None:
    """``wrtfd run`` (a real daemon subprocess, no track configured, following the game's clock)
    records an F1 feed sent four times faster than real time; laps are found afterwards with
    ``wrtfd laps --track``, as when the live detection was off, with the simulator's times."""
    summary, out, _ = record_simulation(
        tmp_path,
        "f1",
        *("--track", str(KART), "--laps", "2", "--seed", "3", "--speed-scale", str(DAEMON_SPEED_SCALE)),
        recorder=FOLLOW_SIMULATOR,
        rate_hz=RATE_HZ,
    )
    files = recordings(out)
    assert len(files) == 1, files
    r = wrtfd("laps", str(files[0]), "--track", str(KART), "--json")
    assert r.returncode == 0, r.stderr
    laps = [lap for s in json.loads(r.stdout)["sessions"] for lap in s["laps"]]
    assert [lap["lap"] for lap in laps] == [1, 2]
    for got, ref in zip(laps, summary["laps"], strict=True):
        assert got["time_s"] == pytest.approx(ref["time_s"], abs=TICK_S)
