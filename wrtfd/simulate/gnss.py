"""A GNSS receiver in a simulated car: the car's true path, a receiver's errors, its messages.

Pure (no clock, no device): :mod:`wrtfd.simulate.gnss_pty` plays it on a pseudo-terminal.

- :class:`Drive` runs the simulated car (:class:`~wrtfd.simulate.car.Simulation`) round a
  track laid on the map (the track file's geodetic anchor) at a fine internal rate and answers
  "where is the car at time t" by interpolating between ticks, so a receiver at any measurement
  rate sees the same car; the car's true lap and sector times come with it.
- :class:`GnssErrors` is the receiver's error: a slowly wandering position offset (first-order
  Gauss-Markov, ``noise_m`` standard deviation per axis, time constant ``tau_s``) plus a little
  white jitter, satellites and accuracy estimates that vary, and, if asked, fix losses
  (dropouts) and spells of a degraded fix (2D, few satellites, a larger error). Seeded.
- :class:`UbxReceiver` is a u-blox receiver's side of the configuration conversation (MON-VER,
  CFG-VALSET on an M10, the legacy CFG messages on an M8, ACK or NAK) and its output (NMEA
  until told otherwise, NAV-PVT once enabled, at the configured rate, within the UART's bytes
  per second). :func:`nmea_epoch` writes the RMC+GGA of a plain NMEA receiver.
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
import random
import struct
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from wrtfd.decoders.ubx import ACK_ACK, ACK_NAK, MON_VER, NAV_PVT, frame_ubx
from wrtfd.simulate.car import Simulation
from wrtfd.tracks.circuit import CircuitLine, line_across
from wrtfd.tracks.geodesy import LocalPlane
from wrtfd.tracks.geometry import LanePath
from wrtfd.tracks.laps import Lap

__all__ = [
    "GENERATIONS",
    "Drive",
    "Fix",
    "GnssErrors",
    "UbxReceiver",
    "epochs",
    "gps_time_of_week_ms",
    "ground_factor",
    "nav_pvt_frame",
    "nmea_epoch",
    "pit_lane_lines",
    "truth_laps",
]

#: GPS time runs ahead of UTC by the leap seconds since 1980 (18 since 2017).
GPS_LEAP_S = 18
_GPS_EPOCH_S = 315964800  # 1980-01-06T00:00:00Z in Unix seconds
_WEEK_MS = 7 * 86400 * 1000


def gps_time_of_week_ms(utc_ns: int) -> int:
    """iTOW of a UTC time: GPS milliseconds into the week."""
    gps_ms = (utc_ns // 1_000_000) - _GPS_EPOCH_S * 1000 + GPS_LEAP_S * 1000
    return gps_ms % _WEEK_MS


@dataclass(frozen=True, slots=True)
class Fix:
    """One navigation epoch as a receiver reports it."""

    utc_ns: int
    fix_type: int  # NAV-PVT fixType: 0 none, 2 2D, 3 3D
    fix_ok: bool
    lat_deg: float
    lon_deg: float
    height_m: float
    alt_msl_m: float
    speed_mps: float
    course_deg: float
    vel_n_mps: float
    vel_e_mps: float
    vel_d_mps: float
    satellites: int
    h_acc_m: float
    v_acc_m: float
    speed_acc_mps: float
    heading_acc_deg: float
    pdop: float


#: Geoid separation used for hMSL (the ellipsoid height minus this).
GEOID_SEP_M = 48.0


#: Long enough for the car to brake to a stop after its last lap (the game simulator's car is
#: out of the car, in the menus, after two seconds whatever its speed; a receiver's is not).
COOLDOWN_S = 15.0


#: The simulated pit lane: beside the track (metres to the right of lane 0, negative: left), from
#: PIT_SPAN_M before the start/finish line to PIT_SPAN_M after it, reached and left over
#: PIT_RAMP_M.
PIT_OFFSET_M = 12.0
PIT_SPAN_M = 160.0
PIT_RAMP_M = 40.0


#: The pit lane's offset is smoothed over this long (a moving average, twice).
PIT_SMOOTH_S = 1.0


def _smoothed(values: np.ndarray, window: int) -> np.ndarray:
    """``values`` through a ``window``-tick moving average, twice (a triangle), the ends held."""
    kernel = np.full(window, 1.0 / window)
    for _ in range(2):
        padded = np.pad(values, (window // 2, window - 1 - window // 2), mode="edge")
        values = np.convolve(padded, kernel, mode="valid")
    return values


def _take_pit_lane(table: np.ndarray, lap_m: float, pit_laps: tuple[int, ...], offset_m: float) -> np.ndarray:
    """Move the car (columns t, x, y, z, speed, hx, hz, progress) into the pit lane at the end
    of each of ``pit_laps``; its velocity becomes that of the moved path (a receiver's Doppler
    velocity is the derivative of its positions). Returns which ticks were moved."""
    t, x, z, prog = table[:, 0], table[:, 1], table[:, 3], table[:, 7]
    hx, hz = table[:, 5].copy(), table[:, 6].copy()
    side = np.zeros(len(t))
    for n in pit_laps:
        d = np.abs(prog - n * lap_m)  # from the line at the end of lap n
        ramp = np.clip((PIT_SPAN_M - d) / PIT_RAMP_M, 0.0, 1.0)
        side = np.maximum(side, ramp * ramp * (3.0 - 2.0 * ramp))  # smoothstep
    if not (side > 0.0).any():
        return side > 0.0
    # the heading turned right: (hz, -hx); smoothed over PIT_SMOOTH_S, as a driven line is: the
    # offset of a path follows its curvature, which jumps where a straight meets an arc (12 m
    # beside a 50 m bend at 28 m/s: a 7 m/s step in one tick, which no car and no receiver shows)
    ticks = max(1, round(PIT_SMOOTH_S / float(t[1] - t[0]))) if len(t) > 1 else 1
    dx, dz = _smoothed(offset_m * side * hz, ticks), _smoothed(offset_m * side * hx, ticks)
    moved = (dx != 0.0) | (dz != 0.0)
    x += dx
    z -= dz
    vx, vz = np.gradient(x, t), np.gradient(z, t)
    v = np.hypot(vx, vz)
    ok = moved & (v > 0.01)
    table[ok, 4] = v[ok]
    table[ok, 5] = vx[ok] / v[ok]
    table[ok, 6] = vz[ok] / v[ok]
    return moved


def _laps_as_driven(
    laps: list[Lap], table: np.ndarray, moved: np.ndarray, path: LanePath, sectors_m: tuple[float, ...]
) -> list[Lap]:
    """``laps`` with each line crossed off the lane (in the pit lane) timed where the moved car
    crosses that line: through the lane's point, across its heading. (The smoothed offset is
    not square to the lane, so it crosses a few ms from where the lane's car does.)"""
    t, x, z, prog = table[:, 0], table[:, 1], table[:, 3], table[:, 7]
    length = path.length_m

    def crossed(t_b: float) -> float:
        i = int(np.searchsorted(t, t_b))
        if not moved[max(i - 1, 0) : i + 1].any():
            return t_b
        s = float(np.interp(t_b, t, prog)) % length  # the line's distance, exact:
        s = min(sectors_m, key=lambda m: min(abs(s - m), length - abs(s - m)))
        px, _, pz = path.point_at(s)
        hx, hz = path.heading_at(s)
        lo, hi = int(np.searchsorted(t, t_b - 2.0)), int(np.searchsorted(t, t_b + 2.0))
        ahead = (x[lo:hi] - px) * hx + (z[lo:hi] - pz) * hz
        k = np.flatnonzero((ahead[:-1] < 0.0) & (ahead[1:] >= 0.0))
        if not len(k):
            return t_b
        j = int(k[np.argmin(np.abs(t[lo + k] - t_b))])
        a0, a1 = float(ahead[j]), float(ahead[j + 1])
        t0, t1 = float(t[lo + j]), float(t[lo + j + 1])
        return t0 + (t1 - t0) * -a0 / (a1 - a0)  # linear between ticks, as Drive.at is

    out = []
    for lap in laps:
        bounds = [lap.start_s + sum(lap.sector_times_s[:k]) for k in range(len(lap.sector_times_s))]
        times = [crossed(b) for b in (*bounds, lap.end_s)]
        sectors = tuple(b - a for a, b in itertools.pairwise(times))
        out.append(Lap(lap.number, times[0], times[-1], sectors, lap.pit))
    return out


