"""A game-feed simulator: a car driven round a track lane, sent as a real game's UDP packets.

It lets the README demo and the end-to-end tests run on a machine with no game: ``wrtfd
simulate --protocol forza --track config/tracks/road.trk --to 127.0.0.1:5301``.
"""

from __future__ import annotations

from wrtfd.simulate.car import CarSpec, CarState, SimulatedLap, Simulation
from wrtfd.simulate.packets import ENCODERS, TrackInfo, make_encoder
from wrtfd.simulate.sender import SendStats, parse_address, send_session

__all__ = [
    "ENCODERS",
    "CarSpec",
    "CarState",
    "SendStats",
    "SimulatedLap",
    "Simulation",
    "TrackInfo",
    "make_encoder",
    "parse_address",
    "send_session",
]
