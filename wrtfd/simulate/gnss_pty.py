"""Play a GNSS receiver on a pseudo-terminal: the recorder opens the pty as it would a real one.

The simulator keeps its own handle on the terminal side, so the pty lives while the recorder
closes and reopens it (a baud probe, a reconnect), and reads the line's settings from it: on a
pty the baud rate is only a termios setting, so the simulator plays a UART by comparing the
rate the recorder set with its own. At a different rate, what it sends arrives as noise and what
it receives is ignored, as on a real wire. Its output never exceeds the rate's bytes per second
(10 bits a byte, counted in simulated time): what does not fit is dropped, as a receiver's full
transmit buffer drops messages.

Time: epoch ``k`` is at ``k * period`` simulated seconds after the start (UTC ``utc_start_ns``
plus that), sent at ``/ speed_scale`` of it in real time. The car starts ``start_delay_s``
after the recorder enabled NAV-PVT (u-blox) or first set the line to the simulator's rate (NMEA).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import secrets
import select
import termios
import time
import tty
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from wrtfd.decoders.ubx import UbxFramer
from wrtfd.errors import WrtfdError
from wrtfd.simulate.gnss import Drive, GnssErrors, UbxReceiver, nmea_epoch, truth_laps

__all__ = ["GnssPty", "PtyStats", "baud_constant"]

#: The unlikely rate the simulator leaves the line at: any other means a recorder set it.
_SENTINEL = termios.B50


def baud_constant(baud: int) -> int:
    """termios ``B<baud>`` constant; ValueError for a rate termios has no constant for."""
    value = getattr(termios, f"B{baud}", None)
    if value is None:
        raise ValueError(f"no termios constant for {baud} baud")
    return int(value)


def _check_link(link: Path) -> None:
    """Refuse ``--link`` at a path holding anything but a symlink to a pty (a previous run's,
    left by a crash): the simulator replaces the link and removes it on exit, and must never do
    that to a file of the user's.

    :raises WrtfdError: one line naming ``link``.
    """
    if not os.path.lexists(link):
        return
    if not link.is_symlink():
        raise WrtfdError(f"--link {link}: exists and is not a symlink; give a new name")
    target = os.readlink(link)
    if not (target.startswith("/dev/pts/") or target.startswith("/dev/pty")):
        raise WrtfdError(f"--link {link}: a symlink to {target}, not to a pty; give a new name")


def _make_link(pty: str, link: Path) -> None:
    """A symlink ``link`` -> ``pty``, made under a fresh name beside it and renamed onto it."""
    for _ in range(100):
        tmp = link.with_name(f".{link.name}.{secrets.token_hex(4)}.new")
        try:
            os.symlink(pty, tmp)
        except FileExistsError:
            continue  # somebody else's: never touch it
        except OSError as exc:
            # name the link (``exc.filename`` would be the pty, which exists)
            raise OSError(exc.errno, exc.strerror, str(link)) from exc
        break
    else:
        raise WrtfdError(f"--link {link}: no free temporary name beside it")
    try:
        _check_link(link)  # again, just before the rename (another process may have made it)
        os.replace(tmp, link)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


@dataclass(slots=True)
class PtyStats:
    epochs: int = 0
    nav_pvt: int = 0
    bytes_out: int = 0
    overflow_epochs: int = 0  # epochs dropped whole: more bytes than the baud rate carries
    unread_bytes: int = 0  # messages dropped whole: the pty's buffer was full (nobody reading)
    garbled_out_bytes: int = 0  # sent while the recorder's rate differed
    garbled_in_bytes: int = 0
    commands: list[tuple[str, str]] = field(default_factory=list)
    baud_changes: list[int] = field(default_factory=list)
    rate_hz: float = 0.0


class GnssPty:
    """One simulated receiver on a fresh pty (``path``; optionally a symlink ``link`` to it)."""

    def __init__(
        self,
        drive: Drive,
        errors: GnssErrors,
        *,
        receiver: UbxReceiver | None = None,
        baud: int = 9600,
        rate_hz: float = 10.0,
        utc_start_ns: int,
        speed_scale: float = 1.0,
        start_delay_s: float = 1.0,
        hold_s: float = 1.0,
        link: Path | None = None,
        seed: int = 0,
    ) -> None:
        self.drive = drive
        self.errors = errors
        self.receiver = receiver
        self.baud = receiver.baud if receiver is not None else baud
        baud_constant(self.baud)
        self.period_s = receiver.meas_ms / 1000 if receiver is not None else 1.0 / rate_hz
        self.utc_start_ns = utc_start_ns
        self.speed_scale = speed_scale
        self.start_delay_s = start_delay_s
        self.hold_s = hold_s
        self.noise = random.Random(seed ^ 0x5A5A)
        if link is not None:
            _check_link(link)  # before the pty: a refusal leaves nothing open
        self.master, self.slave = os.openpty()
        tty.setraw(self.master)
        tty.setraw(self.slave)
        attrs = termios.tcgetattr(self.slave)
        attrs[4] = attrs[5] = _SENTINEL
        termios.tcsetattr(self.slave, termios.TCSANOW, attrs)
        os.set_blocking(self.master, False)
        self.path = os.ttyname(self.slave)
        self.link = link
        if link is not None:
            try:
                _make_link(self.path, link)
            except BaseException:
                self.close()
                raise
        self.framer = UbxFramer()
        self.stats = PtyStats()
        #: Simulated time (s) the car started at; None before.
        self.drive_start_s: float | None = None
        self._tokens = 0.0
        self._stop = False
        self._backlog = b""  # the rest of a message the pty took in part

    # -- the line ---------------------------------------------------------------------------

    def line_speed(self) -> int:
        return int(termios.tcgetattr(self.slave)[5])

    def line_ok(self) -> bool:
        """The recorder's side runs at the simulator's rate."""
        return self.line_speed() == baud_constant(self.baud)

    def _write(self, data: bytes) -> bool:
        """Send a message whole or not at all, as a receiver's transmit buffer drops whole
        messages: the rest of one the pty took in part goes out first, and a message that comes
        while a rest waits is dropped (``unread_bytes``), never cut. False: dropped."""
        if not data:
            return True
        if not self.line_ok():
            self.stats.garbled_out_bytes += len(data)
            data = bytes(self.noise.getrandbits(8) for _ in range(len(data)))
        self._flush()
        if self._backlog:
            self.stats.unread_bytes += len(data)
            return False
        self._backlog = data
        self._flush()
        return True

    def _flush(self) -> None:
        if not self._backlog:
            return
        try:
            n = os.write(self.master, self._backlog)
        except BlockingIOError:
            return
        except OSError:
            self._backlog = b""
            return
        self.stats.bytes_out += n
        self._backlog = self._backlog[n:]

    def _read(self, now_s: float) -> None:
        try:
            data = os.read(self.master, 4096)
        except (BlockingIOError, OSError):
            return
        if not self.line_ok():
            self.stats.garbled_in_bytes += len(data)
            self.framer.reset()
            return
        rx = self.receiver
        if rx is None:
            return
        for frame in self.framer.feed(data):
            before = len(rx.log)
            self._write(rx.handle(frame))
            self.stats.commands.extend(rx.log[before:])
            if rx.pending_baud is not None:
                try:
                    baud_constant(rx.pending_baud)
                except ValueError:
                    rx.pending_baud = None
                    continue
                self.baud = rx.baud = rx.pending_baud
                rx.pending_baud = None
                self.stats.baud_changes.append(self.baud)
                self.framer.reset()
            if rx.nav_pvt and self.drive_start_s is None:
                self.drive_start_s = now_s + self.start_delay_s

    # -- the run ----------------------------------------------------------------------------

    def truth(self) -> dict[str, Any]:
        """The car's true laps (drive time and UTC), once the drive has started."""
        start = self.drive_start_s
        if start is None:
            laps: list[dict[str, Any]] = [
                {k: v for k, v in lap.items() if not k.endswith("_utc_us")}
                for lap in truth_laps(self.drive, 0)
            ]
        else:
            laps = truth_laps(self.drive, self.utc_start_ns + round(start * 1e9))
        return {
            "drive_start_utc_us": None if start is None else (self.utc_start_ns + round(start * 1e9)) // 1000,
            "laps": laps,
            "best_lap_s": min((lap.time_s for lap in self.drive.laps), default=None),
        }

    def run(
        self,
        *,
        wait_s: float = 60.0,
        on_start: Callable[[GnssPty], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> PtyStats:
        """Serve until the drive is over (plus ``hold_s``), or ``wait_s`` (real seconds)
        passes with nobody starting it."""
        wall0 = clock()
        epoch_s = 0.0
        reported = False
        last_epoch_s: float | None = None
        rx = self.receiver
        while True:
            due_wall = wall0 + epoch_s / self.speed_scale
            # serve the host until the epoch is due
            while not self._stop:
                now_wall = clock()
                left = due_wall - now_wall
                if left <= 0:
                    break
                self._flush()
                waiting = [self.master] if self._backlog else []  # wake when the pty takes the rest
                ready, _, _ = select.select([self.master], waiting, [], min(left, 0.1))
                if ready:
                    self._read((now_wall - wall0) * self.speed_scale)
            if self._stop:
                break
            if self.drive_start_s is None and rx is None and self.line_ok():
                self.drive_start_s = epoch_s + self.start_delay_s
            if self.drive_start_s is None and clock() - wall0 > wait_s:
                break
            if self.drive_start_s is not None and not reported:
                reported = True
                if on_start is not None:
                    on_start(self)
            # one epoch
            drive_t = epoch_s - self.drive_start_s if self.drive_start_s is not None else -1.0
            utc_ns = self.utc_start_ns + round(epoch_s * 1e9)
            fix = self.errors.fix(self.drive, drive_t, utc_ns)
            data = rx.epoch(fix) if rx is not None else nmea_epoch(fix)
            byte_rate = self.baud / 10.0
            if last_epoch_s is not None:
                self._tokens = min(byte_rate, self._tokens + (epoch_s - last_epoch_s) * byte_rate)
            else:
                self._tokens = byte_rate * self.period_s
            last_epoch_s = epoch_s
            if len(data) <= self._tokens:
                self._tokens -= len(data)
                if self._write(data):
                    self.stats.epochs += 1
                    if rx is not None and rx.nav_pvt:
                        self.stats.nav_pvt += 1
            else:
                self.stats.overflow_epochs += 1
            if self.drive_start_s is not None and drive_t > self.drive.end_s + self.hold_s:
                break
            period = rx.meas_ms / 1000 if rx is not None else self.period_s
            self.period_s = period
            epoch_s = (int(epoch_s / period + 1e-9) + 1) * period
        self.stats.rate_hz = 1.0 / self.period_s
        return self.stats

    def stop(self) -> None:
        """Make :meth:`run` return soon (from another thread)."""
        self._stop = True

    def write_truth(self, path: Path, extra: dict[str, Any] | None = None) -> None:
        doc = {**(extra or {}), **self.truth(), "stats": asdict(self.stats)}
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
        os.replace(tmp, path)

    def close(self) -> None:
        for fd in (self.master, self.slave):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.link is not None:
            with contextlib.suppress(OSError):  # gone, or no longer a symlink: not ours
                if os.readlink(self.link) == self.path:
                    self.link.unlink()
