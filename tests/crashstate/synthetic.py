"""Synthetic file histories for the unit tests (what a trace of simple appends would give)."""

from __future__ import annotations

from tests.crashstate.replay import FileHistory
from tests.crashstate.trace import FileOp, FsLog, WatchedFile

PATH = "/rec/a.wrtf"


def history(*steps: tuple) -> FileHistory:
    """Ops from compact steps: ("w", bytes) appends, ("truncate", size), ("fsync",),
    ("dirsync",), ("sync",); the file is created first, op k at time k."""
    ops = [FileOp(0, 0.0, "create", 0, PATH)]
    size = 0
    for step in steps:
        seq, t = len(ops), float(len(ops))
        if step[0] == "w":
            ops.append(FileOp(seq, t, "write", 0, PATH, offset=size, data=step[1]))
            size += len(step[1])
        elif step[0] == "truncate":
            ops.append(FileOp(seq, t, "truncate", 0, PATH, size=step[1]))
            size = step[1]
        elif step[0] == "fsync":
            ops.append(FileOp(seq, t, "fsync", 0, PATH))
        elif step[0] == "dirsync":
            ops.append(FileOp(seq, t, "dirsync", -1, "/rec"))
        elif step[0] == "sync":
            ops.append(FileOp(seq, t, "sync", -1, "/"))
        else:
            raise ValueError(f"unknown step {step!r}")
    log = FsLog(ops, {0: WatchedFile(0, PATH, 0)}, float(len(ops)))
    return FileHistory.of(log, 0)
