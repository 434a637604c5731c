"""Cost of u-blox NAV-PVT decoding: wrtfd's decoder and framing next to pyubx2's own parse.

    python bench/bench_ubx.py [--quick]

The message is the first NAV-PVT of ``../shared/data/gnss/ubx/pyubx2__pygpsdata-MIXED.log``
when present, else one pyubx2 builds. "% core at 25 Hz" is what 25 messages a second cost one
core: the issue's budget for GNSS lap timing (decoding included) is +0.3 %.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pyubx2 import UBXMessage, UBXReader

from bench.bench_decoders import rate
from wrtfd.decoders.ubx import NAV_PVT, UbxDecoder, UbxFeed, UbxFramer

LOG = Path(__file__).resolve().parents[2] / "shared" / "data" / "gnss" / "ubx" / "pyubx2__pygpsdata-MIXED.log"


def nav_pvt() -> bytes:
    if LOG.is_file():
        for frame in UbxFramer().feed(LOG.read_bytes()):
            if (frame[2], frame[3]) == NAV_PVT:
                return frame
    msg = UBXMessage("NAV", "NAV-PVT", 0, iTOW=1000, fixType=3, gnssFixOk=1, lat=45.5, lon=7.25, numSV=12)
    return bytes(msg.serialize())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short runs (about 0.2 s per measurement)")
    args = parser.parse_args(argv)
    seconds = 0.2 if args.quick else 1.0
    frame = nav_pvt()
    decoder = UbxDecoder()
    feed = UbxFeed("gps", UbxDecoder())

    def sink(sample: object) -> None:
        return None

    cases = {
        "UbxDecoder.decode": decoder.decode,
        "UbxFeed.feed (frame+decode)": lambda data: feed.feed(0, data, sink),
        "pyubx2 UBXReader.parse": UBXReader.parse,
    }
    print(
        f"{'NAV-PVT, ' + str(len(frame)) + ' bytes':<30} {'msg/s':>10} {'us/msg':>8} {'% core at 25 Hz':>16}"
    )
    for label, fn in cases.items():
        per_s = rate(fn, frame, seconds)
        print(f"{label:<30} {per_s:>10,.0f} {1e6 / per_s:>8.1f} {2500 / per_s:>16.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
