"""Assetto Corsa (2014) remote telemetry."""

from __future__ import annotations

from wrtfd.protocols._common import GEAR, PCT_1, RPM, SPEED, pedal
from wrtfd.protocols._descriptor import Absent, MotecChannels, MotecName, ProtocolInfo

__all__ = ["PROTOCOLS"]

PROTOCOLS = (
    ProtocolInfo(
        name="assetto_corsa",
        title="Assetto Corsa remote telemetry (RTCarInfo, handshake on port 9996)",
        transport="udp",
        decoder="wrtfd.decoders.assetto_corsa:AssettoCorsaDecoder",
        schema_file="assetto_corsa.wrtf.yaml",
        sniff="wrtfd.decoders.assetto_corsa:looks_like",
        position=Absent("no capture yet to confirm the axes of car_x/car_z: give track_position"),
        motec=MotecChannels(
            frozenset({"speed_kmh", "gas", "steer", "car_x"}),
            {
                "speed_kmh": SPEED,
                "engine_rpm": RPM,
                "gear": GEAR,
                "gas": pedal("throttle", PCT_1),
                "brake": pedal("brake", PCT_1),
                "clutch": pedal("clutch", PCT_1),
                "acc_g_horizontal": MotecName("G Force Lat", "G Lat", "G"),
                "acc_g_frontal": MotecName("G Force Long", "G Long", "G"),
                "acc_g_vertical": MotecName("G Force Vert", "G Vert", "G"),
            },
        ),
        simulator=Absent("no simulator of the handshake yet"),
        default_port=9996,
        nominal_rate_hz=60.0,
        client=True,
    ),
)
