"""LineFeed, the serial line sources' bytes -> samples step (what a tap replay runs too)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from wrtfd.decoders.base import Sample, SinkFull
from wrtfd.decoders.lines import LineFeed
from wrtfd.decoders.nmea import NmeaDecoder, nmea_checksum


def nmea(body: str) -> bytes:
    return b"$%s*%02X\r\n" % (body.encode(), nmea_checksum(body.encode()))


LOG = b"".join(
    nmea(f"GNRMC,1200{i // 10:02d}.{i % 10}0,A,4700.{i:03d}0,N,00800.0000,E,20.0,45.0,210325,,,A")
    + nmea(f"GNGGA,1200{i // 10:02d}.{i % 10}0,4700.{i:03d}0,N,00800.0000,E,1,12,0.8,420.0,M,47.0,M,,")
    for i in range(12)
)


def run(chunks: list[bytes]) -> tuple[list[Sample], dict[str, int]]:
    out: list[Sample] = []
    feed = LineFeed("gps", NmeaDecoder())
    for rx_ns, chunk in enumerate(chunks):
        feed.feed(rx_ns, chunk, out.append)
    return out, feed.drops.as_dict()


@given(st.lists(st.integers(0, len(LOG) + 50), max_size=40), st.binary(max_size=30))
def test_chunking_never_changes_the_values_and_the_time_is_the_chunks(cuts: list[int], noise: bytes) -> None:
    data = noise + b"\r\n" + LOG
    edges = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    chunks = [data[a:b] for a, b in itertools.pairwise(edges)]
    got, _ = run(chunks)
    whole, _ = run([data])
    assert [s.values for s in got] == [s.values for s in whole]
    assert [s.source_time_ns for s in got] == [s.source_time_ns for s in whole]
    # each sample carries the receive time of a chunk that ended a line (\r or \n ends one)
    ends = {i for i, c in enumerate(chunks) if b"\r" in c or b"\n" in c}
    assert all(s.rx_ns in ends for s in got)
    assert [s.rx_ns for s in got] == sorted(s.rx_ns for s in got)


def test_drops_are_counted_with_the_framers_and_the_decoders_reasons() -> None:
    feed = LineFeed("gps", NmeaDecoder(), max_line_bytes=100)
    out: list[Sample] = []
    bad = nmea("GNRMC,120000.00,A,4700.0000,N,00800.0000,E,20.0,45.0,210325,,,A").replace(b"*", b"0*")
    lines, samples = feed.feed(5, bad + b"x" * 300 + b"\n" + LOG[:200], out.append)
    assert (lines, samples) == (1 + LOG[:200].count(b"\n"), len(out))  # the long line: no line
    drops = feed.drops.as_dict()
    assert drops.get("line_too_long") == 1 and drops.get("bad_checksum") == 1

    def full(_: Sample) -> None:
        raise SinkFull("full")

    _, taken = feed.feed(6, LOG, full)
    assert taken == 0 and feed.drops.as_dict()["queue_full"] > 0
    feed.reset()
    assert feed.framer.pending_bytes == 0
