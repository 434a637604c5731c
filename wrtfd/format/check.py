"""The frame check: frames that prove they were written by this file's writer, at their place.

WRTF 1.0 has no checksums, so after a power cut a reader cannot tell a frame from zeros, random
bytes or the stale blocks of an older recording. wrtfd adds one ordinary frame field,
``wrtfd_check`` (uint64, the last field of the frame struct), declared in metadata
(``wrtfd.check``, ``wrtfd.check.salt``, ``wrtfd.check.field``): other WRTF readers see one more
channel, and the file stays WRTF 1.0 (N5, N7).

The check covers *commit groups*: the frames the writer hands to the OS together (SQLite's WAL
idea: salt + checksum, valid only whole). A frame's ``wrtfd_check`` (little-endian u64) holds

* bits 0-31: CRC-32C of its group: the file's salt (u64 LE), the file offset of the group's
  first frame (u64 LE), then the group's frames as stored with the low 4 bytes of each
  ``wrtfd_check`` zero;
* bits 32-47: n, the number of frames in the group (1..65535; a zero frame is invalid);
* bits 48-63: i, the frame's index in its group (0..n-1).

A frame is valid only when its whole group is there and its CRC matches. Why groups, the limits
and what each tool does with a failing frame: ``docs/durability.md``.

This module is the one home of the names and the layout; consumers ask :func:`data_leaves`
for the channels without the check.
"""

from __future__ import annotations

import copy
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import yaml

from wrtfd.errors import SchemaError
from wrtfd.format.schema import FieldDef, Leaf, Schema
from wrtfd.format.spec import U64

__all__ = [
    "CHECK_ALGORITHM",
    "CHECK_FIELD",
    "CHECK_FIELD_KEY",
    "CHECK_KEY",
    "CHECK_KEYS",
    "CHECK_SALT_KEY",
    "GROUP_MAX_BYTES",
    "GROUP_MAX_FRAMES",
    "CheckFailure",
    "FrameCheck",
    "check_from_metadata",
    "data_leaves",
    "declared_field",
    "group_limit",
    "new_salt",
    "parse_salt",
    "salt_text",
    "with_check",
]

#: The frame field that carries the check (the last field of the frame struct).
CHECK_FIELD = "wrtfd_check"
#: Algorithm id/version written to ``wrtfd.check``; other values are read but not verified.
CHECK_ALGORITHM = "crc32c-group/1"
CHECK_KEY = "wrtfd.check"
CHECK_SALT_KEY = "wrtfd.check.salt"
CHECK_FIELD_KEY = "wrtfd.check.field"
#: The metadata keys the writer owns when the check is on.
CHECK_KEYS = (CHECK_KEY, CHECK_SALT_KEY, CHECK_FIELD_KEY)
CHECK_DESCRIPTION = (
    "wrtfd frame check (wrtfd.check metadata): bits 0-31 CRC-32C of the frame's commit group "
    "(salt, offset, frames), bits 32-47 frames in the group, bits 48-63 index in the group"
)

#: Bounds of a commit group: its count must fit 16 bits, and its bytes bound what a reader
#: copies to verify it and what a torn write can take with it.
GROUP_MAX_FRAMES = 0xFFFF
GROUP_MAX_BYTES = 256 * 1024
#: How much a verifier copies at a time (whole frames, at least one).
_VERIFY_CHUNK_BYTES = 4 << 20

_SALT_RE = re.compile(r"[0-9a-f]{16}")
_WITH_CHECK_CACHE: dict[str, Schema] = {}
#: The check field of a frame that is a group of its own, CRC, count and index (N7: little-endian).
_GROUP_OF_ONE = struct.Struct("<IHH")
_U32_LE = struct.Struct("<I")
_U16 = np.dtype("<u2")
_U32 = np.dtype("<u4")
_U64 = np.dtype("<u8")


def new_salt() -> int:
    """64 random bits: a new salt for every file."""
    import secrets  # hashlib and hmac: only a writer needs a new salt

    return secrets.randbits(64)


def salt_text(salt: int) -> str:
    return f"{salt:016x}"


def parse_salt(text: str | None) -> int | None:
    """The salt from its metadata text (16 lowercase hex digits), None when malformed."""
    if text is None or not _SALT_RE.fullmatch(text):
        return None
    return int(text, 16)


