"""What to send a u-blox receiver to set it up, by generation (pure; pyubx2 builds the messages).

Generation 9 and later (M9, M10, F9, X20) are configured with CFG-VALSET, one key per message
so that a NAK names the setting it refused; M8 and older with the legacy CFG-RATE, CFG-MSG,
CFG-NAV5 and CFG-PRT. The generation is read from MON-VER: its ``PROTVER=`` extension (27 and
later understand CFG-VALSET; M8 firmware stops at 23), else ``MOD=`` or the hardware version.
Settings go to RAM only: the daemon sets the receiver up again on every connect, and a
receiver's flash is not worn by it. docs/gnss.md lists what each generation gets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from wrtfd._optional import missing_dependency

try:
    from pyubx2 import POLL, SET, UBXMessage
except ImportError as exc:
    raise missing_dependency("pyubx2", extra="gnss", purpose="configuring u-blox receivers") from exc

__all__ = [
    "DYNAMIC_MODELS",
    "PORTS",
    "UBX_BAUD_RATES",
    "ConfigStep",
    "ReceiverInfo",
    "config_steps",
    "mon_ver_poll",
    "receiver_info",
]

#: Baud rates a u-blox UART runs at, the ones probed on connect.
UBX_BAUD_RATES = (9600, 38400, 115200, 230400, 460800, 921600, 57600, 19200, 4800)

#: CFG-NAV5 dynModel / CFG-NAVSPG-DYNMODEL values.
DYNAMIC_MODELS = {
    "portable": 0,
    "stationary": 2,
    "pedestrian": 3,
    "automotive": 4,
    "sea": 5,
    "airborne1g": 6,
    "airborne2g": 7,
    "airborne4g": 8,
}

#: Receiver port -> (legacy CFG-PRT portID, CFG-VALSET key suffix).
PORTS = {"uart1": (1, "UART1"), "uart2": (2, "UART2"), "usb": (3, "USB")}

_PROTVER = re.compile(r"PROTVER[= ]+(\d+)(?:\.(\d+))?")
_MOD = re.compile(r"MOD=(\S+)")
#: Modules with sensor fusion (ADR/UDR/HPS) send HNR-PVT: NEO-M8U, NEO-M8L, ZED-F9R, ...
_FUSION = re.compile(r"M8[UL]|F9[RK]|F10N|M9V")


@dataclass(frozen=True, slots=True)
class ReceiverInfo:
    """What MON-VER told about the receiver."""

    software: str
    hardware: str
    protocol_version: float | None
    module: str  # MOD= extension, "" when absent
    valset: bool  # generation 9 or later: configured with CFG-VALSET
    fusion: bool  # sends HNR-PVT

    @property
    def generation(self) -> str:
        """A short name for logs: the module, else the generation guessed from the versions."""
        if self.module:
            return self.module
        return "generation 9+" if self.valset else "M8 or older"


def receiver_info(software: str, hardware: str, extensions: tuple[str, ...]) -> ReceiverInfo:
    """Classify a receiver from its MON-VER strings."""
    protver: float | None = None
    module = ""
    for text in extensions:
        m = _PROTVER.search(text)
        if m is not None and protver is None:
            protver = float(f"{m.group(1)}.{m.group(2) or 0}")
        m = _MOD.search(text)
        if m is not None and not module:
            module = m.group(1)
    if protver is not None:
        valset = protver >= 27.0
    elif module:
        valset = re.search(r"M9|M10|F9|F10|X20", module) is not None
    else:
        # hardware version 00190000 is generation 9 (F9/M9), 000A0000 generation 10 (M10)
        try:
            hw = int(hardware, 16)
        except ValueError:
            hw = 0
        valset = hw >= 0x00190000 or hw == 0x000A0000
    return ReceiverInfo(
        software=software,
        hardware=hardware,
        protocol_version=protver,
        module=module,
        valset=valset,
        fusion=_FUSION.search(module) is not None,
    )


@dataclass(frozen=True, slots=True)
class ConfigStep:
    """One message of the set-up and what acknowledges it.

    ``baud``: the UART switches to this rate once the message is taken (the ACK may come at
    either rate, or be lost), so the sender follows it and checks the link at the new rate.
    """

    what: str  # for the log: "CFG-RATE 10 Hz", "CFG-VALSET CFG_NAVSPG_DYNMODEL=4"
    message: bytes
    msg_class: int
    msg_id: int
    baud: int | None = None


def mon_ver_poll() -> bytes:
    return bytes(UBXMessage("MON", "MON-VER", POLL).serialize())


def _valset(key: str, value: int, baud: int | None = None) -> ConfigStep:
    msg = UBXMessage.config_set(1, 0, [(key, value)])  # layer 1: RAM only
    return ConfigStep(f"CFG-VALSET {key}={value}", bytes(msg.serialize()), 0x06, 0x8A, baud)


def _legacy(name: str, what: str, baud: int | None = None, **fields: int) -> ConfigStep:
    msg = UBXMessage("CFG", name, SET, **fields)
    raw = bytes(msg.serialize())
    return ConfigStep(what, raw, raw[2], raw[3], baud)


def config_steps(
    info: ReceiverInfo,
    *,
    rate_hz: int,
    port: str,
    current_baud: int,
    dynamic_model: str = "automotive",
    nmea_off: bool = False,
    baud: int | None = None,
) -> list[ConfigStep]:
    """The messages that set ``info``'s receiver up, in order (the baud change last).

    :raises ValueError: an unknown port or dynamic model, a rate outside 1..25 Hz.
    """
    if not 1 <= rate_hz <= 25:
        raise ValueError(f"rate_hz must be 1..25, got {rate_hz}")
    if port not in PORTS:
        raise ValueError(f"port must be one of {sorted(PORTS)}, got {port!r}")
    if dynamic_model not in DYNAMIC_MODELS:
        raise ValueError(f"dynamic_model must be one of {sorted(DYNAMIC_MODELS)}, got {dynamic_model!r}")
    meas_ms = round(1000 / rate_hz)
    dyn = DYNAMIC_MODELS[dynamic_model]
    port_id, suffix = PORTS[port]
    new_baud = baud if baud is not None and baud != current_baud and port != "usb" else None
    steps: list[ConfigStep] = []
    if info.valset:
        steps.append(_valset("CFG_RATE_MEAS", meas_ms))
        steps.append(_valset("CFG_RATE_NAV", 1))
        steps.append(_valset(f"CFG_MSGOUT_UBX_NAV_PVT_{suffix}", 1))
        if info.fusion:
            steps.append(_valset(f"CFG_MSGOUT_UBX_HNR_PVT_{suffix}", 1))
        steps.append(_valset("CFG_NAVSPG_DYNMODEL", dyn))
        if nmea_off:
            steps.append(_valset(f"CFG_{suffix}OUTPROT_NMEA", 0))
        if new_baud is not None:
            steps.append(_valset(f"CFG_{suffix}_BAUDRATE", new_baud, baud=new_baud))
        return steps
    rate_fields = {"rateDDC": 0, "rateUART1": 0, "rateUART2": 0, "rateUSB": 0, "rateSPI": 0}
    rate_fields[{"uart1": "rateUART1", "uart2": "rateUART2", "usb": "rateUSB"}[port]] = 1
    steps.append(_legacy("CFG-RATE", f"CFG-RATE {rate_hz} Hz", measRate=meas_ms, navRate=1, timeRef=1))
    steps.append(_legacy("CFG-MSG", "CFG-MSG NAV-PVT on", msgClass=0x01, msgID=0x07, **rate_fields))
    if info.fusion:
        steps.append(_legacy("CFG-MSG", "CFG-MSG HNR-PVT on", msgClass=0x28, msgID=0x00, **rate_fields))
    steps.append(_legacy("CFG-NAV5", f"CFG-NAV5 {dynamic_model}", dyn=1, dynModel=dyn))
    if nmea_off or new_baud is not None:
        uart = port != "usb"
        what = "CFG-PRT" + (" NMEA off" if nmea_off else "") + (f" {new_baud} baud" if new_baud else "")
        steps.append(
            _legacy(
                "CFG-PRT",
                what,
                baud=new_baud,
                portID=port_id,
                charLen=3 if uart else 0,  # 8 data bits
                parity=4 if uart else 0,  # none
                nStopBits=0,
                baudRate=(new_baud or current_baud) if uart else 0,
                inUBX=1,
                inNMEA=1,
                outUBX=1,
                outNMEA=0 if nmea_off else 1,
            )
        )
    return steps
