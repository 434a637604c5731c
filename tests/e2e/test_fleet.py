"""The fleet end to end: real daemons (real subprocesses) publishing to a real nats-server.

Each test starts ``nats-server -js`` on a free loopback port with its store in a temp directory
(skipped with a reason when the binary is absent), daemons with a ``[fleet]`` section, and
``wrtfd simulate`` driving the oval. The pit wall's side runs as the real commands (``wrtfd
watch``, ``wrtfd collect``, ``wrtfd fleet status``, ``wrtfd status``). Only the outage test is
long (the server is down for 30 s, as the issue asks).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.e2e.test_daemon_harness import Daemon, free_port, recordings, run_cli, udp_source, wait_for
from tests.fleet.nats_server import TOKEN, NatsServer

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
OVAL = REPO / "config" / "tracks" / "oval.trk"
OUTAGE_S = 30.0


def in_session(d: Daemon) -> bool:
    return bool(d.status()["recorder"]["in_session"])


def fleet_daemon(
    tmp_path: Path,
    rig: str,
    server: NatsServer,
    *,
    token: str = TOKEN,
    fleet_extra: str = "",
    recorder_extra: str = "",
    ports: tuple[int, int] | None = None,
    source_extra: str = "",
) -> Daemon:
    """A daemon recording one Forza source (lap channels on the oval) into ``<tmp>/<rig>/rec``."""
    home = tmp_path / rig
    home.mkdir(exist_ok=True)
    forza_port, status_port = ports or (free_port(socket.SOCK_DGRAM), free_port())
    config = (
        udp_source("forza", "forza", forza_port, f'track = "{OVAL}"\n{source_extra}')
        + f'[recorder]\noutput_dir = "rec"\nsession_idle_s = 3.0\n{recorder_extra}'
        + f'[status]\nport = {status_port}\n[logging]\nformat = "text"\n'
        + f'[fleet]\nurl = "{server.url}"\ntoken = "{token}"\nrig = "{rig}"\nstatus_interval_s = 1.0\n'
        + fleet_extra
    )
    d = Daemon(home, config, status_port=status_port)
    d.ports = (forza_port, status_port)  # type: ignore[attr-defined]
    return d


def restarted(d: Daemon) -> Daemon:
    again = Daemon(d.tmp_path, d.config_path.read_text(), status_port=d.status_port)
    again.ports = d.ports  # type: ignore[attr-defined]
    return again


def simulate(port: int, *, laps: int, speed_scale: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "wrtfd", "simulate", "--protocol", "forza", "--track", str(OVAL)),
            *("--to", f"127.0.0.1:{port}", "--laps", str(laps), "--speed-scale", str(speed_scale), "--json"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def fleet(d: Daemon) -> dict[str, Any]:
    return dict(d.status().get("fleet") or {})


def connected(d: Daemon) -> bool:
    return fleet(d).get("state") == "connected"


def wait_laps_sent(d: Daemon, timeout_s: float) -> None:
    """Until every line of the rig's laps.jsonl is acknowledged by the server, the link up; a
    timeout says what the forwarder reported last (pending bytes, its last error)."""

    def sent() -> bool:
        laps = fleet(d).get("laps") or {}
        return connected(d) and laps.get("pending_bytes") == 0 and laps.get("last_error") is None

    try:
        wait_for(sent, f"{d.tmp_path.name}: every lap record sent", timeout_s)
    except AssertionError as exc:
        f = fleet(d)
        raise AssertionError(f"{exc}; fleet state {f.get('state')!r}, laps {f.get('laps')!r}") from None


def uploads_settled(d: Daemon) -> dict[str, Any] | None:
    """The queue read from disk and empty, nothing in flight, the link up."""
    f = fleet(d)
    up = f.get("uploads") or {}
    settled = up.get("loaded") and up.get("queued") == 0 and up.get("current") is None
    return up if settled and f.get("state") == "connected" else None


def start_connected(daemons: Iterable[Daemon]) -> None:
    """Start every rig at once, then wait until each is ready and connected to the server."""
    rigs = list(daemons)
    for d in rigs:
        d.start()
    for d in rigs:
        d.wait_ready()
        wait_for(functools.partial(connected, d), "connected")


def upload_leftovers(daemons: Iterable[Daemon], timeout_s: float = 60.0) -> None:
    """Start each stopped rig again until it has uploaded what its stop (or crash) left queued,
    then stop it."""
    for d in daemons:
        again = restarted(d).start()
        try:
            again.wait_ready()

            def uploaded(again: Daemon = again) -> bool:
                up = fleet(again).get("uploads") or {}
                return bool(up.get("loaded")) and up.get("queued") == 0 and connected(again)

            wait_for(uploaded, "every file uploaded", timeout_s)
            again.signal(signal.SIGTERM)
            assert again.wait_exit() == 0, again.stderr
        finally:
            again.stop()


def stop(d: Daemon) -> None:
    d.signal(signal.SIGTERM)
    assert d.wait_exit() == 0, d.stderr


def server_objects(server: NatsServer) -> tuple[dict[str, Any], int]:
    """The bucket's objects by name, and the number of messages its stream holds."""

    async def read() -> tuple[dict[str, Any], int]:
        import nats

        nc = await nats.connect(server.url, token=TOKEN)
        js = nc.jetstream()
        store = await js.object_store("wrtfd")
        try:
            infos = {i.name: i for i in await store.list(ignore_deletes=True)}
        except nats.js.errors.NotFoundError:  # an empty bucket
            infos = {}
        messages = (await js.stream_info("OBJ_wrtfd")).state.messages
        await nc.close()
        return infos, int(messages)

    return asyncio.run(read())