def pit_lane_lines(
    path: LanePath,
    plane: LocalPlane,
    *,
    entry_m: float,
    exit_m: float,
    offset_m: float = PIT_OFFSET_M,
    width_m: float = 8.0,
) -> tuple[CircuitLine, CircuitLine]:
    """Pit-entry and pit-exit lines across the simulated pit lane, ``entry_m`` and ``exit_m`` from
    the start/finish line (negative: before it; within ``PIT_SPAN_M - PIT_RAMP_M``), ``width_m``
    wide, so only a car in the pit lane crosses them (for a circuit file's ``pit_entry`` and
    ``pit_exit``)."""
    reach = PIT_SPAN_M - PIT_RAMP_M
    if not (-reach <= entry_m <= reach and -reach <= exit_m <= reach) or width_m >= 2 * abs(offset_m):
        raise ValueError(f"pit lines go within {reach:g} m of the line, narrower than the lane's offset")
    out = []
    for s in (entry_m, exit_m):
        px, _, pz = path.point_at(s % path.length_m)
        hx, hz = path.heading_at(s % path.length_m)
        out.append(line_across(plane, px + offset_m * hz, pz - offset_m * hx, hx, hz, width_m))
    return out[0], out[1]


def ground_factor(path: LanePath, progress_m: float) -> float:
    """Ground distance per path distance at ``progress_m``: a climbing line's length is 3D, an
    arc's is its ground length (the car's speed is along the path; a receiver's velocity is the
    horizontal one, the derivative of its horizontal position)."""
    seg = path.segments[path.segment_index_at(progress_m)]
    if seg.kind != "line":
        return 1.0
    return math.hypot(seg.x1 - seg.x0, seg.z1 - seg.z0) / seg.length_m


