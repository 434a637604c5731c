"""EA SPORTS WRC UDP telemetry."""

from __future__ import annotations

from wrtfd.protocols._common import GEAR, PCT_1, RPM, SPEED, pedal
from wrtfd.protocols._descriptor import (
    WHEELS,
    Absent,
    MotecChannels,
    MotecName,
    PositionFields,
    ProtocolInfo,
    Simulator,
)

__all__ = ["PROTOCOLS"]

PROTOCOLS = (
    ProtocolInfo(
        name="wrc",
        title="EA SPORTS WRC UDP telemetry (layout from the game's JSON structure files)",
        transport="udp",
        decoder="wrtfd.decoders.wrc:WrcDecoder",
        schema_file="wrc.wrtf.yaml",
        sniff=Absent(
            "the layout and its four-character code come from the game's structure file, which the"
            " user edits: name its port (--protocol PORT=wrc)"
        ),
        # Y up, as in the earlier Codemasters games (no capture to confirm)
        position=PositionFields("vehicle_position_x", "vehicle_position_z"),
        motec=MotecChannels(
            frozenset({"vehicle_speed", "vehicle_engine_rpm_current", "vehicle_throttle"}),
            {
                "vehicle_speed": SPEED,
                "vehicle_engine_rpm_current": RPM,
                "vehicle_gear_index": GEAR,
                "vehicle_throttle": pedal("throttle", PCT_1),
                "vehicle_brake": pedal("brake", PCT_1),
                "vehicle_clutch": pedal("clutch", PCT_1),
                "vehicle_steering": MotecName("Steering Pos", "Steer", "%", PCT_1),
                **{
                    f"vehicle_brake_temperature_{end}": MotecName(f"Brake Temp {w}", f"BTemp{w}")
                    for end, w in zip(("fl", "fr", "bl", "br"), WHEELS, strict=True)
                },
            },
        ),
        simulator=Simulator(
            "wrtfd.simulate.wrc:wrc_encoder",
            "EA SPORTS WRC session_update of the shipped structure (the track as one stage)",
        ),
        default_port=20779,
        nominal_rate_hz=60.0,
    ),
)
