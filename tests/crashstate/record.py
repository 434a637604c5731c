"""Record the real daemon's file-system calls: ``wrtfd run`` under strace, fed by the simulator.

A scenario is a list of steps: drive (send the simulated car's Forza datagrams at 60 Hz for a
while), pause (the feed stops: a session ends on idle), a signal (SIGHUP: new session), and the
end (SIGTERM or SIGKILL, sent to the daemon itself, not to strace). Every datagram's send time
is logged (wall clock, like strace's ``-ttt``) so the loss after a crash can be measured
against what the rig had sent.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.crashstate.replay import FileHistory, HarnessError
from tests.crashstate.trace import FileOp, FsLog, ProcessEnd, Trace, interpret, read_trace, strace_command
from tests.e2e.test_daemon_harness import free_port, wait_for
from tests.priority import as_the_service, usual_priority

__all__ = ["SCENARIOS", "Recording", "Step", "record", "strace_usable"]

REPO = Path(__file__).resolve().parents[2]
TRACK = REPO / "config" / "tracks" / "oval.trk"
RATE_HZ = 60
#: Every wait is bounded (a daemon under strace on a loaded 2-core machine starts slowly).
START_TIMEOUT_S = 90.0
EXIT_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class Step:
    kind: str  # drive | pause | signal | end
    seconds: float = 0.0
    sig: int = 0


def drive(s: float) -> Step:
    return Step("drive", s)


def pause(s: float) -> Step:
    return Step("pause", s)


#: session_idle_s is 1 s in the test config: a pause of 7.5 s ends the session on idle and
#: leaves the rig at rest for 5 s more (issue 13: "switched off at the wall 5 s after"). The
#: simulator's first second is a session of its own (grid, then the race): drives of 6 s reach
#: the steady state, where the bound has no settle_s allowance.
SCENARIOS: dict[str, tuple[Step, ...]] = {
    "sigterm": (drive(2.5), pause(7.5), drive(1.5), Step("end", sig=signal.SIGTERM)),
    "sigkill": (drive(6.5), Step("end", sig=signal.SIGKILL)),
    "sighup": (drive(3.0), Step("signal", sig=signal.SIGHUP), drive(4.0), Step("end", sig=signal.SIGTERM)),
    "older": (drive(8.0), Step("end", sig=signal.SIGTERM)),
}


@dataclass(slots=True)
class Recording:
    name: str
    workdir: Path
    out_dir: Path
    trace: Trace
    log: FsLog
    #: send times (s, wall clock) per drive phase (phases are separated by pauses)
    phases: list[list[float]]
    #: (time, signal name) of each signal sent to the daemon
    signals: list[tuple[float, str]]
    exit: ProcessEnd
    stderr: str
    histories: dict[int, FileHistory] = field(default_factory=dict)
    #: the daemon's niceness while it ran (the unit's where the test may set it)
    niceness: int | None = None

    def real_paths(self) -> dict[int, Path]:
        return final_paths(self.log)


def strace_usable(tmp: Path) -> str | None:
    """None if strace can trace a child here, else why not (the tests skip with it)."""
    if shutil.which("strace") is None:
        return "strace is not installed (.ci/run installs Debian's strace)"
    for extra in (["--seccomp-bpf"], []):
        probe = ["strace", "-f", *extra, "-o", str(tmp / "probe.trace"), "-e", "trace=write", "true"]
        try:
            proc = subprocess.run(probe, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"strace cannot run: {exc}"
        if proc.returncode == 0:
            return None
    return f"strace cannot trace a child here (ptrace not permitted?): {proc.stderr.strip()[:200]}"


def seccomp_supported(tmp: Path) -> bool:
    probe = ["strace", "-f", "--seccomp-bpf", "-o", str(tmp / "probe.trace"), "-e", "trace=write", "true"]
    return subprocess.run(probe, capture_output=True, timeout=60).returncode == 0


def datagrams(seconds: float, seed: int = 0) -> list[bytes]:
    """Forza (FM2023) datagrams of the simulated car round the oval, one per 1/60 s."""
    from wrtfd.simulate import Simulation, TrackInfo, make_encoder
    from wrtfd.tracks import LanePath, load_track, timing_sectors

    track = load_track(TRACK)
    path = LanePath(track, 0)
    sectors = timing_sectors(track, path)
    encoder = make_encoder("forza", TrackInfo(track.name, path.length_m, sectors, 3), seed=seed)
    sim = Simulation(path, laps=3, rate_hz=RATE_HZ, seed=seed, sectors_m=sectors)
    out: list[bytes] = []
    want = int(seconds * RATE_HZ) + 1
    for i, state in enumerate(sim.states()):
        out += encoder.encode(state, first=i == 0, last=False)
        if len(out) >= want:
            break
    if len(out) < want:
        raise HarnessError(f"the simulator gave {len(out)} datagrams, {want} wanted")
    return out


def config_text(out_dir: Path, port: int) -> str:
    return (
        f'[[sources]]\nkind = "udp"\nname = "forza"\nprotocol = "forza"\nhost = "127.0.0.1"\nport = {port}\n'
        f'[recorder]\noutput_dir = "{out_dir}"\nsession_idle_s = 1.0\n'
        '[status]\nenabled = false\n[logging]\nformat = "text"\n'
    )


def _daemon_pid(strace_pid: int, marker: str) -> int | None:
    """The traced daemon: strace's child whose command line holds ``marker`` (strace also forks
    short-lived children of its own at start, to probe ptrace features)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        if ppid == strace_pid and marker.encode() in cmdline and b"strace" not in cmdline.split(b"\0")[0]:
            return int(entry)
    return None