class Drive:
    """The car's true path on the globe, sampled at any time (s from the drive's start).

    Before the start the car stands on the grid; after the end it stands where it stopped.
    ``laps`` are the simulator's true laps (start/end times interpolated at the line).
    """

    def __init__(
        self,
        path: LanePath,
        plane: LocalPlane,
        *,
        laps: int,
        seed: int = 0,
        sectors_m: tuple[float, ...] = (0.0,),
        tick_hz: float = 200.0,
        base_alt_m: float = 300.0,
        pit_laps: tuple[int, ...] = (),
        pit_offset_m: float = PIT_OFFSET_M,
    ) -> None:
        sim = Simulation(
            path,
            laps=laps,
            rate_hz=tick_hz,
            seed=seed,
            sectors_m=sectors_m,
            pre_start_s=0.0,
            cooldown_s=COOLDOWN_S,
        )
        rows = [
            (
                s.t_s,
                s.x,
                s.y,
                s.z,
                s.speed_mps * ground_factor(path, s.progress_m),
                s.heading_x,
                s.heading_z,
                s.progress_m,
            )
            for s in sim.states()
        ]
        table = np.array(rows, dtype=np.float64)
        moving = np.flatnonzero(table[:, 4] > 0.0)
        if len(moving):  # after the last lap it brakes to a stop, then stands (no need for rows)
            table = table[: moving[-1] + 2]
        true_laps = sim.laps
        if pit_laps:
            moved = _take_pit_lane(table, path.length_m, pit_laps, pit_offset_m)
            true_laps = _laps_as_driven(true_laps, table, moved, path, sectors_m)
        self.t = table[:, 0]
        self.x, self.y, self.z = table[:, 1], table[:, 2], table[:, 3]
        self.speed = table[:, 4]  # over the ground, as a receiver's ground speed
        self.hx, self.hz = table[:, 5], table[:, 6]
        self.plane = plane
        self.base_alt_m = base_alt_m
        self.laps = true_laps
        self.end_s = float(self.t[-1])
        dt_ = 1.0 / tick_hz
        # vertical speed from the altitude track (the car's own y)
        self.vy = np.gradient(self.y, dt_) if len(self.y) > 1 else np.zeros_like(self.y)
        # the same as plain floats, for :meth:`at` (a receiver asks for one time per fix)
        self._ticks: list[float] = self.t.tolist()
        self._columns = tuple(
            c.tolist() for c in (self.x, self.z, self.y, self.speed, self.hx, self.hz, self.vy)
        )

    def at(self, t_s: float) -> tuple[float, float, float, float, float, float, float]:
        """``(x_east, z_north, altitude, speed, vel_east, vel_north, vel_up)`` at ``t_s``."""
        t = min(max(t_s, 0.0), self.end_s)
        # linear between the two ticks either side, in plain floats (np.interp per value cost a
        # third of a simulated receiver's time), the arithmetic np.interp does
        ticks = self._ticks
        j = bisect_left(ticks, t)
        if j == 0 or ticks[j] == t:
            x, z, y, v, hx, hz, vy = (c[j] for c in self._columns)
        else:
            t0 = ticks[j - 1]
            span = ticks[j] - t0
            x, z, y, v, hx, hz, vy = ((c[j] - c[j - 1]) / span * (t - t0) + c[j - 1] for c in self._columns)
        norm = math.hypot(hx, hz) or 1.0
        vy = vy if 0.0 < t_s < self.end_s else 0.0
        return x, z, y + self.base_alt_m, v, v * hx / norm, v * hz / norm, vy


