"""A simulated ACC broadcasting server: the game's side of the protocol, for a simulated session.

Protocol facts: ``shared/spec/protocols/wave2-games.md`` (section 2, Kunos SDK protocol 4); the
messages are built here with this module's own code (not wrtfd's decoder), so the two cross-check
each other. :class:`AccBroadcastServer` is pure (no socket, no clock): :meth:`~AccBroadcastServer.handle`
answers a client's datagram (registration with the password check, entry list and track data
requests, unregistration) and :meth:`~AccBroadcastServer.tick` gives the messages of one simulated
tick for every registered client: a REALTIME_UPDATE and one REALTIME_CAR_UPDATE per car each
update interval the client asked for, and BROADCASTING_EVENTs as they happen (green flag, lap
completed, best personal lap, best session lap, session over). :func:`serve` runs it on a UDP
socket; :class:`AccEncoder` plays it for one implied client (``wrtfd simulate --record``).

Cars: the simulated car (car index 7, race number 88, focused) and ``ai_cars`` AI cars that drive
the same line some seconds behind it, each losing a little more time every lap (so lap times and
positions differ). World X/Y are the track's ground coordinates x and z. A wrong connection
password gets REGISTRATION_RESULT with success 0, connection id -1 and an error text.
"""

from __future__ import annotations

import math
import select
import socket
import struct
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from wrtfd.errors import WrtfdError
from wrtfd.simulate.car import CarSpec, CarState
from wrtfd.simulate.encoding import EncoderOptions
from wrtfd.simulate.sender import SendStats, with_last

__all__ = ["AccBroadcastServer", "AccEncoder", "acc_encoder", "serve"]

PROTOCOL_VERSION = 4
NO_TIME = 0x7FFFFFFF
PLAYER_INDEX = 7
SESSION_RACE = 10
PHASE_PRE_SESSION, PHASE_SESSION, PHASE_SESSION_OVER = 4, 5, 6
EV_GREEN_FLAG, EV_SESSION_OVER, EV_LAP_COMPLETED, EV_BEST_SESSION_LAP, EV_BEST_PERSONAL_LAP = 1, 2, 5, 6, 7
WRONG_PASSWORD = "Wrong connection password"
#: AI cars: (car index, race number, car model, seconds behind at the green flag, fraction of the
#: simulated car's pace they lose). Each drives the simulated car's own line, that far behind.
AI_CARS = ((12, 12, 30, 1.5, 0.006), (3, 3, 25, 3.0, 0.013), (25, 25, 31, 4.5, 0.02), (40, 40, 32, 6.0, 0.03))
#: An AI car stops falling further behind after this many seconds (bounds the history kept).
MAX_LOSS_S = 60.0
_I32 = struct.Struct("<i")


def _str(text: str) -> bytes:
    raw = text.encode("utf-8")
    return struct.pack("<H", len(raw)) + raw


def _lap(ms: int, car: int, splits: list[int], *, invalid: bool = False, outlap: bool = False) -> bytes:
    """Lap: time i32, car u16, driver u16, split count u8 + splits i32, 4 flags u8."""
    body = struct.pack("<iHHB", ms, car, 0, len(splits)) + b"".join(_I32.pack(s) for s in splits)
    return body + struct.pack("<BBBB", invalid, not invalid, outlap, 0)


@dataclass
class _Car:
    index: int
    number: int
    model: int
    delay_s: float
    loss: float
    state: CarState | None = None
    laps_done: int = 0
    lap_start_t: float = 0.0
    splits: list[float] = field(default_factory=list)  # of the current lap, from its start
    last_ms: int = NO_TIME
    last_splits: list[int] = field(default_factory=list)
    best_ms: int = NO_TIME
    best_splits: list[int] = field(default_factory=list)
    lap_seen: int = 0
    sectors_seen: int = 0

    @property
    def progress_m(self) -> float:
        return -1e9 if self.state is None else self.state.progress_m


