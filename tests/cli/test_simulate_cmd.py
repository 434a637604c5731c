"""``wrtfd simulate`` as a real subprocess sending to a real loopback socket."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_simulate_f1_to_loopback() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx:
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 * 1024 * 1024)
        rx.bind(("127.0.0.1", 0))
        port = rx.getsockname()[1]
        # read while the simulator runs: a loopback socket buffer holds far fewer than a session
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "wrtfd",
                "simulate",
                "--protocol",
                "f1",
                "--track",
                "config/tracks/oval.trk",
                "--to",
                f"127.0.0.1:{port}",
                "--laps",
                "2",
                "--speed-scale",
                "10",
                "--seed",
                "5",
                "--json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        got = []
        rx.settimeout(0.2)
        while True:
            try:
                got.append(rx.recv(4096))
            except TimeoutError:
                if proc.poll() is not None:
                    break
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        summary = json.loads(out)
    assert [lap["lap"] for lap in summary["laps"]] == [1, 2]
    assert all(8.0 < lap["time_s"] < 20.0 for lap in summary["laps"])
    assert summary["best_lap_s"] == min(lap["time_s"] for lap in summary["laps"])
    assert len(got) == summary["datagrams"] > 0
    ids = [d[6] for d in got]
    assert {0, 1, 2, 3, 6} == set(ids)
    assert [d[29:33] for d in got if d[6] == 3] == [b"SSTA", b"SEND"]
    assert "lap 1:" in err and "lap 2:" in err


def test_simulate_bad_arguments() -> None:
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "wrtfd",
            "simulate",
            "--protocol",
            "forza",
            "--track",
            "config/tracks/oval.trk",
            "--to",
            "nowhere",
            "--laps",
            "1",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert r.returncode == 2 and r.stderr.startswith("wrtfd: error: --to: expected HOST:PORT")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "wrtfd",
            "simulate",
            "--protocol",
            "forza",
            "--track",
            "missing.trk",
            "--to",
            "127.0.0.1:9",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert r.returncode == 2 and "cannot read track file" in r.stderr


def test_simulate_record_without_network(tmp_path: Path) -> None:
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "wrtfd",
            "simulate",
            "--protocol",
            "outsim",
            "--track",
            "config/tracks/kart.trk",
            "--record",
            str(tmp_path),
            "--laps",
            "2",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    (path,) = summary["files"]
    laps = subprocess.run(
        [sys.executable, "-m", "wrtfd", "laps", path, "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert laps.returncode == 0, laps.stderr
    found = [lap for s in json.loads(laps.stdout)["sessions"] for lap in s["laps"]]
    assert [lap["lap"] for lap in found] == [1, 2]
    for got, ref in zip(found, summary["laps"], strict=True):
        assert abs(got["time_s"] - ref["time_s"]) <= 1 / 60
