"""The strace parser and the descriptor interpreter: synthetic traces, hypothesis, a real strace."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.crashstate.record import strace_usable
from tests.crashstate.replay import FileHistory, apply_ops
from tests.crashstate.trace import (
    FsLog,
    TraceError,
    decode_string,
    interpret,
    parse_trace,
    read_trace,
    split_args,
    strace_command,
)

DIR = "/rec"
FILE = "/rec/a.wrtf"


def hx(data: bytes | str) -> str:
    """A string as strace -xx prints it."""
    raw = data.encode() if isinstance(data, str) else data
    return '"' + "".join(f"\\x{b:02x}" for b in raw) + '"'


class Lines:
    """Builds strace -f -ttt -T lines with increasing times."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.t = 1_700_000_000.0

    def add(self, text: str, pid: int = 100) -> Lines:
        self.t += 0.001
        self.lines.append(f"{pid} {self.t:.6f} {text}")
        return self

    def call(self, text: str, result: int | str = 0, pid: int = 100) -> Lines:
        return self.add(f"{text} = {result} <0.000010>", pid)

    def log(self) -> FsLog:
        return interpret(parse_trace(self.lines), watch=lambda p: os.path.dirname(p) == DIR, cwd="/")


def _opened(fd: int = 3, flags: str = "O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC", path: str = FILE) -> Lines:
    return Lines().call(f"openat(AT_FDCWD, {hx(path)}, {flags}, 0644)", fd)


def _content(log: FsLog, file: int = 0) -> bytes:
    return apply_ops([op for op in log.ops if op.file == file])


# -- parsing ----------------------------------------------------------------------------------------


def test_split_args_respects_strings_brackets_and_comments() -> None:
    text = f"3, [{{iov_base={hx('a,b')}, iov_len=3}}], 1 /* a, comment */, {{x=1, y=[2, 3]}}"
    assert split_args(text, "t") == [
        "3",
        f"[{{iov_base={hx('a,b')}, iov_len=3}}]",
        "1 /* a, comment */",
        "{x=1, y=[2, 3]}",
    ]
    with pytest.raises(TraceError, match="unbalanced"):
        split_args("[1, 2", "t")


def test_strings_are_hex_and_a_cut_string_is_an_error() -> None:
    assert decode_string(hx(b"\x00WR\xff"), "t") == b"\x00WR\xff"
    with pytest.raises(TraceError, match="cut short"):
        decode_string(hx(b"abc") + "...", "t")
    with pytest.raises(TraceError, match="hex-escaped"):
        decode_string('"abc"', "t")


def test_unfinished_and_resumed_lines_are_stitched() -> None:
    lines = (
        _opened()
        .add(f"write(3, {hx('hello')}, 5 <unfinished ...>", pid=101)
        .call("close(9)", 0)
        .add("<... write resumed>) = 5 <0.000500>", pid=101)
    )
    trace = parse_trace(lines.lines)
    write = next(s for s in trace.syscalls if s.name == "write")
    assert write.result == 5 and write.pid == 101 and write.line == 4
    assert write.end_s == pytest.approx(write.start_s + 0.0005)
    # the write completed after the close: it is ordered where it completed
    assert [s.name for s in sorted(trace.syscalls, key=lambda s: s.line)] == ["openat", "close", "write"]


def test_results_errors_signals_and_exits() -> None:
    lines = (
        Lines()
        .call(f"openat(AT_FDCWD, {hx('/x')}, O_RDONLY)", "-1 ENOENT (No such file or directory)")
        .call("fcntl(5, F_GETFL)", "0x802 (flags O_RDWR|O_NONBLOCK)")
        .add("--- SIGTERM {si_signo=SIGTERM, si_code=SI_USER, si_pid=1, si_uid=0} ---")
        .add("+++ exited with 0 +++")
        .add("+++ killed by SIGKILL +++", pid=7)
    )
    trace = parse_trace(lines.lines)
    assert (trace.syscalls[0].result, trace.syscalls[0].error) == (-1, "ENOENT")
    assert trace.syscalls[1].result == 0x802
    assert trace.signals[0][2] == "SIGTERM"
    assert [(e.pid, e.exit_code, e.signal) for e in trace.ends] == [(100, 0, None), (7, None, "SIGKILL")]


