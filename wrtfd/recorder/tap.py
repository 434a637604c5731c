"""The raw tap: every datagram, serial chunk and TCP chunk the tapped sources received, in pcapng.

A recording is only as good as the decoder that made it. The tap keeps the input itself, before
any check or decoding (datagrams the decoder dropped too), so a recording can be made again with
a better decoder: ``wrtfd import TAP.pcapng --config the-daemon.toml`` replays it through the same
sources, scheduler and recorder (docs/import.md).

* **What**: a source with a tap hands every input to its :data:`~wrtfd.sources.base.RawSink`
  (:meth:`RawTap.sink_for`) with the receive time its samples get. UDP datagrams are written as
  IPv4/UDP (or IPv6) packets with their real addresses and ports, on an interface named after
  the source; serial and TCP bytes as received, on a raw-data interface (``LINKTYPE_USER0``) named
  after the source, its address in the description (:class:`~wrtfd.pcap.PcapngWriter`).
* **Time**: a receive time is monotonic; it is written as wall time with *one* offset: the
  daemon's, which its recordings put their session starts on the wall clock with too (or one
  taken when the tap is made), so the tap holds exactly the times the recorder used (what makes
  a replay exact, session headers included), and an NTP step during the recording does not move
  them.
* **Files**: one tap file per recording group, beside its WRTF file and named after it
  (``X.wrtf`` -> ``X.pcapng``): the tap follows the recorder's file events (an observer of
  :class:`~wrtfd.recorder.observe.FileOpened` / ``FileClosed``): when the WRTF file rotates or
  closes, so does the tap file. Input that arrives while the group has no WRTF file open (the
  first datagrams, before the session's first frame is written; a game whose every datagram the
  decoder drops) opens a tap file of its own, ``DATE_TIME_GROUP.pcapng``, renamed after the WRTF
  file when one opens.
* **Size**: all tap files in the directory (this run's and earlier runs', recognised by the
  application name in their section header) together stay under ``max_bytes``: the oldest
  closed file is removed first. A tap file that reaches half of ``max_bytes`` continues in a
  new part (``X.part2.pcapng``, ...), so even one long recording keeps its newest input.
* **Off the event loop**: the sink only appends to a bounded queue (``queue_packets`` inputs,
  ``queue_bytes`` bytes; a full queue drops and counts ``queue_full``). One thread writes, once
  per ``write_interval_s`` while input flows (``fsync_interval_s``, at most
  :data:`MAX_WRITE_INTERVAL_S`; on the grid of the UDP sources' batched reads, just after them),
  and sleeps while none does. It writes each batch to the kernel and fsyncs every
  ``fsync_interval_s``, the recorder's policy: a crash of the process or a power cut loses at
  most ``write_interval_s`` + ``fsync_interval_s`` of the tap's input. Why not write at every
  read, as the recorder does: each wake-up of the thread costs far more than the blocks it
  writes (``bench/bench_tap.py``: 0.2 s turns cost twice the CPU of 1 s turns). A file is a
  sequence of whole pcapng blocks: a power cut leaves a readable prefix, its last block at most
  torn (readers skip it: wrtfd counts it as ``truncated_block``, tshark warns and stops there).
* **Errors**: a write error (disk full) closes the group's tap file; its input is dropped and
  counted (``write_error``) until a new file opens, tried again after a backoff. The recording
  itself never waits for, nor fails because of, the tap.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from wrtfd.decoders.base import DropCounter
from wrtfd.defaults import UDP_READ_INTERVAL_S
from wrtfd.pcap import PcapngWriter
from wrtfd.recorder.files import sanitize_component
from wrtfd.recorder.observe import FileClosed, FileOpened, LiveFrames, RecordingEvent

__all__ = ["MAX_WRITE_INTERVAL_S", "TAP_APPLICATION", "RawTap", "TapInterface", "is_tap_file"]

log = logging.getLogger("wrtfd.tap")

#: The section header's application name of every tap file (how the size bound finds them).
TAP_APPLICATION = "wrtfd raw tap"
#: A pcapng file holds its application name in the first block: this many bytes are enough.
_HEAD_BYTES = 256
_SUFFIX = ".pcapng"
_RETRY_MIN_S = 1.0
_RETRY_MAX_S = 30.0
#: Per input: the pcapng block around it (28 bytes) and IPv4/UDP headers (28), rounded up.
_BLOCK_OVERHEAD = 64
#: The tap writes at least this often while input flows (seconds).
MAX_WRITE_INTERVAL_S = 1.0
#: The tap writes this long after each point of the sources' read grid.
_TURN_DELAY_S = 0.01
#: The queue's marker of a file event (never a group index).
_EVENT = -1


@dataclass(frozen=True, slots=True)
class TapInterface:
    """One tapped source: ``udp`` (datagrams with addresses) or ``raw`` (bytes) interface
    ``source`` in the tap files of ``group``; ``description`` names where it reads."""

    source: str
    group: str
    kind: str
    description: str


def is_tap_file(path: Path) -> bool:
    """True when ``path`` is a pcapng file a raw tap wrote (its application name)."""
    try:
        with path.open("rb") as f:
            head = f.read(_HEAD_BYTES)
    except OSError:
        return False
    return head[:4] == b"\x0a\x0d\x0d\x0a" and TAP_APPLICATION.encode() in head


class _GroupFile:
    """The tap file of one group (writer thread only)."""

    __slots__ = (
        "blocks",
        "bytes",
        "flushed",
        "group",
        "interfaces",
        "makers",
        "paired",
        "part",
        "path",
        "stream",
        "writer",
    )

    def __init__(self, group: str, interfaces: list[TapInterface]) -> None:
        self.group = group
        self.interfaces = interfaces
        self.path: Path | None = None
        self.stream: BinaryIO | None = None
        self.writer: PcapngWriter | None = None
        #: Per interface: its block maker (None while no file is open).
        self.makers: list[Callable[[int, Any, Any, bytes], bytes]] | None = None
        #: Blocks made this turn, written at its end (or before the file closes).
        self.blocks: list[bytes] = []
        self.bytes = 0  # the file's size, estimated between flushes
        self.flushed = 0  # its size at the last flush
        self.part = 1
        #: The WRTF file of the group that is open now (None: none is).
        self.paired: Path | None = None


class RawTap:
    """Keeps what the tapped sources receive in pcapng files (see the module docstring).

    ``interfaces``: every tapped source, grouped by recording group; ``output_dir``: where the
    recorder writes. Call :meth:`start` before the sources run, :meth:`close` after the recorder
    has closed its files (it blocks: call it off the event loop).
    """

    def __init__(
        self,
        interfaces: Sequence[TapInterface],
        *,
        output_dir: Path,
        max_bytes: int,
        fsync_interval_s: float = 1.0,
        write_interval_s: float | None = None,
        queue_packets: int = 65536,
        queue_bytes: int = 16 << 20,
        wall_offset_ns: int | None = None,
    ) -> None:
        if max_bytes < 1 << 20:
            raise ValueError(f"raw_tap_max_bytes must be at least 1 MiB, got {max_bytes}")
        self.output_dir = Path(output_dir)
        self.max_bytes = max_bytes
        self.part_bytes = max_bytes // 2
        self.fsync_interval_s = fsync_interval_s
        if write_interval_s is None:
            write_interval_s = min(fsync_interval_s, MAX_WRITE_INTERVAL_S)
        #: On the UDP read grid: a whole number of read intervals.
        self.write_interval_s = max(1, round(write_interval_s / UDP_READ_INTERVAL_S)) * UDP_READ_INTERVAL_S
        self._queue_packets = queue_packets
        self._queue_bytes = queue_bytes
        #: wall = monotonic + this: one offset for the life of the tap.
        self.wall_offset_ns = (
            time.time_ns() - time.monotonic_ns() if wall_offset_ns is None else wall_offset_ns
        )
        groups: dict[str, list[TapInterface]] = {}
        for iface in interfaces:
            groups.setdefault(iface.group, []).append(iface)
        self._groups = [_GroupFile(group, ifaces) for group, ifaces in groups.items()]
        self._group_index = {g.group: i for i, g in enumerate(self._groups)}
        self._where = {
            iface.source: (gi, ii)
            for gi, g in enumerate(self._groups)
            for ii, iface in enumerate(g.interfaces)
        }
        self._queue: deque[tuple[Any, ...]] = deque()
        # Counters with one writer each (the GIL makes their reads safe): the event loop's ...
        self._bytes_in = 0
        self.queue_dropped = 0
        # ... and the writer thread's.
        self._bytes_out = 0
        self.packets = 0
        self.turns = 0  # the writer thread's wake-ups (its CPU is mostly these)
        self.bytes_written = 0
        self.files = 0
        self.removed_files = 0
        self.write_errors = 0
        self.dropped = DropCounter()  # the writer thread's drops (write_error, bad_address)
        self.last_error: str | None = None
        self._wake = threading.Event()
        self._idle = False
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._closed: deque[tuple[Path, int]] = deque()  # closed tap files, oldest first
        self._dirty_since: float | None = None
        self._last_sync = time.monotonic()
        self._retry_at: dict[int, float] = {}
        self._failures = 0

    # -- what the sources, the hub and the daemon call ---------------------------------------------

    @property
    def groups(self) -> list[str]:
        return [g.group for g in self._groups]

    def sink_for(self, source: str) -> Callable[[int, Any, Any, bytes], None]:
        """The :data:`~wrtfd.sources.base.RawSink` of a tapped source (event loop; never blocks).

        :raises KeyError: ``source`` is not one of the interfaces.
        """
        group, iface = self._where[source]
        queue = self._queue
        append = queue.append
        max_packets = self._queue_packets
        max_bytes = self._queue_bytes

        def sink(rx_ns: int, src: Any, dst: Any, data: bytes) -> None:
            if len(queue) >= max_packets or self._bytes_in - self._bytes_out >= max_bytes:
                self.queue_dropped += 1
                return
            self._bytes_in += len(data)
            append((group, iface, rx_ns, src, dst, data))
            if self._idle:
                self._idle = False
                self._wake.set()

        return sink

    def notify(self, item: RecordingEvent | LiveFrames) -> None:
        """The observer hub's call (the recorder's writer thread): file events of tapped groups."""
        if isinstance(item, FileOpened | FileClosed) and item.group in self._group_index:
            opened = isinstance(item, FileOpened)
            self._queue.append((_EVENT, self._group_index[item.group], opened, item.path, None, b""))
            if self._idle:
                self._idle = False
                self._wake.set()

    def start(self) -> None:
        """Start the writer thread (once); earlier runs' tap files are counted in the bound."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="wrtfd-tap", daemon=True)
        self._thread.start()

    def close(self, timeout_s: float = 5.0) -> bool:
        """Write what is queued, close every file; True when done within ``timeout_s`` (blocks)."""
        self._stopping = True
        self._wake.set()
        thread = self._thread
        if thread is None:
            self._finish()
            return True
        thread.join(timeout_s)
        return not thread.is_alive()

    def snapshot(self) -> dict[str, Any]:
        """For ``/status`` (read on the event loop; cheap)."""
        dropped = {"queue_full": self.queue_dropped} if self.queue_dropped else {}
        dropped.update(self.dropped.as_dict())
        return {
            "groups": self.groups,
            "files": self.files,
            "current": {g.group: str(g.path) for g in self._groups if g.path is not None},
            "packets": self.packets,
            "turns": self.turns,
            "bytes_written": self.bytes_written,
            "queued": len(self._queue),
            "queued_bytes": self._bytes_in - self._bytes_out,
            "dropped": dropped,
            "dropped_total": sum(dropped.values()),
            "removed_files": self.removed_files,
            "max_bytes": self.max_bytes,
            "errors": self.write_errors,
            "last_error": self.last_error,
        }

    # -- the writer thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        """Steady input is written once per ``write_interval_s``, just after the sources' batched reads
        (on the same grid of the monotonic clock); after a turn that found nothing the thread
        sleeps until input arrives (the sink wakes it) or an fsync is due."""
        try:
            self._count_earlier_files()
            queue = self._queue
            busy = False
            while not self._stopping:
                if busy:
                    self._wake.wait(self._next_turn_s())
                else:
                    self._idle = True
                    if not queue and not self._stopping:  # a sink may have appended meanwhile
                        self._wake.wait(self._sync_wait())
                    self._idle = False
                self._wake.clear()
                self.turns += 1
                busy = self._drain() > 0
                self._sync_if_due()
        except Exception:  # a bug here must not take the daemon down: the tap stops, counted
            log.exception("raw tap: the writer thread failed; the tap stops")
            self.last_error = "writer thread failed (see the log)"
        finally:
            self._finish()

    def _next_turn_s(self) -> float:
        """Seconds to the next point of the ``write_interval_s`` grid, plus a little: the UDP sources
        read on that grid of the same clock, so the tap writes right after them, not while
        they hold the interpreter."""
        now = time.monotonic()
        step = self.write_interval_s
        return (math.floor(now / step) + 1) * step + _TURN_DELAY_S - now

    def _sync_wait(self) -> float | None:
        if self._dirty_since is None:
            return None
        return max(0.0, self._last_sync + self.fsync_interval_s - time.monotonic())

    def _drain(self) -> int:
        """Write what is queued now (blocks made per input, written per group in one go);
        returns how many inputs it took."""
        queue = self._queue
        n = len(queue)
        popleft = queue.popleft
        groups = self._groups
        offset = self.wall_offset_ns
        part_bytes = self.part_bytes
        touched: set[int] = set()
        out = 0
        for _ in range(n):
            gi, iface, rx_ns, src, dst, data = popleft()
            if gi == _EVENT:
                self._write_blocks(iface)
                self._file_event(iface, rx_ns, Path(src))
                continue
            out += len(data)
            g = groups[gi]
            makers = g.makers
            if makers is None:
                if not self._open(gi):
                    self.dropped.add("write_error")
                    continue
                makers = g.makers
                if makers is None:  # pragma: no cover - _open returned True
                    continue
            try:
                block = makers[iface](rx_ns + offset, src, dst, data)
            except ValueError:  # an IPv6 scope (fe80::1%eth0), or an address a header cannot hold
                try:
                    block = makers[iface](rx_ns + offset, _address(src), _address(dst), data)
                except (ValueError, TypeError, IndexError):
                    self.dropped.add("bad_address")
                    continue
            g.blocks.append(block)
            g.bytes += len(block)
            touched.add(gi)
            if g.bytes >= part_bytes:  # continue in a new part (the size bound's unit)
                self._close(gi)
                g.part += 1
        self._bytes_out += out
        for gi in touched:
            self._write_blocks(gi)
            self._flush(gi)
        if n:
            self._enforce_bound()
        return n

    def _write_blocks(self, gi: int) -> None:
        g = self._groups[gi]
        blocks, g.blocks = g.blocks, []
        if not blocks or g.writer is None:
            return
        try:
            g.writer.write_blocks(blocks)
        except OSError as exc:
            self.dropped.add("write_error", len(blocks))
            self._fail(gi, exc)
            return
        self.packets += len(blocks)

    def _flush(self, gi: int) -> None:
        """The group's file to the kernel (a crash of the process loses nothing written)."""
        g = self._groups[gi]
        if g.stream is None:
            return
        try:
            g.stream.flush()
            size = g.stream.tell()
        except OSError as exc:
            self._fail(gi, exc)
            return
        self.bytes_written += size - g.flushed
        g.bytes = g.flushed = size
        if self._dirty_since is None:
            self._dirty_since = time.monotonic()

    def _file_event(self, gi: int, opened: bool, wrtf: Path) -> None:
        g = self._groups[gi]
        if opened:
            g.paired = wrtf
            g.part = 1
            if g.path is not None:  # input came first: the file gets the recording's name
                self._rename(gi, self._name_for(gi))
        elif g.paired == wrtf:
            g.paired = None
            self._close(gi)
            g.part = 1

    def _name_for(self, gi: int) -> Path:
        g = self._groups[gi]
        if g.paired is not None:
            stem = g.paired.with_suffix("")
            base = stem.name if g.part == 1 else f"{stem.name}.part{g.part}"
            directory = g.paired.parent
        else:
            when = datetime.now(tz=UTC).strftime("%Y%m%d_%H%M%S")
            base = f"{when}_{sanitize_component(g.group)}"
            directory = self.output_dir
        path = directory / (base + _SUFFIX)
        k = 1
        while path.exists():
            path = directory / f"{base}-{k}{_SUFFIX}"
            k += 1
        return path

    def _open(self, gi: int) -> bool:
        if time.monotonic() < self._retry_at.get(gi, 0.0):
            return False
        g = self._groups[gi]
        path = self._name_for(gi)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            stream = path.open("xb", buffering=1 << 16)
        except OSError as exc:
            self._fail(gi, exc, path)
            return False
        try:
            writer = PcapngWriter(stream, application=TAP_APPLICATION, owns_stream=True)
            for iface in g.interfaces:
                if iface.kind == "udp":
                    writer.add_udp_interface(iface.source, iface.description)
                else:
                    writer.add_raw_interface(iface.source, iface.description)
            stream.flush()
            g.bytes = g.flushed = stream.tell()
            self.bytes_written += g.flushed
        except OSError as exc:
            stream.close()
            self._fail(gi, exc, path)
            return False
        g.path, g.stream, g.writer = path, stream, writer
        g.makers = [writer.block_maker(i) for i in range(len(g.interfaces))]
        self.files += 1
        self._retry_at.pop(gi, None)
        self._failures = 0
        log.info("raw tap: %s", path)
        return True

    def _rename(self, gi: int, target: Path) -> None:
        g = self._groups[gi]
        if g.path is None or g.path == target:
            return
        try:
            os.rename(g.path, target)
        except OSError as exc:  # keeps its own name; recorded
            self._record_error(exc, g.path)
            return
        g.path = target

    def _close(self, gi: int) -> None:
        g = self._groups[gi]
        if g.stream is None or g.path is None:
            return
        self._write_blocks(gi)
        if g.stream is None or g.path is None:  # the write failed: _fail closed it
            return
        stream, path = g.stream, g.path
        g.stream = g.writer = g.makers = None
        g.path = None
        size = g.bytes
        try:
            stream.flush()
            os.fsync(stream.fileno())
            size = stream.tell()
            self.bytes_written += size - g.flushed
        except OSError as exc:
            self._record_error(exc, path)
        finally:
            try:
                stream.close()
            except OSError as exc:
                self._record_error(exc, path)
        self._closed.append((path, size))
        if all(other.stream is None for other in self._groups):
            self._dirty_since = None

    def _fail(self, gi: int, exc: OSError, path: Path | None = None) -> None:
        g = self._groups[gi]
        self._record_error(exc, path or g.path)
        g.blocks = []
        g.makers = None
        if g.stream is not None:
            stream = g.stream
            g.stream = g.writer = None
            if g.path is not None:
                self._closed.append((g.path, g.bytes))
            g.path = None
            try:
                stream.close()
            except OSError:
                pass  # the disk failed already; what was written stays a readable prefix
        self._failures += 1
        backoff = min(_RETRY_MIN_S * (1 << min(self._failures - 1, 8)), _RETRY_MAX_S)
        self._retry_at[gi] = time.monotonic() + backoff

    def _record_error(self, exc: OSError, path: Path | None) -> None:
        self.write_errors += 1
        name = errno.errorcode.get(exc.errno or 0, "EIO")
        self.last_error = f"{path}: {exc.strerror or exc} ({name})"
        log.warning("raw tap: %s", self.last_error)

    def _sync_if_due(self, *, force: bool = False) -> None:
        if self._dirty_since is None:
            return
        now = time.monotonic()
        if not force and now - self._last_sync < self.fsync_interval_s:
            return
        for gi, g in enumerate(self._groups):
            if g.stream is None:
                continue
            try:
                g.stream.flush()
                os.fsync(g.stream.fileno())
            except OSError as exc:
                self._fail(gi, exc)
        self._last_sync = now
        self._dirty_since = None

    def _count_earlier_files(self) -> None:
        """Tap files already in the directory (earlier runs) count in the bound, oldest first."""
        try:
            candidates = [p for p in self.output_dir.glob("*" + _SUFFIX) if p.is_file()]
        except OSError:
            return
        found = []
        for path in candidates:
            if is_tap_file(path):
                try:
                    st = path.stat()
                except OSError:
                    continue
                found.append((st.st_mtime, path, st.st_size))
        for _, path, size in sorted(found):
            self._closed.append((path, size))
        self._enforce_bound()

    def _enforce_bound(self) -> None:
        total = sum(size for _, size in self._closed) + sum(g.bytes for g in self._groups if g.stream)
        while total > self.max_bytes and self._closed:
            path, size = self._closed.popleft()
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                self._record_error(exc, path)
            else:
                self.removed_files += 1
            total -= size

    def _finish(self) -> None:
        """Write what is left and close every file (the thread's last act, or close() without one)."""
        try:
            if self._queue:
                self._drain()
        except Exception:  # a bug: the files are still closed; what was written stays readable
            log.exception("raw tap: writing the last input failed")
            self.last_error = "writing the last input failed (see the log)"
        finally:
            for gi in range(len(self._groups)):
                self._close(gi)


def _address(addr: Any) -> tuple[str, int]:
    """``(host, port)`` of a socket address, without an IPv6 scope (``fe80::1%eth0``) or flow."""
    host = str(addr[0])
    if "%" in host:
        host = host.split("%", 1)[0]
    return host, int(addr[1])
