"""The real daemon as a subprocess on loopback ports, fed real captures, stopped by signals."""

from __future__ import annotations

import os
import signal
import socket
import tomllib
from pathlib import Path

import pytest

from tests.e2e.test_daemon_harness import (
    BackgroundFeed,
    Daemon,
    f1_datagrams,
    forza_datagrams,
    free_port,
    recordings,
    run_cli,
    send_paced,
    sessions_of,
    udp_source,
    wait_for,
)

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def _config(out: Path, status_port: int, sources: str, extra: str = "") -> str:
    return (
        f'{sources}\n[recorder]\noutput_dir = "{out}"\nsession_idle_s = 30\nfsync_interval_s = 0.2\n'
        f'[status]\nport = {status_port}\n[logging]\nformat = "text"\n{extra}'
    )


@pytest.fixture
def ports() -> dict[str, int]:
    return {
        "forza": free_port(socket.SOCK_DGRAM),
        "f1": free_port(socket.SOCK_DGRAM),
        "status": free_port(),
    }


def _source_count(d: Daemon, name: str, key: str = "received") -> int:
    return int(d.status()["sources"][name][key])


def test_forza_and_f1_recorded_status_metrics_then_sigterm(
    tmp_path: Path, shared_data: Path, ports: dict[str, int]
) -> None:
    out = tmp_path / "rec"
    sources = udp_source("forza", "forza", ports["forza"]) + udp_source("f1", "f1", ports["f1"])
    d = Daemon(tmp_path, _config(out, ports["status"], sources), status_port=ports["status"]).start()
    try:
        first = d.wait_ready()
        assert {n: s["state"] for n, s in first["sources"].items()} == {
            "forza": "listening",
            "f1": "listening",
        }
        assert first["healthy"] is True

        forza = forza_datagrams(shared_data)[:240]
        f1 = f1_datagrams(shared_data, 2023)
        sent_f1 = send_paced(ports["f1"], f1, rate_hz=200)
        sent_forza = send_paced(ports["forza"], forza)
        wait_for(lambda: _source_count(d, "forza") == sent_forza, "forza datagrams counted")
        wait_for(lambda: _source_count(d, "f1") == sent_f1, "f1 datagrams counted")

        snap = d.status()
        fz = snap["sources"]["forza"]
        assert fz["state"] == "receiving"
        assert fz["samples"] == sent_forza and fz["dropped_total"] == 0
        assert fz["last_sample_age_s"] is not None and fz["last_sample_age_s"] >= 0
        f1_samples = snap["sources"]["f1"]["samples"]
        f1_dropped = snap["sources"]["f1"]["dropped_total"]
        assert f1_samples + f1_dropped <= sent_f1 and f1_samples > 0
        rec = wait_for(lambda: (r := d.status()["recorder"])["frames_written"] > 0 and r, "frames written")
        assert rec["state"] == "ok" and rec["current_file"] and Path(rec["current_file"]).parent == out
        assert snap["disk"]["free_bytes"] > 0

        code, metrics = d.get("/metrics")
        assert code == 200
        assert f'wrtfd_source_received_total{{source="forza"}} {sent_forza}' in metrics.splitlines()
        assert 'wrtfd_source_up{source="f1"} 1' in metrics.splitlines()
        assert "wrtfd_recorder_frames_written_total" in metrics
        assert d.get("/healthz") == (200, "ok\n")

        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 0, d.stderr
    finally:
        d.stop()
    assert "SIGTERM: stopping" in d.stderr and "finalized" in d.stderr
    files = recordings(out)
    assert len(files) == 1
    check = run_cli("validate", str(files[0]))
    assert check.returncode == 0, check.stdout + check.stderr
    sessions = sessions_of(files[0])
    # the F1 capture's packets come from several game sessions (sessionUID): each starts a session
    assert len(sessions) >= 1
    # every datagram sent reached the file: counted into a session footer, placed on ticks
    assert sum(s["sources"]["forza"]["samples"] for s in sessions) == sent_forza
    assert sum(s["sources"]["f1"]["samples"] for s in sessions) == f1_samples
    # ...and each is accounted for: it made a frame, or shared its tick, or came too late
    fz = [s["sources"]["forza"] for s in sessions]
    assert sum(c["ticks_emitted"] + c["superseded"] + c["late"] + c["dropped"] for c in fz) == sent_forza
    for s in sessions:
        assert s["frames_read"] == s["frame_count"] > 0
        assert s["sources"]["forza"]["ticks_emitted"] <= s["frame_count"]
        assert s["frame_count"] + s["dropped_ticks"] == s["last_tick"] - s["first_tick"] + 1


