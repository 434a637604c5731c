"""The on-disk states a crash can leave of one file, at a crash point, under six models.

What an fsync made durable always survives; what was written after it survives as the model
says. The models (issue 13):

* ``a`` everything written survives (``kill -9``: the page cache outlives the process);
* ``b`` a prefix of the later writes, the last one torn at a 512-byte boundary;
* ``c`` the file extended with zeros to its later size (size updated, data blocks never written);
* ``d`` a random subset of the later 4 KiB pages, the rest zeros (pages written out of order);
* ``e`` random bytes up to the later size;
* ``f`` the blocks of an older wrtfd recording at the same offsets (stale blocks of the card).

Later bytes are those past the durable size (the writer only appends). Directory entries: a
file whose directory was not fsynced since it got its name may also be gone (``v``, vanished);
a file created but never fsynced is then empty (``b``), zeros (``c``) or garbage (``d``-``f``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from tests.crashstate.replay import FileHistory, apply_ops
from tests.crashstate.trace import FileOp

__all__ = ["MODELS", "MODEL_TEXT", "PAGE", "SECTOR", "VANISHED", "CrashState", "build_content", "states_at"]

SECTOR = 512
PAGE = 4096
MODELS = ("a", "b", "c", "d", "e", "f")
VANISHED = "v"
MODEL_TEXT = {
    "a": "everything written survives (kill -9)",
    "b": "fsynced + a prefix of later writes, the last torn at 512 B",
    "c": "fsynced, then zeros to the later size",
    "d": "fsynced + a random subset of later 4 KiB pages, the rest zeros",
    "e": "fsynced, then random bytes",
    "f": "fsynced, then an older recording's blocks",
    VANISHED: "directory entry never fsynced: the file is gone",
}


@dataclass(frozen=True, slots=True)
class CrashState:
    """One file's state after a crash at point ``k`` (``content`` None: the file is gone)."""

    run: str
    file: int
    k: int
    #: the latest moment this state can be seen (the file's next operation, or the end)
    time_s: float
    model: str
    content: bytes | None
    what: str

    @property
    def label(self) -> str:
        return f"{self.run} file {self.file} k={self.k} model {self.model} ({self.what})"


def _torn_prefix(base: bytes, later: list[FileOp], rng: random.Random) -> tuple[bytes, str]:
    """Model b: the first j later operations, the j-th write cut at a 512-byte file offset."""
    j = rng.randint(0, len(later))
    if j == 0:
        return base, "no later write"
    done = apply_ops(later[: j - 1], base)
    last = later[j - 1]
    if last.kind != "write":
        return apply_ops([last], done), f"{j} later ops"
    end = last.offset + len(last.data)
    cuts = [c for c in range((last.offset // SECTOR + 1) * SECTOR, end, SECTOR)] + [end]
    cut = rng.choice(cuts)
    torn = FileOp(
        last.seq, last.time_s, "write", last.file, last.path, last.offset, last.data[: cut - last.offset]
    )
    return apply_ops([torn], done), f"{j} later ops, last cut at {cut} of {end}"


def build_content(
    history: FileHistory, k: int, model: str, rng: random.Random, older: bytes
) -> tuple[bytes, str]:
    """The file's bytes after a crash at ``k`` under ``model`` (see the module docstring)."""
    if model == "a":
        return history.content(k), "all written"
    base, later = history.synced(k)
    if model == "b":
        return _torn_prefix(base, later, rng)
    size = len(history.content(k))
    durable = base[:size]
    if model == "c":
        return durable + bytes(size - len(durable)), f"zeros {len(durable)}..{size}"
    if model == "d":
        written = history.content(k)
        out = bytearray(durable + bytes(size - len(durable)))
        first = min([len(durable)] + [op.offset for op in later if op.kind == "write"])
        pages = range(first // PAGE, (size + PAGE - 1) // PAGE)
        kept = [p for p in pages if rng.random() < 0.5]
        for p in kept:
            out[p * PAGE : (p + 1) * PAGE] = written[p * PAGE : (p + 1) * PAGE]
        return bytes(out), f"pages {kept} of {list(pages)}"
    if model == "e":
        return durable + rng.randbytes(size - len(durable)), f"random {len(durable)}..{size}"
    if model == "f":
        stale = older[len(durable) : size]
        return durable + stale + bytes(size - len(durable) - len(stale)), f"older {len(durable)}..{size}"
    raise ValueError(f"unknown model {model!r}")


def states_at(
    run: str, history: FileHistory, k: int, rng: random.Random, older: bytes, models: tuple[str, ...] = MODELS
) -> list[CrashState]:
    """Every model's state of the file at ``k``, plus ``v`` when its directory entry may be lost."""
    if history.path_at(k) is None:
        return []
    time_s = history.next_op_time(k)
    out = []
    for m in models:
        content, what = build_content(history, k, m, rng, older)
        out.append(CrashState(run, history.file, k, time_s, m, content, what))
    if not history.entry_durable(k):
        out.append(
            CrashState(run, history.file, k, time_s, VANISHED, None, "no directory fsync since created")
        )
    return out
