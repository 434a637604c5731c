"""strace output (``-f -ttt -T -xx``) of a real process -> the operations on the files it wrote.

Two strict steps. :func:`parse_trace` turns lines into :class:`Syscall` records, stitching each
``<unfinished ...>`` line to its ``<... resumed>`` line; a line it cannot read, a syscall it does
not know or a string strace cut short (``"..."...``: raise ``-s``) is a :class:`TraceError`,
never skipped. :func:`interpret` follows the descriptors (threads share one table, ``dup`` and
``fork`` share an open file description and its position, ``O_CLOEXEC`` fds close on ``execve``)
and returns the :class:`FileOp` records of the files the caller watches, in the order the
syscalls completed, plus every directory fsync and global sync.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "STRACE_SYSCALLS",
    "FileOp",
    "FsLog",
    "ProcessEnd",
    "Syscall",
    "Trace",
    "TraceError",
    "decode_string",
    "interpret",
    "parse_trace",
    "read_trace",
    "split_args",
    "strace_command",
]

#: Every syscall the recording traces; the parser knows each one (anything else is an error).
STRACE_SYSCALLS: tuple[str, ...] = (
    "open",
    "openat",
    "openat2",
    "creat",
    "close",
    "close_range",
    "dup",
    "dup2",
    "dup3",
    "fcntl",
    "write",
    "writev",
    "pwrite64",
    "pwritev",
    "pwritev2",
    "lseek",
    "ftruncate",
    "truncate",
    "fsync",
    "fdatasync",
    "sync",
    "syncfs",
    "sync_file_range",
    "rename",
    "renameat",
    "renameat2",
    "unlink",
    "unlinkat",
    "link",
    "linkat",
    "mkdir",
    "mkdirat",
    "chdir",
    "fchdir",
    "clone",
    "clone3",
    "fork",
    "vfork",
    "execve",
    "mmap",
    "fallocate",
    "copy_file_range",
    "sendfile",
    "splice",
)
#: Data strace may print per string (``-s``): more than any single write of the daemon.
STRACE_STRING_LIMIT = 1 << 24
#: Bounds of what the parser accepts (a longer line or file is an error, not a partial parse).
MAX_LINE_CHARS = 4 * STRACE_STRING_LIMIT + (1 << 16)
MAX_TRACE_BYTES = 1 << 30


class TraceError(Exception):
    """The trace cannot be read exactly: a harness error, never a finding about the daemon."""


def strace_command(trace_path: Path, argv: list[str], *, seccomp: bool = True) -> list[str]:
    """strace wrapping ``argv``: every thread and child, wall-clock times, durations, hex strings."""
    cmd = ["strace", "-f", "-ttt", "-T", "-xx", "-s", str(STRACE_STRING_LIMIT), "-o", str(trace_path)]
    if seccomp:
        cmd.append("--seccomp-bpf")  # only the traced syscalls stop the process: far less overhead
    cmd += ["-e", "trace=" + ",".join(STRACE_SYSCALLS), *argv]
    return cmd


# -- lines -> syscalls ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Syscall:
    """One syscall; ``result`` None when strace printed ``?`` or the process died inside it."""

    line: int
    pid: int
    start_s: float
    end_s: float
    name: str
    args: tuple[str, ...]
    result: int | None
    error: str | None
    completed: bool = True


@dataclass(frozen=True, slots=True)
class ProcessEnd:
    line: int
    pid: int
    time_s: float
    exit_code: int | None
    signal: str | None


@dataclass(frozen=True, slots=True)
class Trace:
    syscalls: tuple[Syscall, ...]
    ends: tuple[ProcessEnd, ...]
    #: (pid, time, signal name) of each signal delivered
    signals: tuple[tuple[int, float, str], ...]

    @property
    def end_s(self) -> float:
        times = [e.time_s for e in self.ends] + [s.end_s for s in self.syscalls]
        return max(times, default=0.0)


_HEAD = re.compile(r"(\d+)\s+(\d+\.\d{6})\s(.*)\Z", re.S)
_CALL = re.compile(r"([a-z_][a-z0-9_]*)\(")
_RESUMED = re.compile(r"<\.\.\. ([a-z_][a-z0-9_]*) resumed>(.*)\Z", re.S)
_UNFINISHED = " <unfinished ...>"
_RESULT = re.compile(
    r"\s*=\s*(\?|-?\d+|0x[0-9a-f]+)"
    r"(?:\s+(E[A-Z0-9_]+))?"
    r"(?:\s+\((?:[^()]|\([^()]*\))*\))?"
    r"(?:\s+<(\d+\.\d+|unavailable)>)?\s*\Z"
)
_EXIT = re.compile(r"\+\+\+ exited with (\d+) \+\+\+\Z")
_KILLED = re.compile(r"\+\+\+ killed by (SIG[A-Z0-9]+)(?: \(core dumped\))? \+\+\+\Z")
_SIGNAL = re.compile(r"--- (SIG[A-Z0-9]+) .*---\Z")


def _structure(text: str, start: int, where: str) -> Iterator[tuple[int, str]]:
    """Positions of brackets and commas in ``text`` from ``start``, outside strings and comments."""
    i, n = start, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = text.find('"', i + 1)
            while j > 0 and text[j - 1] == "\\" and text[j - 2] != "\\":
                j = text.find('"', j + 1)
            if j < 0:
                raise TraceError(f"{where}: unterminated string")
            i = j + 1
            continue
        if c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise TraceError(f"{where}: unterminated comment")
            i = j + 2
            continue
        if c in "([{)]},":
            yield i, c
        i += 1


def split_args(text: str, where: str) -> list[str]:
    """Top-level comma-separated items of ``text`` (brackets, strings and comments respected)."""
    items: list[str] = []
    depth = 0
    start = 0
    for i, c in _structure(text, 0, where):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth < 0:
                raise TraceError(f"{where}: unbalanced {c!r}")
        elif depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    if depth:
        raise TraceError(f"{where}: unbalanced brackets")
    last = text[start:].strip()
    if last or items:
        items.append(last)
    return items


def _call_text(text: str, where: str) -> tuple[str, str, str]:
    """(name, argument text, what follows the closing parenthesis) of ``name(args) = ...``."""
    m = _CALL.match(text)
    if m is None:
        raise TraceError(f"{where}: not a syscall: {text[:80]!r}")
    depth = 1
    for i, c in _structure(text, m.end(), where):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return m.group(1), text[m.end() : i], text[i + 1 :]
    raise TraceError(f"{where}: no closing parenthesis")


def _syscall(text: str, pid: int, start_s: float, line: int, where: str, known: frozenset[str]) -> Syscall:
    name, arg_text, rest = _call_text(text, where)
    if name not in known:
        raise TraceError(f"{where}: syscall {name!r} is not one the recording traces")
    m = _RESULT.match(rest)
    if m is None:
        raise TraceError(f"{where}: unreadable result {rest[:80]!r}")
    res, err, dur = m.groups()
    result = None if res == "?" else int(res, 0)
    end_s = start_s + (float(dur) if dur and dur != "unavailable" else 0.0)
    args = tuple(split_args(arg_text, where))
    return Syscall(line, pid, start_s, end_s, name, args, result, err)


def parse_trace(lines: Iterable[str], known: Iterable[str] = STRACE_SYSCALLS) -> Trace:
    """Parse strace ``-f -ttt -T -xx`` lines (with the pid column of ``-o FILE``)."""
    names = frozenset(known)
    calls: list[Syscall] = []
    ends: list[ProcessEnd] = []
    signals: list[tuple[int, float, str]] = []
    pending: dict[int, tuple[str, float, int]] = {}
    for no, raw in enumerate(lines, 1):
        where = f"trace line {no}"
        if len(raw) > MAX_LINE_CHARS:
            raise TraceError(f"{where}: {len(raw)} characters, more than {MAX_LINE_CHARS}")
        line = raw.rstrip("\n")
        if not line:
            continue
        m = _HEAD.match(line)
        if m is None:
            raise TraceError(f"{where}: no pid and -ttt time: {line[:80]!r}")
        pid, ts, rest = int(m.group(1)), float(m.group(2)), m.group(3)
        if rest.startswith("---"):
            sm = _SIGNAL.match(rest)
            if sm is None:
                raise TraceError(f"{where}: unreadable signal line {rest[:80]!r}")
            signals.append((pid, ts, sm.group(1)))
            continue
        if rest.startswith("+++"):
            em, km = _EXIT.match(rest), _KILLED.match(rest)
            if em is None and km is None:
                raise TraceError(f"{where}: unreadable exit line {rest[:80]!r}")
            if pid in pending:  # died inside a syscall: strace never saw it return
                text, start, _ = pending.pop(pid)
                name, arg_text, _ = _call_text(text + ")", where)
                if name not in names:
                    raise TraceError(f"{where}: syscall {name!r} is not one the recording traces")
                args = tuple(split_args(arg_text, where))
                # ordered where the process died (its effect, if any, happened by then)
                calls.append(Syscall(no, pid, start, ts, name, args, None, None, completed=False))
            ends.append(
                ProcessEnd(no, pid, ts, int(em.group(1)) if em else None, km.group(1) if km else None)
            )
            continue
        if rest.endswith(_UNFINISHED):
            if pid in pending:
                raise TraceError(f"{where}: pid {pid} starts a syscall while one is unfinished")
            pending[pid] = (rest[: -len(_UNFINISHED)], ts, no)
            continue
        rm = _RESUMED.match(rest)
        if rm is not None:
            if pid not in pending:
                raise TraceError(f"{where}: {rm.group(1)} resumed, but pid {pid} has nothing unfinished")
            text, start, _ = pending.pop(pid)
            if not text.startswith(rm.group(1) + "("):
                raise TraceError(f"{where}: {rm.group(1)} resumed, but pid {pid} was in {text[:40]!r}")
            if rm.group(2).endswith(_UNFINISHED):
                raise TraceError(f"{where}: a syscall resumed and unfinished again")
            calls.append(_syscall(text + rm.group(2), pid, start, no, where, names))
            continue
        calls.append(_syscall(rest, pid, ts, no, where, names))
    if pending:
        raise TraceError(f"trace ends with unfinished syscalls of pids {sorted(pending)}")
    return Trace(tuple(calls), tuple(ends), tuple(signals))


def read_trace(path: Path) -> Trace:
    size = path.stat().st_size
    if size > MAX_TRACE_BYTES:
        raise TraceError(f"{path}: {size} bytes, more than {MAX_TRACE_BYTES}")
    with path.open(encoding="ascii", errors="strict", newline="\n") as f:
        return parse_trace(f)


# -- argument decoding ------------------------------------------------------------------------------


def decode_string(token: str, where: str) -> bytes:
    """The bytes of a ``-xx`` string (``"\\x2f\\x74"``); a string strace cut short is an error."""
    if len(token) < 2 or token[0] != '"':
        raise TraceError(f"{where}: expected a string, got {token[:40]!r}")
    end = token.rfind('"')
    if end == 0:
        raise TraceError(f"{where}: unterminated string")
    tail = token[end + 1 :]
    if tail == "...":
        raise TraceError(f"{where}: string cut short by strace (-s is too small)")
    if tail:
        raise TraceError(f"{where}: unexpected text after a string: {tail[:40]!r}")
    body = token[1:end]
    hexdigits = body.replace("\\x", "")
    if len(hexdigits) * 2 != len(body):
        raise TraceError(f"{where}: string not fully hex-escaped (-xx): {body[:40]!r}")
    try:
        return bytes.fromhex(hexdigits)
    except ValueError as exc:
        raise TraceError(f"{where}: bad hex in string: {exc}") from exc


def _int(token: str, where: str) -> int:
    try:
        return int(token.split()[0], 0)
    except (ValueError, IndexError) as exc:
        raise TraceError(f"{where}: expected a number, got {token[:40]!r}") from exc


def _flags(token: str) -> set[str]:
    return set(token.split("|"))


def _iovec(token: str, count: int, written: int | None, where: str) -> list[bytes]:
    """The data of an iovec array of a write: strace shows it whole (decoded at entry) or, in
    some versions, up to the bytes written; anything else is an error."""
    if not (token.startswith("[") and token.endswith("]")):
        raise TraceError(f"{where}: expected an iovec array, got {token[:40]!r}")
    items = split_args(token[1:-1], where)
    if len(items) != count:
        raise TraceError(f"{where}: iovec shows {len(items)} of {count} elements (abbreviated?)")
    elements: list[tuple[bytes, int]] = []
    for item in items:
        if not (item.startswith("{") and item.endswith("}")):
            raise TraceError(f"{where}: unreadable iovec element {item[:40]!r}")
        parts = [part.split("=", 1) for part in split_args(item[1:-1], where)]
        fields = {kv[0]: kv[1] for kv in parts if len(kv) == 2}
        if len(parts) != 2 or set(fields) != {"iov_base", "iov_len"}:
            raise TraceError(f"{where}: unreadable iovec element {item[:40]!r}")
        elements.append((decode_string(fields["iov_base"], where), _int(fields["iov_len"], where)))
    if all(len(data) == length for data, length in elements):
        return [data for data, _ in elements]
    left = written
    for data, length in elements:
        shown = length if left is None else min(length, left)
        if len(data) != shown:
            raise TraceError(f"{where}: iovec element shows {len(data)} bytes, expected {shown}")
        if left is not None:
            left -= shown
    return [data for data, _ in elements]


# -- syscalls -> file operations --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FileOp:
    """One operation on a watched file (or a directory fsync, or a global sync).

    ``kind``: create, write, truncate, fsync, dirsync, sync, rename, unlink. ``file`` is the
    watched file's id (-1 for dirsync and sync); ``path`` its path after the operation (dirsync:
    the directory). ``uncertain``: a write the process died in (its result was never seen).
    """

    seq: int
    time_s: float
    kind: str
    file: int
    path: str
    offset: int = 0
    data: bytes = b""
    size: int = 0
    uncertain: bool = False
    pid: int = 0
    line: int = 0


@dataclass(slots=True)
class WatchedFile:
    id: int
    path: str
    created_seq: int


@dataclass(slots=True)
class FsLog:
    ops: list[FileOp] = field(default_factory=list)
    files: dict[int, WatchedFile] = field(default_factory=dict)
    end_s: float = 0.0


@dataclass(slots=True)
class _Ofd:
    """An open file description: shared by dup'd and inherited descriptors."""

    path: str
    file: int | None
    pos: int = 0
    append: bool = False
    is_dir: bool = False