@dataclass(slots=True)
class GnssErrors:
    """A receiver's errors over time (advance with :meth:`step`, once per epoch, in order).

    ``dropouts_per_min`` / ``degraded_per_min``: how often, on average, the fix is lost for
    1-3 s or degrades for 3-10 s (2D fix, 4-6 satellites, three times the error).
    """

    seed: int = 0
    noise_m: float = 1.0
    tau_s: float = 600.0
    dropouts_per_min: float = 0.0
    degraded_per_min: float = 0.0
    rng: random.Random = field(init=False)
    _ex: float = field(init=False, default=0.0)
    _ez: float = field(init=False, default=0.0)
    _eu: float = field(init=False, default=0.0)
    _t: float | None = field(init=False, default=None)
    _lost_until: float = field(init=False, default=-math.inf)
    _degraded_until: float = field(init=False, default=-math.inf)
    _sats: float = field(init=False, default=14.0)

    def __post_init__(self) -> None:
        if self.noise_m < 0 or self.tau_s <= 0:
            raise ValueError("noise_m must be >= 0 and tau_s > 0")
        self.rng = random.Random(self.seed)
        self._ex = self.rng.gauss(0.0, self.noise_m)
        self._ez = self.rng.gauss(0.0, self.noise_m)
        self._eu = self.rng.gauss(0.0, 1.5 * self.noise_m)

    def step(self, t_s: float) -> tuple[float, float, float, int, int, float]:
        """Errors at ``t_s``: ``(east_m, north_m, up_m, fix_type, satellites, scale)``.

        ``scale`` multiplies the accuracy estimates; fix_type 0 is a lost fix.
        """
        rng = self.rng
        dt_ = 0.0 if self._t is None else max(0.0, t_s - self._t)
        self._t = t_s
        if dt_ > 0:
            a = math.exp(-dt_ / self.tau_s)
            b = math.sqrt(1.0 - a * a)
            self._ex = a * self._ex + b * rng.gauss(0.0, self.noise_m)
            self._ez = a * self._ez + b * rng.gauss(0.0, self.noise_m)
            self._eu = a * self._eu + b * rng.gauss(0.0, 1.5 * self.noise_m)
            self._sats = min(20.0, max(7.0, self._sats + rng.gauss(0.0, 0.3 * math.sqrt(dt_))))
            if t_s > self._lost_until and rng.random() < self.dropouts_per_min * dt_ / 60.0:
                self._lost_until = t_s + rng.uniform(1.0, 3.0)
            if t_s > self._degraded_until and rng.random() < self.degraded_per_min * dt_ / 60.0:
                self._degraded_until = t_s + rng.uniform(3.0, 10.0)
        jitter = 0.05 * self.noise_m
        ex = self._ex + rng.gauss(0.0, jitter)
        ez = self._ez + rng.gauss(0.0, jitter)
        if t_s < self._lost_until:
            return ex, ez, self._eu, 0, rng.randint(0, 3), 10.0
        if t_s < self._degraded_until:
            return 3.0 * ex, 3.0 * ez, 3.0 * self._eu, 2, rng.randint(4, 6), 3.0
        return ex, ez, self._eu, 3, round(self._sats), 1.0

    def fix(self, drive: Drive, t_s: float, utc_ns: int) -> Fix:
        """The receiver's report of where the car is at drive time ``t_s``."""
        x, z, alt, _speed, ve, vn, vu = drive.at(t_s)
        ex, ez, eu, fix_type, sats, scale = self.step(t_s)
        rng = self.rng
        lat, lon = drive.plane.to_latlon(x + ex, z + ez)
        ve += rng.gauss(0.0, 0.03 * scale)
        vn += rng.gauss(0.0, 0.03 * scale)
        vu += rng.gauss(0.0, 0.05 * scale)
        ground = math.hypot(ve, vn)
        course = math.degrees(math.atan2(ve, vn)) % 360.0
        h_acc = max(0.3, self.noise_m) * scale * (1.0 + 0.1 * rng.random())
        return Fix(
            utc_ns=utc_ns,
            fix_type=fix_type,
            fix_ok=fix_type != 0,
            lat_deg=float(lat),
            lon_deg=float(lon),
            height_m=alt + eu + GEOID_SEP_M,
            alt_msl_m=alt + eu,
            speed_mps=ground,
            course_deg=course,
            vel_n_mps=vn,
            vel_e_mps=ve,
            vel_d_mps=-vu,
            satellites=sats,
            h_acc_m=h_acc,
            v_acc_m=1.6 * h_acc,
            speed_acc_mps=0.1 * scale,
            heading_acc_deg=min(180.0, 1.0 / max(ground, 0.1)) * scale,
            pdop=min(99.0, (12.0 / max(sats, 1)) * (1.0 if fix_type == 3 else 2.0)),
        )


