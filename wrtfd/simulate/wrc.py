"""EA SPORTS WRC ``session_update`` packets of a simulated stage, in a structure file's layout.

The track is driven as a rally stage: the stage starts where the car launches (a little behind
the start line), ends at the line one lap later, and ``stage_progress`` goes from 0 to 1; the
track's timing sectors are the split checkpoints. Packets are sent while the car drives the stage
and its cool-down. The layout comes from the shipped structure (``wrc.json`` with its channel
catalogue), read here with a type table of this module's own, so the packets cross-check the
decoder's reading of the same files. Track coordinates go into the world frame as they are
(x, y up, z). The four-character code is this simulator's own (``SIMU``).
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

from wrtfd.simulate.car import CarSpec, CarState
from wrtfd.simulate.encoding import EncoderOptions

__all__ = ["WrcEncoder", "wrc_encoder"]

_SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"
#: The game's channel types as struct codes (the simulator's own table).
_CODES = {
    "boolean": "?", "bool": "?", "int8": "b", "uint8": "B", "int16": "h", "uint16": "H",
    "int32": "i", "uint32": "I", "int64": "q", "uint64": "Q", "float32": "f", "float64": "d",
    "fourcc": "4s",
}  # fmt: skip
WHEELS = ("bl", "br", "fl", "fr")
STATUS_RUNNING = 0
STATUS_FINISHED = 1


class WrcEncoder:
    """``session_update`` of ``structure`` (default: the shipped one) for a simulated stage."""

    name = "wrc"
    default_port = 20779
    rate_hz = 60.0

    def __init__(
        self,
        track: Any,
        *,
        car: CarSpec | None = None,
        structure: Path = _SCHEMAS / "wrc.json",
        channels: Path = _SCHEMAS / "wrc.channels.json",
        packet: str = "session_update",
    ) -> None:
        self.track = track
        self.car = car or CarSpec()
        types = {c["id"]: c["type"] for c in json.loads(channels.read_text())["channels"]}
        doc = json.loads(structure.read_text())
        body = next(p["channels"] for p in doc["packets"] if p["id"] == packet)
        self.order: list[str] = [*doc.get("header", {}).get("channels", []), *body]
        self._struct = struct.Struct("<" + "".join(_CODES[types[c]] for c in self.order))
        self.uid = 0
        self.frame = 0
        self.launch_t: float | None = None
        self.start_behind_m = 0.0
        self.split_time_s = 0.0
        self.splits = 0
        self.result_s: float | None = None
        self._prev_t: float | None = None

    @property
    def stage_length_m(self) -> float:
        return float(self.track.length_m) + self.start_behind_m

    def values(self, state: CarState) -> dict[str, Any]:
        """The channel values of one tick (every channel of the shipped catalogue)."""
        c = self.car
        if self.launch_t is None:
            self.launch_t = state.t_s
            self.start_behind_m = state.total_distance_m - state.progress_m
        stage_t = state.t_s - self.launch_t
        if state.lap >= 2 and self.result_s is None:  # crossed the line: the stage is over
            self.result_s = state.t_s - state.lap_time_s - self.launch_t
        if state.lap == 1 and len(state.sector_times_s) > self.splits:
            self.splits = len(state.sector_times_s)
            self.split_time_s = stage_t
        if self.result_s is not None:
            stage_t = self.result_s
        distance = min(max(state.total_distance_m, 0.0), self.stage_length_m)
        v = state.speed_mps
        hx, hz = state.heading_x, state.heading_z
        ax = state.accel_long_mps2 * hx - state.accel_lat_mps2 * hz
        az = state.accel_long_mps2 * hz + state.accel_lat_mps2 * hx
        dt = 0.0 if self._prev_t is None else state.t_s - self._prev_t
        self._prev_t = state.t_s
        start_rpm = 0.8 * c.max_rpm
        out: dict[str, Any] = {
            "packet_4cc": b"SIMU",
            "packet_uid": self.uid,
            "shiftlights_fraction": min(1.0, max(0.0, (state.rpm - start_rpm) / (c.upshift_rpm - start_rpm))),
            "shiftlights_rpm_start": start_rpm,
            "shiftlights_rpm_end": c.upshift_rpm,
            "shiftlights_rpm_valid": True,
            "vehicle_gear_index": state.gear,
            "vehicle_gear_index_neutral": 0,
            "vehicle_gear_index_reverse": 10,
            "vehicle_gear_maximum": len(c.gear_ratios),
            "vehicle_speed": v,
            "vehicle_transmission_speed": v * (1.02 if state.throttle > 0.9 else 1.0),
            "vehicle_position_x": state.x,
            "vehicle_position_y": state.y,
            "vehicle_position_z": state.z,
            "vehicle_velocity_x": v * hx,
            "vehicle_velocity_y": 0.0,
            "vehicle_velocity_z": v * hz,
            "vehicle_acceleration_x": ax,
            "vehicle_acceleration_y": 0.0,
            "vehicle_acceleration_z": az,
            "vehicle_left_direction_x": hz,
            "vehicle_left_direction_y": 0.0,
            "vehicle_left_direction_z": -hx,
            "vehicle_forward_direction_x": hx,
            "vehicle_forward_direction_y": 0.0,
            "vehicle_forward_direction_z": hz,
            "vehicle_up_direction_x": 0.0,
            "vehicle_up_direction_y": 1.0,
            "vehicle_up_direction_z": 0.0,
            "vehicle_engine_rpm_max": c.max_rpm,
            "vehicle_engine_rpm_idle": c.idle_rpm,
            "vehicle_engine_rpm_current": state.rpm,
            "vehicle_throttle": state.throttle,
            "vehicle_brake": state.brake,
            "vehicle_clutch": state.clutch,
            "vehicle_steering": state.steer,
            "vehicle_handbrake": 0.0,
            "game_total_time": 100.0 + state.t_s,  # the game started before the stage
            "game_delta_time": dt,
            "game_frame_count": self.frame,
            "stage_current_time": stage_t,
            "stage_previous_split_time": self.split_time_s,
            "stage_result_time": self.result_s or 0.0,
            "stage_result_time_penalty": 0.0,
            "stage_result_status": STATUS_FINISHED if self.result_s is not None else STATUS_RUNNING,
            "stage_current_distance": distance,
            "stage_length": self.stage_length_m,
            "stage_progress": distance / self.stage_length_m if self.stage_length_m > 0 else 0.0,
            "stage_shakedown": False,
            "game_mode": 1,
            "vehicle_id": 42,
            "vehicle_class_id": 3,
            "vehicle_manufacturer_id": 7,
            "location_id": 5,
            "route_id": 12,
            "vehicle_cluster_abs": state.brake > 0.9,
        }
        for w in WHEELS:
            out[f"vehicle_hub_position_{w}"] = 0.0
            out[f"vehicle_hub_velocity_{w}"] = 0.0
            out[f"vehicle_cp_forward_speed_{w}"] = v
            out[f"vehicle_brake_temperature_{w}"] = 250.0 + 300.0 * state.brake
            out[f"vehicle_tyre_state_{w}"] = 0
        return out

    def encode(self, state: CarState, *, first: bool, last: bool) -> list[bytes]:
        self.frame += 1
        if not state.racing:
            return []  # menus: the game sends nothing
        values = self.values(state)
        self.uid += 1
        packed = [values.get(c, 0) for c in self.order]
        packed = [x if not isinstance(x, float) or math.isfinite(x) else 0.0 for x in packed]
        return [self._struct.pack(*packed)]


def wrc_encoder(track: Any, options: EncoderOptions) -> WrcEncoder:
    return WrcEncoder(track, car=options.car)
