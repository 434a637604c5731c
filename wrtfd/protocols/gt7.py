"""Gran Turismo 7's Simulator Interface."""

from __future__ import annotations

from wrtfd.protocols._common import DEG, GEAR, PCT_1, PCT_255, RPM, SPEED, pedal
from wrtfd.protocols._descriptor import (
    Absent,
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
        name="gt7",
        title="Gran Turismo 7 Simulator Interface (heartbeat to the console, Salsa20)",
        transport="udp",
        decoder="wrtfd.decoders.gt7:Gt7Decoder",
        schema_file="gt7.wrtf.yaml",
        sniff=Absent(
            "Salsa20-encrypted: only a decryption tells it (a decode, not a content test); the"
            " console sends from port 33739, name the port (--protocol PORT=gt7)"
        ),
        # Y up; not on track in menus
        position=PositionFields("position_x", "position_z", 1.0, "on_track"),
        motec=MotecChannels(
            frozenset({"on_track", "rpm_after_clutch", "steering_wheel_angle", "engine_rpm"}),
            {
                "speed": SPEED,
                "engine_rpm": RPM,
                "gear": GEAR,
                "throttle": pedal("throttle", PCT_255),
                "brake": pedal("brake", PCT_255),
                "clutch_pedal": pedal("clutch", PCT_1),
                "steering_wheel_angle": MotecName("Steered Angle", "Steer", "deg", DEG),
                "boost_pressure": MotecName("Turbo Boost Pressure", "TurboP"),
                "oil_temp": MotecName("Eng Oil Temp", "OilTemp"),
                "water_temp": MotecName("Eng Water Temp", "WaterT"),
                "oil_pressure": MotecName("Eng Oil Pres", "OilPres"),
                **wheels("tyre_temp", "Tyre Temp", "TTemp"),
            },
        ),
        simulator=Simulator(
            "wrtfd.simulate.gt7:gt7_encoder",
            "Gran Turismo 7, encrypted; the simulator plays the console (--listen); --gt7-variants",
        ),
        default_port=33740,
        nominal_rate_hz=60.0,
        client=True,
    ),
)