def test_sighup_starts_a_new_session(tmp_path: Path, shared_data: Path, ports: dict[str, int]) -> None:
    out = tmp_path / "rec"
    d = Daemon(
        tmp_path,
        _config(out, ports["status"], udp_source("forza", "forza", ports["forza"])),
        status_port=ports["status"],
    ).start()
    data = forza_datagrams(shared_data)
    try:
        d.wait_ready()
        send_paced(ports["forza"], data[:120])
        wait_for(lambda: d.status()["recorder"]["frames"] > 0, "first session frames")
        d.signal(signal.SIGHUP)
        wait_for(lambda: any("SIGHUP" in ln for ln in d.lines), "SIGHUP logged")
        send_paced(ports["forza"], data[120:240])
        wait_for(lambda: d.status()["recorder"]["sessions"] == 2, "a second session")
        wait_for(lambda: _source_count(d, "forza") == 240, "all datagrams counted")
        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 0, d.stderr
    finally:
        d.stop()
    files = recordings(out)
    assert len(files) == 1
    assert run_cli("validate", str(files[0])).returncode == 0
    sessions = sessions_of(files[0])
    assert len(sessions) == 2
    assert all(s["frame_count"] > 0 for s in sessions)
    assert sum(s["sources"]["forza"]["samples"] for s in sessions) == 240


def test_kill9_leaves_a_recoverable_file(tmp_path: Path, shared_data: Path, ports: dict[str, int]) -> None:
    out = tmp_path / "rec"
    d = Daemon(
        tmp_path,
        _config(out, ports["status"], udp_source("forza", "forza", ports["forza"])),
        status_port=ports["status"],
    ).start()
    try:
        d.wait_ready()
        send_paced(ports["forza"], forza_datagrams(shared_data)[:180])
        rec = wait_for(lambda: (r := d.status()["recorder"])["frames_written"] >= 100 and r, "frames on disk")
        written = rec["frames_written"]
        d.signal(signal.SIGKILL)
        assert d.wait_exit() == -signal.SIGKILL
    finally:
        d.stop()
    files = recordings(out)
    assert len(files) == 1
    assert run_cli("validate", str(files[0])).returncode != 0  # no footers: not a complete file
    fixed = run_cli("repair", str(files[0]))
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    check = run_cli("validate", str(files[0]))
    assert check.returncode == 0, check.stdout + check.stderr
    recovered = sum(s["frames_read"] for s in sessions_of(files[0]))
    assert recovered >= written  # everything the daemon had written survived the kill


_FORZA = '[[sources]]\nkind = "udp"\nprotocol = "forza"\nport = 5300\n'


def _exit_of(tmp_path: Path, source: str, out: Path | str, recorder_keys: str = "") -> tuple[int, Daemon]:
    """A daemon of ``source`` recording into ``out`` that is expected to stop by itself: its exit
    code, and the daemon (its lines)."""
    status_port = free_port()
    text = f'{source}[recorder]\noutput_dir = "{out}"\n{recorder_keys}[status]\nport = {status_port}\n'
    d = Daemon(tmp_path, text, status_port=status_port).start()
    try:
        return d.wait_exit(), d
    finally:
        d.stop()


