"""UDP listener source: one bound socket, one protocol decoder, counted drops.

A game sends datagrams to the configured address and port; each one is stamped with its
receive time on the monotonic clock (see "Receive times"), checked against the optional sender
allowlist and the size bound, decoded, and handed to the sink. Every datagram ends up either
decoded or counted in ``stats.dropped`` under one reason:

``too_large`` (over ``max_datagram_bytes``), ``sender_not_allowed``, the decoder's
:class:`~wrtfd.errors.DecodeError` reason (``wrong_size``, ``unknown_format``, ...),
``decoder_error`` (a decoder bug: logged once, never fatal), ``queue_full`` (the recorder's
intake refused it), ``sink_error`` (the sink raised: logged once), ``kernel_overflow`` (the
socket buffer overflowed before we read: Linux reports the count with ``SO_RXQ_OVFL``, on the
next datagram queued after the loss), ``socket_error`` (e.g. ICMP errors surfacing on recv),
``internal_error`` (a bug in the receive path itself: logged).

The socket is read directly (non-blocking ``recvmsg`` from a reader callback on asyncio, or
driven by :func:`anyio.wait_readable` elsewhere) rather than through anyio's UDP stream, whose
100-entry internal queue drops silently when the loop is busy: here the only queue is the
kernel's, bounded by ``rcvbuf_bytes`` and accounted.

A change of the decoder's ``session_key`` (F1 ``sessionUID``, the Forza / DiRT session
counter, the AC handshake) sets ``new_session`` on the sample that carries it.

Receive times: ``rx_ns`` is the kernel's arrival time (``SO_TIMESTAMPNS``) moved onto the
monotonic clock, so a stall of the event loop does not bunch evenly spaced datagrams (which
the scheduler would otherwise see as a pause followed by a burst).

Batched reads: waking the event loop costs far more CPU than reading a datagram (a 360 Hz F1
feed would wake it 360 times a second), and the kernel stamps each datagram's arrival anyway.
So where the kernel timestamps (Linux) and the loop is asyncio, a source that sees a steady feed
of at most ``HOLD_MAX_DATAGRAMS`` per ``read_interval_s`` stops watching its socket and reads
everything queued once per ``read_interval_s``, on a grid of the loop's clock (every source on
the same grid: they all read in one wake-up, and the recorder steps right after, in the same
one). Datagrams wait in the kernel's buffer meanwhile (bounded and accounted, as always); their
receive times do not change. A socket found empty, a first datagram after a pause, or a faster
feed goes back to a reader callback on the socket (one wake-up per arrival, at most ``batch``
datagrams each). When the source stops, what is queued is still read. This adds up to
``read_interval_s`` (default 0.2 s) to the time a sample takes to reach the recorder (see the
durability bound in :mod:`wrtfd.recorder.live`); it does not make samples late: the recorder
closes a tick only in a step, and a step comes after the batch that holds the tick's samples.

Raw tap: with a ``raw_sink`` set, every datagram read is handed to it first (before the
allowlist, the size bound and the decoder), with the ``rx_ns`` its sample gets (after the
never-backwards clamp below), the sender and the address it was sent to: for a socket bound
to every address, the kernel reports that per datagram (``IP_PKTINFO``, asked for only while a
tap is set).

Lifecycle: ``STARTING -> (bound) LISTENING -> (first datagram) RECEIVING ... cancelled -> STOPPED``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import math
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

import anyio

from wrtfd.decoders.base import Decoder, Sample
from wrtfd.defaults import UDP_READ_INTERVAL_S
from wrtfd.errors import ConfigError, DecodeError, SourceError
from wrtfd.sources.base import Address, RawSink, SampleSink, SinkFull, SourceState, SourceStats

__all__ = ["DatagramSocket", "SenderAllowlist", "UdpSource"]

log = logging.getLogger("wrtfd.sources.udp")

#: Largest UDP payload over IPv4.
MAX_UDP_PAYLOAD = 65507
_LINUX = sys.platform.startswith("linux")
#: Linux socket option: report the count of datagrams the kernel dropped (cmsg on recvmsg).
_SO_RXQ_OVFL = getattr(socket, "SO_RXQ_OVFL", 40 if _LINUX else None)
#: Linux socket option: the kernel's receive time of each datagram (struct timespec, realtime).
_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35 if _LINUX else None)
#: Linux: the destination address of each datagram (struct in_pktinfo / in6_pktinfo).
_IP_PKTINFO = getattr(socket, "IP_PKTINFO", 8 if _LINUX else None)
_IPV6_RECVPKTINFO = getattr(socket, "IPV6_RECVPKTINFO", None)
_IPV6_PKTINFO = getattr(socket, "IPV6_PKTINFO", None)
_ANY_HOSTS = frozenset({"0.0.0.0", "::", ""})
_U32 = struct.Struct("=I")
_TIMESPEC = struct.Struct("=qq")
#: A kernel timestamp older than this (or in the future) is not trusted: the wall clock moved.
_MAX_KERNEL_AGE_NS = 1_000_000_000
#: Datagrams read per wake-up before yielding to other tasks.
DEFAULT_BATCH = 256
#: Batched reads: how often a steady feed's socket is read (seconds; 0 disables batching).
DEFAULT_READ_INTERVAL_S = UDP_READ_INTERVAL_S
#: Batched reads only while a feed brings at most this many datagrams per interval (a faster
#: one is read as it arrives, so the kernel buffer never holds more than this between reads:
#: 128 x the 2 KiB default datagram limit is a quarter of the default 1 MiB receive buffer).
#: An F1 game sends 300-500 datagrams/s, 60-100 per interval.
HOLD_MAX_DATAGRAMS = 128
#: A rate is only measured between two reads this close together (else it is a first datagram).
_RATE_WINDOW_S = 1.0


def _enable(sock: socket.socket, option: int | None) -> bool:
    """Turn on a boolean SOL_SOCKET option where the platform has it."""
    if option is None:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, option, 1)
    except OSError:
        return False
    return True


class SenderAllowlist:
    """Which sender addresses may feed a source: IPs or networks (``192.168.1.0/24``)."""

    __slots__ = ("_cache", "_exact", "_networks")

    def __init__(self, entries: Iterable[str]) -> None:
        self._exact: set[str] = set()
        self._networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for entry in entries:
            try:
                net = ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ConfigError(f"allow_from: {entry!r} is not an IP address or network") from None
            if net.num_addresses == 1:
                self._exact.add(str(net.network_address))
            else:
                self._networks.append(net)
        self._cache: dict[str, bool] = {}

    def allows(self, host: str) -> bool:
        if host in self._exact:
            return True
        hit = self._cache.get(host)
        if hit is None:
            try:
                addr = ipaddress.ip_address(host.split("%", 1)[0])
            except ValueError:
                return False
            hit = any(addr in net for net in self._networks)
            if len(self._cache) >= 1024:  # bounded: a spoofing flood must not grow memory
                self._cache.clear()
            self._cache[host] = hit
        return hit


class DatagramSocket:
    """A bound non-blocking UDP socket with kernel drop accounting. Closing is idempotent."""

    def __init__(self, host: str, port: int, *, rcvbuf_bytes: int | None = 1 << 20) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            sock.setblocking(False)
            if rcvbuf_bytes:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf_bytes)
            self.overflow_supported = _enable(sock, _SO_RXQ_OVFL)
            self.timestamps_supported = _enable(sock, _SO_TIMESTAMPNS)
            sock.bind((host, port))
        except OSError as e:
            sock.close()
            raise SourceError(f"cannot bind UDP {host}:{port}: {e.strerror or e}") from e
        self.sock = sock
        #: recvmsg's ancillary buffer size (drop count and kernel time).
        self.ancbuf_size = (socket.CMSG_SPACE(4) if self.overflow_supported else 0) + (
            socket.CMSG_SPACE(_TIMESPEC.size) if self.timestamps_supported else 0
        )
        #: The kernel's running count of dropped datagrams, as last reported.
        self.kernel_dropped = 0
        #: ``(cmsg level, type, offset of the address)`` of the destination address, once
        #: :meth:`report_destinations` turned it on (None: the bound address is the destination).
        self.destination_cmsg: tuple[int, int, int] | None = None
        self._family = family

    def report_destinations(self) -> bool:
        """Ask the kernel for each datagram's destination address (a socket bound to every
        address receives datagrams sent to any of them); True when it will report it."""
        if self._family == socket.AF_INET6:
            level, enable, kind, offset = socket.IPPROTO_IPV6, _IPV6_RECVPKTINFO, _IPV6_PKTINFO, 0
            size = 20  # struct in6_pktinfo: the address, then the interface index
        else:
            level, enable, kind, offset = socket.IPPROTO_IP, _IP_PKTINFO, _IP_PKTINFO, 8
            size = 12  # struct in_pktinfo: interface index, local address, header destination
        if enable is None or kind is None:
            return False
        try:
            self.sock.setsockopt(level, enable, 1)
        except OSError:
            return False
        if self.destination_cmsg is None:
            self.ancbuf_size += socket.CMSG_SPACE(size)
        self.destination_cmsg = (level, kind, offset)
        return True

    @property
    def local_address(self) -> tuple[str, int]:
        addr = self.sock.getsockname()
        return str(addr[0]), int(addr[1])

    def receive(self, max_bytes: int) -> tuple[bytes, Any, int, int, int] | None:
        """One datagram ``(data, address, flags, new kernel drops, rx_ns)``, or None when none waits.

        ``rx_ns`` is on the monotonic clock: the kernel's arrival time where the kernel reports
        it (so a busy event loop does not bunch the receive times of datagrams that arrived
        evenly), else the time of this read.

        :raises OSError: socket errors other than "would block".
        """
        try:
            data, anc, flags, addr = self.sock.recvmsg(max_bytes, self.ancbuf_size)
        except BlockingIOError:
            return None
        rx_ns = time.monotonic_ns()
        dropped = 0
        for level, kind, payload in anc:
            if level != socket.SOL_SOCKET:
                continue
            if kind == _SO_TIMESTAMPNS and len(payload) >= _TIMESPEC.size:
                sec, nsec = _TIMESPEC.unpack_from(payload)
                age = time.time_ns() - (sec * 1_000_000_000 + nsec)
                if 0 <= age < _MAX_KERNEL_AGE_NS:
                    rx_ns -= age
            elif kind == _SO_RXQ_OVFL and len(payload) >= 4:
                (total,) = _U32.unpack_from(payload)
                dropped = (total - self.kernel_dropped) & 0xFFFFFFFF
                self.kernel_dropped = total
        return data, addr, flags, dropped, rx_ns

    async def wait_readable(self) -> None:
        await anyio.wait_readable(self.sock)

    def send_to(self, data: bytes, address: tuple[str, int]) -> None:
        """Best-effort send (UDP): a full buffer or an unreachable peer raises OSError."""
        self.sock.sendto(data, address)

    def close(self) -> None:
        self.sock.close()


class UdpSource:
    """Listens on ``host:port`` and decodes every datagram with ``decoder``.

    ``allow_from``: sender IPs / networks accepted (None: anyone). ``max_datagram_bytes``: larger
    datagrams are dropped as ``too_large``. ``rcvbuf_bytes``: the kernel receive buffer (the
    only queue on the receive path). ``port`` 0 binds an ephemeral port (see ``local_address``).
    ``read_interval_s``: batched reads of a steady feed (module docstring; 0: read on arrival).
    """

    def __init__(
        self,
        name: str,
        decoder: Decoder,
        *,
        host: str = "0.0.0.0",
        port: int,
        allow_from: Iterable[str] | None = None,
        max_datagram_bytes: int = 2048,
        rcvbuf_bytes: int | None = 1 << 20,
        batch: int = DEFAULT_BATCH,
        read_interval_s: float = DEFAULT_READ_INTERVAL_S,
    ) -> None:
        if not 1 <= max_datagram_bytes <= MAX_UDP_PAYLOAD:
            raise ConfigError(
                f"{name}: max_datagram_bytes {max_datagram_bytes} is not in 1..{MAX_UDP_PAYLOAD}"
            )
        if not 0 <= port <= 65535:
            raise ConfigError(f"{name}: port {port} is not in 0..65535")
        self.name = name
        self.decoder = decoder
        self.host = host
        self.port = port
        self.allow = SenderAllowlist(allow_from) if allow_from is not None else None
        self.max_datagram_bytes = max_datagram_bytes
        self.rcvbuf_bytes = rcvbuf_bytes
        self.batch = max(1, batch)
        self.read_interval_s = max(0.0, read_interval_s)
        #: Socket reads (wake-ups of this source) so far; batched reads keep it low.
        self.reads = 0
        self.stats = SourceStats()
        self._socket: DatagramSocket | None = None
        self._decoder_bug_logged = False
        self._sink_bug_logged = False
        #: The raw tap (see "Raw tap" in the module docstring); set before :meth:`run`.
        self.raw_sink: RawSink | None = None

    @property
    def local_address(self) -> tuple[str, int] | None:
        """The bound address (None before ``run`` has bound the socket)."""
        return self._socket.local_address if self._socket is not None else None

    async def run(self, sink: SampleSink, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Bind, report started, then receive until cancelled.

        :raises SourceError: the address cannot be bound (in use, no permission).
        """
        self.stats.set_state(SourceState.STARTING)
        try:
            sock = DatagramSocket(self.host, self.port, rcvbuf_bytes=self.rcvbuf_bytes)
        except SourceError as e:
            self.stats.set_state(SourceState.FAILED, str(e))
            raise
        self._socket = sock
        host, port = sock.local_address
        self.stats.set_state(SourceState.LISTENING, f"udp {host}:{port}")
        log.info("%s: listening on udp %s:%d", self.name, host, port)
        try:
            task_status.started()
            await self._loop(sock, sink)
        finally:
            sock.close()
            self.stats.set_state(SourceState.STOPPED)

    async def _loop(self, sock: DatagramSocket, sink: SampleSink) -> None:
        drain = self._drainer(sock, sink)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # another anyio backend (trio)
            loop = None
        if loop is not None:
            interval = self.read_interval_s if sock.timestamps_supported else 0.0
            reader = _BatchedReader(loop, sock.sock.fileno(), drain, interval, self.batch)
            reader.start()
            try:
                await anyio.sleep_forever()
            finally:
                reader.stop()
                reader.flush()  # what waits in the kernel for the next batched read is not lost
        else:
            while True:
                await sock.wait_readable()
                drain()

    def _drainer(self, sock: DatagramSocket, sink: SampleSink) -> Callable[[], int]:
        """Read up to ``batch`` waiting datagrams and handle each; returns how many were read
        (``batch``: more may be waiting); never raises.

        What :meth:`DatagramSocket.receive` does, inlined (the receive path of every datagram):
        the clocks are read once per call, not twice per datagram, to move kernel times onto the
        monotonic clock (again only when a datagram is newer than that reading).
        """
        local = sock.local_address
        if self.raw_sink is not None and local[0] in _ANY_HOSTS:
            sock.report_destinations()
        handle = self._handler(sink, local)
        read_size = self.max_datagram_bytes + 1  # one more byte tells "too large" apart
        batch = self.batch
        dropped = self.stats.dropped
        recvmsg = sock.sock.recvmsg
        ancbuf = sock.ancbuf_size
        name = self.name
        sol = socket.SOL_SOCKET
        ts_kind = _SO_TIMESTAMPNS
        ovfl_kind = _SO_RXQ_OVFL
        ts_size = _TIMESPEC.size
        unpack_ts = _TIMESPEC.unpack_from
        unpack_u32 = _U32.unpack_from
        monotonic_ns = time.monotonic_ns
        time_ns = time.time_ns
        dst_level, dst_kind, _ = sock.destination_cmsg or (-1, -1, 0)

        def drain() -> int:
            self.reads += 1
            real_now = -1  # wall clock read at the same moment as ...
            offset = 0  # ... monotonic - wall
            for i in range(batch):
                try:
                    data, anc, flags, addr = recvmsg(read_size, ancbuf)
                except BlockingIOError:
                    return i
                except OSError as e:
                    dropped.add("socket_error")
                    log.debug("%s: recv error %s", name, e)
                    continue
                except Exception:  # never let a bug escape into the event loop's handler
                    dropped.add("internal_error")
                    log.exception("%s: receive failed", name)
                    return i
                rx_ns = -1
                dst = None
                for level, kind, payload in anc:
                    if level != sol:
                        if level == dst_level and kind == dst_kind:
                            dst = payload  # only with a raw tap: its destination address
                        continue
                    if kind == ts_kind and len(payload) >= ts_size:
                        sec, nsec = unpack_ts(payload)
                        kernel_ns = sec * 1_000_000_000 + nsec
                        if kernel_ns > real_now:
                            mono = monotonic_ns()
                            real_now = time_ns()
                            offset = mono - real_now
                        if 0 <= real_now - kernel_ns < _MAX_KERNEL_AGE_NS:
                            rx_ns = kernel_ns + offset
                    elif kind == ovfl_kind and len(payload) >= 4:
                        (total,) = unpack_u32(payload)
                        lost = (total - sock.kernel_dropped) & 0xFFFFFFFF
                        sock.kernel_dropped = total
                        if lost:
                            dropped.add("kernel_overflow", lost)
                if rx_ns < 0:
                    rx_ns = monotonic_ns()  # no (trusted) kernel time: the time of this read
                handle(data, addr, flags, rx_ns, dst)
            return batch

        return drain

    def _handler(
        self, sink: SampleSink, local: Address
    ) -> Callable[[bytes, Any, int, int, bytes | None], None]:
        stats = self.stats
        raw = self.raw_sink
        destination = _destination_reader(local, self._socket)
        dropped = stats.dropped
        decode = self.decoder.decode
        allow = self.allow
        limit = self.max_datagram_bytes
        name = self.name
        sample = Sample  # what Sample.from_decoded builds, without its keyword call
        truncated = int(socket.MSG_TRUNC)  # a plain int: IntFlag & costs microseconds per datagram
        last_key: list[object] = [None]  # the decoder's session key (F1 sessionUID ...) seen last
        receiving = SourceState.RECEIVING  # bound once: an enum member lookup costs 70 ns

        def handle(data: bytes, addr: Any, flags: int, rx_ns: int, dst: bytes | None) -> None:
            last = stats.last_rx_ns
            if last is not None and rx_ns < last:  # clock conversion noise: keep receive order
                rx_ns = last
            if raw is not None:  # the tap keeps every datagram, with the sample's receive time
                raw(rx_ns, addr, local if dst is None else destination(dst), data)
            stats.received += 1
            stats.bytes += len(data)
            stats.last_rx_ns = rx_ns
            if stats.state is not receiving:
                stats.set_state(receiving, f"from {addr[0]}:{addr[1]}")
            if allow is not None and not allow.allows(addr[0]):
                dropped.add("sender_not_allowed")
                return
            if len(data) > limit or flags & truncated:
                dropped.add("too_large")
                return
            try:
                decoded = decode(data)
            except DecodeError as e:
                dropped.add(e.reason)
                return
            except Exception:  # a decoder bug must not stop recording: count it, log it once
                dropped.add("decoder_error")
                if not self._decoder_bug_logged:
                    self._decoder_bug_logged = True
                    log.exception("%s: decoder failed on a %d-byte datagram", name, len(data))
                return
            if decoded is None:
                return
            key = decoded.session_key
            changed = False
            if key is not None and key != last_key[0]:
                changed = last_key[0] is not None
                last_key[0] = key
            try:
                sink(
                    sample(
                        name,
                        rx_ns,
                        decoded.values,
                        decoded.source_time_ns,
                        changed or decoded.new_session,
                        decoded.session_info,
                    )
                )
            except SinkFull:
                dropped.add("queue_full")
                return
            except Exception:  # a failing sink (mapping bug) must not stop the receiving either
                dropped.add("sink_error")
                if not self._sink_bug_logged:
                    self._sink_bug_logged = True
                    log.exception("%s: the sink failed on a sample", name)
                return
            stats.samples += 1

        return handle


