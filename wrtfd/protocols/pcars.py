"""Project CARS 2 / Automobilista 2 (SMS UDP v2) and Project CARS 1 (SMS UDP v1)."""

from __future__ import annotations

from wrtfd.protocols._common import GEAR, PCT_255, RPM, SPEED, pedal
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

PORT = 5606

#: The viewed car's "lap invalidated" and the session's temperatures (both versions' names).
_LAP_FACTS = LapFacts(
    "lap_invalidated", {"air_temp_c": "ambient_temperature", "track_temp_c": "track_temperature"}
)

#: The car channels both versions share (same names, same units).
_COMMON = {
    "speed": SPEED,
    "rpm": RPM,
    "gear": GEAR,
    "throttle": pedal("throttle", PCT_255),
    "brake": pedal("brake", PCT_255),
    "clutch": pedal("clutch", PCT_255),
    "steering": MotecName("Steering Pos", "Steer", "%", 100.0 / 127.0),
    "oil_temp": MotecName("Eng Oil Temp", "OilTemp"),
    "water_temp": MotecName("Eng Water Temp", "WaterT"),
    "oil_pressure": MotecName("Eng Oil Pres", "OilPres"),
    **wheels("tyre_temp", "Tyre Temp", "TTemp"),
    **wheels("brake_temp", "Brake Temp", "BTemp"),
    **wheels("suspension_travel", "Susp Pos", "Susp"),
}

PROTOCOLS = (
    ProtocolInfo(
        name="pcars2",
        title="Project CARS 2 / Automobilista 2 UDP (SMS protocol v2, patch 5)",
        transport="udp",
        decoder="wrtfd.decoders.pcars:Pcars2Decoder",
        schema_file="pcars2.wrtf.yaml",
        sniff="wrtfd.decoders.pcars:looks_like_v2",
        # patch 5's full-precision position
        position=PositionFields("full_position_x", "full_position_z"),
        motec=MotecChannels(frozenset({"full_position_x", "tick_count", "rpm", "steering"}), _COMMON),
        simulator=Simulator(
            "wrtfd.simulate.pcars:pcars2_encoder",
            "Project CARS 2 / AMS2 UDP v2 (telemetry, timings, race, participants, game state...)",
        ),
        default_port=PORT,
        nominal_rate_hz=60.0,
        # PC2 / AMS2's default protocol wins 5606 over PC1's
        port_rank=6,
        lap_facts=_LAP_FACTS,
    ),
    ProtocolInfo(
        name="pcars",
        title="Project CARS 1 UDP (SMS protocol v1; also PC2/AMS2 set to Project CARS 1)",
        transport="udp",
        decoder="wrtfd.decoders.pcars:Pcars1Decoder",
        schema_file="pcars.wrtf.yaml",
        sniff="wrtfd.decoders.pcars:looks_like_v1",
        # the viewed car's participant entry, whole metres
        position=PositionFields("world_position_x", "world_position_z"),
        motec=MotecChannels(
            frozenset({"laps_in_event", "world_position_x", "rpm", "unfiltered_throttle"}), _COMMON
        ),
        simulator=Simulator(
            "wrtfd.simulate.pcars:pcars1_encoder",
            "Project CARS 1 UDP (telemetry 1367 B, participant strings 1347 B)",
        ),
        default_port=PORT,
        nominal_rate_hz=60.0,
        port_rank=7,
        lap_facts=_LAP_FACTS,
    ),
)
