"""Assetto Corsa Competizione's broadcasting protocol."""

from __future__ import annotations

from wrtfd.protocols._common import GEAR, SPEED
from wrtfd.protocols._descriptor import (
    Absent,
    LapFacts,
    MotecChannels,
    PositionFields,
    ProtocolInfo,
    Simulator,
)

__all__ = ["PROTOCOLS"]

PROTOCOLS = (
    ProtocolInfo(
        name="acc",
        title="Assetto Corsa Competizione broadcasting (register with the game on port 9000)",
        transport="udp",
        decoder="wrtfd.decoders.acc:AccDecoder",
        schema_file="acc.wrtf.yaml",
        sniff=Absent(
            "a conversation wrtfd starts (registration): the game's replies alone do not tell a"
            " capture's flow; import it with --config"
        ),
        # the focused car: world X/Y are the ground plane (no capture to confirm the sign)
        position=PositionFields("world_x", "world_y"),
        # the focused car's flag (REALTIME_CAR_UPDATE); the weather of REALTIME_UPDATE (0..1)
        lap_facts=LapFacts(
            "current_lap_invalid",
            {
                "air_temp_c": "ambient_temp",
                "track_temp_c": "track_temp",
                "clouds": "clouds",
                "rain": "rain_level",
                "wetness": "wetness",
            },
        ),
        motec=MotecChannels(
            frozenset({"speed_kmh", "spline_position", "focused_car_index", "world_x"}),
            {"speed_kmh": SPEED, "gear": GEAR},  # broadcasting has no rpm or pedals
        ),
        simulator=Simulator(
            "wrtfd.simulate.acc:acc_encoder",
            "ACC broadcasting server (registration, entry list, track data, car updates, events)",
        ),
        default_port=9000,
        client=True,
    ),
)
