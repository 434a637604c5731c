"""Issue 26 item 4: a daemon loads the libraries of what its config uses, nothing more.

The real daemon (``python -m wrtfd run --config``, through :func:`runpy.run_module` as ``-m``
does) runs as a subprocess whose ``atexit`` hook writes ``sys.modules`` to a file when it
exits: every module it imported, at start and later (``-X importtime`` misses modules loaded
with ``importlib.import_module``, which is how protocols are loaded). A Forza source is
configured and fed datagrams, so its decoder, the recorder and the file writer have all run
when the daemon is stopped.
"""

from __future__ import annotations

import signal
import socket
import sys
from pathlib import Path

from tests.e2e.test_daemon_harness import Daemon, free_port, udp_source, wait_for
from wrtfd.simulate import Simulation, TrackInfo, make_encoder
from wrtfd.tracks import LanePath, load_track

ROAD = Path(__file__).resolve().parents[2] / "config" / "tracks" / "road.trk"

#: What a Forza-only daemon must never load: the CAN stack (cantools brings python-can, whose
#: MF4 support brings asammdf, pandas and pyarrow), the other exporters' libraries.
HEAVY = ("cantools", "can", "asammdf", "pandas", "pyarrow", "matplotlib", "mcap", "pynmeagps", "pyubx2")

#: The status page's web stack: loaded when the first HTTP connection arrives, not before.
WEB_STACK = ("hypercorn", "starlette", "h11", "h2", "wsproto", "python_multipart")


WRAPPER = """\
import atexit, runpy, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write("\\n".join(sorted(sys.modules))))
assert sys.argv[1:3] == ["-m", "wrtfd"]
sys.argv[1:3] = []
runpy.run_module("wrtfd", run_name="__main__", alter_sys=True)
"""


def python_dumping_modules(tmp_path: Path, out: Path) -> str:
    """An interpreter command for the harness: runs ``-m wrtfd ...`` and dumps its modules at exit."""
    script = tmp_path / "dump_modules.py"
    script.write_text(WRAPPER)
    shim = tmp_path / "python"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{script}" "{out}" "$@"\n')
    shim.chmod(0o755)
    return str(shim)


def forza_datagrams(n: int) -> list[bytes]:
    track = load_track(ROAD)
    path = LanePath(track)
    sim = Simulation(path, laps=1, rate_hz=60.0, seed=3)
    encoder = make_encoder("forza", TrackInfo(track.name, path.length_m, (), 1))
    out: list[bytes] = []
    for i, state in enumerate(sim.states()):
        out.extend(encoder.encode(state, first=i == 0, last=False))
        if len(out) >= n:
            break
    return out


def run_forza_daemon(tmp_path: Path, *, ask_status: bool) -> tuple[set[str], Path]:
    """A one-Forza-source daemon fed datagrams until it has decoded some; the modules it had
    loaded at exit and its output directory. ``ask_status``: GET /status once before stopping
    (otherwise no HTTP connection is made: readiness and decoding are read from its log)."""
    port = free_port(socket.SOCK_DGRAM)
    status_port = free_port()
    out = tmp_path / "rec"
    config = (
        udp_source("forza", "forza", port)
        + f'[recorder]\noutput_dir = "{out}"\n'
        + f"[status]\nport = {status_port}\n"
    )
    dump = tmp_path / "modules.txt"
    python = python_dumping_modules(tmp_path, dump)
    daemon = Daemon(tmp_path, config, status_port=status_port, python=python).start()

    def logged(text: str) -> bool | None:
        if daemon.proc is not None and daemon.proc.poll() is not None:
            raise AssertionError(f"daemon exited: {daemon.stderr}")
        return any(text in ln for ln in daemon.lines) or None

    try:
        wait_for(lambda: logged("ready:"), "the daemon to be ready")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for d in forza_datagrams(120):
                s.sendto(d, ("127.0.0.1", port))
        wait_for(lambda: logged("source forza: first sample"), "the daemon to decode Forza datagrams")
        if ask_status:
            assert daemon.status()["sources"]["forza"]["samples"] > 0
        daemon.signal(signal.SIGTERM)
        assert daemon.wait_exit() == 0, daemon.stderr
    finally:
        daemon.stop()
    return set(dump.read_text().split()), out


def test_one_forza_source_daemon_loads_only_forza(tmp_path: Path) -> None:
    modules, out = run_forza_daemon(tmp_path, ask_status=False)
    assert "wrtfd.decoders.forza" in modules and "wrtfd.format.writer" in modules  # the parse works
    top = {m.split(".")[0] for m in modules}
    assert not top & set(HEAVY), sorted(top & set(HEAVY))
    other_games = {m for m in modules if m.startswith("wrtfd.decoders.")} - {
        "wrtfd.decoders.forza",
        "wrtfd.decoders.base",
        "wrtfd.decoders._common",
        "wrtfd.decoders.registry",
    }
    assert not other_games, sorted(other_games)
    # GNSS lap timing (circuits, VBO) is for a GNSS source with a circuit, track files and their
    # lap channels for a source with a track
    laps = {
        "wrtfd.tracks.gnsslaps",
        "wrtfd.tracks.circuit",
        "wrtfd.vbo",
        "wrtfd.tracks.lapchannels",
        "wrtfd.tracks.validate",
        "wrtfd.tracks.geometry",
    } & modules
    assert not laps, sorted(laps)
    # the status server listens (its port is bound at start) but loads its web stack only for
    # the first connection
    assert not top & set(WEB_STACK), sorted(top & set(WEB_STACK))
    assert list(out.glob("*.wrtf")), "the daemon recorded the datagrams"


def test_first_connection_loads_the_web_stack(tmp_path: Path) -> None:
    modules, _ = run_forza_daemon(tmp_path, ask_status=True)
    assert {"hypercorn", "starlette", "wrtfd.daemon.web.routes"} <= modules
