"""OBD-II mode 01 answers from an ELM327 -> channel values (pure; SAE J1979 formulas).

The input is one complete adapter response: the text before the ``>`` prompt, e.g.
``b"SEARCHING...\\r410C1AF8\\r\\r"``. The decoder takes the first line that answers mode 01
(``41 pid data``, with or without spaces; headers off), ignores progress lines
(``SEARCHING...``, ``BUS INIT: ...OK``) and turns the adapter's failures into
:class:`DecodeError` reasons: ``no_data``, ``unknown_command`` (``?``), ``bus_error`` (CAN ERROR,
BUS BUSY, BUFFER FULL, ...), ``unable_to_connect``, ``stopped``.

A sample carries only the channel of the answered PID; the recorder holds the others.
"""

from __future__ import annotations

import binascii
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from wrtfd.decoders._common import load_definition
from wrtfd.decoders.base import Decoded
from wrtfd.errors import ConfigError, DecodeError

__all__ = ["PIDS", "ObdAnswer", "ObdDecoder", "PidSpec", "obd_definition", "parse_response"]


@dataclass(frozen=True, slots=True)
class PidSpec:
    """One mode-01 PID: how many data bytes it answers and its J1979 scaling."""

    pid: int
    channel: str
    size: int
    formula: Callable[[bytes], float]


def _a(d: bytes) -> float:
    return float(d[0])


def _ab(d: bytes) -> float:
    return float(d[0] * 256 + d[1])


def _pct(d: bytes) -> float:
    return d[0] * 100.0 / 255.0


def _temp(d: bytes) -> float:
    return d[0] - 40.0


def _trim(d: bytes) -> float:
    return (d[0] - 128) * 100.0 / 128.0


PIDS: dict[int, PidSpec] = {
    spec.pid: spec
    for spec in (
        PidSpec(0x04, "engine_load_pct", 1, _pct),
        PidSpec(0x05, "coolant_temp_c", 1, _temp),
        PidSpec(0x06, "short_fuel_trim_b1_pct", 1, _trim),
        PidSpec(0x07, "long_fuel_trim_b1_pct", 1, _trim),
        PidSpec(0x0A, "fuel_pressure_kpa", 1, lambda d: d[0] * 3.0),
        PidSpec(0x0B, "intake_map_kpa", 1, _a),
        PidSpec(0x0C, "engine_rpm", 2, lambda d: _ab(d) / 4.0),
        PidSpec(0x0D, "vehicle_speed_kmh", 1, _a),
        PidSpec(0x0E, "timing_advance_deg", 1, lambda d: d[0] / 2.0 - 64.0),
        PidSpec(0x0F, "intake_temp_c", 1, _temp),
        PidSpec(0x10, "maf_g_per_s", 2, lambda d: _ab(d) / 100.0),
        PidSpec(0x11, "throttle_pct", 1, _pct),
        PidSpec(0x1F, "run_time_s", 2, _ab),
        PidSpec(0x2F, "fuel_level_pct", 1, _pct),
        PidSpec(0x33, "baro_kpa", 1, _a),
        PidSpec(0x42, "module_voltage_v", 2, lambda d: _ab(d) / 1000.0),
        PidSpec(0x45, "relative_throttle_pct", 1, _pct),
        PidSpec(0x46, "ambient_temp_c", 1, _temp),
        PidSpec(0x49, "accel_pedal_d_pct", 1, _pct),
        PidSpec(0x5C, "oil_temp_c", 1, _temp),
        PidSpec(0x5E, "fuel_rate_l_per_h", 2, lambda d: _ab(d) / 20.0),
    )
}

