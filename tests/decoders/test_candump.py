"""candump -l lines and logs; the Subaru log decoded frame by frame against cantools."""

from __future__ import annotations

import collections
from pathlib import Path

import cantools
import pytest
from hypothesis import given
from hypothesis import strategies as st

from wrtfd.decoders.base import DropCounter
from wrtfd.decoders.can_dbc import CanFrame
from wrtfd.decoders.candump import CandumpDecoder, candump_samples, iter_candump, parse_candump
from wrtfd.errors import DecodeError, ImportFormatError


@pytest.mark.parametrize(
    ("line", "frame"),
    [
        (
            b"(1631416514.717133) can0 0D2#0000FFFF10000000\n",
            CanFrame(0xD2, bytes.fromhex("0000FFFF10000000"), timestamp_ns=1631416514_717133000),
        ),
        (b"(1.5) vcan0 12345678#DEAD", CanFrame(0x12345678, b"\xde\xad", True, False, 1_500_000_000)),
        (b"(0.000001) can1 123#", CanFrame(0x123, b"", timestamp_ns=1000)),
        (b"(0.000001) can1 123#R", CanFrame(0x123, b"", False, True, 1000)),
        (b"(0.000001) can1 123#R3", CanFrame(0x123, b"", False, True, 1000)),
    ],
)
def test_parse(line: bytes, frame: CanFrame) -> None:
    assert parse_candump(line) == frame


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b"can0 0D2#00", "malformed"),
        (b"(1.0) can0 0D2##100", "unsupported_fd"),
        (b"(1.0) can0 0D2#001", "bad_dlc"),
        (b"(1.0) can0 0D2#" + b"00" * 9, "bad_dlc"),
        (b"(1.0) can0 12345#00", "bad_id"),
        (b"(1.0) can0 800#00", "bad_id"),
        (b"(1.0) can0 0D2#00" + b" " * 600, "too_long"),
    ],
)
def test_rejections(line: bytes, reason: str) -> None:
    with pytest.raises(DecodeError) as err:
        parse_candump(line)
    assert err.value.reason == reason


@given(st.binary(max_size=80))
def test_arbitrary_bytes_only_raise_decode_error(data: bytes) -> None:
    try:
        result = parse_candump(data)
    except DecodeError as exc:
        # Sources count drops by this key; it must name a reason, never be empty.
        assert exc.reason and exc.reason.isidentifier()
    else:
        assert isinstance(result, CanFrame)
        assert 0 <= result.arbitration_id < 1 << 29 and len(result.data) <= 64


def test_iter_strict_and_counting(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_bytes(b"# comment\n(1.0) can0 100#01\n\ngarbage\n(2.0) can0 101#02\n")
    with pytest.raises(ImportFormatError, match=r"x.log:4: not a candump"):
        list(iter_candump(log))
    drops = DropCounter()
    assert [f.arbitration_id for f in iter_candump(log, drops=drops)] == [0x100, 0x101]
    assert drops.as_dict() == {"malformed": 1}
    with pytest.raises(ImportFormatError, match=r"missing\.log"):
        list(iter_candump(tmp_path / "missing.log"))


def test_subaru_log_every_frame_decoded_or_counted(shared_data: Path) -> None:
    base = shared_data / "can" / "subaru"
    dbc = base / "sample_can_spec.dbc"
    db = cantools.database.load_file(str(dbc))
    assert isinstance(db, cantools.database.can.Database)
    decoder = CandumpDecoder(dbc=dbc, mapping={"rpm": "ID_140.RPM", "speed": "SPEED", "gear": "GEAR"})
    decoded = 0
    drops: collections.Counter[str] = collections.Counter()
    for line in (base / "can_sample.log").read_bytes().splitlines():
        try:
            out = decoder.decode(line)
        except DecodeError as exc:
            drops[exc.reason] += 1
            continue
        assert out is not None
        frame = parse_candump(line)
        direct = db.decode_message(frame.arbitration_id, frame.data, decode_choices=False)
        assert isinstance(direct, dict)
        names = {"rpm": "RPM", "speed": "SPEED", "gear": "GEAR"}
        assert out.values == {ch: direct[sig] for ch, sig in names.items() if sig in direct}
        assert out.source_time_ns == frame.timestamp_ns
        decoded += 1
    assert decoded == 9030 + 4514 + 9030  # ID_140 (rpm), ID_D1 (speed), ID_141 (gear)
    assert decoded + sum(drops.values()) == 82_558
    assert set(drops) == {"unmapped_id"}


def test_candump_samples_for_import(tmp_path: Path) -> None:
    dbc = tmp_path / "e.dbc"
    dbc.write_text(
        'VERSION ""\nBS_:\nBU_: E\nBO_ 256 ENGINE: 2 E\n SG_ RPM : 0|16@1+ (1,0) [0|16000] "rpm" E\n'
    )
    log = tmp_path / "x.log"
    log.write_bytes(b"(10.000001) can0 100#D007\n(10.5) can0 200#00\n(11.0) can0 100#B80B\n")
    drops = DropCounter()
    samples = list(candump_samples(log, CandumpDecoder(dbc=dbc), source="car", drops=drops))
    assert [(s.source, s.rx_ns, s.source_time_ns, dict(s.values)) for s in samples] == [
        ("car", 10_000_001_000, 10_000_001_000, {"rpm": 2000}),
        ("car", 11_000_000_000, 11_000_000_000, {"rpm": 3000}),
    ]
    assert drops.as_dict() == {"unmapped_id": 1}