def server_events(server: NatsServer, rig: str) -> list[dict[str, Any]]:
    async def read() -> list[dict[str, Any]]:
        import nats

        nc = await nats.connect(server.url, token=TOKEN)
        js = nc.jetstream()
        info = await js.stream_info("WRTFD_EVENTS")
        out = []
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            msg = await js.get_msg("WRTFD_EVENTS", seq)
            if msg.subject == f"wrtfd.{rig}.events":
                out.append(json.loads(msg.data or b"null"))
        await nc.close()
        return out

    return asyncio.run(read())


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def frame_times(files: list[Path]) -> np.ndarray:
    from wrtfd.format import Reader

    times = []
    for path in files:
        with Reader(path) as r:
            for i in range(len(r.sessions)):
                times.append(r.frame_times_us(i))
    return np.sort(np.concatenate(times)) if times else np.zeros(0, dtype=np.int64)


def last_table(text: str) -> dict[str, list[str]]:
    """The rows (split on blanks) of the last table ``wrtfd watch`` printed, by rig."""
    block = text.rsplit("--- ", 1)[-1]
    return {ln.split()[0]: ln.split() for ln in block.splitlines() if ln.startswith("rig-")}


@pytest.fixture
def server(tmp_path: Path) -> Any:
    s = NatsServer(tmp_path / "nats").start()
    yield s
    s.stop()


