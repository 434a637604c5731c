"""`.zddsrec` 1.0 reader/writer: layout per zerodds-recorder format.rs (seed 003), strictness, limits."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wrtfd.errors import ImportFormatError
from wrtfd.zddsrec.format import (
    FRAME_HEADER_SIZE,
    Frame,
    Header,
    Limits,
    ParticipantEntry,
    SampleKind,
    StreamDecoder,
    TopicEntry,
    ZddsrecError,
    ZddsrecReader,
    ZddsrecWriter,
    encode_frame,
    encode_header,
)

HEADER = Header(
    time_base_unix_ns=1_700_000_000_000_000_000,
    participants=(ParticipantEntry(bytes(range(16)), "node_a"), ParticipantEntry(b"\xff" * 16, "ß")),
    topics=(TopicEntry("rt/odom", "nav::Odom"), TopicEntry("rt/imu", "sensor::Imu")),
)


def test_header_layout_matches_format_rs() -> None:
    """Magic, u32 version 1, i64 time base, u32 counts, GUID + name, then type_name BEFORE name."""
    data = encode_header(HEADER)
    assert data[:4] == b"ZDDS"
    assert struct.unpack_from("<IqII", data, 4) == (1, 1_700_000_000_000_000_000, 2, 2)
    pos = 24
    assert data[pos : pos + 16] == bytes(range(16))
    assert struct.unpack_from("<I", data, pos + 16)[0] == 6 and data[pos + 20 : pos + 26] == b"node_a"
    pos += 26 + 16
    assert struct.unpack_from("<I", data, pos)[0] == 2 and data[pos + 4 : pos + 6] == "ß".encode()
    pos += 6
    assert data[pos : pos + 4 + 9] == struct.pack("<I", 9) + b"nav::Odom"  # type name first (Header::write)
    assert data[pos + 13 : pos + 13 + 4 + 7] == struct.pack("<I", 7) + b"rt/odom"


def test_frame_layout_matches_format_rs() -> None:
    data = encode_frame(-5, 1, 2, SampleKind.NOT_ALIVE_DISPOSED, b"\x00\x01\x00\x00abcd")
    assert FRAME_HEADER_SIZE == 22
    assert data[0:1] == b"F"
    assert struct.unpack_from("<qIIBI", data, 1) == (-5, 1, 2, 1, 8)
    assert data[22:] == b"\x00\x01\x00\x00abcd"
    assert [k.value for k in SampleKind] == [0, 1, 2]  # Alive, NotAliveDisposed, NotAliveUnregistered


names = st.text(max_size=12)
participants = st.lists(
    st.builds(ParticipantEntry, st.binary(min_size=16, max_size=16), names), min_size=1, max_size=4
)
topics = st.lists(st.builds(TopicEntry, names, names), min_size=1, max_size=4)


@st.composite
def recordings(draw: st.DrawFn) -> tuple[Header, list[Frame]]:
    header = Header(draw(st.integers(-(2**63), 2**63 - 1)), tuple(draw(participants)), tuple(draw(topics)))
    frames = draw(
        st.lists(
            st.builds(
                Frame,
                st.integers(-(2**63), 2**63 - 1),
                st.integers(0, len(header.participants) - 1),
                st.integers(0, len(header.topics) - 1),
                st.sampled_from(SampleKind),
                st.binary(max_size=64),
            ),
            max_size=20,
        )
    )
    return header, frames


@settings(max_examples=150, deadline=None)
@given(recordings(), st.lists(st.integers(1, 40), min_size=1, max_size=8))
def test_round_trip_any_chunking(rec: tuple[Header, list[Frame]], chunk_sizes: list[int]) -> None:
    header, frames = rec
    buf = io.BytesIO()
    w = ZddsrecWriter(buf, header)
    for f in frames:
        w.write_frame(f.timestamp_delta_ns, f.participant_idx, f.topic_idx, f.kind, f.payload)
    data = buf.getvalue()
    dec = StreamDecoder()
    got: list[Frame] = []
    pos = 0
    i = 0
    while pos < len(data):
        n = chunk_sizes[i % len(chunk_sizes)]
        got.extend(dec.feed(data[pos : pos + n]))
        pos += n
        i += 1
    assert dec.header == header
    assert got == frames
    assert dec.pending_bytes == 0
    # offsets point at each frame's 'F'
    for f in got:
        assert data[f.offset] == ord("F")


def _write(path: Path, header: Header, frames: list[tuple[int, int, int, int, bytes]]) -> bytes:
    buf = io.BytesIO()
    w = ZddsrecWriter(buf, header)
    for f in frames:
        w.write_frame(*f)
    path.write_bytes(buf.getvalue())
    return buf.getvalue()


def test_torn_last_frame_is_reported_and_complete_frames_kept(tmp_path: Path) -> None:
    frames = [(i * 1000, 0, i % 2, 0, bytes([i]) * (i + 4)) for i in range(5)]
    data = _write(tmp_path / "a.zddsrec", HEADER, frames)
    last_len = FRAME_HEADER_SIZE + 8
    for cut in (1, FRAME_HEADER_SIZE - 1, FRAME_HEADER_SIZE, last_len - 1):
        torn = data[: len(data) - last_len + cut]
        (tmp_path / "t.zddsrec").write_bytes(torn)
        with ZddsrecReader(tmp_path / "t.zddsrec", chunk_bytes=7) as r:
            got = list(r.frames())
            assert [f.payload for f in got] == [f[4] for f in frames[:4]]
            assert r.torn_tail is not None
            assert r.torn_tail.offset == len(data) - last_len
            assert r.torn_tail.size == cut
    with ZddsrecReader(tmp_path / "a.zddsrec") as r:
        assert len(list(r.frames())) == 5 and r.torn_tail is None


def test_truncated_header_is_an_import_error(tmp_path: Path) -> None:
    data = encode_header(HEADER)
    (tmp_path / "h.zddsrec").write_bytes(data[:-3])
    with pytest.raises(ImportFormatError, match=r"truncated \.zddsrec header"):
        ZddsrecReader(tmp_path / "h.zddsrec")


@pytest.mark.parametrize(
    ("patch", "reason", "at_frame"),
    [
        (lambda f: f[:17] + b"\x07" + f[18:], "unknown_sample_kind", True),
        (lambda f: f[:9] + struct.pack("<I", 2) + f[13:], "participant_out_of_range", True),
        (lambda f: f[:13] + struct.pack("<I", 99) + f[17:], "topic_out_of_range", True),
        (lambda f: b"G" + f[1:], "bad_frame_magic", True),
        (lambda f: f[:18] + struct.pack("<I", (1 << 20) + 1) + f[22:], "payload_too_large", True),
    ],
)
def test_bad_frames_rejected_with_offset(tmp_path: Path, patch, reason: str, at_frame: bool) -> None:  # type: ignore[no-untyped-def]
    head = encode_header(HEADER)
    good = encode_frame(0, 0, 0, 0, b"\x00\x01\x00\x00")
    bad = patch(encode_frame(10, 1, 1, 0, b"\x00\x01\x00\x00"))
    data = head + good + bad + good
    dec = StreamDecoder()
    with pytest.raises(ZddsrecError) as exc:
        dec.feed(data)
    assert exc.value.reason == reason
    assert [f.timestamp_delta_ns for f in exc.value.frames_before] == [0]  # the good frame before it
    assert exc.value.offset == len(head) + len(good)
    assert f"at byte {len(head) + len(good)}" in str(exc.value)
    with pytest.raises(ZddsrecError):  # the stream stays refused
        dec.feed(good)
    (tmp_path / "b.zddsrec").write_bytes(data)
    seen: list[Frame] = []
    with (
        ZddsrecReader(tmp_path / "b.zddsrec") as r,
        pytest.raises(ImportFormatError, match=f"at byte {len(head) + len(good)}"),
    ):
        for f in r.frames():
            seen.append(f)
    assert len(seen) == 1  # every complete frame before the fault was delivered first


def test_oversized_payload_refused_before_buffering() -> None:
    """Only the 22-byte frame header is needed to refuse a 4 GiB length: nothing is allocated for it."""
    dec = StreamDecoder(Limits(max_payload_bytes=100))
    dec.feed(encode_header(HEADER))
    assert dec.feed(encode_frame(0, 0, 0, 0, b"x" * 100)) != []
    with pytest.raises(ZddsrecError) as exc:
        dec.feed(struct.pack("<BqIIBI", 0x46, 0, 0, 0, 0, 0xFFFFFFFF))
    assert exc.value.reason == "payload_too_large"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"ZDDX" + bytes(20), "bad_magic"),
        (b"ZDDS" + struct.pack("<IqII", 2, 0, 0, 0), "bad_version"),
        (b"ZDDS" + struct.pack("<IqII", 1, 0, 5000, 0), "too_many_participants"),
        (b"ZDDS" + struct.pack("<IqII", 1, 0, 0, 5000), "too_many_topics"),
        (b"ZDDS" + struct.pack("<IqII", 1, 0, 0, 1) + struct.pack("<I", 2_000_000), "string_too_long"),
        (b"ZDDS" + struct.pack("<IqII", 1, 0, 0, 1) + struct.pack("<I", 2) + b"\xff\xfe", "bad_string"),
    ],
)
def test_bad_headers(data: bytes, reason: str) -> None:
    with pytest.raises(ZddsrecError) as exc:
        StreamDecoder().feed(data + bytes(64))
    assert exc.value.reason == reason


def test_string_cap_is_configurable() -> None:
    header = Header(0, (ParticipantEntry(bytes(16), "x" * 50),), (TopicEntry("t", "T"),))
    with pytest.raises(ZddsrecError) as exc:
        StreamDecoder(Limits(max_string_bytes=49)).feed(encode_header(header))
    assert exc.value.reason == "string_too_long"
    assert StreamDecoder(Limits(max_string_bytes=50)).feed(encode_header(header)) == []


def test_header_growing_past_its_cap_is_refused() -> None:
    dec = StreamDecoder(Limits(max_header_bytes=64))
    head = b"ZDDS" + struct.pack("<IqII", 1, 0, 1, 0) + bytes(16) + struct.pack("<I", 60)
    with pytest.raises(ZddsrecError) as exc:
        dec.feed(head)
    assert exc.value.reason == "header_too_large"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_after_header_only_raises_zddsrec_error(junk: bytes) -> None:
    dec = StreamDecoder(Limits(max_payload_bytes=64))
    dec.feed(encode_header(HEADER))
    try:
        frames = dec.feed(junk)
    except ZddsrecError as exc:
        assert exc.reason in {
            "bad_frame_magic",
            "unknown_sample_kind",
            "participant_out_of_range",
            "topic_out_of_range",
            "payload_too_large",
        }
    else:
        for f in frames:
            assert f.participant_idx < 2 and f.topic_idx < 2 and len(f.payload) <= 64
        assert dec.pending_bytes <= FRAME_HEADER_SIZE + 64


def test_writer_checks_indices() -> None:
    w = ZddsrecWriter(io.BytesIO(), HEADER)
    with pytest.raises(ValueError, match="topic index 2"):
        w.write_frame(0, 0, 2, 0, b"")
    with pytest.raises(ValueError, match="participant index 5"):
        w.write_frame(0, 5, 0, 0, b"")
    with pytest.raises(ValueError):
        w.write_frame(0, 0, 0, 9, b"")
