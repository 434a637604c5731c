"""Bounded line framer: chunking never changes the result, memory never exceeds the bound."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wrtfd.decoders.framing import LineFramer


def feed_chunks(framer: LineFramer, data: bytes, cuts: list[int]) -> list[bytes]:
    out: list[bytes] = []
    pos = 0
    for cut in sorted(set(c % (len(data) + 1) for c in cuts)):
        out += framer.feed(data[pos:cut])
        pos = cut
    return out + framer.feed(data[pos:])


def test_mixed_line_ends_and_empty_lines() -> None:
    f = LineFramer()
    assert f.feed(b"$A\r\n$B\n\n$C\r$D") == [b"$A", b"$B", b"$C"]
    assert f.pending_bytes == 2
    assert f.feed(b"\r\n") == [b"$D"]


def test_over_long_line_dropped_whole_and_resynced() -> None:
    f = LineFramer(max_line_bytes=8)
    assert f.feed(b"ok\n" + b"x" * 20) == [b"ok"]
    assert f.pending_bytes == 0  # bounded: the long tail was not kept
    assert f.feed(b"y" * 50) == []
    assert f.feed(b"zz\nnext\n") == [b"next"]
    assert f.drops.as_dict() == {"line_too_long": 1}
    assert f.feed(b"0123456789\nfine\n") == [b"fine"]
    assert f.drops.as_dict() == {"line_too_long": 2}


def test_reset_forgets_partial_line() -> None:
    f = LineFramer()
    f.feed(b"$GPRMC,half")
    f.reset()
    assert f.feed(b"tail\n") == [b"tail"]


def test_rejects_bad_settings() -> None:
    with pytest.raises(ValueError):
        LineFramer(delimiters=b"")
    with pytest.raises(ValueError):
        LineFramer(max_line_bytes=0)


@given(
    st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b"")), max_size=30),
    st.lists(st.integers(min_value=0, max_value=10_000), max_size=20),
)
def test_any_chunking_gives_the_same_lines(lines: list[bytes], cuts: list[int]) -> None:
    data = b"".join(line + b"\r\n" for line in lines)
    expected = [line for line in lines if line and len(line) <= 32]
    framer = LineFramer(max_line_bytes=32)
    assert feed_chunks(framer, data, cuts) == expected
    assert framer.drops.as_dict().get("line_too_long", 0) == sum(1 for line in lines if len(line) > 32)


@given(st.lists(st.binary(max_size=200), max_size=20))
def test_pending_is_always_bounded(chunks: list[bytes]) -> None:
    framer = LineFramer(delimiters=b">", max_line_bytes=64)
    for chunk in chunks:
        for line in framer.feed(chunk):
            assert 0 < len(line) <= 64 and b">" not in line
        assert framer.pending_bytes <= 64