def epochs(
    drive: Drive,
    errors: GnssErrors,
    *,
    rate_hz: float,
    utc_start_ns: int,
    before_s: float = 1.0,
    after_s: float = 1.0,
) -> Iterator[Fix]:
    """Every fix of a receiver at ``rate_hz`` from ``before_s`` before the drive to ``after_s``
    after it, the drive starting at UTC ``utc_start_ns``: the pty simulator's stream without a
    pty, for tests that time laps offline (:func:`truth_laps` gives the laps to compare with)."""
    period_ns = round(1e9 / rate_hz)
    k = -int(before_s * rate_hz)
    end_ns = round((drive.end_s + after_s) * 1e9)
    while k * period_ns <= end_ns:
        t_ns = k * period_ns
        yield errors.fix(drive, t_ns / 1e9, utc_start_ns + t_ns)
        k += 1


def truth_laps(drive: Drive, drive_start_utc_ns: int) -> list[dict[str, object]]:
    """The car's true laps: drive seconds, UTC microseconds (interpolated at the line), sectors."""
    out: list[dict[str, object]] = []
    for lap in drive.laps:
        out.append(
            {
                "lap": lap.number,
                "start_s": lap.start_s,
                "end_s": lap.end_s,
                "time_s": lap.time_s,
                "sectors_s": list(lap.sector_times_s),
                "start_utc_us": (drive_start_utc_ns + round(lap.start_s * 1e9)) // 1000,
                "end_utc_us": (drive_start_utc_ns + round(lap.end_s * 1e9)) // 1000,
            }
        )
    return out