def test_two_rigs_publish_watch_sees_both_and_collect_is_byte_identical(
    tmp_path: Path, server: NatsServer
) -> None:
    daemons = [
        fleet_daemon(tmp_path, rig, server, recorder_extra="rotate_s = 4.0\n") for rig in ("rig-a", "rig-b")
    ]
    sims: list[subprocess.Popen[str]] = []
    try:
        for d in daemons:
            d.start()
        for d in daemons:
            d.wait_ready()
            wait_for(functools.partial(connected, d), f"{d.tmp_path.name} connected")
        sims = [simulate(d.ports[0], laps=2, speed_scale=4) for d in daemons]  # type: ignore[attr-defined]
        for d in daemons:
            wait_for(functools.partial(in_session, d), "both rigs recording")
        watch = run_cli("watch", "--url", server.url, "--token", TOKEN, "--seconds", "3", "--interval", "1")
        assert watch.returncode == 0, watch.stderr
        rows = last_table(watch.stdout)
        assert set(rows) == {"rig-a", "rig-b"}, watch.stdout
        for rig, row in rows.items():
            assert row[1:3] == ["main", "recording"], (rig, watch.stdout)
            assert row[4] == "km/h" and float(row[3]) > 0, (rig, watch.stdout)  # live speed from frames
            assert "connected" in row and "queued" in row
        for sim in sims:
            assert sim.wait(timeout=60) == 0, sim.stderr
        # the last files are finalized at stop and queued on disk; the next start uploads them
        for d in daemons:
            stop(d)
        daemons = [restarted(d).start() for d in daemons]
        for d in daemons:
            d.wait_ready()
            wait_for(functools.partial(uploads_settled, d), f"{d.tmp_path.name}'s uploads", 60)
        local = {f"{d.tmp_path.name}/{p.name}": p for d in daemons for p in recordings(d.tmp_path / "rec")}
        assert len(local) >= 4  # rotated while driving, plus the last of each rig

        pit = tmp_path / "pit"
        result = run_cli("collect", "--url", server.url, "--token", TOKEN, "--into", str(pit))
        assert result.returncode == 0, result.stderr
        got = {str(p.relative_to(pit)): p for p in pit.rglob("*.wrtf")}
        assert set(got) == set(local)
        for name, path in local.items():
            assert got[name].read_bytes() == path.read_bytes(), name
        assert f"{len(local)} new file(s)" in result.stderr
        again = run_cli("collect", "--url", server.url, "--token", TOKEN, "--into", str(pit))
        assert again.returncode == 0 and f"0 new file(s) (0 B), {len(local)} already in" in again.stderr

        def fleet_rows() -> dict[str, list[str]] | None:
            """`fleet status` once both restarted rigs' statuses are in (each publishes every
            second; on a loaded machine the first one after the uploads can come late)."""
            status = run_cli("fleet", "status", "--url", server.url, "--token", TOKEN)
            assert status.returncode == 0, status.stderr
            rows = {ln.split()[0]: ln.split() for ln in status.stdout.splitlines() if ln.startswith("rig-")}
            assert set(rows) == {"rig-a", "rig-b"}, status.stdout
            return None if any(row[1] == "offline" for row in rows.values()) else rows

        for row in wait_for(fleet_rows, "both rigs' status after the restart", 30).values():
            assert row[1] in ("idle", "recording") and row[3] == "0"  # nothing left to upload
    finally:
        for sim in sims:
            if sim.poll() is None:
                sim.kill()
        for d in daemons:
            d.stop()


