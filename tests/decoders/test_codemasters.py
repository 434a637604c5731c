"""Codemasters legacy 66-float packet: the real DiRT Rally capture and synthetic packets."""

from __future__ import annotations

import itertools
import struct
from pathlib import Path

import pytest

from wrtfd.decoders.codemasters import CodemastersDecoder
from wrtfd.errors import ConfigError, DecodeError


def _capture(shared_data: Path) -> list[bytes]:
    base = shared_data / "udp" / "dirt_rally" / "DirtRallye.bin.raw"
    raw = base.read_bytes()
    rows = base.with_name(base.name + ".index.tsv").read_text().splitlines()[1:]
    out = []
    for row in rows:
        _seq, _wall, _delta, offset, length = row.split("\t")
        out.append(raw[int(offset) : int(offset) + int(length)])
    return out


def test_dirt_rally_capture_decodes_every_datagram(shared_data: Path) -> None:
    packets = _capture(shared_data)
    assert len(packets) == 2627
    dec = CodemastersDecoder()
    out = [dec.decode(p) for p in packets]
    runs = [o.values["run_time"] for o in out]
    assert all(b >= a for a, b in itertools.pairwise(runs))
    assert not any(o.new_session for o in out)
    floats = struct.unpack("<66f", packets[100])
    v = out[100].values
    assert v["engine_rpm"] == pytest.approx(floats[37] * 10)
    assert v["gear"] == int(floats[33])
    assert v["wheel_speed"] == (floats[27], floats[28], floats[25], floats[26])  # FL, FR, RL, RR
    assert out[100].source_time_ns == int(floats[0] * 1e9)
    for o in out:
        assert 0 <= o.values["speed"] < 70  # m/s
        assert 0 < o.values["engine_rpm"] <= o.values["max_rpm"] + 1
        assert -1 <= o.values["gear"] <= o.values["max_gears"]
    assert out[0].session_info is not None and "track length" in out[0].session_info["track"]


def test_run_time_reset_is_a_new_session() -> None:
    dec = CodemastersDecoder()
    floats = [0.0] * 66

    def packet(run_time: float) -> bytes:
        floats[0] = run_time
        return struct.pack("<66f", *floats)

    a = dec.decode(packet(100.0))
    assert not dec.decode(packet(100.02)).new_session
    assert not dec.decode(packet(100.01)).new_session  # jitter, not a restart
    b = dec.decode(packet(0.01))
    assert b.new_session and b.session_key != a.session_key


def test_mode1_152_bytes_and_rpm_scale() -> None:
    floats = [float(i) for i in range(38)]
    out = CodemastersDecoder(rpm_scale=1.0).decode(struct.pack("<38f", *floats))
    assert out.values["engine_rpm"] == 37.0
    assert out.values["suspension_position"] == (19.0, 20.0, 17.0, 18.0)
    assert "max_rpm" not in out.values and "brake_temperature" not in out.values
    with pytest.raises(ConfigError):
        CodemastersDecoder(rpm_scale=0)


def test_nan_counters_do_not_crash() -> None:
    floats = [float("nan")] * 66
    out = CodemastersDecoder().decode(struct.pack("<66f", *floats))
    assert out.values["gear"] == 0 and out.source_time_ns is None
    with pytest.raises(DecodeError):
        CodemastersDecoder().decode(bytes(263))


def test_f1_2017_legacy_packet_uses_the_first_66_floats() -> None:
    floats = [float(i) for i in range(66)]
    packet = struct.pack("<66f", *floats) + bytes(1289 - 264)
    out = CodemastersDecoder(rpm_scale=1.0).decode(packet)
    assert out.values["engine_rpm"] == 37.0 and out.values["max_gears"] == 65
    assert out.values["track_length"] == 61.0