@pytest.mark.parametrize(
    "line",
    [
        "garbage",
        "100 1700000000.000001 write(3, ",
        "100 1700000000.000001 frobnicate(3) = 0 <0.000001>",
        "100 1700000000.000001 close(3) == 0",
        "100 1700000000.000001 <... close resumed>) = 0 <0.000001>",
        "100 1700000000.000001 +++ vanished +++",
    ],
    ids=["no-pid", "cut-line", "unknown-syscall", "bad-result", "resumed-nothing", "bad-exit"],
)
def test_malformed_lines_are_errors(line: str) -> None:
    with pytest.raises(TraceError):
        parse_trace([line])


def test_a_trace_ending_inside_a_syscall_is_an_error() -> None:
    with pytest.raises(TraceError, match="unfinished"):
        parse_trace(_opened().add(f"write(3, {hx('ab')}, 2 <unfinished ...>").lines)


def test_a_write_the_process_died_in_is_uncertain() -> None:
    lines = _opened().add(f"write(3, {hx('ab')}, 2 <unfinished ...>").add("+++ killed by SIGKILL +++")
    (op,) = [op for op in lines.log().ops if op.kind == "write"]
    assert op.uncertain and op.data == b"ab"


# -- interpreting -----------------------------------------------------------------------------------


def test_write_length_must_match_what_strace_shows() -> None:
    with pytest.raises(TraceError, match="count"):
        _opened().call(f"write(3, {hx('abc')}, 4)", 4).log()
    with pytest.raises(TraceError, match="more than"):
        _opened().call(f"pwrite64(3, {hx('abc')}, 3, 0)", 4).log()


def test_writev_abbreviated_or_cut_is_an_error() -> None:
    iov = f"[{{iov_base={hx('ab')}, iov_len=2}}, ...]"
    with pytest.raises(TraceError, match="abbreviated"):
        _opened().call(f"writev(3, {iov}, 3)", 2).log()
    iov = f"[{{iov_base={hx('ab')}, iov_len=5}}]"
    with pytest.raises(TraceError, match="expected 5"):
        _opened().call(f"writev(3, {iov}, 1)", 5).log()


def test_positions_dup_lseek_pwrite_append_and_truncate() -> None:
    iov = f"[{{iov_base={hx('AB')}, iov_len=2}}, {{iov_base={hx('CDE')}, iov_len=3}}]"
    log = (
        _opened()
        .call(f"writev(3, {iov}, 2)", 5)  # ABCDE, pos 5
        .call("dup(3)", 4)
        .call("lseek(4, 1, SEEK_SET)", 1)  # shared position: 1
        .call(f"write(3, {hx('x')}, 1)", 1)  # AxCDE, pos 2
        .call(f"pwrite64(4, {hx('zz')}, 2, 8)", 2)  # AxCDE\0\0\0zz, pos stays 2
        .call(f"write(4, {hx('y')}, 1)", 1)  # AxyDE...
        .call("fcntl(3, F_SETFL, O_WRONLY|O_APPEND)", 0)
        .call(f"write(4, {hx('!')}, 1)", 1)  # appended at 10
        .call("ftruncate(3, 12)", 0)
        .call("close(3)", 0)
        .call(f"write(4, {hx('w')}, 1)", 1)  # fd 4 still open, append
        .call(f"write(3, {hx('lost')}, 4)", "-1 EBADF (Bad file descriptor)")
        .log()
    )
    assert _content(log) == b"AxyDE\0\0\0zz!\0w"


def test_threads_share_the_table_and_forks_copy_it() -> None:
    lines = (
        _opened()
        .call("clone3({flags=CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_THREAD, exit_signal=0}, 88)", 101)
        .call("clone(child_stack=NULL, flags=SIGCHLD)", 102)
        .call(f"write(3, {hx('thread')}, 6)", 6, pid=101)
        .call("close(3)", 0, pid=102)  # the fork's copy: the parent's fd stays open
        .call(f"write(3, {hx('parent')}, 6)", 6)
        .call("close(3)", 0, pid=101)  # the thread closes the shared fd
        .call(f"write(3, {hx('gone')}, 4)", "-1 EBADF (Bad file descriptor)")
    )
    assert _content(lines.log()) == b"threadparent"