@dataclass(slots=True)
class _Table:
    fds: dict[int, tuple[_Ofd, bool]]
    cwd: str

    def copy(self) -> _Table:
        return _Table(dict(self.fds), self.cwd)


_WRITE_MODES = {"O_WRONLY", "O_RDWR"}


class _Interpreter:
    def __init__(self, watch: Callable[[str], bool], cwd: str, children: dict[int, tuple[int, bool]]) -> None:
        self.watch = watch
        self.cwd = cwd
        self.children = children
        self.tables: dict[int, _Table] = {}
        self.log = FsLog()
        self.by_path: dict[str, int] = {}
        self.sizes: dict[int, int] = {}
        self.dirs: set[str] = set()
        self.seq = 0

    # -- helpers

    def table(self, pid: int) -> _Table:
        t = self.tables.get(pid)
        if t is not None:
            return t
        rel = self.children.get(pid)
        if rel is None:
            t = _Table({}, self.cwd)
        else:
            parent, shares = rel
            pt = self.table(parent)
            t = pt if shares else pt.copy()
        self.tables[pid] = t
        return t

    def path(self, sc: Syscall, dirfd: str | None, token: str, where: str) -> str:
        p = os.fsdecode(decode_string(token, where))
        if not os.path.isabs(p):
            if dirfd is None or dirfd == "AT_FDCWD":
                base = self.table(sc.pid).cwd
            else:
                entry = self.table(sc.pid).fds.get(_int(dirfd, where))
                if entry is None:
                    raise TraceError(f"{where}: path relative to an unknown descriptor {dirfd}")
                base = entry[0].path
            p = os.path.join(base, p)
        return os.path.normpath(p)

    def emit(self, sc: Syscall, kind: str, file: int, path: str, **kw: Any) -> None:
        self.log.ops.append(FileOp(self.seq, sc.end_s, kind, file, path, pid=sc.pid, line=sc.line, **kw))
        self.seq += 1

    def ofd(self, sc: Syscall, token: str, where: str) -> _Ofd | None:
        entry = self.table(sc.pid).fds.get(_int(token, where))
        return None if entry is None else entry[0]

    def new_fd(self, sc: Syscall, fd: int, ofd: _Ofd, cloexec: bool) -> None:
        self.table(sc.pid).fds[fd] = (ofd, cloexec)

    def write(self, sc: Syscall, ofd: _Ofd | None, data: bytes, offset: int | None, where: str) -> None:
        """``offset`` None: at the descriptor's position (which then advances)."""
        if ofd is None or ofd.file is None:
            return
        if not sc.completed:
            at = self.sizes[ofd.file] if ofd.append else (ofd.pos if offset is None else offset)
            self.emit(sc, "write", ofd.file, ofd.path, offset=at, data=data, uncertain=True)
            return
        if sc.result is None or sc.result < 0:
            return
        n = sc.result
        if n > len(data):
            raise TraceError(f"{where}: {sc.name} returned {n}, more than the {len(data)} bytes shown")
        if offset is None:
            at = self.sizes[ofd.file] if ofd.append else ofd.pos
            ofd.pos = at + n
        else:
            at = offset
        if n:
            self.emit(sc, "write", ofd.file, ofd.path, offset=at, data=data[:n])
            self.sizes[ofd.file] = max(self.sizes[ofd.file], at + n)

    def watched_dir_of(self, path: str) -> bool:
        return path in self.dirs

    # -- the syscalls

    def run(self, sc: Syscall) -> None:
        where = f"trace line {sc.line} ({sc.name})"
        handler = getattr(self, "sys_" + sc.name, None)
        if handler is None:
            raise TraceError(f"{where}: no interpretation for {sc.name}")
        if not sc.completed and sc.name not in ("write", "writev", "pwrite64", "pwritev", "pwritev2"):
            self.died_in(sc, where)
            return
        handler(sc, where)

    def died_in(self, sc: Syscall, where: str) -> None:
        """The process died inside ``sc``: harmless unless it changed a watched file."""
        a = sc.args
        if sc.name in ("fsync", "fdatasync", "close", "lseek", "sync", "syncfs", "mmap"):
            return  # an fsync that never returned made nothing durable; the rest changes no data
        if sc.name in ("open", "openat", "creat", "openat2"):
            token = a[0] if sc.name in ("open", "creat") else a[1]
            dirfd = None if sc.name in ("open", "creat") else a[0]
            if not self.watch(self.path(sc, dirfd, token, where)):
                return
        elif sc.name in ("ftruncate",):
            ofd = self.ofd(sc, a[0], where)
            if ofd is None or ofd.file is None:
                return
        elif sc.name in ("clone", "clone3", "fork", "vfork", "execve", "dup", "dup2", "dup3", "fcntl"):
            return
        raise TraceError(f"{where}: the process died inside {sc.name} on a watched file: state unknown")

    def _open(self, sc: Syscall, dirfd: str | None, path_tok: str, flags: set[str], where: str) -> None:
        if sc.result is None or sc.result < 0:
            return
        path = self.path(sc, dirfd, path_tok, where)
        if flags & {"O_TMPFILE", "__O_TMPFILE"}:
            self._tmpfile(sc, path, flags)
            return
        is_dir = "O_DIRECTORY" in flags
        file: int | None = None
        if self.watch(path) and not is_dir:
            file = self.by_path.get(path)
            if file is None:
                if "O_CREAT" not in flags:
                    raise TraceError(f"{where}: {path} opened but never created in the trace")
                file = len(self.log.files)
                self.log.files[file] = WatchedFile(file, path, self.seq)
                self.by_path[path] = file
                self.sizes[file] = 0
                self.dirs.add(os.path.dirname(path))
                self.emit(sc, "create", file, path)
            if "O_TRUNC" in flags and (flags & _WRITE_MODES) and self.sizes[file]:
                self.sizes[file] = 0
                self.emit(sc, "truncate", file, path, size=0)
        ofd = _Ofd(path, file, 0, "O_APPEND" in flags, is_dir)
        self.new_fd(sc, sc.result, ofd, "O_CLOEXEC" in flags)

    def _tmpfile(self, sc: Syscall, directory: str, flags: set[str]) -> None:
        """``O_TMPFILE``: a file without a name in ``directory`` until ``linkat`` gives it one
        (until then it is followed under a hidden placeholder name no recording has)."""
        file: int | None = None
        path = directory
        if self.watch(os.path.join(directory, "x.wrtf")):
            file = len(self.log.files)
            path = os.path.join(directory, f".O_TMPFILE-{file}")
            self.log.files[file] = WatchedFile(file, path, self.seq)
            self.sizes[file] = 0
            self.dirs.add(directory)
            self.emit(sc, "create", file, path)
        assert sc.result is not None
        self.new_fd(sc, sc.result, _Ofd(path, file, 0, "O_APPEND" in flags), "O_CLOEXEC" in flags)

    def sys_open(self, sc: Syscall, where: str) -> None:
        self._open(sc, None, sc.args[0], _flags(sc.args[1]), where)

    def sys_openat(self, sc: Syscall, where: str) -> None:
        self._open(sc, sc.args[0], sc.args[1], _flags(sc.args[2]), where)

    def sys_openat2(self, sc: Syscall, where: str) -> None:
        m = re.search(r"flags=([A-Z_|0-9x]+)", sc.args[2])
        if m is None:
            raise TraceError(f"{where}: openat2 without flags")
        self._open(sc, sc.args[0], sc.args[1], _flags(m.group(1)), where)

    def sys_creat(self, sc: Syscall, where: str) -> None:
        self._open(sc, None, sc.args[0], {"O_WRONLY", "O_CREAT", "O_TRUNC"}, where)

    def sys_close(self, sc: Syscall, where: str) -> None:
        if sc.result == 0:
            self.table(sc.pid).fds.pop(_int(sc.args[0], where), None)

    def sys_close_range(self, sc: Syscall, where: str) -> None:
        if sc.result != 0:
            return
        first, last = _int(sc.args[0], where), _int(sc.args[1], where)
        flags = sc.args[2]
        fds = self.table(sc.pid).fds
        for fd in [fd for fd in fds if first <= fd <= last]:
            if "CLOSE_RANGE_CLOEXEC" in flags:
                fds[fd] = (fds[fd][0], True)
            else:
                del fds[fd]

    def _dup(self, sc: Syscall, src: str, cloexec: bool, where: str) -> None:
        if sc.result is None or sc.result < 0:
            return
        fds = self.table(sc.pid).fds
        entry = fds.get(_int(src, where))
        if entry is None:
            fds.pop(sc.result, None)  # a copy of something we do not follow
            return
        fds[sc.result] = (entry[0], cloexec)

    def sys_dup(self, sc: Syscall, where: str) -> None:
        self._dup(sc, sc.args[0], False, where)

    def sys_dup2(self, sc: Syscall, where: str) -> None:
        self._dup(sc, sc.args[0], False, where)

    def sys_dup3(self, sc: Syscall, where: str) -> None:
        self._dup(sc, sc.args[0], "O_CLOEXEC" in sc.args[2], where)

    def sys_fcntl(self, sc: Syscall, where: str) -> None:
        cmd = sc.args[1]
        if sc.result is None or sc.result < 0:
            return
        if cmd in ("F_DUPFD", "F_DUPFD_CLOEXEC"):
            self._dup(sc, sc.args[0], cmd == "F_DUPFD_CLOEXEC", where)
        elif cmd == "F_SETFD":
            fds = self.table(sc.pid).fds
            fd = _int(sc.args[0], where)
            if fd in fds:
                fds[fd] = (fds[fd][0], "FD_CLOEXEC" in sc.args[2])
        elif cmd == "F_SETFL":
            ofd = self.ofd(sc, sc.args[0], where)
            if ofd is not None:
                ofd.append = "O_APPEND" in sc.args[2]

    def sys_write(self, sc: Syscall, where: str) -> None:
        data = decode_string(sc.args[1], where)
        if len(data) != _int(sc.args[2], where):
            raise TraceError(f"{where}: {len(data)} bytes shown, count {sc.args[2]}")
        self.write(sc, self.ofd(sc, sc.args[0], where), data, None, where)

    def sys_pwrite64(self, sc: Syscall, where: str) -> None:
        data = decode_string(sc.args[1], where)
        if len(data) != _int(sc.args[2], where):
            raise TraceError(f"{where}: {len(data)} bytes shown, count {sc.args[2]}")
        self.write(sc, self.ofd(sc, sc.args[0], where), data, _int(sc.args[3], where), where)

    def _writev(self, sc: Syscall, offset: int | None, where: str) -> None:
        ofd = self.ofd(sc, sc.args[0], where)
        if ofd is None or ofd.file is None:
            return
        shown = sc.result if sc.completed and sc.result is not None and sc.result >= 0 else None
        if sc.completed and shown is None:
            return  # failed: nothing written
        data = b"".join(_iovec(sc.args[1], _int(sc.args[2], where), shown, where))
        self.write(sc, ofd, data, offset, where)

    def sys_writev(self, sc: Syscall, where: str) -> None:
        self._writev(sc, None, where)

    def sys_pwritev(self, sc: Syscall, where: str) -> None:
        self._writev(sc, _int(sc.args[3], where), where)

    def sys_pwritev2(self, sc: Syscall, where: str) -> None:
        self._writev(sc, _int(sc.args[3], where), where)

    def sys_lseek(self, sc: Syscall, where: str) -> None:
        ofd = self.ofd(sc, sc.args[0], where)
        if ofd is not None and sc.result is not None and sc.result >= 0:
            ofd.pos = sc.result

    def _truncate(self, sc: Syscall, file: int | None, path: str, size: int) -> None:
        if file is None or sc.result != 0:
            return
        self.sizes[file] = size
        self.emit(sc, "truncate", file, path, size=size)

    def sys_ftruncate(self, sc: Syscall, where: str) -> None:
        ofd = self.ofd(sc, sc.args[0], where)
        if ofd is not None:
            self._truncate(sc, ofd.file, ofd.path, _int(sc.args[1], where))

    def sys_truncate(self, sc: Syscall, where: str) -> None:
        path = self.path(sc, None, sc.args[0], where)
        self._truncate(sc, self.by_path.get(path), path, _int(sc.args[1], where))

    def _fsync(self, sc: Syscall, where: str) -> None:
        if sc.result != 0:
            return
        ofd = self.ofd(sc, sc.args[0], where)
        if ofd is None:
            return
        if ofd.file is not None:
            self.emit(sc, "fsync", ofd.file, ofd.path)
        elif ofd.is_dir or ofd.path in self.dirs:
            self.emit(sc, "dirsync", -1, ofd.path)

    def sys_fsync(self, sc: Syscall, where: str) -> None:
        self._fsync(sc, where)

    def sys_fdatasync(self, sc: Syscall, where: str) -> None:
        self._fsync(sc, where)

    def sys_sync(self, sc: Syscall, where: str) -> None:
        self.emit(sc, "sync", -1, "/")

    def sys_syncfs(self, sc: Syscall, where: str) -> None:
        if sc.result == 0:
            self.emit(sc, "sync", -1, "/")

    def sys_sync_file_range(self, sc: Syscall, where: str) -> None:
        """Starts writeback but guarantees nothing durable (no metadata, no cache flush)."""

    def _rename(self, sc: Syscall, old: str, new: str) -> None:
        if sc.result != 0:
            return
        replaced = self.by_path.pop(new, None)
        if replaced is not None:
            self.emit(sc, "unlink", replaced, new)
        file = self.by_path.pop(old, None)
        if file is None:
            if self.watch(new):
                raise TraceError(f"trace line {sc.line}: an unwatched file {old} renamed to watched {new}")
            return
        if not self.watch(new):
            raise TraceError(f"trace line {sc.line}: watched {old} renamed out of the watched tree")
        self.by_path[new] = file
        self.dirs.add(os.path.dirname(new))
        self.emit(sc, "rename", file, new, data=os.fsencode(old))

    def sys_rename(self, sc: Syscall, where: str) -> None:
        self._rename(sc, self.path(sc, None, sc.args[0], where), self.path(sc, None, sc.args[1], where))

    def sys_renameat(self, sc: Syscall, where: str) -> None:
        a = sc.args
        self._rename(sc, self.path(sc, a[0], a[1], where), self.path(sc, a[2], a[3], where))

    def sys_renameat2(self, sc: Syscall, where: str) -> None:
        self.sys_renameat(sc, where)

    def _unlink(self, sc: Syscall, path: str) -> None:
        if sc.result != 0:
            return
        file = self.by_path.pop(path, None)
        if file is not None:
            self.emit(sc, "unlink", file, path)

    def sys_unlink(self, sc: Syscall, where: str) -> None:
        self._unlink(sc, self.path(sc, None, sc.args[0], where))

    def sys_unlinkat(self, sc: Syscall, where: str) -> None:
        self._unlink(sc, self.path(sc, sc.args[0], sc.args[1], where))

    def _link(self, sc: Syscall, source: int | None, old: str, new: str) -> None:
        """A link gives an ``O_TMPFILE`` its name; other hard links of watched files are not modelled."""
        if sc.result != 0:
            return
        if source is not None and source not in self.by_path.values():
            self.by_path[new] = source
            self.dirs.add(os.path.dirname(new))
            self.emit(sc, "rename", source, new, data=os.fsencode(old))
            return
        if source is not None or old in self.by_path or self.watch(new):
            raise TraceError(f"trace line {sc.line}: hard links of watched files are not modelled")

    def sys_link(self, sc: Syscall, where: str) -> None:
        old = self.path(sc, None, sc.args[0], where)
        self._link(sc, self.by_path.get(old), old, self.path(sc, None, sc.args[1], where))

    def sys_linkat(self, sc: Syscall, where: str) -> None:
        a = sc.args
        new = self.path(sc, a[2], a[3], where)
        if "AT_EMPTY_PATH" in a[4] and decode_string(a[1], where) == b"":
            ofd = self.ofd(sc, a[0], where)
            self._link(sc, None if ofd is None else ofd.file, ofd.path if ofd else "", new)
            return
        old = self.path(sc, a[0], a[1], where)
        m = re.fullmatch(r"/proc/(?:self|\d+)/fd/(\d+)", old)
        if m is not None and "AT_SYMLINK_FOLLOW" in a[4]:
            ofd = self.ofd(sc, m.group(1), where)
            self._link(sc, None if ofd is None else ofd.file, ofd.path if ofd else old, new)
            return
        self._link(sc, self.by_path.get(old), old, new)

    def sys_mkdir(self, sc: Syscall, where: str) -> None:
        """A new directory's own entry is not modelled: the tests' output directory exists."""

    def sys_mkdirat(self, sc: Syscall, where: str) -> None:
        """As mkdir."""

    def sys_chdir(self, sc: Syscall, where: str) -> None:
        if sc.result == 0:
            self.table(sc.pid).cwd = self.path(sc, None, sc.args[0], where)

    def sys_fchdir(self, sc: Syscall, where: str) -> None:
        ofd = self.ofd(sc, sc.args[0], where)
        if sc.result == 0:
            if ofd is None:
                raise TraceError(f"{where}: fchdir to an unknown descriptor")
            self.table(sc.pid).cwd = ofd.path

    def _no_tracked_output(self, sc: Syscall, token: str, where: str) -> None:
        ofd = self.ofd(sc, token, where)
        if ofd is not None and ofd.file is not None and (sc.result is None or sc.result >= 0):
            raise TraceError(f"{where}: {sc.name} into a watched file is not modelled")

    def sys_fallocate(self, sc: Syscall, where: str) -> None:
        self._no_tracked_output(sc, sc.args[0], where)

    def sys_copy_file_range(self, sc: Syscall, where: str) -> None:
        self._no_tracked_output(sc, sc.args[2], where)

    def sys_sendfile(self, sc: Syscall, where: str) -> None:
        self._no_tracked_output(sc, sc.args[0], where)

    def sys_splice(self, sc: Syscall, where: str) -> None:
        self._no_tracked_output(sc, sc.args[2], where)

    def sys_mmap(self, sc: Syscall, where: str) -> None:
        a = sc.args
        if "MAP_SHARED" in a[3] and "PROT_WRITE" in a[2] and a[4] != "-1":
            self._no_tracked_output(sc, a[4], where)

    def sys_clone(self, sc: Syscall, where: str) -> None:
        """Handled before the run (:func:`_children`): a child may print before its parent."""

    sys_clone3 = sys_clone
    sys_fork = sys_clone
    sys_vfork = sys_clone

    def sys_execve(self, sc: Syscall, where: str) -> None:
        if sc.result != 0:
            return
        t = self.table(sc.pid).copy()
        t.fds = {fd: e for fd, e in t.fds.items() if not e[1]}
        self.tables[sc.pid] = t


def _children(trace: Trace) -> dict[int, tuple[int, bool]]:
    """child pid -> (parent pid, shares the descriptor table) from clone/fork results."""
    out: dict[int, tuple[int, bool]] = {}
    for sc in trace.syscalls:
        if sc.name in ("clone", "clone3", "fork", "vfork") and sc.result is not None and sc.result > 0:
            shares = sc.name in ("clone", "clone3") and "CLONE_FILES" in ",".join(sc.args)
            out[sc.result] = (sc.pid, shares)
    return out


def interpret(trace: Trace, *, watch: Callable[[str], bool], cwd: str) -> FsLog:
    """The operations on watched files (``watch(path)``), in the order the syscalls completed.

    ``cwd``: the traced process's working directory at start. Watched files must be created in
    the trace (the recording starts with an empty output directory).
    """
    interp = _Interpreter(watch, os.path.normpath(cwd), _children(trace))
    for sc in sorted(trace.syscalls, key=lambda s: s.line):
        interp.run(sc)
    interp.log.end_s = trace.end_s
    return interp.log