def _destination_reader(local: Address, sock: DatagramSocket | None) -> Callable[[bytes | None], Address]:
    """Turns a datagram's destination cmsg (or None) into its ``(host, port)``: the bound
    address, with the kernel's reported address in place of an any-address."""
    cmsg = None if sock is None else sock.destination_cmsg
    if cmsg is None:
        return lambda _dst: local
    level, _, offset = cmsg
    family, size = (socket.AF_INET6, 16) if level == socket.IPPROTO_IPV6 else (socket.AF_INET, 4)
    port = local[1]
    ntop = socket.inet_ntop
    last: list[Any] = [None, local]  # the last cmsg seen and its address (a feed repeats them)

    def destination(dst: bytes | None) -> Address:
        if dst is None or len(dst) < offset + size:
            return local
        if dst != last[0]:
            last[0] = dst
            last[1] = (ntop(family, dst[offset : offset + size]), port)
        address: Address = last[1]
        return address

    return destination


class _BatchedReader:
    """Reads one socket on asyncio: on arrival (a reader callback) or, for a steady feed, once
    per ``interval_s`` on a grid of the loop's clock (see "Batched reads" in the module docstring).

    ``drain`` reads up to ``batch`` queued datagrams and returns how many it read.
    """

    __slots__ = ("_batch", "_drain", "_fd", "_interval", "_last", "_loop", "_timer", "_watching")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        fd: int,
        drain: Callable[[], int],
        interval_s: float,
        batch: int,
    ) -> None:
        self._loop = loop
        self._fd = fd
        self._drain = drain
        self._interval = interval_s
        self._batch = batch
        self._last = -1e18  # loop time of the last read
        self._timer: asyncio.TimerHandle | None = None
        self._watching = False

    def start(self) -> None:
        self._watch()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._watching:
            self._watching = False
            self._loop.remove_reader(self._fd)

    def flush(self) -> None:
        """Read everything queued now (at most a few batches): the source is stopping."""
        for _ in range(16):
            if self._drain() < self._batch:
                return

    def _watch(self) -> None:
        if not self._watching:
            self._watching = True
            self._loop.add_reader(self._fd, self._on_readable)

    def _steady(self, n: int, now: float) -> bool:
        """True when the feed is slow and regular enough to be read once per interval."""
        dt = now - self._last
        self._last = now
        return (
            self._interval > 0.0
            and 0 < n < self._batch
            and dt <= _RATE_WINDOW_S
            and n * self._interval <= HOLD_MAX_DATAGRAMS * dt
        )

    def _hold(self, now: float) -> None:
        """Stop watching the socket; read it again at the next point of the grid."""
        if self._watching:
            self._watching = False
            self._loop.remove_reader(self._fd)
        step = self._interval
        self._timer = self._loop.call_at((math.floor(now / step) + 1) * step, self._on_timer)

    def _on_readable(self) -> None:
        n = self._drain()
        now = self._loop.time()
        if self._steady(n, now):
            self._hold(now)

    def _on_timer(self) -> None:
        self._timer = None
        n = self._drain()
        now = self._loop.time()
        if self._steady(n, now):
            self._hold(now)
        else:  # empty (the feed paused), or faster than batching allows: read on arrival
            self._watch()