def test_files_and_directories_fsync_rename_unlink() -> None:
    log = (
        _opened(3, "O_WRONLY|O_CREAT|O_EXCL|O_CLOEXEC", "/rec/.a.tmp")
        .call(f"write(3, {hx('data')}, 4)", 4)
        .call("fdatasync(3)", 0)
        .call(f"openat(AT_FDCWD, {hx(DIR)}, O_RDONLY|O_CLOEXEC|O_DIRECTORY)", 4)
        .call("fsync(4)", 0)
        .call(f"rename({hx('/rec/.a.tmp')}, {hx(FILE)})", 0)
        .call("fsync(4)", 0)
        .call(f"openat(AT_FDCWD, {hx('/other/b')}, O_WRONLY|O_CREAT, 0644)", 5)
        .call(f"write(5, {hx('unwatched')}, 9)", 9)
        .call("fsync(5)", 0)
        .call(f"unlink({hx(FILE)})", 0)
        .log()
    )
    assert [(op.kind, op.path) for op in log.ops] == [
        ("create", "/rec/.a.tmp"),
        ("write", "/rec/.a.tmp"),
        ("fsync", "/rec/.a.tmp"),
        ("dirsync", DIR),
        ("rename", FILE),
        ("dirsync", DIR),
        ("unlink", FILE),
    ]
    h = FileHistory.of(log, 0)
    assert h.path_at(5) == FILE and h.path_at(7) is None
    assert not h.entry_durable(5) and h.entry_durable(6)  # renamed: durable only once synced again


def test_an_o_tmpfile_gets_its_name_from_linkat() -> None:
    log = (
        Lines()
        .call(f"openat(AT_FDCWD, {hx(DIR)}, O_WRONLY|O_TMPFILE|O_CLOEXEC, 0644)", 3)
        .call(f"write(3, {hx('head')}, 4)", 4)
        .call("fsync(3)", 0)
        .call(f"linkat(AT_FDCWD, {hx('/proc/self/fd/3')}, AT_FDCWD, {hx(FILE)}, AT_SYMLINK_FOLLOW)", 0)
        .call(f"openat(AT_FDCWD, {hx(DIR)}, O_RDONLY|O_TMPFILE, 0600)", 4)
        .call(f"linkat(4, {hx('')}, AT_FDCWD, {hx('/rec/b.wrtf')}, AT_EMPTY_PATH)", 0)
        .log()
    )
    assert [(op.kind, op.file, op.path) for op in log.ops] == [
        ("create", 0, "/rec/.O_TMPFILE-0"),
        ("write", 0, "/rec/.O_TMPFILE-0"),
        ("fsync", 0, "/rec/.O_TMPFILE-0"),
        ("rename", 0, FILE),
        ("create", 1, "/rec/.O_TMPFILE-1"),
        ("rename", 1, "/rec/b.wrtf"),
    ]
    h = FileHistory.of(log, 0)
    assert h.path_at(3) == "/rec/.O_TMPFILE-0" and h.path_at(4) == FILE and not h.entry_durable(4)
    with pytest.raises(TraceError, match="hard links"):
        _opened().call(f"link({hx(FILE)}, {hx('/rec/c.wrtf')})", 0).log()


def test_relative_paths_chdir_execve_and_o_trunc() -> None:
    log = (
        Lines()
        .call(f"chdir({hx(DIR)})", 0)
        .call(f"openat(AT_FDCWD, {hx('a.wrtf')}, O_WRONLY|O_CREAT|O_CLOEXEC, 0644)", 3)
        .call(f"write(3, {hx('old')}, 3)", 3)
        .call(f"openat(AT_FDCWD, {hx('a.wrtf')}, O_WRONLY|O_TRUNC)", 4)
        .call(f"execve({hx('/bin/x')}, [{hx('x')}], 0x7ffd /* 3 vars */)", 0)
        .call(f"write(3, {hx('closed')}, 6)", "-1 EBADF (Bad file descriptor)")
        .call(f"write(4, {hx('new')}, 3)", 3)
        .log()
    )
    assert [op.kind for op in log.ops] == ["create", "write", "truncate", "write"]
    assert _content(log) == b"new"


def test_watched_files_must_be_created_in_the_trace() -> None:
    with pytest.raises(TraceError, match="never created"):
        Lines().call(f"openat(AT_FDCWD, {hx(FILE)}, O_WRONLY)", 3).log()
    with pytest.raises(TraceError, match="not modelled"):
        _opened().call("fallocate(3, 0, 0, 4096)", 0).log()


