"""EA / Codemasters F1 UDP telemetry."""

from __future__ import annotations

from wrtfd.protocols._common import GEAR, PCT_1, RPM, SPEED, pedal
from wrtfd.protocols._descriptor import (
    LapFacts,
    MotecChannels,
    MotecName,
    PositionFields,
    ProtocolInfo,
    Simulator,
    wheels,
)

__all__ = ["PROTOCOLS"]

PROTOCOLS = (
    ProtocolInfo(
        name="f1",
        title="EA / Codemasters F1 UDP telemetry (packet formats 2018-2025)",
        transport="udp",
        decoder="wrtfd.decoders.f1:F1Decoder",
        schema_file="f1.wrtf.yaml",
        sniff="wrtfd.decoders.f1:looks_like",
        position=PositionFields("world_position_x", "world_position_z"),
        # the player's Lap Data flag; weather and temperatures from the Session packet
        lap_facts=LapFacts(
            "current_lap_invalid",
            {"air_temp_c": "air_temperature", "track_temp_c": "track_temperature", "weather": "weather"},
            ("clear", "light cloud", "overcast", "light rain", "heavy rain", "storm"),
        ),
        motec=MotecChannels(
            frozenset({"world_position_x", "throttle", "steer", "engine_rpm"}),
            {
                "speed": SPEED,
                "engine_rpm": RPM,
                "gear": GEAR,
                "throttle": pedal("throttle", PCT_1),
                "brake": pedal("brake", PCT_1),
                "clutch": MotecName("Clutch Pos", "ClutchP"),  # already %
                "steer": MotecName("Steering Pos", "Steer", "%", PCT_1),
                "g_force_lateral": MotecName("G Force Lat", "G Lat", "G"),
                "g_force_longitudinal": MotecName("G Force Long", "G Long", "G"),
                "g_force_vertical": MotecName("G Force Vert", "G Vert", "G"),
                "lap_distance": MotecName("Lap Distance", "LapDist"),
                **wheels("wheel_speed", "Wheel Speed", "WSpd"),
                **wheels("tyres_surface_temperature", "Tyre Temp", "TTemp"),
                **wheels("brakes_temperature", "Brake Temp", "BTemp"),
                **wheels("tyres_pressure", "Tyre Pressure", "TPres"),
                **wheels("suspension_position", "Susp Pos", "Susp"),
            },
        ),
        simulator=Simulator(
            "wrtfd.simulate.packets:f1_encoder",
            "EA F1 2024/2025 (Motion, Lap Data, Car Telemetry, Session, Event)",
        ),
        default_port=20777,
        nominal_rate_hz=60.0,
        port_rank=1,
    ),
)