_NAV_PVT = struct.Struct("<IHBBBBBBIiBBBBiiiiIIiiiiiIIHH4xiHH")


def nav_pvt_frame(fix: Fix) -> bytes:
    """The 92-byte NAV-PVT a receiver sends for ``fix``, framed (published layout)."""
    t = dt.datetime.fromtimestamp(fix.utc_ns // 1_000_000_000, tz=dt.UTC)
    nano = fix.utc_ns % 1_000_000_000
    if nano >= 500_000_000:  # the receiver rounds to the nearest second, nano in -5e8..5e8
        t += dt.timedelta(seconds=1)
        nano -= 1_000_000_000
    flags = 0x01 if fix.fix_ok else 0x00
    payload = _NAV_PVT.pack(
        gps_time_of_week_ms(fix.utc_ns),
        t.year,
        t.month,
        t.day,
        t.hour,
        t.minute,
        t.second,
        0x07,  # validDate, validTime, fullyResolved
        20,  # tAcc ns
        nano,
        fix.fix_type,
        flags,
        0xE0,  # flags2: confirmedAvai, confirmedDate, confirmedTime
        fix.satellites,
        round(fix.lon_deg * 1e7),
        round(fix.lat_deg * 1e7),
        round(fix.height_m * 1e3),
        round(fix.alt_msl_m * 1e3),
        round(fix.h_acc_m * 1e3),
        round(fix.v_acc_m * 1e3),
        round(fix.vel_n_mps * 1e3),
        round(fix.vel_e_mps * 1e3),
        round(fix.vel_d_mps * 1e3),
        round(fix.speed_mps * 1e3),
        round(fix.course_deg * 1e5) % 36_000_000,
        round(fix.speed_acc_mps * 1e3),
        round(fix.heading_acc_deg * 1e5),
        round(fix.pdop * 100),
        0,  # flags3
        0,  # headVeh
        0,  # magDec
        0,  # magAcc
    )
    return frame_ubx(*NAV_PVT, payload)


def _nmea(body: str) -> bytes:
    check = 0
    for byte in body.encode("ascii"):
        check ^= byte
    return b"$%s*%02X\r\n" % (body.encode("ascii"), check)


def _dm(value: float, width: int) -> tuple[str, float]:
    deg = int(abs(value))
    minutes = (abs(value) - deg) * 60.0
    return f"{deg:0{width}d}{minutes:09.6f}", value


def nmea_epoch(fix: Fix, *, talker: str = "GN") -> bytes:
    """RMC and GGA of one epoch (hundredths of a second, 6 decimals of a minute)."""
    t = dt.datetime.fromtimestamp(fix.utc_ns / 1e9, tz=dt.UTC)
    clock = f"{t:%H%M%S}.{t.microsecond // 10_000:02d}"
    date = f"{t:%d%m%y}"
    if not fix.fix_ok:
        return _nmea(f"{talker}RMC,{clock},V,,,,,,,{date},,,N") + _nmea(
            f"{talker}GGA,{clock},,,,,0,00,99.99,,,,,,"
        )
    lat, _ = _dm(fix.lat_deg, 2)
    lon, _ = _dm(fix.lon_deg, 3)
    ns = "N" if fix.lat_deg >= 0 else "S"
    ew = "E" if fix.lon_deg >= 0 else "W"
    knots = fix.speed_mps / (1852.0 / 3600.0)
    hdop = max(0.5, fix.pdop * 0.6)
    rmc = f"{talker}RMC,{clock},A,{lat},{ns},{lon},{ew},{knots:.3f},{fix.course_deg:.2f},{date},,,A"
    gga = (
        f"{talker}GGA,{clock},{lat},{ns},{lon},{ew},1,{fix.satellites:02d},{hdop:.2f},"
        f"{fix.alt_msl_m:.2f},M,{GEOID_SEP_M:.2f},M,,"
    )
    return _nmea(rmc) + _nmea(gga)


#: What each simulated generation says in MON-VER, and its fastest measurement rate.
GENERATIONS: dict[str, dict[str, object]] = {
    "m8": {
        "software": "ROM CORE 3.01 (107888)",
        "hardware": "00080000",
        "extensions": ("FWVER=SPG 3.01", "PROTVER=18.00", "GPS;GLO;GAL;BDS", "SBAS;IMES;QZSS"),
        "min_meas_ms": 100,  # 10 Hz with concurrent GNSS
        "valset": False,
    },
    "m10": {
        "software": "ROM SPG 5.10 (7b202e)",
        "hardware": "000A0000",
        "extensions": (
            "ROM BASE 0x118B2060",
            "FWVER=SPG 5.10",
            "PROTVER=34.10",
            "MOD=MAX-M10S",
            "GPS;GAL;BDS;GLO",
            "SBAS;QZSS",
        ),
        "min_meas_ms": 40,  # 25 Hz
        "valset": True,
    },
}

_CFG = 0x06
_LEGACY = {0x00: "CFG-PRT", 0x01: "CFG-MSG", 0x08: "CFG-RATE", 0x24: "CFG-NAV5"}
_VALSET = 0x8A
#: Size in bytes of a configuration value by the key's size bits (28..30).
_KEY_SIZE = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8}


