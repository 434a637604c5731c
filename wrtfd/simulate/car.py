"""A simple, deterministic car driven round one lane of a track (pure: no clock, no I/O).

The driver follows the lane exactly. Speed is limited by lateral grip on arcs
(``v = sqrt(a_lat / curvature)``), a backward pass over the lap turns those limits into braking
points before each arc, and on straights the car accelerates as hard as grip, power and drag
allow (slopes included). The gearbox shifts up near the red line and down when revs fall, so
gear, rpm and speed stay consistent: ``rpm = v / (2 pi r) * 60 * ratio * final_drive``.

Time advances in fixed ticks of ``1 / rate_hz`` sim seconds. The car starts from standstill a
little behind the start line; lap *k* starts at the k-th forward crossing, and the crossing
times are interpolated inside the tick, which is what the simulator reports as its lap times.
A seeded random generator varies the grip by up to 1 % per lap, so laps differ the way real ones do.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np

from wrtfd.tracks.geometry import LanePath
from wrtfd.tracks.laps import Lap

__all__ = ["CarSpec", "CarState", "SimulatedLap", "Simulation"]

G = 9.81


@dataclass(frozen=True, slots=True)
class CarSpec:
    """A generic 300 kW rear-drive sports car."""

    mass_kg: float = 1300.0
    power_w: float = 300_000.0
    max_lat_accel_mps2: float = 1.3 * G
    max_long_accel_mps2: float = 0.9 * G  # traction limit when accelerating
    max_brake_mps2: float = 1.1 * G
    drag_per_m: float = 0.00045  # aerodynamic + rolling, a = k v^2
    wheel_radius_m: float = 0.33
    gear_ratios: tuple[float, ...] = (3.3, 2.3, 1.75, 1.4, 1.15, 0.95)
    final_drive: float = 3.7
    idle_rpm: float = 900.0
    max_rpm: float = 7800.0
    upshift_rpm: float = 7300.0
    downshift_rpm: float = 3800.0
    wheelbase_m: float = 2.6
    max_steer_rad: float = 0.6


#: The simulator's own laps are the same record the lap detector produces, so the two compare
#: field by field (the detector is checked against them).
SimulatedLap = Lap


@dataclass(frozen=True, slots=True)
class CarState:
    """Everything the packet encoders need at one tick (track coordinates: y is altitude)."""

    t_s: float
    racing: bool  # False before the start and after the cool-down (menus)
    lap: int  # 0 on the out-lap, 1.. after each crossing
    lap_distance_m: float  # may be negative before the first crossing (F1 style) - see `progress_m`
    progress_m: float  # unwrapped distance from the start line (negative before it)
    total_distance_m: float
    x: float
    y: float
    z: float
    heading_x: float  # unit travel direction on the ground
    heading_z: float
    speed_mps: float
    accel_long_mps2: float
    accel_lat_mps2: float  # positive = towards the right
    yaw_rate_rps: float  # positive = turning right
    pitch_rad: float
    throttle: float
    brake: float
    clutch: float
    gear: int  # 1.. forward (0 never used: the car does not reverse)
    rpm: float
    steer: float  # -1 full left .. +1 full right
    sector: int
    lap_time_s: float  # time on the current lap (since the start on lap 0)
    last_lap_s: float
    best_lap_s: float
    sector_times_s: tuple[float, ...] = field(default_factory=tuple)  # of the current lap so far


class Simulation:
    """Iterate :meth:`states` for one session of ``laps`` timed laps.

    ``sectors_m``: timing-sector start distances (first 0), e.g. from the track file.
    """

    def __init__(
        self,
        path: LanePath,
        *,
        laps: int = 3,
        rate_hz: float = 60.0,
        seed: int = 0,
        car: CarSpec | None = None,
        sectors_m: tuple[float, ...] = (0.0,),
        start_behind_m: float | None = None,
        pre_start_s: float = 1.0,
        cooldown_s: float = 2.0,
        post_end_s: float = 1.0,
    ) -> None:
        if laps < 1:
            raise ValueError("laps must be at least 1")
        if rate_hz <= 0:
            raise ValueError("rate_hz must be positive")
        self.path = path
        self.laps_wanted = laps
        self.rate_hz = rate_hz
        self.dt_s = 1.0 / rate_hz
        self.car = car or CarSpec()
        self.rng = random.Random(seed)
        self.sectors_m = sectors_m
        self.start_behind_m = start_behind_m if start_behind_m is not None else min(40.0, 0.1 * path.length_m)
        self.pre_start_s = pre_start_s
        self.cooldown_s = cooldown_s
        self.post_end_s = post_end_s
        self.laps: list[SimulatedLap] = []
        self._ds = 0.5
        self._profile = self._speed_profile(1.0)

    # --- speed limits ---------------------------------------------------------------------------

    def _speed_profile(self, grip: float) -> np.ndarray:
        """Highest speed at each lap-distance sample that still makes every arc ahead."""
        n = max(4, math.ceil(self.path.length_m / self._ds))
        ds = self.path.length_m / n
        top = (self.car.power_w / (self.car.mass_kg * self.car.drag_per_m)) ** (1 / 3)
        vmax = np.full(n, top)
        for i in range(n):
            k = abs(self.path.curvature_at(i * ds))
            if k > 0:
                vmax[i] = min(top, math.sqrt(self.car.max_lat_accel_mps2 * grip / k))
        brake = self.car.max_brake_mps2 * grip
        # backward pass round the loop (twice so the wrap-around is settled)
        for _ in range(2):
            for i in range(n - 1, -1, -1):
                nxt = vmax[(i + 1) % n]
                vmax[i] = min(vmax[i], math.sqrt(nxt * nxt + 2 * brake * ds))
        return vmax

    def _limit(self, profile: np.ndarray, s: float) -> float:
        n = len(profile)
        x = (s % self.path.length_m) / self.path.length_m * n
        i = int(x) % n
        f = x - int(x)
        return float(profile[i] * (1 - f) + profile[(i + 1) % n] * f)

    def _grade(self, s: float) -> float:
        seg = self.path.segments[self.path.segment_index_at(s)]
        return (seg.y1 - seg.y0) / seg.length_m

    # --- drivetrain -----------------------------------------------------------------------------

    def _rpm(self, v: float, gear: int) -> float:
        c = self.car
        wheel_rpm = v / (2 * math.pi * c.wheel_radius_m) * 60.0
        return wheel_rpm * c.gear_ratios[gear - 1] * c.final_drive

    def _shift(self, v: float, gear: int) -> int:
        c = self.car
        if gear < len(c.gear_ratios) and self._rpm(v, gear) > c.upshift_rpm:
            return gear + 1
        if gear > 1 and self._rpm(v, gear) < c.downshift_rpm and self._rpm(v, gear - 1) < c.upshift_rpm - 300:
            return gear - 1
        return gear

    # --- the run --------------------------------------------------------------------------------

    def states(self) -> Iterator[CarState]:
        """Every tick of the session: pre-start (not racing), the laps, cool-down, post-end."""
        c = self.car
        L = self.path.length_m
        dt = self.dt_s
        t = 0.0
        p = -self.start_behind_m
        v = 0.0
        gear = 1
        lap = 0
        lap_start_t = 0.0
        last_lap = 0.0
        best_lap = 0.0
        grip = 1.0
        profile = self._profile
        marks: list[float] = []
        cooldown_until: float | None = None
        end_at: float | None = None
        prev_heading = self.path.heading_at(p)
        n_sec = len(self.sectors_m)
        # bound the run even for a track the car cannot drive (average 2 m/s at the very least)
        give_up_t = self.pre_start_s + (self.laps_wanted + 1) * L / 2.0 + self.start_behind_m / 2.0 + 60.0
        # menus before the start
        for _ in range(round(self.pre_start_s * self.rate_hz)):
            yield self._state(
                t, False, 0, p, 0.0, 0.0, 0.0, 0.0, 0.0, 1, 0.0, 0.0, 0.0, last_lap, best_lap, ()
            )
            t += dt
        lap_start_t = t
        # on the grid, engine running: the first driving tick
        yield self._state(
            t,
            True,
            0,
            p,
            0.0,
            0.0,
            0.0,
            0.0,
            0.0,
            1,
            c.idle_rpm,
            0.0,
            0.0,
            last_lap,
            best_lap,
            (),
            lap_start_t=lap_start_t,
        )
        while True:
            if cooldown_until is not None and t >= cooldown_until:
                # stopped, out of the car: menus again
                if end_at is None:
                    end_at = t
                t += dt
                if t > end_at + self.post_end_s + 1e-9:
                    return
                yield self._state(
                    t, False, lap, p, 0.0, 0.0, 0.0, 0.0, 0.0, 1, 0.0, 0.0, 0.0, last_lap, best_lap, ()
                )
                continue
            if cooldown_until is None and t > give_up_t:
                cooldown_until = t  # a car that cannot make progress (a wall of a slope): end the run
            # control: accelerate towards the limit just ahead, or brake down to it
            target = self._limit(profile, p + v * dt + 0.5)
            if cooldown_until is not None:
                target = min(target, max(0.0, v - 0.5 * c.max_brake_mps2 * dt))
            drive = min(c.max_long_accel_mps2 * grip, c.power_w / (c.mass_kg * max(v, 1.0)))
            resist = c.drag_per_m * v * v + G * self._grade(p)
            if v < target:
                a = min(drive - resist, (target - v) / dt)
            else:
                a = max(-c.max_brake_mps2 * grip - resist, (target - v) / dt)
            need = a + resist
            throttle = min(1.0, max(0.0, need / drive)) if need >= 0 else 0.0
            brake = min(1.0, -need / (c.max_brake_mps2 * grip)) if need < 0 else 0.0
            v_new = max(0.0, v + a * dt)
            p_new = p + 0.5 * (v + v_new) * dt
            t_new = t + dt
            # crossings of timing marks inside this tick, interpolated
            for k in range(math.floor(p / L) if p >= 0 else -1, math.floor(p_new / L) + 1):
                for j, m in enumerate(self.sectors_m):
                    mark = k * L + m
                    if p < mark <= p_new and p_new > p:
                        t_cross = t + (mark - p) / (p_new - p) * dt
                        if j == 0:
                            if lap >= 1 and len(marks) == n_sec - 1:
                                times = [lap_start_t, *marks, t_cross]
                                sectors = tuple(b - a_ for a_, b in pairwise(times))
                                completed = SimulatedLap(lap, lap_start_t, t_cross, sectors)
                                self.laps.append(completed)  # the simulator's own lap times
                                last_lap = completed.time_s
                                best_lap = min(best_lap or last_lap, last_lap)
                            lap += 1
                            lap_start_t = t_cross
                            marks = []
                            grip = 1.0 + self.rng.uniform(-0.01, 0.01)
                            profile = self._speed_profile(grip)
                            if lap > self.laps_wanted and cooldown_until is None:
                                cooldown_until = t_cross + self.cooldown_s
                        elif lap >= 1:
                            marks.append(t_cross)
            gear = self._shift(v_new, gear)
            rpm = min(c.max_rpm, max(c.idle_rpm, self._rpm(v_new, gear)))
            clutch = 1.0 if v_new < 3.0 and throttle > 0 else 0.0  # slipping the clutch off the line
            if v_new < 3.0 and throttle > 0:
                rpm = max(rpm, 3000.0)
            heading = self.path.heading_at(p_new)
            turn = math.atan2(
                prev_heading[0] * heading[1] - prev_heading[1] * heading[0],
                prev_heading[0] * heading[0] + prev_heading[1] * heading[1],
            )
            prev_heading = heading
            k_curv = self.path.curvature_at(p_new)
            p, v, t = p_new, v_new, t_new
            yield self._state(
                t,
                True,
                lap,
                p,
                v,
                a,
                v * v * k_curv,
                turn / dt,
                throttle,
                gear,
                rpm,
                brake,
                clutch,
                last_lap,
                best_lap,
                tuple(marks),
                steer_k=k_curv,
                lap_start_t=lap_start_t,
            )

    def _state(
        self,
        t: float,
        racing: bool,
        lap: int,
        p: float,
        v: float,
        a_long: float,
        a_lat: float,
        yaw_rate: float,
        throttle: float,
        gear: int,
        rpm: float,
        brake: float,
        clutch: float,
        last_lap: float,
        best_lap: float,
        marks: tuple[float, ...],
        *,
        steer_k: float = 0.0,
        lap_start_t: float | None = None,
    ) -> CarState:
        x, y, z = self.path.point_at(p)
        hx, hz = self.path.heading_at(p)
        grade = self._grade(p)
        s = p % self.path.length_m
        sector = max(j for j, m in enumerate(self.sectors_m) if s >= m)
        steer = max(-1.0, min(1.0, math.atan(self.car.wheelbase_m * steer_k) / self.car.max_steer_rad))
        start = lap_start_t if lap_start_t is not None else 0.0
        if not racing:
            rpm = self.car.idle_rpm if rpm == 0 else rpm
        return CarState(
            t_s=t,
            racing=racing,
            lap=lap,
            lap_distance_m=s if p >= 0 else p,
            progress_m=p,
            total_distance_m=p + self.start_behind_m,
            x=x,
            y=y,
            z=z,
            heading_x=hx,
            heading_z=hz,
            speed_mps=v,
            accel_long_mps2=a_long,
            accel_lat_mps2=a_lat,
            yaw_rate_rps=yaw_rate,
            pitch_rad=-math.atan(grade),
            throttle=throttle,
            brake=brake,
            clutch=clutch,
            gear=gear,
            rpm=rpm if rpm > 0 else self.car.idle_rpm,
            steer=steer,
            sector=sector,
            lap_time_s=(t - start) if racing else 0.0,
            last_lap_s=last_lap,
            best_lap_s=best_lap,
            sector_times_s=tuple(b - a for a, b in zip((start, *marks), marks, strict=False)),
        )
