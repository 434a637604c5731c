"""iRacing ``.ibt`` telemetry files: header, variables, session-info YAML, rows (pure reading).

Layout (iRacing SDK ``irsdk_defines.h``, little-endian):

* ``irsdk_header`` at 0 (112 bytes): ver, status, tickRate, sessionInfoUpdate,
  sessionInfoLen, sessionInfoOffset, numVars, varHeaderOffset, numBuf, bufLen, 2 pad, then
  four ``irsdk_varBuf`` (tickCount, bufOffset, 2 pad) of 16 bytes;
* ``irsdk_diskSubHeader`` at 112 (32 bytes): sessionStartDate (time_t), sessionStartTime,
  sessionEndTime (double s), sessionLapCount, sessionRecordCount;
* ``numVars`` variable headers of 144 bytes at varHeaderOffset: type, offset, count,
  countAsTime (1 byte + 3 pad), name[32], desc[64], unit[32];
* the session-info YAML at sessionInfoOffset; the rows, ``bufLen`` bytes each, from
  ``varBuf[0].bufOffset`` to the end of the file.

Every count, offset and length is checked against the file before anything is allocated (a
hostile file gets one :class:`~wrtfd.errors.ImportFormatError` naming what is wrong); rows are
read through a numpy structured view of the memory-mapped file, one dtype built from the
variable headers, so a row costs no per-variable Python work until its values are taken.

Why not pyirsdk: its ``IBT`` class reads the same layout, but checks no offset or count
(``struct.error``/``IndexError`` escape on a hostile file), offers no access to the disk file's
session YAML (only the live ``IRSDK`` class parses it), and reads a row one variable at a time
with ``struct.unpack_from``. Checking everything it reads would be the whole reader again.

The *live* variant (a dump of iRacing's shared memory map: no disk sub-header, the YAML right
after the header, three rotating row buffers) is recognised and refused: it holds three rows,
not a recording.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from wrtfd.errors import ImportFormatError

__all__ = [
    "HEADER_SIZE",
    "MAX_VARS",
    "VAR_HEADER_SIZE",
    "IbtFile",
    "IbtHeader",
    "IbtVar",
    "looks_like_ibt",
]

_HEADER = struct.Struct("<10i8x")  # ver .. bufLen, 2 pad
_VARBUF = struct.Struct("<ii8x")  # tickCount, bufOffset, 2 pad
_DISK = struct.Struct("<qddii")
_VAR = struct.Struct("<iii?3x32s64s32s")
HEADER_SIZE = 112
DISK_HEADER_SIZE = 32
VAR_HEADER_SIZE = _VAR.size  # 144
MAX_VARS = 4096
MAX_ROW_BYTES = 1 << 20
MAX_SESSION_INFO_BYTES = 16 << 20
MAX_TICK_RATE = 10_000
MAX_BUFS = 4
#: irsdk_VarType -> (numpy dtype, WRTF type)
VAR_TYPES: dict[int, tuple[str, str]] = {
    0: ("u1", "uint8"),  # char
    1: ("?", "bool"),
    2: ("<i4", "int32"),
    3: ("<u4", "uint32"),  # bitfield
    4: ("<f4", "float32"),
    5: ("<f8", "float64"),
}


@dataclass(frozen=True, slots=True)
class IbtHeader:
    version: int
    tick_rate: int
    session_info_len: int
    session_info_offset: int
    num_vars: int
    var_header_offset: int
    num_buf: int
    buf_len: int
    buf_offset: int
    session_start_date_s: int
    session_start_time_s: float
    session_end_time_s: float
    session_lap_count: int
    session_record_count: int


@dataclass(frozen=True, slots=True)
class IbtVar:
    name: str
    type: int
    offset: int
    count: int
    count_as_time: bool
    description: str
    unit: str

    @property
    def wrtf_type(self) -> str:
        return VAR_TYPES[self.type][1]


def _text(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("latin-1").strip()


def looks_like_ibt(head: bytes, size: int) -> bool:
    """A structurally plausible irsdk header (disk file or live dump) in ``head``."""
    if len(head) < HEADER_SIZE or size < HEADER_SIZE:
        return False
    ver, _st, rate, _upd, info_len, info_off, nvars, var_off, nbuf, buf_len = _HEADER.unpack_from(head)
    return (
        ver in (1, 2)
        and 1 <= rate <= MAX_TICK_RATE
        and 1 <= nvars <= MAX_VARS
        and 1 <= nbuf <= MAX_BUFS
        and 1 <= buf_len <= MAX_ROW_BYTES
        and var_off >= HEADER_SIZE
        and var_off + nvars * VAR_HEADER_SIZE <= size
        and info_len >= 0
        and info_off >= HEADER_SIZE
        and info_off + info_len <= size
    )


class IbtFile:
    """An ``.ibt`` file, memory-mapped and checked (see the module docstring).

    :raises ImportFormatError: not an .ibt, a live-memory dump, or an inconsistent header.
    :raises OSError: the file cannot be opened.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.notes: list[str] = []
        self._file = open(self.path, "rb")  # noqa: SIM115 - closed by close()
        self._map: Any = None
        try:
            self.size = self._file.seek(0, 2)
            if self.size == 0:
                raise ImportFormatError(f"{self.path}: empty file, not an iRacing .ibt")
            self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
            self.header = self._read_header()
            self.vars = self._read_vars()
            self.row_dtype = np.dtype(
                {
                    "names": [v.name for v in self.vars],
                    "formats": [
                        (VAR_TYPES[v.type][0], (v.count,)) if v.count > 1 else VAR_TYPES[v.type][0]
                        for v in self.vars
                    ],
                    "offsets": [v.offset for v in self.vars],
                    "itemsize": self.header.buf_len,
                }
            )
            self.row_count = self._row_count()
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> IbtFile:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:  # a numpy view still exported: released with it
                pass
            self._map = None
        self._file.close()

    def _bad(self, what: str) -> ImportFormatError:
        return ImportFormatError(f"{self.path}: not a readable iRacing .ibt: {what}")

    def _read_header(self) -> IbtHeader:
        m, size = self._map, self.size
        if size < HEADER_SIZE:
            raise self._bad(f"{size} bytes, shorter than the {HEADER_SIZE}-byte header")
        ver, _status, rate, _upd, info_len, info_off, nvars, var_off, nbuf, buf_len = _HEADER.unpack_from(m)
        if ver not in (1, 2):
            raise self._bad(f"header version {ver} (expected 1 or 2)")
        if not 1 <= nbuf <= MAX_BUFS:
            raise self._bad(f"{nbuf} row buffers (expected 1..{MAX_BUFS})")
        if nbuf > 1 or HEADER_SIZE <= info_off < HEADER_SIZE + DISK_HEADER_SIZE:
            raise ImportFormatError(
                f"{self.path}: a dump of iRacing's live shared memory ({nbuf} rotating row buffers,"
                " no disk sub-header), not a telemetry file: it holds a few rows, not a recording;"
                " import the .ibt iRacing writes to disk instead"
            )
        if not 1 <= rate <= MAX_TICK_RATE:
            raise self._bad(f"tick rate {rate} Hz (expected 1..{MAX_TICK_RATE})")
        if not 1 <= nvars <= MAX_VARS:
            raise self._bad(f"{nvars} variables (expected 1..{MAX_VARS})")
        if not 1 <= buf_len <= MAX_ROW_BYTES:
            raise self._bad(f"row length {buf_len} (expected 1..{MAX_ROW_BYTES})")
        if size < HEADER_SIZE + DISK_HEADER_SIZE:
            raise self._bad(f"{size} bytes, shorter than the header and disk sub-header")
        if not (var_off >= HEADER_SIZE + DISK_HEADER_SIZE and var_off + nvars * VAR_HEADER_SIZE <= size):
            raise self._bad(f"variable headers at {var_off} ({nvars} x {VAR_HEADER_SIZE} B) outside the file")
        if not (0 <= info_len <= MAX_SESSION_INFO_BYTES and info_off >= 0 and info_off + info_len <= size):
            raise self._bad(f"session info at {info_off} ({info_len} B) outside the file")
        _tick, buf_off = _VARBUF.unpack_from(m, 48)
        if not HEADER_SIZE + DISK_HEADER_SIZE <= buf_off <= size:
            raise self._bad(f"rows at offset {buf_off} outside the file")
        date_s, start_s, end_s, laps, records = _DISK.unpack_from(m, HEADER_SIZE)
        return IbtHeader(
            version=ver,
            tick_rate=rate,
            session_info_len=info_len,
            session_info_offset=info_off,
            num_vars=nvars,
            var_header_offset=var_off,
            num_buf=nbuf,
            buf_len=buf_len,
            buf_offset=buf_off,
            session_start_date_s=date_s,
            session_start_time_s=start_s,
            session_end_time_s=end_s,
            session_lap_count=laps,
            session_record_count=records,
        )

    def _read_vars(self) -> tuple[IbtVar, ...]:
        h = self.header
        out: list[IbtVar] = []
        seen: set[str] = set()
        for i in range(h.num_vars):
            at = h.var_header_offset + i * VAR_HEADER_SIZE
            vtype, offset, count, as_time, name_raw, desc_raw, unit_raw = _VAR.unpack_from(self._map, at)
            name = _text(name_raw)
            where = f"variable {i} ({name or 'unnamed'})"
            if vtype not in VAR_TYPES:
                raise self._bad(f"{where}: type {vtype} (expected 0..5)")
            item = np.dtype(VAR_TYPES[vtype][0]).itemsize
            if not 1 <= count <= h.buf_len or not offset >= 0 or offset + item * count > h.buf_len:
                raise self._bad(f"{where}: {count} x {item} B at {offset} outside the {h.buf_len}-byte row")
            if not name:
                raise self._bad(f"{where}: no name")
            if name in seen:
                raise self._bad(f"{where}: name used twice")
            seen.add(name)
            out.append(IbtVar(name, vtype, offset, count, bool(as_time), _text(desc_raw), _text(unit_raw)))
        return tuple(out)

    def _row_count(self) -> int:
        h = self.header
        available, rest = divmod(self.size - h.buf_offset, h.buf_len)
        records = h.session_record_count
        if rest:
            self.notes.append(f"the last {rest} bytes are a partial row (file cut short): ignored")
        if records > available:
            self.notes.append(f"the header counts {records} rows, the file holds {available}: file cut short")
        if 0 < records < available:
            return records
        return available

    def session_info_text(self) -> str:
        """The session-info YAML as text (up to its first NUL)."""
        h = self.header
        raw = bytes(self._map[h.session_info_offset : h.session_info_offset + h.session_info_len])
        return raw.split(b"\0", 1)[0].decode("latin-1")

    def rows(self) -> np.ndarray:
        """All rows as a read-only structured view (``row_dtype``) of the file."""
        return np.frombuffer(
            self._map, dtype=self.row_dtype, count=self.row_count, offset=self.header.buf_offset
        )

    def iter_rows(self, chunk: int = 4096) -> Iterator[np.ndarray]:
        """The rows in chunks (copies: the file can be closed while they live)."""
        view = self.rows()
        for start in range(0, len(view), chunk):
            yield np.array(view[start : start + chunk])