_FAILURES: tuple[tuple[bytes, str], ...] = (
    (b"NO DATA", "no_data"),
    (b"UNABLE TO CONNECT", "unable_to_connect"),
    (b"STOPPED", "stopped"),
    (b"CAN ERROR", "bus_error"),
    (b"BUS BUSY", "bus_error"),
    (b"BUS ERROR", "bus_error"),
    (b"BUFFER FULL", "bus_error"),
    (b"DATA ERROR", "bus_error"),
    (b"FB ERROR", "bus_error"),
    (b"LV RESET", "adapter_reset"),
    (b"ERR", "bus_error"),
)
_PROGRESS = (b"SEARCHING", b"BUS INIT")
_HEX_CHARS = frozenset(b"0123456789ABCDEFabcdef")


def obd_definition() -> dict[str, Any]:
    """A fresh copy of the WRTF definition of the OBD frame (``wrtfd/schemas/obd.wrtf.yaml``).

    A copy: the caller (a source's ``mapping``, a test) may edit it.
    """
    return load_definition("obd.wrtf.yaml")


@dataclass(frozen=True, slots=True)
class ObdAnswer:
    pid: int
    data: bytes


def parse_response(response: bytes) -> ObdAnswer:
    """The first mode-01 answer in an ELM327 response.

    :raises DecodeError: with the adapter's failure as reason, or ``malformed``.
    """
    lines = [ln.strip() for ln in response.replace(b"\n", b"\r").split(b"\r")]
    lines = [ln for ln in lines if ln and not ln.startswith(_PROGRESS)]
    if not lines:
        raise DecodeError("empty response", reason="empty")
    for line in lines:
        compact = line.replace(b" ", b"")
        if compact.startswith(b"41") and len(compact) >= 4 and _HEX_CHARS.issuperset(compact):
            if len(compact) % 2:
                raise DecodeError(f"odd number of hex digits: {line[:40]!r}", reason="malformed")
            raw = binascii.unhexlify(compact)
            return ObdAnswer(raw[1], raw[2:])
    first = lines[0]
    if first == b"?":
        raise DecodeError("adapter did not understand the request ('?')", reason="unknown_command")
    upper = first.upper()
    for text, reason in _FAILURES:
        if text in upper:
            raise DecodeError(f"adapter answered {first[:40]!r}", reason=reason)
    compact = first.replace(b" ", b"")
    if compact.startswith(b"7F"):
        raise DecodeError(f"ECU refused the request: {first[:40]!r}", reason="negative_response")
    raise DecodeError(f"not a mode 01 answer: {first[:40]!r}", reason="malformed")


class ObdDecoder:
    """ELM327 response -> :class:`Decoded` with the channel of the answered PID.

    ``pids``: the PIDs that will be polled (ints or names of :data:`PIDS` channels); answers
    for other PIDs are dropped as ``unexpected_pid``. None accepts every known PID.
    """

    def __init__(self, *, pids: Iterable[int | str] | None = None) -> None:
        self.definition = obd_definition()
        self.pids: tuple[int, ...] = tuple(PIDS) if pids is None else tuple(_pid_of(p) for p in pids)
        self._accept = frozenset(self.pids)

    def decode_answer(self, answer: ObdAnswer) -> dict[str, object]:
        spec = PIDS.get(answer.pid)
        if spec is None or answer.pid not in self._accept:
            raise DecodeError(f"answer for PID 0x{answer.pid:02X} not polled", reason="unexpected_pid")
        if len(answer.data) < spec.size:
            raise DecodeError(
                f"PID 0x{spec.pid:02X} needs {spec.size} data bytes, got {len(answer.data)}",
                reason="wrong_size",
            )
        return {spec.channel: spec.formula(answer.data)}

    def decode(self, data: bytes) -> Decoded | None:
        return Decoded(values=self.decode_answer(parse_response(data)))


def _pid_of(value: int | str) -> int:
    if isinstance(value, int):
        if value not in PIDS:
            raise ConfigError(f"OBD PID 0x{value:02X} is not supported; known: {sorted(PIDS)}")
        return value
    for spec in PIDS.values():
        if spec.channel == value:
            return spec.pid
    try:
        pid = int(value, 16)
    except ValueError:
        raise ConfigError(f"unknown OBD PID {value!r}; known: {[s.channel for s in PIDS.values()]}") from None
    return _pid_of(pid)
