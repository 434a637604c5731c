"""CARLA recorder import speed, in CARLA frames per second.

Builds a recording of 100 vehicles for 10 minutes at 20 Hz (12,000 frames; ``--quick``: 1 minute)
following ``spec/carla-recorder-layout.md``, then times, side by side in this process:

* baseline: a naive reader that walks the packets and unpacks every Position record with
  ``struct.unpack_from`` (what the reader would cost without numpy);
* ``wrtfd.carla`` reader: every packet decoded (positions and animations as numpy views);
* ``wrtfd import --actor hero`` and ``--actor all-vehicles``: reader + channels + scheduler + WRTF writer.

    python bench/bench_carla.py [--quick] [--vehicles N] [--minutes M]
"""

from __future__ import annotations

import argparse
import struct
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

_POS = np.dtype([("id", "<u4"), ("loc", "<f4", (3,)), ("rot", "<f4", (3,))])
_ANIM = np.dtype(
    [("id", "<u4"), ("steer", "<f4"), ("throttle", "<f4"), ("brake", "<f4"), ("hand", "u1"), ("gear", "<i4")]
)


def _lp(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<H", len(raw)) + raw


def build_recording(vehicles: int, frames: int, hz: int = 20) -> bytes:
    """A plausible recording: vehicles circling, all created in frame 1, the first one the hero."""
    out = bytearray(
        struct.pack("<H", 1) + _lp("CARLA_RECORDER") + struct.pack("<q", 1_700_000_000) + _lp("Town04")
    )
    ids = np.arange(1000, 1000 + vehicles, dtype=np.uint32)
    pos = np.zeros(vehicles, _POS)
    pos["id"] = ids
    anim = np.zeros(vehicles, _ANIM)
    anim["id"] = ids
    anim["gear"] = 3
    radius = 5000.0 + 200.0 * np.arange(vehicles)
    dt = 1.0 / hz
    adds = bytearray(struct.pack("<H", vehicles))
    for i, actor_id in enumerate(ids):
        role = "hero" if i == 0 else "autopilot"
        adds += struct.pack("<IB3f3fI", int(actor_id), 1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 7)
        adds += _lp("vehicle.tesla.model3") + struct.pack("<H", 2)
        adds += b"\x05" + _lp("role_name") + _lp(role) + b"\x05" + _lp("color") + _lp("10,20,30")
    for n in range(frames):
        t = n * dt
        out += struct.pack("<BIQdd", 0, 24, n + 1, dt, t)
        if n == 0:
            out += struct.pack("<BI", 2, len(adds)) + adds
        angle = t * 20.0 / radius * 100.0
        pos["loc"][:, 0] = radius * np.cos(angle)
        pos["loc"][:, 1] = radius * np.sin(angle)
        pos["rot"][:, 2] = np.degrees(angle) + 90.0
        anim["throttle"] = 0.5 + 0.5 * np.sin(t)
        anim["steer"] = 0.1
        out += struct.pack("<BIH", 6, 2 + pos.nbytes, vehicles) + pos.tobytes()
        out += struct.pack("<BIH", 8, 2 + anim.nbytes, vehicles) + anim.tobytes()
        out += struct.pack("<BI", 1, 0)
    return bytes(out)


def naive_reader(data: bytes) -> int:
    """Baseline: walk the packets and decode Position and AnimVehicle records one by one with struct."""
    pos_rec = struct.Struct("<I3f3f")
    anim_rec = struct.Struct("<IfffBi")
    head = struct.Struct("<BI")
    (maplen,) = struct.unpack_from("<H", data, 26)
    pos = 28 + maplen
    frames = 0
    n = len(data)
    while pos + 5 <= n:
        pid, size = head.unpack_from(data, pos)
        body = pos + 5
        if pid in (6, 8):
            rec = pos_rec if pid == 6 else anim_rec
            (count,) = struct.unpack_from("<H", data, body)
            records = [rec.unpack_from(data, body + 2 + i * rec.size) for i in range(count)]
            assert len(records) == count
        elif pid == 1:
            frames += 1
        pos = body + size
    return frames


def wrtfd_reader(data: bytes) -> int:
    from wrtfd.carla.reader import FrameStream

    return sum(1 for _ in FrameStream(data))


def best_of(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1 minute of recording, one repetition")
    ap.add_argument("--vehicles", type=int, default=100)
    ap.add_argument("--minutes", type=float, default=10.0)
    args = ap.parse_args()
    minutes = 1.0 if args.quick else args.minutes
    repeat = 1 if args.quick else 3
    frames = int(minutes * 60 * 20)
    data = build_recording(args.vehicles, frames)
    print(f"recording: {args.vehicles} vehicles, {frames} frames at 20 Hz, {len(data) / 1e6:.1f} MB")

    rows: list[tuple[str, float]] = []
    rows.append(("baseline: struct.unpack_from per record", best_of(lambda: naive_reader(data), repeat)))
    rows.append(("wrtfd.carla reader (all packets)", best_of(lambda: wrtfd_reader(data), repeat)))

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "bench.log"
        src.write_bytes(data)
        try:
            from wrtfd.importers.carla import import_recording

            for actor in ("hero", "all-vehicles"):
                out = Path(tmp) / f"{actor}.wrtf"

                def run(actor: str = actor, out: Path = out) -> None:
                    import_recording(
                        src,
                        out,
                        actor=actor,
                        max_vehicles=args.vehicles,
                        start_timestamp_us=1_700_000_000_000_000,
                        force=True,
                    )

                rows.append((f"wrtfd import --actor {actor}", best_of(run, repeat)))
                rows[-1] = (rows[-1][0] + f" ({out.stat().st_size / 1e6:.1f} MB out)", rows[-1][1])
        except ImportError as exc:
            print(f"import not measured: {exc}")

    base = rows[0][1]
    print(f"{'what':<62} {'seconds':>9} {'frames/s':>12} {'vs baseline':>12}")
    for name, secs in rows:
        print(f"{name:<62} {secs:>9.3f} {frames / secs:>12,.0f} {base / secs:>11.2f}x")


if __name__ == "__main__":
    main()
