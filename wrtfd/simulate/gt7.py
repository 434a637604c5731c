"""Gran Turismo 7 for the simulator: the packets, and a console that streams them on request.

Layout and crypto follow ``shared/spec/protocols/gt7.md``, written independently of
:mod:`wrtfd.decoders.gt7` so the two cross-check each other. Each packet is built in plain,
Salsa20-encrypted whole (pycryptodome) with the nonce of a random ``iv1``, and ``iv1`` is then
written over the encrypted bytes 0x40..0x43, as the console does.

:class:`Gt7Console` plays the PlayStation: it binds the heartbeat port, starts streaming when a
heartbeat of a letter it understands arrives (to the heartbeat's sender address, which is the
real console's behaviour when the receiver binds port 33740 and sends from it), keeps the
variant of the heartbeat that started the stream, and stops when heartbeats stop for
``timeout_s``. The simulated drive starts with the first heartbeat.
"""

from __future__ import annotations

import math
import random
import socket
import struct
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from Crypto.Cipher import Salsa20

from wrtfd.simulate.car import CarSpec, CarState
from wrtfd.simulate.encoding import EncoderOptions, TrackInfo, _u8
from wrtfd.simulate.sender import with_last

__all__ = ["GT7_LETTERS", "ConsoleStats", "Gt7Console", "Gt7Encoder", "gt7_encoder", "seal"]

_KEY = b"Simulator Interface Packet GT7 ver 0.0"[:32]
#: Heartbeat letter -> (packet size, IV XOR constant).
GT7_LETTERS: dict[str, tuple[int, int]] = {
    "A": (296, 0xDEADBEAF),
    "B": (316, 0xDEADBEEF),
    "~": (344, 0x55FABB4F),
    "C": (368, 0xDEADBEEF),
}
G = 9.81
# 0x00 magic, position, velocity, rotation (pitch, yaw, roll), north, angular velocity, body
# height, rpm, IV slot, fuel, capacity, speed, boost, oil pressure, water, oil temperature, tyres.
_HEAD = struct.Struct("<I3f3f3ff3fffIfffffff4f")
# 0x70 packet id, lap, laps, best, last, time of day, grid position, cars, rev alert min/max, max
# speed, flags, gear byte, throttle, brake, unused.
_RACE = struct.Struct("<IhhiiIhhHHHHBBBB")
# 0x94 road plane normal + distance, wheel rotation, tyre radius, suspension height (4 each).
_WHEELS = struct.Struct("<4f4f4f4f")
# 0xF4 clutch, engagement, rpm after clutch, top speed, 8 gear ratios, car code.
_TAIL = struct.Struct("<4f8fi")
_B = struct.Struct("<5f")  # wheel angle, force feedback, sway, heave, surge
_TILDE = struct.Struct("<4B4fff")  # throttle input, brake output, 2 unknown, 4 floats, energy, unknown
_C = struct.Struct("<4sIfff4s")  # surfaces, lap ms, FL/FR steer angle, unknown, category
_RESERVED = bytes(32)
FLAG_ON_TRACK = 1
FLAG_IN_GEAR = 1 << 3
#: Steering wheel angle per road wheel angle.
STEERING_RATIO = 15.0


def seal(plain: bytes, letter: str, iv1: int) -> bytes:
    """Encrypt one plaintext packet as the console does (``iv1`` ends up in bytes 0x40..0x43)."""
    size, xor = GT7_LETTERS[letter]
    if len(plain) != size:
        raise ValueError(f"a {letter!r} packet is {size} bytes, got {len(plain)}")
    nonce = struct.pack("<II", (iv1 ^ xor) & 0xFFFFFFFF, iv1 & 0xFFFFFFFF)
    sealed = bytearray(Salsa20.new(key=_KEY, nonce=nonce).encrypt(plain))
    struct.pack_into("<I", sealed, 0x40, iv1 & 0xFFFFFFFF)
    return bytes(sealed)