def test_a_30_s_server_outage_loses_no_frame_no_file_no_event(tmp_path: Path, server: NatsServer) -> None:
    d = fleet_daemon(tmp_path, "rig-o", server, recorder_extra="rotate_s = 10.0\n").start()
    sim = None
    try:
        d.wait_ready()
        wait_for(lambda: connected(d), "connected")
        sim = simulate(d.ports[0], laps=3, speed_scale=1)  # type: ignore[attr-defined]
        wait_for(lambda: d.status()["recorder"]["frames"] > 300, "5 s recorded")
        server.stop()
        down_at = time.monotonic()
        frames_before = d.status()["recorder"]["frames"]
        most_queued = 0
        while time.monotonic() - down_at < OUTAGE_S:  # the outage: watch the daemon through it
            snap = d.status()
            most_queued = max(most_queued, snap["fleet"]["uploads"]["queued"])
            assert snap["fleet"]["state"] in ("disconnected", "connecting") or time.monotonic() - down_at < 5
            time.sleep(0.5)
        snap = d.status()
        assert snap["recorder"]["frames"] - frames_before > 0.9 * 60 * OUTAGE_S  # recording went on
        assert snap["recorder"]["state"] == "ok" and snap["healthy"]
        assert most_queued >= 2  # files rotated during the outage waited on disk
        assert snap["fleet"]["live"]["dropped"]["disconnected"] > 0
        assert any("lost the connection" in ln for ln in d.lines)
        server.start()
        wait_for(lambda: connected(d), "reconnected", 30)
        out, err = sim.communicate(timeout=60)
        assert sim.returncode == 0, err
        summary = json.loads(out)
        sim_laps = summary["laps"]
        # samples without a frame of their own, each counted: read after their tick closed
        # (late) or placed on a tick another had (superseded: a burst after the simulator
        # stalled). On a loaded machine both happen without an outage (clean-clone runs: 162
        # frames of 2474 missing; a gap of 0.367 s with the simulator 0.228 s late at most and
        # 12 samples late, 12 superseded); the outage may add no gap the counters do not explain
        counts = d.status()["recorder"]["per_source"]["forza"]
        late, merged = counts["late"], counts["superseded"]
        stop(d)
        d = restarted(d).start()
        d.wait_ready()
        wait_for(lambda: uploads_settled(d), "every upload done", 60)

        files = recordings(tmp_path / "rig-o" / "rec")
        objects, messages = server_objects(server)
        assert sorted(objects) == sorted(f"rig-o/{p.name}" for p in files)  # nothing lost
        for p in files:
            info = objects[f"rig-o/{p.name}"]
            assert info.size == p.stat().st_size and info.headers["Wrtfd-Sha256"] == [sha(p)]
        # nothing duplicated: the stream holds each object's chunks once and one info each
        assert messages == sum(i.chunks for i in objects.values()) + len(objects)

        # the local recording has no gap across the outage (nor across the file rotations)
        times = frame_times(files)
        gaps_s = np.diff(times) / 1e6
        driving = (times[1:] > times[0] + 2e6) & (times[:-1] < times[-1] - 1e6)
        # (speed scale 1: a stall of the simulator itself on a loaded machine is a real pause of
        # its feed, which the recording must show; the outage must add nothing to it)
        allowed_s = 0.1 + summary["max_late_s"] + late / 60
        assert gaps_s[driving].max() < allowed_s, f"a gap of {gaps_s[driving].max():.3f} s in the recording"
        assert abs(len(times) + late + merged - (times[-1] - times[0]) / 1e6 * 60) < 0.01 * len(times)

        # events sent while the server was down arrived after it: every lap, timed as simulated
        laps = [e for e in server_events(server, "rig-o") if e["type"] == "lap"]
        assert [e["lap"] for e in laps] == [lap["lap"] for lap in sim_laps]
        # (the same allowance as the gaps: a simulator that fell behind for a while can step the
        # game clock's offset on the daemon's clock, and a lap across the step is timed that much off)
        for event, lap in zip(laps, sim_laps, strict=True):
            assert abs(event["lap_ms"] - lap["time_s"] * 1000) < 50 + 1000 * summary["max_late_s"]
    finally:
        if sim is not None and sim.poll() is None:
            sim.kill()
        d.stop()


def test_sigkill_during_an_upload_resumes_after_restart(tmp_path: Path, server: NatsServer) -> None:
    rec = tmp_path / "rig-k" / "rec"
    rec.mkdir(parents=True)
    big = rec / "20260101_120000_forza_oval.wrtf"  # a finished file from before: the scan queues it
    big.write_bytes(os.urandom(3 << 20))
    old = time.time() - 3600
    os.utime(big, (old, old))
    slow = 'chunk_bytes = 16384\nupload_rate_bytes_s = 262144\nverify = "info"\n'
    d = fleet_daemon(tmp_path, "rig-k", server, fleet_extra=slow).start()
    try:
        d.wait_ready()

        def a_third_sent() -> bool:
            current = (fleet(d).get("uploads") or {}).get("current") or {}
            return bool(current) and current.get("sent_bytes", 0) > big.stat().st_size // 3

        wait_for(a_third_sent, "a third of the file sent", 30)
        d.proc.send_signal(signal.SIGKILL)  # type: ignore[union-attr]
        d.wait_exit()
        objects, messages = server_objects(server)
        assert objects == {} and 0 < messages < (3 << 20) // 16384  # chunks, but no object yet

        fast = d.config_path.read_text().replace("upload_rate_bytes_s = 262144\n", "")
        ports = d.ports  # type: ignore[attr-defined]
        d = Daemon(d.tmp_path, fast, status_port=d.status_port)  # the same config, at full speed
        d.ports = ports  # type: ignore[attr-defined]
        d.start()
        d.wait_ready()
        wait_for(lambda: uploads_settled(d), "the upload done", 60)
        resumed = [ln for ln in d.lines if "resuming the upload of" in ln and big.name in ln]
        assert resumed, d.stderr
        chunk = int(resumed[0].split(" at chunk ")[1].split()[0])
        assert chunk == messages  # exactly where the server's chunks ended
        objects, messages = server_objects(server)
        info = objects[f"rig-k/{big.name}"]
        assert info.headers["Wrtfd-Sha256"] == [sha(big)] and info.size == big.stat().st_size
        assert messages == info.chunks + 1  # no chunk twice
        pit = tmp_path / "pit"
        assert run_cli("collect", "--url", server.url, "--token", TOKEN, "--into", str(pit)).returncode == 0
        assert (pit / "rig-k" / big.name).read_bytes() == big.read_bytes()
    finally:
        d.stop()