def group_limit(frame_size: int) -> int:
    """Most frames in one commit group for frames of ``frame_size`` bytes (at least 1)."""
    return max(1, min(GROUP_MAX_FRAMES, GROUP_MAX_BYTES // max(1, frame_size)))


def _check_field(schema: Schema, name: str = CHECK_FIELD) -> FieldDef | None:
    """The frame's check field (a scalar uint64 named ``name``), if it has one."""
    f = next((f for f in schema.frame_fields if f.name == name), None)
    if f is None or f.type != "uint64" or f.dimensions != 0:
        return None
    return f


def with_check(schema: Schema) -> Schema:
    """``schema`` with the check field appended to its frame (itself when it has it already).

    :raises SchemaError: the frame has a ``wrtfd_check`` field that is not a scalar uint64 at
        its end (the name is reserved for the check).
    """
    fields = schema.frame_fields
    if fields and fields[-1].name == CHECK_FIELD:
        if _check_field(schema) is None:
            raise SchemaError(f"frame field '{CHECK_FIELD}' must be a scalar uint64 (the frame check)")
        return schema
    if any(f.name == CHECK_FIELD for f in fields):
        raise SchemaError(
            f"frame field '{CHECK_FIELD}' is reserved for the frame check (the frame's last field)"
        )
    cached = _WITH_CHECK_CACHE.get(schema.yaml_text)
    if cached is not None:
        return cached
    d: dict[str, Any] = copy.deepcopy(schema.definition)
    target = d["frame"]["fields"] if "frame" in d else d["channels"]
    target.append({"name": CHECK_FIELD, "type": "uint64", "description": CHECK_DESCRIPTION})
    try:
        text = yaml.safe_dump(d, sort_keys=False, allow_unicode=True)
    except yaml.YAMLError as exc:  # pragma: no cover - the definition came from YAML
        raise SchemaError(f"definition: cannot be written as YAML ({exc})") from exc
    out = Schema.from_yaml(text)
    if len(_WITH_CHECK_CACHE) >= 64:
        _WITH_CHECK_CACHE.pop(next(iter(_WITH_CHECK_CACHE)))
    _WITH_CHECK_CACHE[schema.yaml_text] = out
    return out


def data_leaves(schema: Schema, check_field: str | None) -> list[Leaf]:
    """The frame's channels without the check field: what exports, dumps and plots show.

    ``check_field`` is the field a file declares (``Reader.check_field``); None keeps every leaf.
    """
    leaves = schema.frame_leaves
    if check_field is None:
        return leaves
    return [lf for lf in leaves if lf.path != (check_field,)]


@dataclass(frozen=True, slots=True)
class CheckFailure:
    """Consecutive frames of a session that fail the check.

    ``frame`` is the index (in the session) of the first one, at byte ``offset``; the others
    follow every ``frame_size`` bytes.
    """

    frame: int
    frames: int
    offset: int
    reason: str


_crc32c_function: Callable[..., int] | None = None


def _crc32c() -> Callable[..., int]:
    """``crc32c.crc32c``, imported on first use: the package imports importlib.metadata (a good
    part of the start of a command that opens a file but checks no frame, ``wrtfd info``)."""
    global _crc32c_function
    if _crc32c_function is None:
        import crc32c

        _crc32c_function = crc32c.crc32c
    return _crc32c_function


class FrameCheck:
    """The check of one file: its salt, and where the field sits in its frames."""

    __slots__ = ("_salt_crc", "frame_size", "group_max", "lo_offset", "offset", "salt")

    def __init__(self, salt: int, frame_size: int, field_offset: int) -> None:
        self.salt = salt
        self.frame_size = frame_size
        self.offset = field_offset
        self.lo_offset = field_offset  # the CRC: the low 4 bytes of the little-endian u64
        self.group_max = group_limit(frame_size)
        self._salt_crc: int | None = None  # CRC-32C of the salt, on first use

    def _salt(self) -> int:
        if self._salt_crc is None:
            self._salt_crc = int(_crc32c()(U64.pack(self.salt)))
        return self._salt_crc

    @classmethod
    def for_schema(cls, schema: Schema, salt: int, field: str = CHECK_FIELD) -> FrameCheck:
        fields: Mapping[str, Any] = schema.frame_dtype.fields or {}
        return cls(salt, schema.frame_size, int(fields[field][1]))

    def metadata(self) -> list[tuple[str, str]]:
        """The ``wrtfd.check*`` metadata entries that declare this check."""
        return [
            (CHECK_KEY, CHECK_ALGORITHM),
            (CHECK_SALT_KEY, salt_text(self.salt)),
            (CHECK_FIELD_KEY, CHECK_FIELD),
        ]

    def seed(self, offset: int) -> int:
        """CRC-32C of salt ‖ offset: where a group's CRC starts."""
        return int(_crc32c()(U64.pack(offset), self._salt()))

    # -- writing ----------------------------------------------------------------------------------

    def seal(self, rows: np.ndarray, offset: int, cut: int = 0) -> None:
        """Fill the check of every frame of ``rows`` in place, as groups of at most
        :attr:`group_max` frames, one of which starts at frame ``cut`` (when inside).

        ``rows``: the frames as a writable, C-contiguous ``(count, frame_size)`` uint8 array;
        ``offset``: the file offset of the first. Strided stores into every frame cost more than
        the CRC itself at small frame sizes, so there are two per batch, whatever its number of
        groups: (index, count) with the CRC zero for every frame at once, then per group one
        CRC-32C call and one store of the CRC (through 8- and 4-byte column views: the field is
        8-aligned in a frame whose size is a multiple of 8, N6/N7).
        """
        count, fs = rows.shape
        if (self.offset | fs) & 7:  # pragma: no cover - every Schema layout is 8-aligned (N6, N7)
            raise ValueError("the frame check needs an 8-aligned field in a frame of 8-byte multiples")
        lengths, pattern = _group_layout(count, cut, self.group_max)
        rows.view(_U64)[:, self.offset >> 3] = pattern
        crc_col = rows.view(_U32)[:, self.offset >> 2]
        mv = rows.data.cast("B")
        salt_crc = self._salt()
        crc = _crc32c()
        a = 0
        for length in lengths:
            b = a + length
            seed = crc(U64.pack(offset + a * fs), salt_crc)
            crc_col[a:b] = crc(mv[a * fs : b * fs], seed)
            a = b

    def seal_record(self, rec: bytearray, offset: int) -> None:
        """Fill the check of one frame written as a group of its own (a call per frame: the
        seed's CRC of the salt and the CRC function are taken once, not per call)."""
        o = self.offset
        crc = _crc32c_function or _crc32c()
        salt_crc = self._salt_crc
        if salt_crc is None:
            salt_crc = self._salt()
        _GROUP_OF_ONE.pack_into(rec, o, 0, 1, 0)  # CRC 0, n = 1, i = 0
        _U32_LE.pack_into(rec, o, crc(rec, crc(U64.pack(offset), salt_crc)))

    # -- verifying --------------------------------------------------------------------------------

    def failures(
        self, buf: Any, frames_offset: int, count: int, *, first_only: bool = False
    ) -> list[CheckFailure]:
        """The frames of ``count`` frames at ``frames_offset`` in ``buf`` that fail the check.

        In file order, adjacent failures with the same reason merged; ``first_only`` stops at
        the first one. Nothing is trusted: any value in the check field gives a failure, never
        an exception.
        """
        if count <= 0:
            return []
        fs = self.frame_size
        at = frames_offset + self.offset
        crc = np.ndarray((count,), dtype=_U32, buffer=buf, offset=at, strides=(fs,))
        n = np.ndarray((count,), dtype=_U16, buffer=buf, offset=at + 4, strides=(fs,))
        index = np.ndarray((count,), dtype=_U16, buffer=buf, offset=at + 6, strides=(fs,))
        groups, bad = _structure(index, n, crc, count)
        out: list[CheckFailure] = []
        stored = crc[np.asarray([g[0] for g in groups], dtype=np.int64)].tolist() if groups else []
        # Walk groups and structural failures in file order; CRCs are computed lazily, in chunks.
        verifier = _GroupCrcs(self, buf, frames_offset, groups)
        gi = 0
        bi = 0
        while gi < len(groups) or bi < len(bad):
            if bi < len(bad) and (gi >= len(groups) or bad[bi][0] < groups[gi][0]):
                start, stop, reason = bad[bi]
                bi += 1
            else:
                start, length = groups[gi]
                got = verifier.crc(gi)
                gi += 1
                if got == stored[gi - 1]:
                    continue
                stop = start + length
                reason = (
                    "CRC mismatch: not the bytes this file's writer wrote at this offset "
                    "(damaged, stale, or from another file)"
                )
            _add(out, CheckFailure(start, stop - start, frames_offset + start * fs, reason))
            if first_only:
                break
        return out


def _add(out: list[CheckFailure], f: CheckFailure) -> None:
    last = out[-1] if out else None
    if last is not None and last.reason == f.reason and last.frame + last.frames == f.frame:
        out[-1] = CheckFailure(last.frame, last.frames + f.frames, last.offset, last.reason)
    else:
        out.append(f)


_GROUP_LAYOUT_CACHE: dict[tuple[int, int, int], tuple[tuple[int, ...], np.ndarray]] = {}
#: Layouts of batches up to this many frames are cached (8 bytes a frame: at most 16 x 1 MiB).
_LAYOUT_CACHE_FRAMES = 1 << 17
_LAYOUT_CACHE_ENTRIES = 16


def _group_layout(count: int, cut: int, group_max: int) -> tuple[tuple[int, ...], np.ndarray]:
    """How :meth:`FrameCheck.seal` splits ``count`` frames: the group lengths (groups of at most
    ``group_max``, one starting at ``cut`` when inside), and every frame's check value
    ``(i << 48) | (n << 32)`` with the CRC zero (cached: a recorder's batches repeat sizes and
    cuts; bigger batches get theirs built each time: 8 bytes a frame, for the call only)."""
    if not 0 < cut < count:
        cut = 0
    key = (count, cut, group_max)
    layout = _GROUP_LAYOUT_CACHE.get(key)
    if layout is None:
        lengths: list[int] = []
        a = 0
        while a < count:
            b = min(count, a + group_max)
            if a < cut < b:
                b = cut
            lengths.append(b - a)
            a = b
        pattern = np.zeros(0, dtype=np.uint64)
        if lengths:
            pattern = np.concatenate(
                [(np.arange(n, dtype=np.uint64) << np.uint64(48)) | np.uint64(n << 32) for n in lengths]
            )
        layout = (tuple(lengths), pattern)
        if count <= _LAYOUT_CACHE_FRAMES:
            if len(_GROUP_LAYOUT_CACHE) >= _LAYOUT_CACHE_ENTRIES:
                _GROUP_LAYOUT_CACHE.pop(next(iter(_GROUP_LAYOUT_CACHE)))
            _GROUP_LAYOUT_CACHE[key] = layout
    return layout


def _structure(
    index: np.ndarray, n: np.ndarray, crc: np.ndarray, count: int
) -> tuple[list[tuple[int, int]], list[tuple[int, int, str]]]:
    """Split frames into structurally whole groups ``(start, length)`` and failing ranges
    ``(start, stop, reason)``, from the index, count and CRC fields alone (uint16 index and
    count: an index wrapping from 65535 to 0 can never link two frames of one group, whose
    indexes stay below its count)."""
    same = np.zeros(count, dtype=bool)
    if count > 1:
        same[1:] = (index[1:] == index[:-1] + 1) & (n[1:] == n[:-1]) & (crc[1:] == crc[:-1])
    starts = np.flatnonzero((index == 0) & (n >= 1))
    # Fast path: the groups tile the frames exactly (every healthy file).
    if len(starts) and starts[0] == 0:
        lens = n[starts].astype(np.int64)
        ends = starts + lens
        breaks = np.flatnonzero(~same)
        if (
            int(ends[-1]) == count
            and len(breaks) == len(starts)
            and np.array_equal(breaks, starts)
            and np.array_equal(ends[:-1], starts[1:])
        ):
            return list(zip(starts.tolist(), lens.tolist(), strict=True)), []
    # Slow path (damage): walk candidate group starts.
    not_same = np.cumsum(~same)
    groups: list[tuple[int, int]] = []
    bad: list[tuple[int, int, str]] = []
    cand = starts.tolist()
    ci = 0
    p = 0
    while p < count:
        while ci < len(cand) and cand[ci] < p:
            ci += 1
        if ci < len(cand) and cand[ci] == p:
            length = int(n[p])
            end = p + length
            if end > count:
                if ci + 1 >= len(cand):
                    bad.append((p, count, f"its group of {length} frames is cut short after {count - p}"))
                    break
                bad.append((p, cand[ci + 1], f"its group of {length} frames runs into the next group"))
                p = cand[ci + 1]
                continue
            if int(not_same[end - 1]) - int(not_same[p]) == 0:
                groups.append((p, length))
                p = end
                continue
            nxt = cand[ci + 1] if ci + 1 < len(cand) else count
            bad.append((p, nxt, "the frames of its group disagree on index, count or CRC"))
            p = nxt
            continue
        nxt = cand[ci] if ci < len(cand) else count
        if int(n[p]) == 0:
            reason = "no group count (zeros, or bytes not written with the check)"
        else:
            reason = f"index {int(index[p])} of a {int(n[p])}-frame group where a group should start"
        bad.append((p, nxt, reason))
        p = nxt
    return groups, bad


class _GroupCrcs:
    """CRCs of structurally whole groups, computed in order over bounded copies of the frames
    (the stored CRCs zeroed, as the writer computed them)."""

    def __init__(
        self, check: FrameCheck, buf: Any, frames_offset: int, groups: list[tuple[int, int]]
    ) -> None:
        self.check = check
        self.buf = buf
        self.frames_offset = frames_offset
        self.groups = groups
        self.chunk = max(1, _VERIFY_CHUNK_BYTES // check.frame_size)
        self.win_a = 0
        self.win_b = 0
        self.view: memoryview | None = None

    def _window(self, a: int, limit: int) -> memoryview:
        fs = self.check.frame_size
        b = min(limit, a + self.chunk)
        raw = np.frombuffer(self.buf, dtype=np.uint8, count=(b - a) * fs, offset=self.frames_offset + a * fs)
        rows = raw.reshape(b - a, fs).copy()
        lo = self.check.lo_offset
        rows[:, lo : lo + 4] = 0
        self.win_a, self.win_b = a, b
        self.view = rows.data.cast("B")
        return self.view

    def crc(self, gi: int) -> int:
        groups = self.groups
        start, length = groups[gi]
        fs = self.check.frame_size
        end = start + length
        value = self.check.seed(self.frames_offset + start * fs)
        crc = _crc32c()
        k = start
        while k < end:
            view = self.view
            if view is None or not (self.win_a <= k < self.win_b):
                # A new window: this group and the groups right after it, up to a chunk.
                limit = end
                j = gi + 1
                while j < len(groups) and groups[j][0] == limit and limit + groups[j][1] - k <= self.chunk:
                    limit += groups[j][1]
                    j += 1
                view = self._window(k, limit)
            stop = min(end, self.win_b)
            value = crc(view[(k - self.win_a) * fs : (stop - self.win_a) * fs], value)
            k = stop
        return int(value)


def declared_field(metadata: Mapping[str, str], schema: Schema) -> str | None:
    """The check field a file declares (whatever its algorithm), if its frame has it."""
    if CHECK_KEY not in metadata:
        return None
    name = metadata.get(CHECK_FIELD_KEY, CHECK_FIELD)
    return name if _check_field(schema, name) is not None else None


def check_from_metadata(metadata: Mapping[str, str], schema: Schema) -> tuple[FrameCheck | None, str | None]:
    """The file's frame check from its ``wrtfd.check*`` metadata: ``(check, note)``.

    ``(None, None)``: the file has no check (read as before). ``(None, note)``: it declares one
    this wrtfd cannot verify (an unknown algorithm, a bad salt, no such field); ``note`` says why.
    """
    algo = metadata.get(CHECK_KEY)
    if algo is None:
        return None, None
    if algo != CHECK_ALGORITHM:
        return (
            None,
            f"frame check '{algo}' is not known to this wrtfd ({CHECK_ALGORITHM} is): frames not verified",
        )
    salt = parse_salt(metadata.get(CHECK_SALT_KEY))
    if salt is None:
        return (
            None,
            f"frame check: '{CHECK_SALT_KEY}' is missing or not 16 lowercase hex digits: frames not verified",
        )
    name = metadata.get(CHECK_FIELD_KEY, CHECK_FIELD)
    if _check_field(schema, name) is None:
        return None, f"frame check: the frame has no scalar uint64 field '{name}': frames not verified"
    return FrameCheck.for_schema(schema, salt, name), None