@pytest.mark.parametrize(
    ("source", "recorder_keys", "message"),
    [
        (_FORZA.replace("5300", '"abc"'), "", 'sources[0].port: expected integer, got "abc"'),
        (_FORZA.replace('"forza"', '"forzza"'), "", "sources[0].protocol: unknown protocol 'forzza'"),
        (_FORZA + "frobnicate = 1\n", "", "sources[0].frobnicate: unknown key"),
        (_FORZA + 'options = { colour = "red" }\n', "", "sources[0].options: "),
        (_FORZA, 'file_template = "{nonsense}.wrtf"\n', "file_template"),
        (_FORZA, "rate_hz = 0\n", "recorder.rate_hz: expected greater than or equal to 1"),
        (
            _FORZA,
            'schema = "/nonexistent/frame.wrtf.yaml"\n',
            "recorder.schema: /nonexistent/frame.wrtf.yaml",
        ),
        # a key the writer writes itself: refused at start, not at the first frame (which
        # killed the daemon after journal lines claiming frames, with no file left)
        (_FORZA, 'metadata = { "wrtf.schema" = "x" }\n', "recorder.metadata: metadata key 'wrtf.schema'"),
        (_FORZA, 'metadata = { "wrtfd.check.salt" = "00" }\n', "metadata key 'wrtfd.check.salt'"),
        # every problem, one line
        (
            _FORZA,
            "rate_hz = 0\nfsync_interval_s = 0\n",
            "recorder.rate_hz: expected greater than or equal to 1; recorder.fsync_interval_s: ",
        ),
        (_FORZA + 'allow_from = ["999.1.1.1"]\n', "", "sources[0].allow_from: '999.1.1.1' is not an IP"),
    ],
    ids=[
        "type",
        "protocol",
        "unknown-key",
        "decoder-option",
        "recorder-template",
        "range",
        "pinned-schema",
        "reserved-metadata",
        "check-metadata",
        "two-errors",
        "allow-from",
    ],
)
def test_bad_config_exits_2_and_creates_nothing(
    tmp_path: Path, source: str, recorder_keys: str, message: str
) -> None:
    out = tmp_path / "rec"
    code, d = _exit_of(tmp_path, source, out, recorder_keys)
    assert code == 2
    assert len(d.lines) == 1, d.stderr  # one clear line, no traceback
    assert d.lines[0].startswith(f"wrtfd: error: {d.config_path}: ")
    assert message in d.lines[0]
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wrtfd.toml"]


@pytest.mark.parametrize("where", ["itself", "parent"])
def test_output_dir_that_is_a_file_is_a_config_error(tmp_path: Path, where: str) -> None:
    """A regular file where the directory (or one of its parents) should be: one line naming
    ``recorder.output_dir``, exit 2 (no restart loop under systemd), not a daemon crash."""
    blocker = tmp_path / "rec"
    blocker.write_text("not a directory")
    out = blocker if where == "itself" else blocker / "sub"
    code, d = _exit_of(tmp_path, _FORZA, out)
    assert code == 2
    assert len(d.lines) == 1, d.stderr
    assert d.lines[0].startswith(f"wrtfd: error: {d.config_path}: recorder.output_dir: "), d.lines[0]
    assert "not a directory" in d.lines[0]
    check = run_cli("config", "check", str(d.config_path))
    assert check.returncode == 2
    assert check.stderr.count("\n") == 1 and "recorder.output_dir: " in check.stderr


def test_an_output_dir_that_cannot_be_made_yet_is_a_failure_systemd_retries(tmp_path: Path) -> None:
    """Not the config's fault (no permission, a disk not mounted yet; here /proc, where even root
    cannot make a directory): one critical line naming the key and exit 1, which the unit's
    ``Restart=on-failure`` tries again (exit 2 would stop it for good: RestartPreventExitStatus)."""
    out = "/proc/wrtfd-not-mounted/rec"
    code, d = _exit_of(tmp_path, _FORZA, out)
    assert code == 1
    (line,) = [ln for ln in d.lines if "recorder.output_dir" in ln]
    assert f"recorder.output_dir: cannot create {out}: No such file or directory" in line


