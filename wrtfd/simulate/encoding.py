"""What every simulated game encoder shares: the track facts it is given, its interface, and the
clamping helpers for the games' small integer fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from wrtfd.simulate.car import CarSpec, CarState

__all__ = ["Encoder", "EncoderOptions", "TrackInfo"]


@dataclass(frozen=True, slots=True)
class TrackInfo:
    name: str
    length_m: float
    sectors_m: tuple[float, ...]
    laps: int


@dataclass(frozen=True, slots=True)
class EncoderOptions:
    """What ``wrtfd simulate`` can choose; each game's factory (its descriptor's ``simulator``,
    :mod:`wrtfd.protocols`) reads the options that concern it."""

    seed: int = 0
    car: CarSpec | None = None
    forza_format: str = "fm2023"
    f1_format: int = 2024
    gt7_variant: str = "C"
    #: Laps the game marks invalid from half-way round on (f1: Lap Data's currentLapInvalid; acc:
    #: the simulated car's current lap's invalid byte).
    invalid_laps: frozenset[int] = frozenset()


class Encoder(Protocol):
    name: str
    default_port: int
    rate_hz: float

    def encode(self, state: CarState, *, first: bool, last: bool) -> list[bytes]:
        """Datagrams to send at this tick (``first``/``last``: the first and last tick of the run)."""
        ...


def _u8(v: float) -> int:
    return max(0, min(255, round(v)))


def _s8(v: float) -> int:
    return max(-127, min(127, round(v)))


def _u16(v: float) -> int:
    return max(0, min(65535, round(v)))