def test_a_wrong_token_is_refused_with_a_clear_status_line_and_recording_goes_on(
    tmp_path: Path, server: NatsServer
) -> None:
    d = fleet_daemon(tmp_path, "rig-w", server, token="not-the-token").start()
    sim = None
    try:
        d.wait_ready()
        sim = simulate(d.ports[0], laps=1, speed_scale=2)  # type: ignore[attr-defined]
        wait_for(lambda: fleet(d).get("state") == "refused", "the refusal")
        shown = run_cli("status", "--url", f"http://127.0.0.1:{d.status_port}")
        line = next((ln for ln in shown.stdout.splitlines() if ln.strip().startswith("fleet")), shown.stdout)
        assert f"{server.url} as rig rig-w: refused (authorization refused by the server" in line
        assert any("fleet:" in ln and "authorization refused by the server" in ln for ln in d.lines)
        first = d.status()["recorder"]["frames_written"]
        wait_for(lambda: d.status()["recorder"]["frames_written"] > first + 60, "recording going on")
        assert d.status()["recorder"]["state"] == "ok"
    finally:
        if sim is not None and sim.poll() is None:
            sim.kill()
        d.stop()


def test_a_file_closed_by_sigterm_is_uploaded_before_the_daemon_exits(
    tmp_path: Path, server: NatsServer
) -> None:
    # A link slow enough that the last file takes seconds (three 16 KiB chunks, one a second
    # after the first), well within a stop_upload_s of 15 s (the default 5 s, the test's subject
    # is the wait, not its length: a clean-clone run at six workers once found the file not
    # uploaded at exit, the daemon's log cut short in the message; it is printed whole now)
    slow = "chunk_bytes = 16384\nupload_rate_bytes_s = 16384\nstop_upload_s = 15\n"
    d = fleet_daemon(tmp_path, "rig-t", server, fleet_extra=slow).start()
    rec = tmp_path / "rig-t" / "rec"
    sim = None
    try:
        d.wait_ready()
        wait_for(lambda: connected(d), "the fleet link")
        sim = simulate(d.ports[0], laps=1, speed_scale=4.0)  # type: ignore[attr-defined]
        wait_for(
            lambda: recordings(rec) and recordings(rec)[0].stat().st_size > 40_000, "a session under way"
        )
        sim.kill()
        sim.wait()
        stop(d)  # SIGTERM in the session: the file is closed by the stop
    finally:
        if sim is not None and sim.poll() is None:
            sim.kill()
        d.stop()
    files = recordings(rec)
    assert len(files) == 1 and files[0].stat().st_size > 32768
    objects, _ = server_objects(server)  # after the exit: nothing of this rig runs any more
    info = objects.get(f"rig-t/{files[0].name}")
    assert info is not None, f"{sorted(objects)}\n{d.stderr}"
    assert info.headers["Wrtfd-Sha256"] == [sha(files[0])] and info.size == files[0].stat().st_size
    assert info.headers["Wrtfd-Complete"] == ["true"]