class Gt7Encoder:
    """GT7 packets of one variant (``letter``); the packet id advances once per tick."""

    name = "gt7"
    default_port = 33739  # the console's heartbeat port: the simulator listens there
    rate_hz = 60.0

    def __init__(
        self, track: TrackInfo, *, letter: str = "C", car: CarSpec | None = None, seed: int = 0
    ) -> None:
        if letter not in GT7_LETTERS:
            raise ValueError(f"gt7 variant must be one of {', '.join(GT7_LETTERS)}")
        self.letter = letter
        self.track = track
        self.car = car or CarSpec()
        self.rng = random.Random(seed)
        self.packet_id = 100_000 + self.rng.randrange(1000)

    def plain(self, state: CarState) -> bytes:
        """The plaintext packet of ``state`` (bytes 0x40..0x43 zero)."""
        c = self.car
        self.packet_id += 1
        racing = state.racing
        v = state.speed_mps if racing else 0.0
        yaw = math.atan2(state.heading_x, state.heading_z)
        x, y, z = (state.x, state.y, state.z) if racing else (0.0, 0.0, 0.0)
        head = _HEAD.pack(
            0x47375330,
            x,
            y,
            z,
            v * state.heading_x,
            0.0,
            v * state.heading_z,
            0.0,
            math.sin(yaw / 2),
            0.0,
            math.cos(yaw / 2),
            0.0,
            state.yaw_rate_rps if racing else 0.0,
            0.0,
            0.08,
            state.rpm if racing else 0.0,
            0,
            80.0,
            100.0,
            v,
            1.0,
            5.5,
            85.0,
            110.0,
            *([80.0] * 4),
        )
        gear = state.gear if racing else 0
        flags = (FLAG_ON_TRACK | (FLAG_IN_GEAR if gear else 0)) if racing else 0
        best = round(state.best_lap_s * 1000) if state.best_lap_s > 0 else -1
        last = round(state.last_lap_s * 1000) if state.last_lap_s > 0 else -1
        race = _RACE.pack(
            self.packet_id & 0xFFFFFFFF,
            state.lap,
            self.track.laps,
            best,
            last,
            round(43_200_000 + state.t_s * 1000) % 86_400_000,
            -1,
            -1,
            round(c.upshift_rpm) - 500,
            round(c.max_rpm),
            280,
            flags,
            (gear & 0x0F) | 0xF0,
            _u8(state.throttle * 255) if racing else 0,
            _u8(state.brake * 255) if racing else 0,
            0,
        )
        wheel = -v / c.wheel_radius_m  # negative rolling forward, as in real captures
        wheels = _WHEELS.pack(0.0, 1.0, 0.0, y, *([wheel] * 4), *([c.wheel_radius_m] * 4), *([0.1] * 4))
        ratios = (*c.gear_ratios, *([0.0] * (8 - len(c.gear_ratios))))[:8]
        tail = _TAIL.pack(state.clutch, 1.0 - state.clutch, state.rpm if racing else 0.0, 80.0, *ratios, 3311)
        packet = head + race + wheels + _RESERVED + tail
        if self.letter == "A":
            return packet
        steer = state.steer * c.max_steer_rad if racing else 0.0
        packet += _B.pack(
            steer * STEERING_RATIO, 0.0, state.accel_lat_mps2 / G / 3, 0.0, state.accel_long_mps2 / G / 3
        )
        if self.letter == "B":
            return packet
        packet += _TILDE.pack(
            _u8(state.throttle * 255) if racing else 0, _u8(state.brake * 255) if racing else 0, 0, 0,
            0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
        )  # fmt: skip
        if self.letter == "~":
            return packet
        return packet + _C.pack(b"TTTT", round(state.lap_time_s * 1000), steer, steer, 2.5, b"GR3\x00")

    def encode(self, state: CarState, *, first: bool, last: bool) -> list[bytes]:
        return [seal(self.plain(state), self.letter, self.rng.getrandbits(32))]