def _valset_keys() -> dict[int, str]:
    from pyubx2 import UBX_CONFIG_DATABASE

    return {keyid: name for name, (keyid, _kind) in UBX_CONFIG_DATABASE.items()}


@dataclass(slots=True)
class UbxReceiver:
    """One simulated u-blox receiver on UART1 (``generation`` "m8" or "m10").

    ``refuse``: message names (``CFG-NAV5``) or configuration keys (``CFG_NAVSPG_DYNMODEL``)
    answered with a NAK, to show how the recorder takes a refusal. An M8 NAKs CFG-VALSET; an
    M10 NAKs the legacy CFG-RATE, CFG-MSG, CFG-NAV5 and CFG-PRT, and keys of ports it has not
    (USB, UART2); both NAK a rate faster than they can measure.
    """

    generation: str = "m10"
    baud: int = 9600
    refuse: frozenset[str] = frozenset()
    meas_ms: int = 1000
    nav_pvt: bool = False
    nmea: bool = True
    dyn_model: int = 0
    #: Set by a baud change: the rate the UART switches to once the ACK is out.
    pending_baud: int | None = None
    log: list[tuple[str, str]] = field(default_factory=list)  # (what, "ack" | "nak")
    _keys: dict[int, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.generation not in GENERATIONS:
            raise ValueError(f"generation must be one of {sorted(GENERATIONS)}, got {self.generation!r}")

    @property
    def spec(self) -> dict[str, object]:
        return GENERATIONS[self.generation]

    def mon_ver(self) -> bytes:
        spec = self.spec
        payload = str(spec["software"]).encode().ljust(30, b"\0") + str(spec["hardware"]).encode().ljust(
            10, b"\0"
        )
        for ext in spec["extensions"]:  # type: ignore[attr-defined]
            payload += str(ext).encode().ljust(30, b"\0")
        return frame_ubx(*MON_VER, payload)

    def _answer(self, msg_class: int, msg_id: int, what: str, ok: bool) -> bytes:
        self.log.append((what, "ack" if ok else "nak"))
        return frame_ubx(*(ACK_ACK if ok else ACK_NAK), bytes((msg_class, msg_id)))

    def handle(self, frame: bytes) -> bytes:
        """The receiver's answer to one whole frame from the host (b"" for none)."""
        msg_class, msg_id = frame[2], frame[3]
        payload = frame[6:-2]
        if (msg_class, msg_id) == MON_VER and not payload:
            return self.mon_ver()
        if msg_class != _CFG:
            return b""
        if msg_id == _VALSET:
            return self._valset(payload)
        name = _LEGACY.get(msg_id)
        if name is None or self.spec["valset"] or name in self.refuse:
            return self._answer(msg_class, msg_id, name or f"CFG 0x{msg_id:02X}", False)
        ok = self._legacy(name, payload)
        return self._answer(msg_class, msg_id, name, ok)

    def _legacy(self, name: str, payload: bytes) -> bool:
        if name == "CFG-RATE":
            if len(payload) != 6:
                return False
            meas, nav, _ref = struct.unpack("<HHH", payload)
            if meas < int(str(self.spec["min_meas_ms"])) or nav != 1:
                return False
            self.meas_ms = meas
            return True
        if name == "CFG-MSG":
            if len(payload) == 3:
                rate = payload[2]
            elif len(payload) == 8:
                rate = payload[3]  # UART1
            else:
                return False
            if (payload[0], payload[1]) == NAV_PVT:
                self.nav_pvt = rate > 0
            return True
        if name == "CFG-NAV5":
            if len(payload) != 36:
                return False
            mask, dyn = struct.unpack_from("<HB", payload)
            if mask & 0x01:
                self.dyn_model = dyn
            return True
        # CFG-PRT
        if len(payload) != 20 or payload[0] != 1:
            return len(payload) == 20  # other ports: taken, nothing to do here
        baud, _in_mask, out_mask = struct.unpack_from("<IHH", payload, 8)
        self.nmea = bool(out_mask & 0x02)
        if baud != self.baud:
            self.pending_baud = baud
        return True

    def _valset(self, payload: bytes) -> bytes:
        what = "CFG-VALSET"
        if not self.spec["valset"] or "CFG-VALSET" in self.refuse or len(payload) < 4:
            return self._answer(_CFG, _VALSET, what, False)
        if not self._keys:
            self._keys = _valset_keys()
        pos = 4
        changes: list[tuple[str, int]] = []
        while pos < len(payload):
            if pos + 4 > len(payload):
                return self._answer(_CFG, _VALSET, what, False)
            (keyid,) = struct.unpack_from("<I", payload, pos)
            size = _KEY_SIZE.get((keyid >> 28) & 0x7)
            name = self._keys.get(keyid)
            if size is None or name is None or pos + 4 + size > len(payload):
                return self._answer(_CFG, _VALSET, what, False)
            value = int.from_bytes(payload[pos + 4 : pos + 4 + size], "little")
            pos += 4 + size
            changes.append((name, value))
        what = "CFG-VALSET " + ",".join(name for name, _ in changes)
        for name, value in changes:
            if name in self.refuse or "_USB" in name or "UART2" in name:
                return self._answer(_CFG, _VALSET, what, False)
            if name == "CFG_RATE_MEAS" and value < int(str(self.spec["min_meas_ms"])):
                return self._answer(_CFG, _VALSET, what, False)
        for name, value in changes:  # all or nothing, as the receiver does
            if name == "CFG_RATE_MEAS":
                self.meas_ms = value
            elif name == "CFG_MSGOUT_UBX_NAV_PVT_UART1":
                self.nav_pvt = value > 0
            elif name == "CFG_NAVSPG_DYNMODEL":
                self.dyn_model = value
            elif name == "CFG_UART1OUTPROT_NMEA":
                self.nmea = bool(value)
            elif name == "CFG_UART1_BAUDRATE" and value != self.baud:
                self.pending_baud = value
        return self._answer(_CFG, _VALSET, what, True)

    def epoch(self, fix: Fix) -> bytes:
        """What the receiver sends for one navigation epoch."""
        out = b""
        if self.nmea:
            out += nmea_epoch(fix)
        if self.nav_pvt:
            out += nav_pvt_frame(fix)
        return out
