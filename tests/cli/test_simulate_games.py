"""``wrtfd simulate`` for GT7 and Project CARS 1/2 (the CLI's ``main``, in process): recorded offline through
the real decoders with lap channels from the track (the laps match the simulator's), and the GT7
console's argument errors."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest

from tests.cli.inprocess import wrtfd_main

REPO = Path(__file__).resolve().parents[2]


def wrtfd(*args: str) -> subprocess.CompletedProcess[str]:
    return wrtfd_main(*args, cwd=REPO)  # the track paths are the repository's


@pytest.mark.parametrize("protocol", ["gt7", "pcars2", "pcars"])
def test_recorded_lap_channels_match_the_simulator(tmp_path: Path, protocol: str) -> None:
    track = "config/tracks/oval.trk"
    r = wrtfd("simulate", "--protocol", protocol, "--track", track, "--record", str(tmp_path), "--laps", "2",
              "--seed", "3", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert [lap["lap"] for lap in summary["laps"]] == [1, 2]
    laps = wrtfd("laps", *summary["files"], "--json")  # no --track: the recorded lap channels
    assert laps.returncode == 0, laps.stderr
    result = json.loads(laps.stdout)
    found = [lap for s in result["sessions"] for lap in s["laps"]]
    assert [lap["lap"] for lap in found] == [1, 2]
    for got, ref in zip(found, summary["laps"], strict=True):
        assert abs(got["time_s"] - ref["time_s"]) <= 1 / 60 + 1e-9
    footers = [s for s in result["sessions"] if s["best_lap"] is not None]
    assert len(footers) == 1 and footers[0]["best_lap_s"] == pytest.approx(summary["best_lap_s"], abs=1 / 60)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--protocol", "gt7", "--to", "127.0.0.1:33740"], "gt7 streams only on request"),
        (["--protocol", "forza", "--listen", "127.0.0.1:33739"], "only gt7 waits for heartbeats"),
        (["--protocol", "gt7", "--listen", "127.0.0.1:0", "--gt7-variants", "AZ"], "--gt7-variants"),
        (["--protocol", "gt7", "--listen", "nonsense"], "--listen: expected HOST:PORT"),
        (
            ["--protocol", "gt7", "--listen", "127.0.0.1:{port}", "--wait-s", "0.3"],
            "no heartbeat on 127.0.0.1:",
        ),
    ],
)
def test_gt7_console_argument_errors(args: list[str], message: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = wrtfd("simulate", "--track", "config/tracks/oval.trk", *(a.format(port=port) for a in args))
    assert r.returncode != 0
    assert message in r.stderr and "Traceback" not in r.stderr
