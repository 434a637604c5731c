"""Forza Motorsport / Horizon Data Out."""

from __future__ import annotations

from wrtfd.protocols._common import GEAR, PCT_255, RPM, SPEED, pedal
from wrtfd.protocols._descriptor import (
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
        name="forza",
        title="Forza Motorsport / Horizon Data Out (FM7, FH4, FH5, FH6, FM2023)",
        transport="udp",
        decoder="wrtfd.decoders.forza:ForzaDecoder",
        schema_file="forza.wrtf.yaml",
        sniff="wrtfd.decoders.forza:looks_like",
        position=PositionFields("position_x", "position_z", 1.0, "is_race_on"),
        motec=MotecChannels(
            frozenset({"is_race_on", "accel", "brake", "speed", "position_x"}),
            {
                "speed": SPEED,
                "engine_rpm": RPM,
                "gear": GEAR,
                "accel": pedal("throttle", PCT_255),
                "brake": pedal("brake", PCT_255),
                "clutch": pedal("clutch", PCT_255),
                "steer": MotecName("Steering Pos", "Steer", "%", 100.0 / 127.0),
                "boost": MotecName("Turbo Boost Pressure", "TurboP"),
                **wheels("tire_temp", "Tyre Temp", "TTemp"),
                **wheels("suspension_travel_m", "Susp Pos", "Susp"),
            },
        ),
        simulator=Simulator(
            "wrtfd.simulate.packets:forza_encoder",
            "fm2023 Data Out (331 B); --forza-format sled|fm7|horizon|fm2023",
        ),
        default_port=5301,
        nominal_rate_hz=60.0,
        port_rank=0,
    ),
)
