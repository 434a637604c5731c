"""A small recording that uses every packet type, shared by the reader, info and import tests.

Timeline (20 Hz, elapsed in seconds):

=====  =======  ===========================================================================
frame  elapsed  events
=====  =======  ===========================================================================
1      0.00     add hero 10, vehicle 11, walker 40, light 20, stop sign 30, sensor 50;
                sensor 50 parented to 10; unknown packets 12 and 100
2      0.05     light 20 turns green
3      0.10     collision 7 between 10 (hero) and 11
4      0.15     vehicle 11 deleted
5      0.20     vehicle 12 added
6      0.25     (no events)
7      0.30     truncated: FrameStart and a Position packet cut short
=====  =======  ===========================================================================

The hero drives along +X at 10 m/s (50 cm per frame), the positions are exact in float32.
"""

from __future__ import annotations

from tests.carla.carla_writer import (
    Actor,
    CarlaWriter,
    anim_vehicle,
    anim_walker,
    collision,
    event_add,
    event_del,
    event_parent,
    packet,
    position,
    traffic_light,
)

MAP = "Town06"
DATE_S = 1_700_000_000  # 2023-11-14T22:13:20Z
DT_S = 0.05

HERO = Actor(
    10,
    1,
    "vehicle.tesla.model3",
    description_uid=101,
    location=(100.0, 200.0, 30.0),
    rotation=(0.0, 0.0, 90.0),
    attributes=[(5, "role_name", "hero"), (5, "color", "79,33,85"), (1, "number_of_wheels", "4")],
)
OTHER = Actor(11, 1, "vehicle.seat.leon", description_uid=102, attributes=[(5, "role_name", "autopilot")])
LATE = Actor(12, 1, "vehicle.audi.tt", description_uid=103, attributes=[(5, "role_name", "autopilot")])
WALKER = Actor(40, 2, "walker.pedestrian.0001", description_uid=201)
LIGHT = Actor(20, 3, "traffic.traffic_light", description_uid=301)
SIGN = Actor(30, 4, "traffic.stop", description_uid=302)
SENSOR = Actor(50, 5, "sensor.other.collision", description_uid=401)


def hero_x_cm(frame: int) -> float:
    return 100.0 + 50.0 * (frame - 1)


def hero_controls(frame: int) -> tuple[int, float, float, float, bool, int]:
    """(id, steering, throttle, brake, handbrake, gear) of the hero in ``frame``."""
    return (
        10,
        0.25 * (frame % 2),
        0.5 + 0.125 * frame,
        0.0 if frame < 4 else 0.75,
        frame == 6,
        min(frame, 3),
    )


def build(*, truncated: bool = True) -> bytes:
    w = CarlaWriter(map_name=MAP, date_s=DATE_S)
    for frame in range(1, 7):
        w.start_frame(DT_S)
        alive = [10, 40] + ([11] if frame < 4 else []) + ([12] if frame >= 5 else [])
        if frame == 1:
            w.add(event_add([HERO, OTHER, WALKER, LIGHT, SIGN, SENSOR]))
            w.add(event_parent([(50, 10)]))
            w.add(packet(12, b"\x01\x02\x03"))  # Kinematics: skipped by size
            w.add(packet(100, b"user data"))  # a user packet
        if frame == 3:
            w.add(collision([(7, 10, 11, True, False)]))
        if frame == 4:
            w.add(event_del([11]))
        if frame == 5:
            w.add(event_add([LATE]))
        records = []
        for actor_id in alive:
            if actor_id == 10:
                records.append((10, (hero_x_cm(frame), 200.0, 30.0), (0.0, 0.0, 90.0)))
            else:
                records.append((actor_id, (1000.0 * actor_id, float(frame), 0.0), (0.0, 0.0, 0.0)))
        w.add(position(records))
        w.add(traffic_light([(20, False, 0.5 * frame, 0 if frame < 2 else 2)]))
        vehicles = [hero_controls(frame)] + [(i, 0.0, 0.25, 0.0, False, 1) for i in alive if i in (11, 12)]
        w.add(anim_vehicle(vehicles))
        w.add(anim_walker([(40, 1.5)]))
        w.end_frame()
    if truncated:
        w.start_frame(DT_S)
        w.add(position([(10, (hero_x_cm(7), 200.0, 30.0), (0.0, 0.0, 90.0))])[:-6])
    return w.getvalue()