# -- hypothesis: a random sequence of writes and fsyncs, replayed, equals doing it ------------------

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.binary(min_size=1, max_size=700)),
        st.tuples(st.just("writev"), st.lists(st.binary(max_size=300), min_size=1, max_size=4)),
        st.tuples(st.just("pwrite"), st.binary(min_size=1, max_size=300), st.integers(0, 3000)),
        st.tuples(st.just("lseek"), st.integers(0, 3000)),
        st.tuples(st.just("ftruncate"), st.integers(0, 3000)),
        st.tuples(st.just("fsync")),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_replay_of_a_random_trace_equals_the_real_file(ops: list[tuple], tmp_path: Path) -> None:
    real = tmp_path / "real.bin"
    real.unlink(missing_ok=True)
    fd = os.open(real, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    lines = _opened()
    synced: list[bytes] = []
    try:
        for op in ops:
            if op[0] == "write":
                n = os.write(fd, op[1])
                lines.call(f"write(3, {hx(op[1])}, {len(op[1])})", n)
            elif op[0] == "writev":
                n = os.writev(fd, op[1])
                iov = ", ".join(f"{{iov_base={hx(b)}, iov_len={len(b)}}}" for b in op[1])
                lines.call(f"writev(3, [{iov}], {len(op[1])})", n)
            elif op[0] == "pwrite":
                n = os.pwrite(fd, op[1], op[2])
                lines.call(f"pwrite64(3, {hx(op[1])}, {len(op[1])}, {op[2]})", n)
            elif op[0] == "lseek":
                lines.call(f"lseek(3, {op[1]}, SEEK_SET)", os.lseek(fd, op[1], os.SEEK_SET))
            elif op[0] == "ftruncate":
                os.ftruncate(fd, op[1])
                lines.call(f"ftruncate(3, {op[1]})", 0)
            else:
                os.fsync(fd)
                lines.call("fsync(3)", 0)
                synced.append(real.read_bytes())
    finally:
        os.close(fd)
    log = lines.log()
    h = FileHistory.of(log, 0)
    end = len(log.ops)
    assert h.content(end) == real.read_bytes()
    durable, later = h.synced(end)
    assert durable == (synced[-1] if synced else b"")
    assert apply_ops(later, durable) == real.read_bytes()


# -- a real strace ----------------------------------------------------------------------------------

_CHILD = """
import os, sys, threading
d = sys.argv[1]
fd = os.open(os.path.join(d, "t.wrtf"), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
os.write(fd, b"head" * 300)
def worker():
    os.writev(fd, [b"A" * 5000, b"B" * 3, b""])
    os.fsync(fd)
t = threading.Thread(target=worker); t.start(); t.join()
fd2 = os.dup(fd)
os.pwrite(fd2, b"pw", 3)
os.lseek(fd2, 100, os.SEEK_SET)
os.write(fd, b"at100")
os.ftruncate(fd, 4000)
os.write(fd, b"tail")
dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY); os.fsync(dfd); os.close(dfd)
os.close(fd); os.close(fd2)
os.rename(os.path.join(d, "t.wrtf"), os.path.join(d, "u.wrtf"))
"""


def test_real_strace_of_a_writer_rebuilds_its_file(tmp_path: Path) -> None:
    reason = strace_usable(tmp_path)
    if reason is not None:
        pytest.skip(reason)
    out = tmp_path / "rec"
    out.mkdir()
    trace_path = tmp_path / "child.trace"
    cmd = strace_command(trace_path, [sys.executable, "-c", _CHILD, str(out)], seccomp=False)
    subprocess.run(cmd, check=True, timeout=60, capture_output=True)
    log = interpret(read_trace(trace_path), watch=lambda p: os.path.dirname(p) == str(out), cwd=str(tmp_path))
    assert [op.kind for op in log.ops if op.kind != "write"] == [
        "create",
        "fsync",
        "truncate",
        "dirsync",
        "rename",
    ]
    h = FileHistory.of(log, 0)
    assert h.content(len(log.ops) + 1) == (out / "u.wrtf").read_bytes()
    assert h.path_at(len(log.ops) + 1) == str(out / "u.wrtf")
    assert [op.pid for op in log.ops if op.kind == "fsync"] != [log.ops[0].pid]  # the thread's fsync
