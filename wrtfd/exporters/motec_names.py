"""MoTeC-style names for the common channels of each game's definition (``wrtfd/schemas``).

i2's track maps, lap reports and default maths look channels up by MoTeC's usual names (``Ground
Speed``, ``Engine RPM``, ``Throttle Pos``...): a channel with one of those names works without
setting up Channel Mappings by hand. Every other channel keeps its flattened WRTF name
(``forza_tire_temp_0``).

Which game a source speaks is recognised from its fields (a source is named by the user, so its
name proves nothing): the first protocol whose *signature* fields are all present wins. Pedals
become percent (``factor``), wheel arrays get MoTeC's ``FL FR RL RR`` suffixes (every shipped
definition stores wheels in that order), and OutGauge's gear (0 = R, 1 = N) is shifted so that
-1 is reverse as in the other games.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["PROTOCOL_SIGNATURES", "MotecName", "motec_name", "protocol_of"]

WHEELS = ("FL", "FR", "RL", "RR")


@dataclass(frozen=True, slots=True)
class MotecName:
    """A MoTeC channel name, short name and unit, and the conversion value * factor + offset."""

    name: str
    short: str
    unit: str | None = None  # None: keep the definition's unit
    factor: float = 1.0
    offset: float = 0.0

    @property
    def converts(self) -> bool:
        return self.factor != 1.0 or self.offset != 0.0


#: Fields that identify a protocol's channels; checked in this order, first match wins.
PROTOCOL_SIGNATURES: dict[str, frozenset[str]] = {
    "laps": frozenset({"lap_number", "lap_distance", "lap_time", "track_sector"}),
    "forza": frozenset({"is_race_on", "accel", "brake", "speed", "position_x"}),
    "f1": frozenset({"world_position_x", "throttle", "steer", "engine_rpm"}),
    "assetto_corsa": frozenset({"speed_kmh", "gas", "steer", "car_x"}),
    "codemasters": frozenset({"run_time", "lap_distance", "pos_x", "throttle"}),
    "outsim2": frozenset({"pos_x", "throttle", "input_steer"}),
    "outgauge": frozenset({"speed", "rpm", "display1"}),
    "nmea": frozenset({"lat_deg", "lon_deg"}),
    "obd": frozenset({"engine_rpm", "vehicle_speed_kmh", "throttle_pct"}),
}

_PCT_255 = 100.0 / 255.0
_PCT_1 = 100.0


def _wheels(prefix: str, name: str, short: str, unit: str | None = None) -> dict[str, MotecName]:
    return {f"{prefix}_{i}": MotecName(f"{name} {w}", f"{short}{w}", unit) for i, w in enumerate(WHEELS)}


_SPEED = MotecName("Ground Speed", "Gnd Spd")
_RPM = MotecName("Engine RPM", "RPM")
_GEAR = MotecName("Gear", "Gear")

#: protocol -> local field name -> MoTeC name.
TABLE: dict[str, dict[str, MotecName]] = {
    "laps": {
        "lap_number": MotecName("Lap Number", "Lap"),
        "lap_distance": MotecName("Lap Distance", "LapDist"),
        "lap_time": MotecName("Lap Time", "LapTime"),
    },
    "forza": {
        "speed": _SPEED,
        "engine_rpm": _RPM,
        "gear": _GEAR,
        "accel": MotecName("Throttle Pos", "Thr Pos", "%", _PCT_255),
        "brake": MotecName("Brake Pos", "Brk Pos", "%", _PCT_255),
        "clutch": MotecName("Clutch Pos", "ClutchP", "%", _PCT_255),
        "steer": MotecName("Steering Pos", "Steer", "%", 100.0 / 127.0),
        "boost": MotecName("Turbo Boost Pressure", "TurboP"),
        **_wheels("tire_temp", "Tyre Temp", "TTemp"),
        **_wheels("suspension_travel_m", "Susp Pos", "Susp"),
    },
    "f1": {
        "speed": _SPEED,
        "engine_rpm": _RPM,
        "gear": _GEAR,
        "throttle": MotecName("Throttle Pos", "Thr Pos", "%", _PCT_1),
        "brake": MotecName("Brake Pos", "Brk Pos", "%", _PCT_1),
        "clutch": MotecName("Clutch Pos", "ClutchP"),
        "steer": MotecName("Steering Pos", "Steer", "%", _PCT_1),
        "g_force_lateral": MotecName("G Force Lat", "G Lat", "G"),
        "g_force_longitudinal": MotecName("G Force Long", "G Long", "G"),
        "g_force_vertical": MotecName("G Force Vert", "G Vert", "G"),
        "lap_distance": MotecName("Lap Distance", "LapDist"),
        **_wheels("wheel_speed", "Wheel Speed", "WSpd"),
        **_wheels("tyres_surface_temperature", "Tyre Temp", "TTemp"),
        **_wheels("brakes_temperature", "Brake Temp", "BTemp"),
        **_wheels("tyres_pressure", "Tyre Pressure", "TPres"),
        **_wheels("suspension_position", "Susp Pos", "Susp"),
    },
    "assetto_corsa": {
        "speed_kmh": _SPEED,
        "engine_rpm": _RPM,
        "gear": _GEAR,
        "gas": MotecName("Throttle Pos", "Thr Pos", "%", _PCT_1),
        "brake": MotecName("Brake Pos", "Brk Pos", "%", _PCT_1),
        "clutch": MotecName("Clutch Pos", "ClutchP", "%", _PCT_1),
        "acc_g_horizontal": MotecName("G Force Lat", "G Lat", "G"),
        "acc_g_frontal": MotecName("G Force Long", "G Long", "G"),
        "acc_g_vertical": MotecName("G Force Vert", "G Vert", "G"),
    },
    "codemasters": {
        "speed": _SPEED,
        "engine_rpm": _RPM,
        "gear": _GEAR,
        "throttle": MotecName("Throttle Pos", "Thr Pos", "%", _PCT_1),
        "brake": MotecName("Brake Pos", "Brk Pos", "%", _PCT_1),
        "clutch": MotecName("Clutch Pos", "ClutchP", "%", _PCT_1),
        "steering": MotecName("Steering Pos", "Steer", "%", _PCT_1),
        "g_force_lat": MotecName("G Force Lat", "G Lat", "G"),
        "g_force_lon": MotecName("G Force Long", "G Long", "G"),
        "lap_distance": MotecName("Lap Distance", "LapDist"),
        **_wheels("wheel_speed", "Wheel Speed", "WSpd"),
        **_wheels("brake_temperature", "Brake Temp", "BTemp"),
        **_wheels("suspension_position", "Susp Pos", "Susp"),
    },
    "outsim2": {
        "throttle": MotecName("Throttle Pos", "Thr Pos", "%", _PCT_1),
        "brake": MotecName("Brake Pos", "Brk Pos", "%", _PCT_1),
        "clutch": MotecName("Clutch Pos", "ClutchP", "%", _PCT_1),
        "gear": MotecName("Gear", "Gear", None, 1.0, -1.0),
        "current_lap_dist": MotecName("Lap Distance", "LapDist"),
    },
    "outgauge": {
        "speed": _SPEED,
        "rpm": _RPM,
        "gear": MotecName("Gear", "Gear", None, 1.0, -1.0),
        "throttle": MotecName("Throttle Pos", "Thr Pos", "%", _PCT_1),
        "brake": MotecName("Brake Pos", "Brk Pos", "%", _PCT_1),
        "clutch": MotecName("Clutch Pos", "ClutchP", "%", _PCT_1),
        "oil_temp": MotecName("Eng Oil Temp", "OilTemp"),
        "oil_pressure": MotecName("Eng Oil Pres", "OilPres"),
    },
    "nmea": {
        "lat_deg": MotecName("GPS Latitude", "GPSLat"),
        "lon_deg": MotecName("GPS Longitude", "GPSLong"),
        "alt_msl_m": MotecName("GPS Altitude", "GPSAlt"),
        "speed_mps": MotecName("GPS Speed", "GPSSpd"),
        "course_deg": MotecName("GPS Heading", "GPSHead"),
    },
    "obd": {
        "engine_rpm": _RPM,
        "vehicle_speed_kmh": _SPEED,
        "throttle_pct": MotecName("Throttle Pos", "Thr Pos"),
        "coolant_temp_c": MotecName("Eng Water Temp", "WaterT"),
        "oil_temp_c": MotecName("Eng Oil Temp", "OilTemp"),
    },
}


def protocol_of(field_names: Iterable[str]) -> str | None:
    """The protocol whose signature fields a source struct has, if any."""
    names = frozenset(field_names)
    for protocol, signature in PROTOCOL_SIGNATURES.items():
        if signature <= names:
            return protocol
    return None


def motec_name(
    protocols: Mapping[str | None, str | None], source: str | None, local: str
) -> MotecName | None:
    """The MoTeC name of field ``local`` of ``source``, given each source's protocol."""
    protocol = protocols.get(source)
    return TABLE.get(protocol, {}).get(local) if protocol is not None else None