@dataclass
class _Client:
    connection_id: int
    interval_s: float
    writable: bool
    next_update_t: float = -1.0
    registered_t: float = 0.0
    #: A track data request waits for its answer (``track_data_delay_s``).
    track_asked: bool = False


class AccBroadcastServer:
    """The game's broadcasting side for one simulated session (see the module docstring)."""

    def __init__(
        self,
        track: Any,
        *,
        password: str = "",
        command_password: str = "",
        ai_cars: int = 3,
        rate_hz: float = 60.0,
        car: CarSpec | None = None,
        first_connection_id: int = 1,
        track_data_delay_s: float = 0.0,
        invalid_laps: frozenset[int] = frozenset(),
    ) -> None:
        if not 0 <= ai_cars <= len(AI_CARS):
            raise ValueError(f"ai_cars must be 0..{len(AI_CARS)}")
        self.track = track
        #: Laps of the simulated car the game marks invalid, from half-way round (its current
        #: lap's ``invalid`` byte; the last lap's once it is done).
        self.invalid_laps = invalid_laps
        #: Track data is answered no sooner than this long (simulated time) after a client
        #: registered: a game slow to answer, as a busy one may be.
        self.track_data_delay_s = track_data_delay_s
        self.password = password
        self.command_password = command_password
        self.rate_hz = rate_hz
        self.car = car or CarSpec()
        self.cars = [_Car(PLAYER_INDEX, 88, 31, 0.0, 0.0)] + [_Car(*spec) for spec in AI_CARS[:ai_cars]]
        history = max((c.delay_s for c in self.cars), default=0.0) + MAX_LOSS_S
        self._history: deque[CarState] = deque(maxlen=round(history * rate_hz) + 2)
        self.clients: dict[Any, _Client] = {}
        self._next_id = first_connection_id  # a restarted game numbers its connections anew
        self.bad_requests = 0
        self.refused = 0
        self.events: list[tuple[int, int, int]] = []  # (type, car index, time ms): every event sent
        self.session_best: tuple[int, int, list[int]] = (NO_TIME, 0, [])  # ms, car, splits
        self._racing = False
        self._over = False
        self._t = 0.0
        self._green_t = 0.0

    # --- requests -------------------------------------------------------------------------------

    def handle(self, data: bytes, client: Any) -> list[bytes]:
        """The answers to one datagram a client sent (nothing for what it cannot parse)."""
        try:
            return self._handle(data, client)
        except (struct.error, IndexError, UnicodeDecodeError, ValueError):
            self.bad_requests += 1
            return []

    def _read_str(self, data: bytes, pos: int) -> tuple[str, int]:
        (n,) = struct.unpack_from("<H", data, pos)
        end = pos + 2 + n
        if end > len(data):
            raise ValueError("string past the end")
        return data[pos + 2 : end].decode("utf-8"), end

    def _handle(self, data: bytes, client: Any) -> list[bytes]:
        kind = data[0]
        if kind == 1:  # REGISTER_COMMAND_APPLICATION
            version = data[1]
            _name, pos = self._read_str(data, 2)
            password, pos = self._read_str(data, pos)
            (interval_ms,) = _I32.unpack_from(data, pos)
            command, pos = self._read_str(data, pos + 4)
            if pos != len(data):
                raise ValueError("trailing bytes")
            if version != PROTOCOL_VERSION:
                self.refused += 1
                return [self._registration(-1, False, False, f"Protocol version {version} not supported")]
            if password != self.password:
                self.refused += 1
                return [self._registration(-1, False, False, WRONG_PASSWORD)]
            conn = self._next_id
            self._next_id += 1
            writable = not self.command_password or command == self.command_password
            self.clients[client] = _Client(
                conn, max(0.01, interval_ms / 1000.0), writable, registered_t=self._t
            )
            return [self._registration(conn, True, writable, "")]
        if len(data) != 5:
            raise ValueError("a request is type + connection id")
        (conn,) = _I32.unpack_from(data, 1)
        known = self.clients.get(client)
        if known is None or known.connection_id != conn:
            self.bad_requests += 1
            return []
        if kind == 9:  # UNREGISTER_COMMAND_APPLICATION
            del self.clients[client]
            return []
        if kind == 10:  # REQUEST_ENTRY_LIST
            return [self.entry_list(conn), *[self.entry_list_car(c) for c in self.cars]]
        if kind == 11:  # REQUEST_TRACK_DATA
            if self._t < known.registered_t + self.track_data_delay_s:
                known.track_asked = True  # answered by tick() when the delay has passed
                return []
            return [self.track_data(conn)]
        self.bad_requests += 1
        return []

    @staticmethod
    def _registration(conn: int, success: bool, writable: bool, error: str) -> bytes:
        # isReadonly byte: 0 means read-only (the SDK reads `isReadonly = byte == 0`)
        return struct.pack("<BiBB", 1, conn, success, 1 if writable else 0) + _str(error)

    # --- messages -------------------------------------------------------------------------------

    def entry_list(self, conn: int) -> bytes:
        return struct.pack("<BiH", 4, conn, len(self.cars)) + b"".join(
            struct.pack("<H", c.index) for c in self.cars
        )

    def entry_list_car(self, c: _Car) -> bytes:
        first, last = ("Sim", "Driver") if c.index == PLAYER_INDEX else ("AI", f"Driver {c.number}")
        driver = _str(first) + _str(last) + _str(last[:3].upper()) + struct.pack("<BH", 1, 0)
        return (
            struct.pack("<BHB", 6, c.index, c.model)
            + _str(f"Team {c.number}")
            + struct.pack("<iBBHB", c.number, 0, 0, 0, 1)
            + driver
        )

    def track_data(self, conn: int) -> bytes:
        cameras = _str("set1") + bytes((2,)) + _str("cam1") + _str("cam2") + _str("Drivable") + bytes((1,))
        cameras += _str("Chase")
        return (
            struct.pack("<Bi", 5, conn)
            + _str(self.track.name)
            + struct.pack("<ii", 7, round(self.track.length_m))
            + bytes((2,))
            + cameras
            + bytes((2,))
            + _str("Basic HUD")
            + _str("Broadcasting")
        )

    def realtime_update(self) -> bytes:
        phase = PHASE_SESSION_OVER if self._over else PHASE_SESSION if self._racing else PHASE_PRE_SESSION
        best_ms, best_car, best_splits = self.session_best
        return (
            struct.pack(
                "<BHHBBffi", 2, 0, 0, SESSION_RACE, phase, self._t * 1000.0, 3_600_000.0, PLAYER_INDEX
            )
            + _str("Drivable")
            + _str("Chase")
            + _str("Basic HUD")
            + bytes((0,))  # no replay
            + struct.pack("<fbbBBB", 14 * 3_600_000.0, 22, 29, 1, 0, 0)
            + _lap(best_ms, best_car, best_splits)
        )

    def car_update(self, c: _Car, position: int) -> bytes:
        s = c.state
        length = float(self.track.length_m)
        if s is None:
            return b""
        spline = (s.progress_m % length) / length if length > 0 else 0.0
        cur_ms = round((self._t - c.lap_start_t) * 1000) if s.racing else 0
        delta = cur_ms - round(c.best_ms * spline) if c.best_ms != NO_TIME else 0
        cur_splits = [round(x * 1000) for x in c.splits]
        mine = c.index == PLAYER_INDEX
        invalid_now = (
            mine and length > 0 and s.lap in self.invalid_laps and s.progress_m % length >= length / 2
        )
        return (
            struct.pack(
                "<BHHBBfffBHHHHfHi",
                3,
                c.index,
                0,
                1,
                (s.gear if s.racing else 0) + 2,
                s.x,
                s.z,
                math.atan2(s.heading_x, s.heading_z),
                1,
                max(0, min(65535, round(s.speed_mps * 3.6))),
                position,
                position,
                position,
                spline,
                c.laps_done,
                delta,
            )
            + _lap(c.best_ms, c.index, c.best_splits)
            + _lap(c.last_ms, c.index, c.last_splits, invalid=mine and c.laps_done in self.invalid_laps)
            + _lap(cur_ms, c.index, cur_splits, invalid=invalid_now, outlap=s.lap == 0)
        )

    def event(self, kind: int, car: int, time_ms: int, message: str) -> bytes:
        self.events.append((kind, car, time_ms))
        return struct.pack("<BB", 7, kind) + _str(message) + struct.pack("<ii", time_ms, car)

    # --- the session ----------------------------------------------------------------------------

    def _advance_cars(self, state: CarState) -> list[bytes]:
        """Move every car to this tick; the events it caused."""
        out: list[bytes] = []
        self._history.append(state)
        racing_s = self._t - self._green_t if self._racing else 0.0
        for c in self.cars:
            # an AI car is the simulated car some time ago: its pace is (1 - loss) of it
            behind = c.delay_s + min(MAX_LOSS_S, c.loss * racing_s)
            back = min(len(self._history) - 1, round(behind * self.rate_hz))
            c.state = self._history[-1 - back]
            s = c.state
            scale = 1.0 / (1.0 - c.loss)  # the simulated car's times, at this car's pace
            if s.lap > c.lap_seen:  # crossed the line since the last tick
                crossed_t = self._t - s.lap_time_s * scale
                if c.lap_seen >= 1:
                    ms = round((crossed_t - c.lap_start_t) * 1000)
                    c.last_ms = ms
                    c.last_splits = [round(x * 1000) for x in c.splits]
                    c.laps_done += 1
                    out.append(self.event(EV_LAP_COMPLETED, c.index, ms, f"lap {c.laps_done} completed"))
                    if c.best_ms == NO_TIME or ms < c.best_ms:
                        c.best_ms, c.best_splits = ms, c.last_splits
                        out.append(self.event(EV_BEST_PERSONAL_LAP, c.index, ms, "personal best"))
                        if ms < self.session_best[0]:
                            self.session_best = (ms, c.index, c.last_splits)
                            out.append(self.event(EV_BEST_SESSION_LAP, c.index, ms, "session best"))
                c.lap_seen = s.lap
                c.lap_start_t = crossed_t
                c.splits = []
                c.sectors_seen = 0
            elif s.lap == c.lap_seen >= 1 and len(s.sector_times_s) > c.sectors_seen:
                c.sectors_seen = len(s.sector_times_s)
                c.splits.append(sum(s.sector_times_s) * scale)
        return out

    def tick(self, state: CarState, *, last: bool = False) -> list[tuple[bytes, Any]]:
        """Every message of this tick, with the client it goes to."""
        self._t = state.t_s
        events: list[bytes] = []
        if state.racing and not self._racing:
            self._racing = True
            self._green_t = state.t_s
            events.append(self.event(EV_GREEN_FLAG, PLAYER_INDEX, 0, "green flag"))
        events += self._advance_cars(state)
        if last and not self._over:
            self._over = True
            events.append(self.event(EV_SESSION_OVER, PLAYER_INDEX, round(self._t * 1000), "session over"))
        out: list[tuple[bytes, Any]] = [(e, addr) for addr in self.clients for e in events]
        for addr, cl in self.clients.items():
            if cl.track_asked and self._t >= cl.registered_t + self.track_data_delay_s:
                cl.track_asked = False
                out.append((self.track_data(cl.connection_id), addr))
        due = [(a, cl) for a, cl in self.clients.items() if self._t >= cl.next_update_t - 1e-9 or last]
        if due:
            order = sorted(self.cars, key=lambda c: -c.progress_m)
            positions = {c.index: i + 1 for i, c in enumerate(order)}
            updates = [self.realtime_update()] + [self.car_update(c, positions[c.index]) for c in self.cars]
            for addr, cl in due:
                # on the client's own grid (a 100 ms interval is not a whole number of 60 Hz ticks)
                cl.next_update_t += cl.interval_s
                if cl.next_update_t <= self._t:
                    cl.next_update_t = self._t + cl.interval_s
                out += [(m, addr) for m in updates if m]
        return out