def test_an_incomplete_file_found_at_start_is_uploaded_as_incomplete(
    tmp_path: Path, server: NatsServer
) -> None:
    from wrtfd.format import Reader

    # A kill -9 leftover: the daemon is killed in the middle of a session (the fleet off, so the
    # file is only found by the next start's scan).
    d = fleet_daemon(tmp_path, "rig-i", server, fleet_extra="upload = false\n").start()
    sim = None
    try:
        d.wait_ready()
        sim = simulate(d.ports[0], laps=1, speed_scale=4.0)  # type: ignore[attr-defined]
        wait_for(lambda: d.status()["recorder"]["session_frames"] > 240, "a session under way")
        rec = tmp_path / "rig-i" / "rec"
        wait_for(lambda: recordings(rec) and recordings(rec)[0].stat().st_size > 16384, "frames on disk")
        d.proc.send_signal(signal.SIGKILL)  # type: ignore[union-attr]
        d.wait_exit()
    finally:
        if sim is not None and sim.poll() is None:
            sim.kill()
        d.stop()
    [left] = recordings(rec)
    old = time.time() - 60
    os.utime(left, (old, old))
    with Reader(left) as r:  # the oracle: the reader's own scan of the file
        assert not r.complete
        frames = sum(s.frame_count for s in r.sessions)
    assert frames > 0

    again = Daemon(
        d.tmp_path, d.config_path.read_text().replace("upload = false\n", ""), status_port=d.status_port
    )
    again.start()
    try:
        again.wait_ready()
        wait_for(lambda: uploads_settled(again), "the upload done", 60)
        stop(again)
    finally:
        again.stop()
    objects, _ = server_objects(server)
    info = objects[f"rig-i/{left.name}"]
    assert info.headers["Wrtfd-Complete"] == ["false"], info.headers
    assert info.headers["Wrtfd-Frames"] == [str(frames)]
    assert info.headers["Wrtfd-Sha256"] == [sha(left)]


def test_live_frames_are_the_files_frames_byte_for_byte(tmp_path: Path, server: NatsServer) -> None:
    """A subscriber's frames (decimated to the default 10 Hz) against the file's frames at the same
    wall time, read from the disk: every byte equal, padding included (WRTF's padding is zero)."""
    received: list[bytes] = []

    async def run() -> None:
        import nats

        nc = await nats.connect(server.url, token=TOKEN)

        async def on_frames(msg: Any) -> None:
            received.append(bytes(msg.data))

        await nc.subscribe("wrtfd.rig-f.main.frames", cb=on_frames)
        await nc.flush()
        try:
            await asyncio.to_thread(drive)
        finally:
            await nc.close()

    def drive() -> None:
        d = fleet_daemon(tmp_path, "rig-f", server).start()
        sim = None
        try:
            d.wait_ready()
            wait_for(functools.partial(connected, d), "connected")
            sim = simulate(d.ports[0], laps=1, speed_scale=6)  # type: ignore[attr-defined]
            assert sim.wait(timeout=60) == 0, sim.stderr.read() if sim.stderr else ""
            wait_for(lambda: not in_session(d), "the session's end")
            sent = fleet(d)["live"]["frames_sent"]
            wait_for(lambda: sum(struct.unpack_from("<I", p, 8)[0] for p in received) >= sent, "every frame")
            stop(d)
        finally:
            if sim is not None and sim.poll() is None:
                sim.kill()
            d.stop()

    asyncio.run(run())
    live: dict[int, bytes] = {}
    for payload in received:
        magic, _layout_id, count, size = struct.unpack_from("<4sIII", payload)
        assert magic == b"WLF1"
        times = struct.unpack_from(f"<{count}q", payload, 16)
        body = payload[16 + 8 * count :]
        live.update((t, body[k * size : (k + 1) * size]) for k, t in enumerate(times))
    assert len(live) > 20

    from wrtfd.format import Reader

    matched = 0
    for path in recordings(tmp_path / "rig-f" / "rec"):
        raw = path.read_bytes()
        with Reader(path) as r:
            stride = r.schema.frame_dtype.itemsize
            for i, session in enumerate(r.sessions):
                for k, t in enumerate(r.frame_times_us(i).tolist()):
                    if t in live:
                        at = session.frames_offset + k * stride
                        frame = live.pop(t)
                        # the file's frame is the live frame and then its 8-byte check (N7)
                        assert raw[at : at + len(frame)] == frame, (path.name, i, k)
                        assert stride == len(frame) + 8
                        matched += 1
    assert matched > 20 and live == {}  # every live frame is in a file
