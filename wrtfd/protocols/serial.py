"""Devices on a serial line: NMEA and u-blox GPS receivers, OBD-II through an ELM327, CAN through SLCAN."""

from __future__ import annotations

from wrtfd.protocols._common import RPM, SPEED
from wrtfd.protocols._descriptor import Absent, MotecChannels, MotecName, ProtocolInfo

__all__ = ["PROTOCOLS"]

_SERIAL = Absent("a serial line, not datagrams: the source's device says what it is")
_NO_SIMULATOR = Absent("no simulator of serial devices (tests use ptys with recorded lines)")
_GNSS_PTY = Absent(
    "a receiver on a pseudo-terminal, not datagrams: wrtfd simulate --protocol ubx|nmea --pty"
    " (wrtfd.simulate.gnss_pty)"
)
#: MoTeC's GPS channels, for both receivers (the u-blox definition uses the NMEA names).
_GPS_NAMES = {
    "lat_deg": MotecName("GPS Latitude", "GPSLat"),
    "lon_deg": MotecName("GPS Longitude", "GPSLong"),
    "alt_msl_m": MotecName("GPS Altitude", "GPSAlt"),
    "speed_mps": MotecName("GPS Speed", "GPSSpd"),
    "course_deg": MotecName("GPS Heading", "GPSHead"),
}
_LAT_LON = Absent("latitude/longitude, not a track's metres: lap timing takes a circuit (docs/circuits.md)")

PROTOCOLS = (
    ProtocolInfo(
        name="nmea",
        title="NMEA 0183 GPS receiver",
        transport="serial",
        decoder="wrtfd.decoders.nmea:NmeaDecoder",
        schema_file="nmea.wrtf.yaml",
        sniff=_SERIAL,
        position=_LAT_LON,
        motec=MotecChannels(frozenset({"lat_deg", "lon_deg"}), _GPS_NAMES),
        simulator=_GNSS_PTY,
    ),
    ProtocolInfo(
        name="ubx",
        title="u-blox receiver (UBX NAV-PVT), set up by wrtfd",
        transport="serial",
        decoder="wrtfd.decoders.ubx:UbxDecoder",
        schema_file="ubx.wrtf.yaml",
        sniff=_SERIAL,
        position=_LAT_LON,
        motec=MotecChannels(frozenset({"lat_deg", "lon_deg", "itow_ms"}), _GPS_NAMES),
        simulator=_GNSS_PTY,
    ),
    ProtocolInfo(
        name="obd",
        title="OBD-II mode 01 through an ELM327 adapter",
        transport="serial",
        decoder="wrtfd.decoders.obd:ObdDecoder",
        schema_file="obd.wrtf.yaml",
        sniff=_SERIAL,
        position=Absent("OBD-II gives no position"),
        motec=MotecChannels(
            frozenset({"engine_rpm", "vehicle_speed_kmh", "throttle_pct"}),
            {
                "engine_rpm": RPM,
                "vehicle_speed_kmh": SPEED,
                "throttle_pct": MotecName("Throttle Pos", "Thr Pos"),
                "coolant_temp_c": MotecName("Eng Water Temp", "WaterT"),
                "oil_temp_c": MotecName("Eng Oil Temp", "OilTemp"),
            },
        ),
        simulator=_NO_SIMULATOR,
    ),
    ProtocolInfo(
        name="slcan",
        title="CAN bus over SLCAN (Lawicel ASCII) with a DBC file",
        transport="serial",
        decoder="wrtfd.decoders.slcan:SlcanDecoder",
        schema_file=Absent("generated from the DBC and the channel mapping"),
        sniff=_SERIAL,
        position=Absent("the channels are the DBC's: give track_position"),
        motec=Absent("the channels are the DBC's: name them in the mapping"),
        simulator=_NO_SIMULATOR,
    ),
)
