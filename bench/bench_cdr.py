"""CDR decode throughput: wrtfd's decoder vs pycdr2's, same payloads, same process.

    python bench/bench_cdr.py [--quick]

Cases: a struct of 20 primitive members (XCDR1 and XCDR2, little endian), the same struct with
a string and a bounded sequence added (the variable-size path), and the whole receive path
(.zddsrec frame parsing + CDR decode). Baselines: pycdr2's ``deserialize`` (the peer library) and
a bare ``struct.unpack_from`` of the fixed part (the floor no Python decoder beats).

(No ``from __future__ import annotations`` here: pycdr2 resolves the dataclass annotations itself.)
"""

import argparse
import dataclasses
import random
import struct
import time
from collections.abc import Callable

from pycdr2 import Endianness, IdlStruct
from pycdr2.types import float32, float64, int8, int16, int32, sequence, uint8, uint16, uint32, uint64

from wrtfd.zddsrec.cdr import CdrDecoder
from wrtfd.zddsrec.format import (
    Header,
    ParticipantEntry,
    StreamDecoder,
    TopicEntry,
    encode_frame,
    encode_header,
)
from wrtfd.zddsrec.types import parse_idl

IDL = """
struct Telemetry20 {
  uint32 seq; double t; float speed; float rpm; uint8 gear; float throttle; float brake; float steer;
  double lat; double lon; int16 alt_dm; uint16 flags; int32 lap; float fuel; float tyre_fl; float tyre_fr;
  float tyre_rl; float tyre_rr; int8 drs; uint64 stamp;
};
struct Telemetry22 {
  uint32 seq; double t; float speed; float rpm; uint8 gear; float throttle; float brake; float steer;
  double lat; double lon; int16 alt_dm; uint16 flags; int32 lap; float fuel; float tyre_fl; float tyre_fr;
  float tyre_rl; float tyre_rr; int8 drs; uint64 stamp; string driver; sequence<float, 8> sectors;
};
"""
TYPES = parse_idl(IDL)


@dataclasses.dataclass
class Telemetry20(IdlStruct, typename="Telemetry20"):
    seq: uint32
    t: float64
    speed: float32
    rpm: float32
    gear: uint8
    throttle: float32
    brake: float32
    steer: float32
    lat: float64
    lon: float64
    alt_dm: int16
    flags: uint16
    lap: int32
    fuel: float32
    tyre_fl: float32
    tyre_fr: float32
    tyre_rl: float32
    tyre_rr: float32
    drs: int8
    stamp: uint64


@dataclasses.dataclass
class Telemetry22(IdlStruct, typename="Telemetry22"):
    seq: uint32
    t: float64
    speed: float32
    rpm: float32
    gear: uint8
    throttle: float32
    brake: float32
    steer: float32
    lat: float64
    lon: float64
    alt_dm: int16
    flags: uint16
    lap: int32
    fuel: float32
    tyre_fl: float32
    tyre_fr: float32
    tyre_rl: float32
    tyre_rr: float32
    drs: int8
    stamp: uint64
    driver: str
    sectors: sequence[float32, 8]


def sample(i: int, rng: random.Random, extra: bool) -> IdlStruct:
    f = rng.random
    vals = [
        i,
        f(),
        f(),
        f(),
        i % 8,
        f(),
        f(),
        f(),
        f(),
        f(),
        i % 100,
        i % 65536,
        i,
        f(),
        f(),
        f(),
        f(),
        f(),
        -1,
        i,
    ]
    if extra:
        return Telemetry22(*vals, "driver-" + str(i % 10), [f() for _ in range(i % 9)])  # type: ignore[call-arg]
    return Telemetry20(*vals)  # type: ignore[call-arg]


def rate(fn: Callable[[bytes], object], payloads: list[bytes], min_s: float) -> float:
    n = 0
    start = time.perf_counter()
    while True:
        for p in payloads:
            fn(p)
        n += len(payloads)
        elapsed = time.perf_counter() - start
        if elapsed >= min_s:
            return n / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="short run")
    args = ap.parse_args()
    min_s = 0.3 if args.quick else 2.0
    rng = random.Random(1)
    rows: list[tuple[str, str, float, float]] = []

    for label, cls, extra, v2 in (
        ("20 primitives, XCDR1 LE", Telemetry20, False, False),
        ("20 primitives, XCDR2 LE", Telemetry20, False, True),
        ("+string +sequence, XCDR1 LE", Telemetry22, True, False),
    ):
        objs = [sample(i, rng, extra) for i in range(1000)]
        payloads = [o.serialize(endianness=Endianness.Little, use_version_2=v2) for o in objs]
        ours = CdrDecoder(TYPES[cls.__name__])
        assert ours.decode(payloads[5]) == dataclasses.asdict(cls.deserialize(payloads[5]))  # type: ignore[attr-defined]
        peer = rate(cls.deserialize, payloads, min_s)  # type: ignore[attr-defined]
        mine = rate(ours.decode, payloads, min_s)
        rows.append((label, "pycdr2 deserialize", peer, 1.0))
        rows.append((label, "wrtfd CdrDecoder", mine, mine / peer))
        if not extra and not v2:
            fixed = struct.Struct("<I4xdffB3xfffddhHifffffb3xQ")
            assert fixed.size == len(payloads[0]) - 4, (fixed.size, len(payloads[0]))
            floor = rate(lambda p, u=fixed.unpack_from: u(p, 4), payloads, min_s)
            rows.append((label, "struct.unpack_from (floor)", floor, floor / peer))

    # whole receive path: stream parsing + decoding, vs pycdr2 decoding the same payloads
    objs = [sample(i, rng, False) for i in range(1000)]
    payloads = [o.serialize(endianness=Endianness.Little) for o in objs]
    header = Header(0, (ParticipantEntry(bytes(16), "p"),), (TopicEntry("t", "Telemetry20"),))
    stream = encode_header(header) + b"".join(encode_frame(i, 0, 0, 0, p) for i, p in enumerate(payloads))
    dec = CdrDecoder(TYPES["Telemetry20"])

    def whole(data: bytes) -> None:
        sd = StreamDecoder()
        for off in range(0, len(data), 65536):
            for fr in sd.feed(data[off : off + 65536]):
                dec.decode(fr.payload)

    n_loops = 0
    start = time.perf_counter()
    while time.perf_counter() - start < min_s:
        whole(stream)
        n_loops += 1
    path_rate = n_loops * len(payloads) / (time.perf_counter() - start)
    peer = rate(Telemetry20.deserialize, payloads, min_s)
    rows.append(("frames + CDR (receive path)", "pycdr2 deserialize only", peer, 1.0))
    rows.append(
        ("frames + CDR (receive path)", "wrtfd StreamDecoder+CdrDecoder", path_rate, path_rate / peer)
    )

    print(f"{'case':32} {'decoder':34} {'frames/s':>12} {'vs pycdr2':>10}")
    for case, name, r, ratio in rows:
        print(f"{case:32} {name:34} {r:12,.0f} {ratio:9.1f}x")


if __name__ == "__main__":
    main()