class AccEncoder:
    """The server for one implied client registered before the first tick (``--record``):
    registration result, entry list and track data first, then every tick's messages."""

    name = "acc"
    default_port = 9000
    rate_hz = 60.0
    _CLIENT = ("record", 0)

    def __init__(
        self,
        track: Any,
        *,
        car: CarSpec | None = None,
        update_interval_ms: int = 100,
        invalid_laps: frozenset[int] = frozenset(),
    ) -> None:
        self.server = AccBroadcastServer(track, password="", car=car, invalid_laps=invalid_laps)
        self.update_interval_ms = update_interval_ms

    def encode(self, state: CarState, *, first: bool, last: bool) -> list[bytes]:
        out: list[bytes] = []
        if first:
            register = (
                bytes((1, PROTOCOL_VERSION))
                + _str("wrtfd")
                + _str("")
                + _I32.pack(self.update_interval_ms)
                + _str("")
            )
            out += self.server.handle(register, self._CLIENT)
            conn = self.server.clients[self._CLIENT].connection_id
            out += self.server.handle(bytes((11,)) + _I32.pack(conn), self._CLIENT)
            out += self.server.handle(bytes((10,)) + _I32.pack(conn), self._CLIENT)
        return out + [m for m, _addr in self.server.tick(state, last=last)]


