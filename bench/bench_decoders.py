"""Decode rate of every UDP game decoder, next to a plain ``struct.unpack`` of the same bytes.

    python bench/bench_decoders.py [--quick]

Packets come from ``../shared/data/udp`` when present (real captures), otherwise synthetic ones
of the right sizes. The baseline unpacks the whole datagram with one precompiled
``struct.Struct`` of its layout and builds nothing: the floor any Python decoder pays. The
ratio says how much the channel dict, session signals and checks cost on top.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from wrtfd.decoders._f1_layouts import FORMATS
from wrtfd.decoders.registry import make_decoder

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "udp"


def _f1_packets() -> dict[int, bytes]:
    """One 2024 packet per id from the capture (id -> datagram)."""
    found: dict[int, bytes] = {}
    path = DATA / "f1" / "2024.jsonl"
    if path.exists():
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            msg = rec["message"]
            raw = bytes(msg["data"] if isinstance(msg, dict) else msg)
            found.setdefault(raw[6], raw)
    return found


def _f1_struct(pid: int) -> struct.Struct:
    """The full-packet layout of a 2024 per-car packet, as one Struct (baseline)."""
    layout = FORMATS[2024]
    packet = layout.car_packets[pid]

    def fmt(spec: Any) -> str:
        return "".join(code if count == 1 else f"{count}{code}" for _n, code, count in spec)

    return struct.Struct(layout.header[0] + fmt(packet.car) * layout.num_cars + fmt(packet.trailer))


def cases() -> list[tuple[str, str, dict[str, Any], bytes, struct.Struct]]:
    """(label, protocol, options, datagram, baseline struct)."""
    out: list[tuple[str, str, dict[str, Any], bytes, struct.Struct]] = []
    forza = DATA / "forza_fm2023" / "fm2023_dash_331B_x1793.bin"
    fm2023 = forza.read_bytes()[:331] if forza.exists() else bytes(331)
    from wrtfd.decoders.forza import SIZES

    out.append(("forza FM2023 dash", "forza", {}, fm2023, SIZES[331][1]))
    out.append(("forza Horizon", "forza", {}, fm2023[:232] + bytes(92), SIZES[324][1]))
    out.append(("forza sled", "forza", {}, fm2023[:232], SIZES[232][1]))
    f1 = _f1_packets()
    names = {0: "motion", 2: "lap data", 6: "car telemetry", 7: "car status"}
    for pid, name in names.items():
        s = _f1_struct(pid)
        out.append((f"f1 2024 {name}", "f1", {}, f1.get(pid, bytes(s.size)), s))
    ac = DATA / "assetto_corsa" / "AssettoCorsa_monza_A8LMS.raw"
    from wrtfd.decoders.assetto_corsa import RTCARINFO

    out.append(("assetto_corsa RTCarInfo", "assetto_corsa", {}, ac.read_bytes()[:328] if ac.exists()
                else struct.pack("<4si", b"a\0\0\0", 328) + bytes(320), RTCARINFO))  # fmt: skip
    dirt = DATA / "dirt_rally" / "DirtRallye.bin.raw"
    dirt_packet = dirt.read_bytes()[:264] if dirt.exists() else bytes(264)
    out.append(("codemasters 66 floats", "codemasters", {}, dirt_packet, struct.Struct("<66f")))
    out.append(("outgauge", "outgauge", {}, bytes(96), struct.Struct("<I4sHBB7fII3f16s16si")))
    out.append(("outsim", "outsim", {}, bytes(64), struct.Struct("<I12f3i")))
    out.append(("outsim2 1ff", "outsim2", {"opts": "1ff"}, b"LFST" + bytes(276),
                struct.Struct("<4siI12f3i5fB3xffff" + "7f4B2f" * 4 + "ff")))  # fmt: skip
    fields = [{"name": f"f{i}", "type": "float32"} for i in range(20)]
    out.append(("struct 20 floats", "struct", {"fields": fields}, bytes(80), struct.Struct("<20f")))
    out += _acc_wrc_cases()
    out.extend(_issue14_cases())
    return out


def _acc_wrc_cases() -> list[tuple[str, str, dict[str, Any], bytes, struct.Struct]]:
    """ACC broadcasting (issue 14): a car update (one car of the arrays, the common message) and a
    realtime update; EA SPORTS WRC: a session_update of the shipped structure. Baselines: one
    Struct of the whole message as sent (strings at their sample lengths)."""
    from wrtfd.decoders.wrc import TYPES, WrcDecoder

    lap = "iHHB3iBBBB"
    car_fmt = "<BHHBBfffBHHHHfHi" + lap * 3
    laps = [95_000, 12, 0, 3, 30_000, 32_000, 33_000, 0, 1, 0, 0] * 3
    car = struct.pack(car_fmt, 3, 12, 0, 1, 6, 1.0, 2.0, 0.5, 1, 201, 2, 2, 2, 0.25, 3, -120, *laps)
    rt_fmt = "<BHHBBffiH8sH5sH9sBfbbBBB" + lap
    realtime = struct.pack(rt_fmt, 2, 0, 0, 10, 5, 61_500.0, 3_600_000.0, 7, 8, b"Drivable", 5, b"Chase",
                           9, b"Basic HUD", 0, 50_400_000.0, 22, 29, 1, 0, 0, *laps[:11])  # fmt: skip
    wrc = WrcDecoder()
    return [
        ("acc car update", "acc", {}, car, struct.Struct(car_fmt)),
        ("acc realtime update", "acc", {}, realtime, struct.Struct(rt_fmt)),
        (
            "wrc session_update",
            "wrc",
            {},
            b"SESU" + bytes(wrc.size - 4),
            struct.Struct("<" + "".join(TYPES[c.type][0] for c in wrc.layout)),
        ),
    ]


def _issue14_cases() -> list[tuple[str, str, dict[str, Any], bytes, struct.Struct]]:
    """GT7 (decryption included; the baseline unpacks the plaintext) and Project CARS 1/2, from a
    real GT7 capture when present and simulated packets otherwise."""
    from wrtfd.decoders import gt7, pcars
    from wrtfd.simulate import Simulation, TrackInfo, make_encoder
    from wrtfd.tracks import LanePath, load_track

    track = load_track(ROOT / "config" / "tracks" / "oval.trk")
    path = LanePath(track)
    info = TrackInfo(track.name, path.length_m, (0.0,), 1)
    racing = [s for s in Simulation(path, laps=1, seed=1).states() if s.racing][100]
    out: list[tuple[str, str, dict[str, Any], bytes, struct.Struct]] = []
    capture = sorted((DATA / "gt7").glob("*.gt7raw"))
    a = (
        capture[0].read_bytes()[:296]
        if capture
        else make_encoder("gt7", info, gt7_variant="A").encode(racing, first=False, last=False)[0]
    )
    out.append(("gt7 A (Salsa20 + decode)", "gt7", {}, a, gt7.VARIANTS["A"].struct))
    for letter in "B~C":
        packet = make_encoder("gt7", info, gt7_variant=letter).encode(racing, first=False, last=False)[0]
        out.append((f"gt7 {letter} (Salsa20 + decode)", "gt7", {}, packet, gt7.VARIANTS[letter].struct))
    pc2 = {len(p): p for p in make_encoder("pcars2", info).encode(racing, first=True, last=False)}
    out.append(
        ("pcars2 telemetry", "pcars2", {}, pc2[559], struct.Struct(pcars._TELEMETRY + pcars._PATCH5_TAIL))
    )
    timings = struct.Struct("<IIBBBBbIffff" + pcars._CAR_V2 * pcars.PARTICIPANTS_V2 + "HI")
    out.append(("pcars2 timings (32 cars)", "pcars2", {}, pc2[1063], timings))
    pc1 = [p for p in make_encoder("pcars", info).encode(racing, first=False, last=False) if len(p) == 1367]
    v1 = struct.Struct(pcars._V1_HEAD.format + pcars._CAR_V1 * pcars.PARTICIPANTS_V1 + "f2BB")
    out.append(("pcars telemetry (56 cars)", "pcars", {}, pc1[0], v1))
    return out


def _salsa20_alone(data: bytes, seconds: float) -> float:
    """GT7's floor: pycryptodome's Salsa20 object made and run over one datagram."""
    from Crypto.Cipher import Salsa20

    from wrtfd.decoders.gt7 import KEY

    def decrypt(buf: bytes) -> bytes:
        return Salsa20.new(key=KEY, nonce=buf[0x40:0x48]).decrypt(buf)

    return rate(decrypt, data, seconds)


def rate(fn: Callable[[bytes], Any], data: bytes, seconds: float, rounds: int = 3) -> float:
    """Best of ``rounds`` timed runs (calls/s): the machine is shared, the best run is the code's."""
    best = 0.0
    batch = 2000
    for _ in range(rounds):
        n = 0
        t0 = time.perf_counter()
        deadline = t0 + seconds / rounds
        while True:
            for _ in range(batch):
                fn(data)
            n += batch
            now = time.perf_counter()
            if now >= deadline:
                break
        best = max(best, n / (now - t0))
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short runs (about 0.2 s per measurement)")
    args = parser.parse_args(argv)
    seconds = 0.2 if args.quick else 1.0
    warm = make_decoder("forza")
    rate(warm.decode, bytes(331), seconds)  # let the CPU clock up before the first row
    print(f"{'protocol / packet':<26} {'bytes':>6} {'decode pkt/s':>13} {'unpack pkt/s':>13} {'ratio':>6}")
    for label, protocol, options, data, baseline in cases():
        decoder = make_decoder(protocol, **options)
        decoder.decode(data)  # (PCARS2 holds a telemetry or timings packet for its partner)
        if decoder.decode(data) is None:
            raise SystemExit(f"{label}: the sample packet decodes to nothing")
        unpack = baseline.unpack_from
        r_dec = rate(decoder.decode, data, seconds)
        r_base = rate(unpack, data, seconds)
        print(f"{label:<26} {len(data):>6} {r_dec:>13,.0f} {r_base:>13,.0f} {r_dec / r_base:>6.2f}")
        if protocol == "gt7" and len(data) == 296:
            from Crypto.Util import _raw_api

            alone = _salsa20_alone(data, seconds)
            print(f"{'  Salsa20 alone (' + _raw_api.backend + ')':<26} {len(data):>6} {alone:>13,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