def test_a_write_failure_is_logged_and_the_exit_says_so(
    tmp_path: Path, shared_data: Path, ports: dict[str, int]
) -> None:
    """The recordings directory replaced by a file while running (as a removed or unwritable
    directory would): one error line naming the file and the error, the session's line says
    its frames were not all written, and the stop neither claims every file was finalized nor
    exits 0."""
    out = tmp_path / "rec"
    sources = udp_source("forza", "forza", ports["forza"])
    d = Daemon(tmp_path, _config(out, ports["status"], sources), status_port=ports["status"]).start()
    try:
        d.wait_ready()
        out.rmdir()
        out.write_text("in the way")
        sent = send_paced(ports["forza"], forza_datagrams(shared_data)[:120])
        wait_for(lambda: _source_count(d, "forza") == sent, "forza datagrams counted")
        wait_for(lambda: d.status()["recorder"]["errors"] > 0, "the write error in status")
        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 3, d.stderr
    finally:
        d.stop()
    errors = [line for line in d.lines if "write failed for group main" in line]
    assert len(errors) >= 1, d.stderr
    assert "ERROR" in errors[0] and str(out) in errors[0] and "(EEXIST)" in errors[0], errors[0]
    ended = [line for line in d.lines if "session ended in group main" in line]
    assert ended and "NOT all written" in ended[-1], d.stderr
    assert "every session and file finalized" not in d.stderr
    assert any("write error(s)" in line and "were not written" in line for line in d.lines), d.stderr
    assert "Traceback" not in d.stderr and "CRITICAL" not in d.stderr


def test_a_failing_source_is_restarted_and_never_stops_the_others(
    tmp_path: Path, shared_data: Path, ports: dict[str, int]
) -> None:
    out = tmp_path / "rec"
    blocker = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    blocker.bind(("127.0.0.1", ports["f1"]))  # f1's port is taken: its source fails to bind
    sources = udp_source("forza", "forza", ports["forza"]) + udp_source(
        "f1", "f1", ports["f1"], "restart_backoff_s = 0.1\nrestart_backoff_max_s = 0.4"
    )
    d = Daemon(tmp_path, _config(out, ports["status"], sources), status_port=ports["status"]).start()
    try:
        d.wait_ready()
        wait_for(lambda: d.status()["sources"]["f1"]["restarts"] >= 2, "f1 restarted with backoff")
        assert d.status()["sources"]["f1"]["state"] in ("reconnecting", "failed")
        send_paced(ports["forza"], forza_datagrams(shared_data)[:60])
        wait_for(lambda: _source_count(d, "forza") == 60, "forza still recording")
        code, metrics = d.get("/metrics")
        assert code == 200 and 'wrtfd_source_up{source="f1"} 0' in metrics.splitlines()
        blocker.close()  # the port frees up: the next restart binds it
        wait_for(lambda: d.status()["sources"]["f1"]["state"] == "listening", "f1 bound after the port freed")
        d.signal(signal.SIGINT)
        assert d.wait_exit() == 0, d.stderr
    finally:
        blocker.close()
        d.stop()
    assert any("source f1 failed" in ln and "restarting" in ln for ln in d.lines)
    assert run_cli("validate", str(recordings(out)[0])).returncode == 0


def test_healthz_503_when_a_required_source_is_silent(
    tmp_path: Path, shared_data: Path, ports: dict[str, int]
) -> None:
    out = tmp_path / "rec"
    sources = udp_source("forza", "forza", ports["forza"], "required = true\nsilent_after_s = 1.0")
    d = Daemon(tmp_path, _config(out, ports["status"], sources), status_port=ports["status"]).start()
    try:
        d.wait_ready()
        _, body = wait_for(lambda: (r := d.get("/healthz"))[0] == 503 and r, "503 while silent")
        assert "source forza silent" in body
        assert d.status()["healthy"] is False
        send_paced(ports["forza"], forza_datagrams(shared_data)[:30], rate_hz=60)
        assert d.get("/healthz") == (200, "ok\n")  # just fed: fresh
        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 0
    finally:
        d.stop()


def _tcp_listen_addresses(port: int) -> set[str]:
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        cols = line.split()
        addr_hex, port_hex = cols[1].split(":")
        if cols[3] == "0A" and int(port_hex, 16) == port:
            found.add(socket.inet_ntoa(bytes.fromhex(addr_hex)[::-1]))
    return found