def serve(
    states: Iterable[CarState],
    server: AccBroadcastServer,
    sock: socket.socket,
    *,
    rate_hz: float,
    speed_scale: float = 1.0,
    wait_s: float = 30.0,
    linger_s: float = 0.5,
    clock: Callable[[], float] = time.monotonic,
    on_wait: Callable[[], None] | None = None,
    on_tick: Callable[[CarState], None] | None = None,
) -> SendStats:
    """Wait (up to ``wait_s``) for a client to register, then run the session on ``sock``,
    answering requests between ticks; linger ``linger_s`` after the last tick for late requests.

    :raises WrtfdError: no client registered in time.
    """
    if speed_scale <= 0:
        raise ValueError("speed_scale must be positive")
    stats = SendStats()

    def pump(until: float) -> None:
        while True:
            timeout = until - clock()
            readable, _w, _x = select.select([sock], [], [], max(0.0, timeout))
            if readable:
                try:
                    data, addr = sock.recvfrom(4096)
                except OSError:
                    stats.send_errors += 1
                    continue
                for reply in server.handle(data, addr):
                    send(reply, addr)
            elif timeout <= 0:
                return

    def send(data: bytes, addr: Any) -> None:
        try:
            sock.sendto(data, addr)
        except OSError:
            stats.send_errors += 1
            return
        stats.datagrams += 1
        stats.bytes += len(data)

    if on_wait is not None:
        on_wait()
    deadline = clock() + wait_s
    while not server.clients:
        if clock() >= deadline:
            raise WrtfdError(f"no broadcasting client registered within {wait_s:g} s")
        pump(min(deadline, clock() + 0.1))
    period = 1.0 / (rate_hz * speed_scale)
    start = clock()
    for i, (state, last) in enumerate(with_last(states)):
        due = start + i * period
        if clock() - due > period:
            stats.late_ticks += 1
        pump(due)
        for data, addr in server.tick(state, last=last):
            send(data, addr)
        stats.ticks += 1
        if on_tick is not None:
            on_tick(state)
    pump(clock() + linger_s)
    return stats


def acc_encoder(track: Any, options: EncoderOptions) -> AccEncoder:
    return AccEncoder(track, car=options.car, invalid_laps=options.invalid_laps)
