"""ACC broadcasting messages (game -> client), built in the tests from the protocol document
(``shared/spec/protocols/wave2-games.md`` section 2): little-endian, strings u16 length + UTF-8.

Independent of wrtfd's decoder and of the simulator, so all three cross-check each other.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

NO_TIME = 0x7FFFFFFF


def string(text: str | bytes) -> bytes:
    raw = text.encode("utf-8") if isinstance(text, str) else text
    return struct.pack("<H", len(raw)) + raw


def lap(
    ms: int = NO_TIME,
    car: int = 0,
    splits: Sequence[int] = (),
    *,
    invalid: int = 0,
    valid_for_best: int = 1,
    outlap: int = 0,
    inlap: int = 0,
) -> bytes:
    """Lap: i32 ms, u16 car, u16 driver, u8 split count + i32 splits, u8 invalid, validForBest,
    outlap, inlap."""
    return (
        struct.pack("<iHHB", ms, car, 0, len(splits))
        + b"".join(struct.pack("<i", s) for s in splits)
        + struct.pack("<BBBB", invalid, valid_for_best, outlap, inlap)
    )


def registration(conn: int = 5, success: bool = True, writable: bool = True, error: str = "") -> bytes:
    return struct.pack("<BiBB", 1, conn, success, writable) + string(error)


def realtime(
    *,
    event: int = 0,
    session: int = 0,
    session_type: int = 10,
    phase: int = 5,
    time_ms: float = 61_500.0,
    end_ms: float = 3_600_000.0,
    focused: int = 7,
    replay: tuple[float, float] | None = None,
    best: bytes | None = None,
) -> bytes:
    body = struct.pack("<BHHBBffi", 2, event, session, session_type, phase, time_ms, end_ms, focused)
    body += string("set") + string("cam") + string("hud")
    if replay is None:
        body += b"\x00"
    else:
        body += b"\x01" + struct.pack("<ff", *replay)
    body += struct.pack("<fbbBBB", 50_400_000.0, 21, -3, 4, 2, 7)
    return body + (best if best is not None else lap(95_123, 7, (30_000, 32_000, 33_123)))


def car_update(
    car: int,
    *,
    gear: int = 4,
    x: float = 100.0,
    y: float = -50.0,
    kmh: int = 201,
    position: int = 1,
    laps: int = 3,
    spline: float = 0.25,
    delta: int = -120,
    best: bytes | None = None,
    last: bytes | None = None,
    current: bytes | None = None,
) -> bytes:
    head = struct.pack(
        "<BHHBBfffBHHHHfHi", 3, car, 0, 1, gear + 2, x, y, 1.5, 1, kmh, position, position, position,
        spline, laps, delta,
    )  # fmt: skip
    return (
        head
        + (best if best is not None else lap(95_000, car, (30_000, 32_000, 33_000)))
        + (last if last is not None else lap(96_000, car, (30_500, 32_100, 33_400)))
        + (current if current is not None else lap(20_000, car, (19_000,)))
    )


def entry_list(cars: Sequence[int], conn: int = 5) -> bytes:
    return struct.pack("<BiH", 4, conn, len(cars)) + b"".join(struct.pack("<H", c) for c in cars)


def entry_list_car(
    car: int,
    number: int,
    *,
    model: int = 31,
    cup: int = 0,
    drivers: Sequence[tuple[str, str]] = (("Sim", "Driver"),),
) -> bytes:
    body = struct.pack("<BHB", 6, car, model) + string(f"Team {number}")
    body += struct.pack("<iBBHB", number, cup, 0, 17, len(drivers))
    for first, last in drivers:
        body += string(first) + string(last) + string(last[:3].upper()) + struct.pack("<BH", 2, 17)
    return body


def track_data(name: str = "monza", track_id: int = 12, meters: int = 5793, conn: int = 5) -> bytes:
    body = struct.pack("<Bi", 5, conn) + string(name) + struct.pack("<ii", track_id, meters)
    body += b"\x02" + string("Drivable") + b"\x02" + string("Chase") + string("Cockpit")
    body += string("Onboard") + b"\x00"
    return body + b"\x02" + string("Basic HUD") + string("Broadcasting")


def event(kind: int, car: int = 7, time_ms: int = 95_000, message: str | bytes = "lap") -> bytes:
    return struct.pack("<BB", 7, kind) + string(message) + struct.pack("<ii", time_ms, car)


def session_stream() -> list[bytes]:
    """A short valid session: registration, track, entry list, then updates and events."""
    return [
        registration(),
        realtime(),
        track_data(),
        entry_list([7, 1001, 3]),
        entry_list_car(7, 88),
        entry_list_car(1001, 12, model=30),
        entry_list_car(3, 3, model=25, drivers=(("A", "One"), ("B", "Two"))),
        car_update(7),
        car_update(1001, position=2),
        car_update(3, position=3, gear=-1),
        event(5),
        event(7),
    ]