@dataclass(slots=True)
class ConsoleStats:
    ticks: int = 0
    datagrams: int = 0
    bytes: int = 0
    late_ticks: int = 0
    send_errors: int = 0
    unsent_ticks: int = 0  # ticks while no one asked (no heartbeat within the timeout)
    heartbeats: int = 0
    ignored_heartbeats: int = 0  # letters this console does not know
    streams: list[str] = field(default_factory=list)  # the variant of each stream started


class Gt7Console:
    """Answers heartbeats on ``sock`` (bound to the heartbeat port) with ``encoder``'s packets.

    ``understands``: the heartbeat letters this console knows (an older firmware ignores the
    others). ``timeout_s``: the stream stops after this long without a heartbeat.
    """

    def __init__(
        self,
        encoder: Gt7Encoder,
        sock: socket.socket,
        *,
        understands: Iterable[str] = tuple(GT7_LETTERS),
        timeout_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.encoder = encoder
        self.sock = sock
        self.understands = frozenset(understands)
        unknown = self.understands - set(GT7_LETTERS)
        if unknown or not self.understands:
            raise ValueError(f"gt7 variants must be some of {', '.join(GT7_LETTERS)}")
        self.timeout_s = timeout_s
        self.clock = clock
        self.sleep = sleep
        self.stats = ConsoleStats()
        self.client: tuple[str, int] | None = None
        self._last_heartbeat = -math.inf

    def _heartbeats(self) -> str | None:
        """Read every waiting heartbeat; returns the letter of the last understood one."""
        letter = None
        while True:
            try:
                data, addr = self.sock.recvfrom(64)
            except (BlockingIOError, InterruptedError):
                return letter
            except OSError:
                continue
            self.stats.heartbeats += 1
            text = data.decode("latin-1")
            if len(data) != 1 or text not in self.understands:
                self.stats.ignored_heartbeats += 1
                continue
            letter = text
            self._last_heartbeat = self.clock()
            if self.client is None:
                self.client = (str(addr[0]), int(addr[1]))
                self.encoder.letter = letter  # the first heartbeat of a stream sets its variant
                self.stats.streams.append(letter)
            elif (str(addr[0]), int(addr[1])) != self.client:
                self.stats.ignored_heartbeats += 1  # one receiver at a time

    def wait_first(self, wait_s: float) -> bool:
        """Block until a heartbeat this console understands arrives (False after ``wait_s``)."""
        deadline = self.clock() + wait_s
        while self.client is None:
            self._heartbeats()
            if self.client is not None:
                break
            now = self.clock()
            if now >= deadline:
                return False
            self.sleep(min(0.02, deadline - now))
        return True

    def serve(
        self,
        states: Iterable[CarState],
        *,
        rate_hz: float,
        speed_scale: float = 1.0,
        on_tick: Callable[[CarState], None] | None = None,
    ) -> ConsoleStats:
        """Drive ``states`` in real time (scaled), streaming each tick while someone asks."""
        period = 1.0 / (rate_hz * speed_scale)
        stats = self.stats
        start = self.clock()
        for i, (state, last) in enumerate(with_last(states)):
            deadline = start + i * period
            now = self.clock()
            if deadline > now:
                self.sleep(deadline - now)
            elif now - deadline > period:
                stats.late_ticks += 1
            self._heartbeats()
            if self.client is not None and self.clock() - self._last_heartbeat > self.timeout_s:
                self.client = None  # heartbeats stopped: the console stops streaming
            datagrams = self.encoder.encode(state, first=i == 0, last=last)  # the game runs anyway
            stats.ticks += 1
            if self.client is None:
                stats.unsent_ticks += 1
            else:
                for datagram in datagrams:
                    try:
                        self.sock.sendto(datagram, self.client)
                    except OSError:
                        stats.send_errors += 1
                        continue
                    stats.datagrams += 1
                    stats.bytes += len(datagram)
            if on_tick is not None:
                on_tick(state)
        return stats


def gt7_encoder(track: TrackInfo, options: EncoderOptions) -> Gt7Encoder:
    return Gt7Encoder(track, letter=options.gt7_variant, car=options.car, seed=options.seed)
