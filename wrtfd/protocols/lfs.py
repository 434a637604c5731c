"""Live for Speed's OutGauge (also BeamNG.drive), OutSim and OutSim2."""

from __future__ import annotations

from wrtfd.protocols._common import DEG, PCT_1, RPM, SPEED, pedal
from wrtfd.protocols._descriptor import (
    Absent,
    MotecChannels,
    MotecName,
    PositionFields,
    ProtocolInfo,
    Simulator,
)

__all__ = ["PROTOCOLS"]

#: OutGauge and OutSim2 send the gear as 0 = R, 1 = N: MoTeC's (and the other games') -1 = R.
_GEAR_FROM_R0 = MotecName("Gear", "Gear", None, 1.0, -1.0)
#: LFS: X right, Y forward, Z up, so the track's z (north-ish, Y-up world) is -pos_y.
_LFS_POSITION = PositionFields("pos_x", "pos_y", -1.0)

PROTOCOLS = (
    ProtocolInfo(
        name="outgauge",
        title="Live for Speed / BeamNG.drive OutGauge",
        transport="udp",
        decoder="wrtfd.decoders.outgauge:OutGaugeDecoder",
        schema_file="outgauge.wrtf.yaml",
        sniff="wrtfd.decoders.outgauge:looks_like_outgauge",
        position=Absent("OutGauge carries no position: record OutSim beside it for laps"),
        motec=MotecChannels(
            frozenset({"speed", "rpm", "display1"}),
            {
                "speed": SPEED,
                "rpm": RPM,
                "gear": _GEAR_FROM_R0,
                "throttle": pedal("throttle", PCT_1),
                "brake": pedal("brake", PCT_1),
                "clutch": pedal("clutch", PCT_1),
                "oil_temp": MotecName("Eng Oil Temp", "OilTemp"),
                "oil_pressure": MotecName("Eng Oil Pres", "OilPres"),
            },
        ),
        simulator=Simulator("wrtfd.simulate.packets:outgauge_encoder", "LFS OutGauge (92 B)"),
        default_port=4444,
        nominal_rate_hz=60.0,
        port_rank=2,
    ),
    ProtocolInfo(
        name="outsim",
        title="Live for Speed OutSim (v1, OutSim Opts 0)",
        transport="udp",
        decoder="wrtfd.decoders.outgauge:OutSimDecoder",
        schema_file="outsim.wrtf.yaml",
        sniff="wrtfd.decoders.outgauge:looks_like_outsim",
        position=_LFS_POSITION,
        motec=Absent("motion and position only: none of MoTeC's common channels"),
        simulator=Simulator("wrtfd.simulate.packets:outsim_encoder", "LFS OutSim v1 (64 B, positions)"),
        default_port=4445,
        nominal_rate_hz=60.0,
        port_rank=3,
    ),
    ProtocolInfo(
        name="outsim2",
        title="Live for Speed OutSim2 (OutSim Opts != 0)",
        transport="udp",
        decoder="wrtfd.decoders.outgauge:OutSim2Decoder",
        schema_file="outsim2.wrtf.yaml",
        sniff=Absent(
            "its size and fields depend on the game's OutSim Opts: name its port (--protocol PORT=outsim2)"
        ),
        position=_LFS_POSITION,
        motec=MotecChannels(
            frozenset({"pos_x", "throttle", "input_steer"}),
            {
                "throttle": pedal("throttle", PCT_1),
                "brake": pedal("brake", PCT_1),
                "clutch": pedal("clutch", PCT_1),
                "gear": _GEAR_FROM_R0,
                "input_steer": MotecName("Steered Angle", "Steer", "deg", DEG),
                "current_lap_dist": MotecName("Lap Distance", "LapDist"),
            },
        ),
        simulator=Absent("the simulator sends OutSim v1; OutSim2's layout depends on OutSim Opts"),
        default_port=4446,
        nominal_rate_hz=60.0,
    ),
)
