"""``wrtfd simulate --protocol acc|wrc``: recording without a network (then ``wrtfd laps`` from
the lap channels), the ACC server's arguments, and waiting for a client that never comes."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from wrtfd.cli.main import main

REPO = Path(__file__).resolve().parents[2]
OVAL = str(REPO / "config" / "tracks" / "oval.trk")


@pytest.mark.parametrize("protocol", ["acc", "wrc"])
def test_record_then_laps(protocol: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["simulate", "--protocol", protocol, "--track", OVAL, "--record", str(tmp_path), "--laps", "2",
               "--json"])  # fmt: skip
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    (path,) = summary["files"]
    assert main(["laps", path, "--json"]) == 0
    laps = [lap for s in json.loads(capsys.readouterr().out)["sessions"] for lap in s["laps"]]
    expected = summary["laps"]
    assert len(expected) == (1 if protocol == "wrc" else 2)  # WRC: the track once, as a stage
    # the lap channels come from the game's positions and the track file: within a 60 Hz tick
    assert [lap["time_s"] for lap in laps] == pytest.approx([lap["time_s"] for lap in expected], abs=1 / 60)


def test_acc_is_served_not_sent(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--protocol", "acc", "--track", OVAL, "--to", "127.0.0.1:9000"]) == 2
    assert "use --listen HOST:PORT" in capsys.readouterr().err
    assert main(["simulate", "--protocol", "forza", "--track", OVAL, "--listen", "127.0.0.1:9000"]) == 2
    assert "--listen is for acc" in capsys.readouterr().err
    assert main(["simulate", "--protocol", "acc", "--track", OVAL, "--listen", "here", "--ai-cars", "9"]) == 2
    assert "--ai-cars must be 0..4" in capsys.readouterr().err


def test_acc_gives_up_when_no_client_registers(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rc = main(
        ["simulate", "--protocol", "acc", "--track", OVAL, "--listen", f"127.0.0.1:{port}", "--wait", "0.3"]
    )
    assert rc == 2
    err = capsys.readouterr().err
    assert f"waiting for a broadcasting client on 127.0.0.1:{port}" in err
    assert "no broadcasting client registered within 0.3 s" in err