def final_paths(log: FsLog) -> dict[int, Path]:
    """Each watched file's path at the end of the trace (files removed by then left out)."""
    out: dict[int, Path] = {}
    for op in log.ops:
        if op.kind in ("create", "rename"):
            out[op.file] = Path(op.path)
        elif op.kind == "unlink":
            out.pop(op.file, None)
    return out


def resolve_uncertain(log: FsLog, real_size: dict[int, int]) -> None:
    """A write the process died in: as much of it landed as the file on disk shows (appends)."""
    fixed: list[FileOp] = []
    for op in log.ops:
        if not op.uncertain:
            fixed.append(op)
            continue
        n = max(0, min(len(op.data), real_size.get(op.file, 0) - op.offset))
        if n:
            fixed.append(
                FileOp(op.seq, op.time_s, "write", op.file, op.path, op.offset, op.data[:n], line=op.line)
            )
    log.ops = fixed


def record(
    name: str, workdir: Path, steps: tuple[Step, ...], seed: int = 0, seccomp: bool = True
) -> Recording:
    """Run the daemon under strace through ``steps``; the trace and the files stay in ``workdir``."""
    workdir.mkdir(parents=True, exist_ok=True)
    out_dir = workdir / "rec"
    out_dir.mkdir()
    port = free_port(socket.SOCK_DGRAM)
    cfg = workdir / "wrtfd.toml"
    cfg.write_text(config_text(out_dir, port))
    trace_path = workdir / "daemon.trace"
    err_path = workdir / "daemon.stderr"
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")}
    env["PYTHONPATH"] = str(REPO)
    argv = [sys.executable, "-m", "wrtfd", "run", "--config", str(cfg)]
    total_drive = sum(s.seconds for s in steps if s.kind == "drive")
    grams = datagrams(total_drive + 1.0, seed)
    with err_path.open("w") as err:
        proc = subprocess.Popen(
            strace_command(trace_path, argv, seccomp=seccomp),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            cwd=workdir,
            env=env,
            preexec_fn=as_the_service,  # strace and the daemon, as the unit runs it (tests/priority.py)
        )
    phases: list[list[float]] = []
    signals: list[tuple[float, str]] = []
    try:
        pid = wait_for(lambda: _daemon_pid(proc.pid, str(cfg)), "the daemon under strace", START_TIMEOUT_S)

        def ready() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"daemon under strace exited: {err_path.read_text()[-2000:]}")
            return "ready:" in err_path.read_text()

        wait_for(ready, "the daemon to be ready", START_TIMEOUT_S)
        niceness = os.getpriority(os.PRIO_PROCESS, pid)
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sent = 0
        # The feed's pace is part of the loss measured: a feeder starved behind the run's other
        # tests sends what is overdue in a burst just before a signal (tests/priority.py).
        with usual_priority():
            try:
                paused = True
                for step in steps:
                    if step.kind == "drive":
                        if paused:  # a drive phase runs from one pause to the next (signals included)
                            phases.append([])
                        phase = phases[-1]
                        paused = False
                        start = time.monotonic()
                        n = round(step.seconds * RATE_HZ)
                        for i in range(n):
                            delay = start + i / RATE_HZ - time.monotonic()
                            if delay > 0:
                                time.sleep(delay)
                            tx.sendto(grams[sent], ("127.0.0.1", port))
                            phase.append(time.time())
                            sent += 1
                    elif step.kind == "pause":
                        time.sleep(step.seconds)
                        paused = True
                    elif step.kind in ("signal", "end"):
                        os.kill(pid, step.sig)
                        signals.append((time.time(), signal.Signals(step.sig).name))
            finally:
                tx.close()
        proc.wait(timeout=EXIT_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=EXIT_TIMEOUT_S)
    trace = read_trace(trace_path)
    exits = [e for e in trace.ends if e.pid == pid]
    if len(exits) != 1:
        raise HarnessError(f"{name}: the trace does not show how the daemon (pid {pid}) ended")
    log = interpret(trace, watch=lambda p: os.path.dirname(p) == str(out_dir), cwd=str(workdir))
    real = final_paths(log)
    resolve_uncertain(log, {i: p.stat().st_size for i, p in real.items() if p.exists()})
    rec = Recording(
        name, workdir, out_dir, trace, log, phases, signals, exits[0], err_path.read_text(), niceness=niceness
    )
    rec.histories = {i: FileHistory.of(log, i) for i in log.files}
    return rec
