"""Reading ``shared/data/udp/f1/<year>.jsonl`` and the expected values of the public decoder."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: 2025 files name packets by id; older files by name.
PACKET_NAMES = {
    0: "motion",
    1: "session",
    2: "lapData",
    3: "event",
    4: "participants",
    5: "carSetups",
    6: "carTelemetry",
    7: "carStatus",
    8: "finalClassification",
    9: "lobbyInfo",
    10: "carDamage",
    11: "sessionHistory",
    12: "tyreSets",
    13: "motionEx",
}
YEARS = tuple(range(2018, 2026))


def records(shared_data: Path, year: int) -> Iterator[tuple[str, bytes, dict[str, Any]]]:
    """(packet name, datagram, parsed expectation) for each line of a year's capture."""
    with (shared_data / "udp" / "f1" / f"{year}.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            msg = rec["message"]
            raw = bytes(msg["data"] if isinstance(msg, dict) else msg)
            pid = rec["packetID"]
            name = PACKET_NAMES[pid] if isinstance(pid, int) else pid
            yield name, raw, rec["parsed"]


def wheels(values: list[Any]) -> list[Any]:
    """The game's RL, RR, FL, FR -> FL, FR, RL, RR (what the decoder records)."""
    return [values[2], values[3], values[0], values[1]]


def _div100(v: float) -> float:
    return v / 100.0


def _dir(v: int) -> float:
    return v / 32767.0


def _s_to_ms(v: float) -> int:
    return round(v * 1000.0)


#: channel -> (parsed per-car key, transform) for the per-car packets.
MOTION = {
    "world_position_x": "m_worldPositionX",
    "world_position_y": "m_worldPositionY",
    "world_position_z": "m_worldPositionZ",
    "world_velocity_x": "m_worldVelocityX",
    "world_velocity_y": "m_worldVelocityY",
    "world_velocity_z": "m_worldVelocityZ",
    "world_forward_dir_x": ("m_worldForwardDirX", _dir),
    "world_forward_dir_y": ("m_worldForwardDirY", _dir),
    "world_forward_dir_z": ("m_worldForwardDirZ", _dir),
    "world_right_dir_x": ("m_worldRightDirX", _dir),
    "world_right_dir_y": ("m_worldRightDirY", _dir),
    "world_right_dir_z": ("m_worldRightDirZ", _dir),
    "g_force_lateral": "m_gForceLateral",
    "g_force_longitudinal": "m_gForceLongitudinal",
    "g_force_vertical": "m_gForceVertical",
    "yaw": "m_yaw",
    "pitch": "m_pitch",
    "roll": "m_roll",
}
#: Player-only values at the top level of motion (before 2023) and motionEx.
MOTION_TOP = {
    "suspension_position": "m_suspensionPosition",
    "suspension_velocity": "m_suspensionVelocity",
    "suspension_acceleration": "m_suspensionAcceleration",
    "wheel_speed": "m_wheelSpeed",
    "wheel_slip_ratio": ("m_wheelSlipRatio", "m_wheelSlip"),
    "wheel_slip_angle": "m_wheelSlipAngle",
    "wheel_lat_force": "m_wheelLatForce",
    "wheel_long_force": "m_wheelLongForce",
    "wheel_vert_force": "m_wheelVertForce",
    "height_of_cog": "m_heightOfCOGAboveGround",
    "local_velocity_x": "m_localVelocityX",
    "local_velocity_y": "m_localVelocityY",
    "local_velocity_z": "m_localVelocityZ",
    "angular_velocity_x": "m_angularVelocityX",
    "angular_velocity_y": "m_angularVelocityY",
    "angular_velocity_z": "m_angularVelocityZ",
    "angular_acceleration_x": "m_angularAccelerationX",
    "angular_acceleration_y": "m_angularAccelerationY",
    "angular_acceleration_z": "m_angularAccelerationZ",
    "front_wheels_angle": "m_frontWheelsAngle",
    "front_aero_height": "m_frontAeroHeight",
    "rear_aero_height": "m_rearAeroHeight",
    "front_roll_angle": "m_frontRollAngle",
    "rear_roll_angle": "m_rearRollAngle",
    "chassis_yaw": "m_chassisYaw",
    "chassis_pitch": "m_chassisPitch",
    "wheel_camber": "m_wheelCamber",
    "wheel_camber_gain": "m_wheelCamberGain",
}
TELEMETRY = {
    "speed": "m_speed",
    "throttle": "m_throttle",
    "steer": "m_steer",
    "brake": "m_brake",
    "clutch": "m_clutch",
    "gear": "m_gear",
    "engine_rpm": "m_engineRPM",
    "drs": "m_drs",
    "rev_lights_percent": "m_revLightsPercent",
    "rev_lights_bit_value": "m_revLightsBitValue",
    "brakes_temperature": "m_brakesTemperature",
    "tyres_surface_temperature": "m_tyresSurfaceTemperature",
    "tyres_inner_temperature": "m_tyresInnerTemperature",
    "engine_temperature": "m_engineTemperature",
    "tyres_pressure": "m_tyresPressure",
    "surface_type": "m_surfaceType",
}
TELEMETRY_2018 = {
    **TELEMETRY,
    "throttle": ("m_throttle", _div100),
    "steer": ("m_steer", _div100),
    "brake": ("m_brake", _div100),
}
LAP = {
    "last_lap_time_ms": ("m_lastLapTimeInMS", ("m_lastLapTime", _s_to_ms)),
    "current_lap_time_ms": ("m_currentLapTimeInMS", ("m_currentLapTime", _s_to_ms)),
    "lap_distance": "m_lapDistance",
    "total_distance": "m_totalDistance",
    "safety_car_delta": "m_safetyCarDelta",
    "car_position": "m_carPosition",
    "current_lap_num": "m_currentLapNum",
    "pit_status": "m_pitStatus",
    "num_pit_stops": "m_numPitStops",
    "sector": "m_sector",
    "current_lap_invalid": "m_currentLapInvalid",
    "penalties": "m_penalties",
    "grid_position": "m_gridPosition",
    "driver_status": "m_driverStatus",
    "result_status": "m_resultStatus",
    "speed_trap_fastest_speed": "m_speedTrapFastestSpeed",
}
STATUS = {
    "traction_control": "m_tractionControl",
    "anti_lock_brakes": "m_antiLockBrakes",
    "fuel_mix": "m_fuelMix",
    "front_brake_bias": "m_frontBrakeBias",
    "pit_limiter_status": "m_pitLimiterStatus",
    "fuel_in_tank": "m_fuelInTank",
    "fuel_capacity": "m_fuelCapacity",
    "fuel_remaining_laps": "m_fuelRemainingLaps",
    "max_rpm": "m_maxRPM",
    "idle_rpm": "m_idleRPM",
    "max_gears": "m_maxGears",
    "drs_allowed": "m_drsAllowed",
    "drs_activation_distance": "m_drsActivationDistance",
    "actual_tyre_compound": ("m_actualTyreCompound", "m_tyreCompound"),
    "visual_tyre_compound": "m_visualTyreCompound",
    "tyres_age_laps": "m_tyresAgeLaps",
    "vehicle_fia_flags": "m_vehicleFiaFlags",
    "engine_power_ice": "m_enginePowerICE",
    "engine_power_mguk": "m_enginePowerMGUK",
    "ers_store_energy": "m_ersStoreEnergy",
    "ers_deploy_mode": "m_ersDeployMode",
    "ers_harvested_this_lap_mguk": "m_ersHarvestedThisLapMGUK",
    "ers_harvested_this_lap_mguh": "m_ersHarvestedThisLapMGUH",
    "ers_deployed_this_lap": "m_ersDeployedThisLap",
}
SESSION = {
    "weather": "m_weather",
    "track_temperature": "m_trackTemperature",
    "air_temperature": "m_airTemperature",
    "total_laps": "m_totalLaps",
    "track_length": "m_trackLength",
    "session_type": "m_sessionType",
    "track_id": "m_trackId",
    "formula": ("m_formula", "m_era"),
    "session_time_left": "m_sessionTimeLeft",
    "session_duration": "m_sessionDuration",
    "pit_speed_limit": "m_pitSpeedLimit",
    "game_paused": "m_gamePaused",
    "is_spectating": "m_isSpectating",
    "spectator_car_index": "m_spectatorCarIndex",
    "safety_car_status": "m_safetyCarStatus",
    "network_game": "m_networkGame",
}
#: packet name -> (per-car array key, mapping, all-cars channels -> per-car key)
CAR_PACKETS: dict[str, tuple[str, dict[str, Any], dict[str, str]]] = {
    "motion": (
        "m_carMotionData",
        MOTION,
        {
            "all_world_position_x": "m_worldPositionX",
            "all_world_position_y": "m_worldPositionY",
            "all_world_position_z": "m_worldPositionZ",
        },
    ),
    "carTelemetry": ("m_carTelemetryData", TELEMETRY, {"all_speed": "m_speed", "all_gear": "m_gear"}),
    "lapData": (
        "m_lapData",
        LAP,
        {
            "all_car_position": "m_carPosition",
            "all_current_lap_num": "m_currentLapNum",
            "all_lap_distance": "m_lapDistance",
            "all_pit_status": "m_pitStatus",
            "all_result_status": "m_resultStatus",
        },
    ),
    "carStatus": ("m_carStatusData", STATUS, {"all_visual_tyre_compound": "m_visualTyreCompound"}),
}


def expected(source: dict[str, Any], rule: Any) -> tuple[bool, Any]:
    """Resolve a mapping rule against a parsed dict: (found, value)."""
    rules = rule if isinstance(rule, tuple) and not callable(rule[1]) else (rule,)
    for r in rules:
        key, fn = r if isinstance(r, tuple) else (r, None)
        if key in source:
            v = source[key]
            return True, (fn(v) if fn is not None else v)
    return False, None