def test_builtin_default_runs_with_status_on_loopback_only(tmp_path: Path) -> None:
    """No config at all: the games' usual ports, the state directory, status on 127.0.0.1 only."""
    env = {"STATE_DIRECTORY": str(tmp_path / "state")}
    probe = run_cli("config", "show")
    assert probe.returncode == 0 and 'host = "127.0.0.1"' in probe.stdout
    shown = tomllib.loads(probe.stdout)  # sections other than these (e.g. [foxglove]) may have ports too
    status_port = int(shown["status"]["port"])
    ports = [int(src["port"]) for src in shown["sources"]] + [status_port]
    for port in ports:
        kind = socket.SOCK_STREAM if port == status_port else socket.SOCK_DGRAM
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind(("0.0.0.0" if kind == socket.SOCK_DGRAM else "127.0.0.1", port))
            except OSError:
                pytest.skip(f"port {port} is in use on this machine")
    d = Daemon(tmp_path, None, status_port=status_port, env=env).start()
    try:
        snap = d.wait_ready()
        assert snap["config"] == "built-in default"
        assert snap["disk"]["path"] == str(tmp_path / "state")
        assert "forza" in snap["sources"] and all(s["state"] == "listening" for s in snap["sources"].values())
        assert _tcp_listen_addresses(status_port) == {"127.0.0.1"}
        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 0
    finally:
        d.stop()
    assert (tmp_path / "state").is_dir()
    assert not (tmp_path / "recordings").exists()


def _wedged_daemon(tmp_path: Path, ports: dict[str, int]) -> tuple[Daemon, int, Path]:
    """A daemon whose writer thread can be wedged for real (see test_daemon_notify.py)."""
    fifo = tmp_path / "wedge.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    out = tmp_path / "rec"
    cfg = _config(
        out, ports["status"], udp_source("forza", "forza", ports["forza"]), "[daemon]\nstall_after_s = 0.5\n"
    )
    d = Daemon(tmp_path, cfg, status_port=ports["status"], env={"WRTFD_DEBUG_WEDGE_FIFO": str(fifo)}).start()
    return d, reader, out


def _feed_then_wedge(d: Daemon, reader: int, ports: dict[str, int], shared_data: Path) -> int:
    d.wait_ready()
    with BackgroundFeed(ports["forza"], forza_datagrams(shared_data)):
        rec = wait_for(lambda: (r := d.status()["recorder"])["frames_written"] >= 30 and r, "frames on disk")
        os.close(reader)  # nobody reads the FIFO: the writer thread blocks in open() after its next batch
        wait_for(lambda: d.status()["recorder"]["state"] == "stalled", "the recorder to stall")
    return int(rec["frames_written"])


def _assert_recoverable(out: Path, at_least_frames: int) -> None:
    files = recordings(out)
    assert len(files) == 1
    if run_cli("validate", str(files[0])).returncode != 0:
        fixed = run_cli("repair", str(files[0]))
        assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    check = run_cli("validate", str(files[0]))
    assert check.returncode == 0, check.stdout + check.stderr
    assert sum(s["frames_read"] for s in sessions_of(files[0])) >= at_least_frames


def test_shutdown_is_bounded_even_when_the_disk_hangs(
    tmp_path: Path, shared_data: Path, ports: dict[str, int]
) -> None:
    d, reader, out = _wedged_daemon(tmp_path, ports)
    try:
        written = _feed_then_wedge(d, reader, ports, shared_data)
        d.signal(signal.SIGTERM)
        assert d.wait_exit(timeout_s=10) == 1  # gave up after shutdown_timeout_s, did not hang
    finally:
        d.stop()
    assert any("did not finish within 2.0 s" in ln for ln in d.lines)
    _assert_recoverable(out, written)


def test_second_sigint_exits_at_once(tmp_path: Path, shared_data: Path, ports: dict[str, int]) -> None:
    d, reader, out = _wedged_daemon(tmp_path, ports)
    try:
        written = _feed_then_wedge(d, reader, ports, shared_data)
        d.signal(signal.SIGINT)
        wait_for(lambda: any("SIGINT: stopping" in ln for ln in d.lines), "the first SIGINT to be taken")
        d.signal(signal.SIGINT)
        assert d.wait_exit(timeout_s=10) == 130
    finally:
        d.stop()
    assert any("second SIGINT" in ln for ln in d.lines)
    _assert_recoverable(out, written)


