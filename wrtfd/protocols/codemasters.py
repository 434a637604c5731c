"""Codemasters' legacy "extradata=3" UDP (DiRT Rally 1/2, DiRT 4, GRID, F1 2016/17 legacy)."""

from __future__ import annotations

from wrtfd.protocols._common import GEAR, PCT_1, RPM, SPEED, pedal
from wrtfd.protocols._descriptor import Absent, MotecChannels, MotecName, PositionFields, ProtocolInfo, wheels

__all__ = ["PROTOCOLS"]

PROTOCOLS = (
    ProtocolInfo(
        name="codemasters",
        title='Codemasters legacy UDP "extradata=3" (DiRT Rally 1/2, DiRT 4, GRID, F1 2016/17 legacy)',
        transport="udp",
        decoder="wrtfd.decoders.codemasters:CodemastersDecoder",
        schema_file="codemasters.wrtf.yaml",
        sniff="wrtfd.decoders.codemasters:looks_like",
        position=PositionFields("pos_x", "pos_z"),
        motec=MotecChannels(
            frozenset({"run_time", "lap_distance", "pos_x", "throttle"}),
            {
                "speed": SPEED,
                "engine_rpm": RPM,
                "gear": GEAR,
                "throttle": pedal("throttle", PCT_1),
                "brake": pedal("brake", PCT_1),
                "clutch": pedal("clutch", PCT_1),
                "steering": MotecName("Steering Pos", "Steer", "%", PCT_1),
                "g_force_lat": MotecName("G Force Lat", "G Lat", "G"),
                "g_force_lon": MotecName("G Force Long", "G Long", "G"),
                "lap_distance": MotecName("Lap Distance", "LapDist"),
                **wheels("wheel_speed", "Wheel Speed", "WSpd"),
                **wheels("brake_temperature", "Brake Temp", "BTemp"),
                **wheels("suspension_position", "Susp Pos", "Susp"),
            },
        ),
        simulator=Absent("no simulator of the legacy format yet"),
        default_port=20778,
        nominal_rate_hz=60.0,
        port_rank=4,
    ),
)