def test_status_port_taken_recording_goes_on(
    tmp_path: Path, shared_data: Path, ports: dict[str, int]
) -> None:
    out = tmp_path / "rec"
    taken = socket.socket()
    taken.bind(("127.0.0.1", ports["status"]))
    taken.listen()
    d = Daemon(
        tmp_path,
        _config(out, ports["status"], udp_source("forza", "forza", ports["forza"])),
        status_port=None,
    ).start()
    try:
        wait_for(lambda: any("ready:" in ln for ln in d.lines), "READY without the status endpoint")
        assert any("status endpoint: cannot listen" in ln for ln in d.lines)
        sent = send_paced(ports["forza"], forza_datagrams(shared_data)[:60])
        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 0, d.stderr
    finally:
        taken.close()
        d.stop()
    files = recordings(out)
    assert len(files) == 1 and run_cli("validate", str(files[0])).returncode == 0
    assert sum(s["sources"]["forza"]["samples"] for s in sessions_of(files[0])) == sent


def test_example_struct_feed_config_records_the_values_sent(tmp_path: Path) -> None:
    """config/struct-feed.toml as shipped (ports and paths moved): sent values come back from the file."""
    import struct
    import tomllib

    from wrtfd.format import Reader, Schema
    from wrtfd.format.schema import layout_difference

    port, status_port = free_port(socket.SOCK_DGRAM), free_port()
    out = tmp_path / "rec"
    text = (REPO / "config" / "struct-feed.toml").read_text()
    text = text.replace("port = 9100", f"port = {port}").replace("port = 8788", f"port = {status_port}")
    text = text.replace("[recorder]\n", f'[recorder]\noutput_dir = "{out}"\n')
    assert tomllib.loads(text)["sources"][0]["port"] == port
    # Pin the frame layout the way an operator would: `wrtfd config schema`, then recorder.schema.
    pin = tmp_path / "pin" / "frame.wrtf.yaml"
    pin.parent.mkdir()
    (pin.parent / "draft.toml").write_text(text)
    made = run_cli("config", "schema", "--config", str(pin.parent / "draft.toml"), "-o", str(pin))
    assert made.returncode == 0, made.stderr
    text = text.replace("[recorder]\n", f'[recorder]\nschema = "{pin}"\n')
    d = Daemon(tmp_path, text, status_port=status_port).start()
    record = struct.Struct("<2s2xIH2xf")  # magic, t_ms, rpm*4, speed: the example's layout
    speeds = [10.0 + i for i in range(50)]
    try:
        d.wait_ready()
        datagrams = [record.pack(b"WR", 1000 + 10 * i, 4 * (3000 + i), v) for i, v in enumerate(speeds)]
        send_paced(port, [b"XX" + datagrams[0][2:], *datagrams], rate_hz=100)  # one with a bad magic
        wait_for(lambda: d.status()["sources"]["feed"]["samples"] == len(speeds), "records decoded")
        assert sum(d.status()["sources"]["feed"]["dropped"].values()) == 1
        d.signal(signal.SIGTERM)
        assert d.wait_exit() == 0, d.stderr
    finally:
        d.stop()
    files = recordings(out)
    assert len(files) == 1 and run_cli("validate", str(files[0])).returncode == 0
    with Reader(files[0]) as r:
        assert r.rate_hz == 100
        assert layout_difference(Schema.load(pin).frame_dtype, r.schema.frame_dtype) is None
        frames = [r.frames(i) for i in range(len(r.sessions))]
        got_speed = sorted({float(v) for f in frames for v in f["feed"]["speed"]})
        got_rpm = sorted({float(v) for f in frames for v in f["feed"]["rpm"]})
    assert got_speed == speeds  # the sender's clock places each record on its own tick
    assert got_rpm == [3000.0 + i for i in range(50)]
