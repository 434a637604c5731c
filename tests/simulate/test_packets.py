"""Simulator packets: exact sizes, and decoded by wrtfd's own decoders (written independently
from the same protocol notes) they give back the simulated values."""

from __future__ import annotations

import math
import struct
from pathlib import Path

import pytest

from wrtfd.simulate import Simulation, TrackInfo, make_encoder
from wrtfd.simulate.car import CarState
from wrtfd.simulate.sender import with_last
from wrtfd.tracks import LanePath, load_track, timing_sectors

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "tracks"


@pytest.fixture(scope="module")
def session() -> tuple[TrackInfo, list[CarState]]:
    track = load_track(SHIPPED / "oval.trk")
    path = LanePath(track)
    sectors = timing_sectors(track, path)
    sim = Simulation(path, laps=1, rate_hz=60.0, seed=1, sectors_m=sectors)
    return TrackInfo(track.name, path.length_m, sectors, 1), list(sim.states())


def encode_all(
    protocol: str, info: TrackInfo, states: list[CarState], **kw: object
) -> list[tuple[CarState, list[bytes]]]:
    enc = make_encoder(protocol, info, **kw)  # type: ignore[arg-type]
    out: list[tuple[CarState, list[bytes]]] = []
    for i, (s, last) in enumerate(with_last(states)):
        out.append((s, enc.encode(s, first=i == 0, last=last)))
    return out


@pytest.mark.parametrize(
    ("variant", "size"), [("sled", 232), ("fm7", 311), ("horizon", 324), ("fm2023", 331)]
)
def test_forza_sizes(session: tuple[TrackInfo, list], variant: str, size: int) -> None:
    info, states = session
    sent = encode_all("forza", info, states[:200], forza_format=variant)
    assert all(len(p) == size for _, pkts in sent for p in pkts)
    assert all(len(pkts) == 1 for _, pkts in sent)


@pytest.mark.parametrize("variant", ["fm7", "horizon", "fm2023"])
def test_forza_decodes_to_the_state(session: tuple[TrackInfo, list], variant: str) -> None:
    forza = pytest.importorskip("wrtfd.decoders.forza")
    info, states = session
    dec = forza.ForzaDecoder()
    new_sessions = 0
    for state, pkts in encode_all("forza", info, states, forza_format=variant):
        d = dec.decode(pkts[0])
        v = d.values
        new_sessions += d.new_session
        assert v["is_race_on"] == state.racing
        assert d.source_time_ns == round(state.t_s * 1000) * 1_000_000
        if state.racing:
            assert v["position_x"] == pytest.approx(state.x, abs=1e-3)
            assert v["position_z"] == pytest.approx(state.z, abs=1e-3)
            assert v["speed"] == pytest.approx(state.speed_mps, rel=1e-6)
            assert v["gear"] == state.gear
            assert v["engine_rpm"] == pytest.approx(state.rpm, rel=1e-6)
            assert v["lap_number"] == max(0, state.lap - 1)
            assert v["accel"] == round(state.throttle * 255) and v["brake"] == round(state.brake * 255)
            assert v["distance_traveled"] == pytest.approx(state.progress_m, abs=1e-2)
        else:
            assert v["speed"] == 0.0 and v["position_x"] == 0.0
    assert new_sessions == 1  # IsRaceOn 0 -> 1 once


def test_f1_packets(session: tuple[TrackInfo, list]) -> None:
    info, states = session
    sent = encode_all("f1", info, states, seed=9)
    sizes = {0: 1349, 1: 753, 2: 1285, 3: 45, 6: 1352}
    seen: dict[int, int] = {}
    events = []
    for _, pkts in sent:
        for p in pkts:
            fmt, pid = struct.unpack_from("<H", p)[0], p[6]
            assert fmt == 2024 and len(p) == sizes[pid]
            seen[pid] = seen.get(pid, 0) + 1
            if pid == 3:
                events.append(p[29:33])
    assert events == [b"SSTA", b"SEND"]
    racing = sum(1 for s in states if s.racing)
    assert seen[0] == racing and seen[2] == seen[6] == len(states)
    # session packets twice a (simulated) second
    assert seen[1] == pytest.approx(states[-1].t_s * 2, abs=2)
    uids = {struct.unpack_from("<Q", p, 7)[0] for _, pkts in sent for p in pkts}
    assert len(uids) == 1 and uids != {0}


def test_f1_decodes_to_the_state(session: tuple[TrackInfo, list]) -> None:
    f1 = pytest.importorskip("wrtfd.decoders.f1")
    info, states = session
    dec = f1.F1Decoder()
    checked = 0
    for state, pkts in encode_all("f1", info, states, seed=9):
        for p in pkts:
            d = dec.decode(p)
            if d is None:
                continue
            v = d.values
            assert v["session_time"] == pytest.approx(state.t_s, abs=1e-4)
            pid = p[6]
            if pid == 0:
                assert v["world_position_x"] == pytest.approx(state.x, abs=1e-3)
                assert v["world_position_z"] == pytest.approx(state.z, abs=1e-3)
                checked += 1
            elif pid == 6:
                assert v["speed"] == round(state.speed_mps * 3.6)
                assert v["engine_rpm"] == round(state.rpm)
                assert v["throttle"] == pytest.approx(state.throttle, abs=1e-6)
            elif pid == 2:
                assert v["lap_distance"] == pytest.approx(state.lap_distance_m, abs=1e-3)
                assert v["current_lap_time_ms"] == round(state.lap_time_s * 1000)
            elif pid == 3:
                assert v["event_code"] in ("SSTA", "SEND")
    assert checked > 100


def test_outgauge_and_outsim_decode(session: tuple[TrackInfo, list]) -> None:
    og = pytest.importorskip("wrtfd.decoders.outgauge")
    info, states = session
    gauge, sim = og.OutGaugeDecoder(), og.OutSimDecoder()
    n = 0
    for state, pkts in encode_all("outgauge", info, states):
        if not state.racing:
            assert pkts == []
            continue
        v = gauge.decode(pkts[0]).values
        assert v["gear"] == state.gear + 1  # LFS: 0 = R, 1 = N, 2 = first
        assert v["speed"] == pytest.approx(state.speed_mps, rel=1e-6)
        assert v["rpm"] == pytest.approx(state.rpm, rel=1e-6)
        n += 1
    assert n == sum(1 for s in states if s.racing)
    for state, pkts in encode_all("outsim", info, states):
        if state.racing:
            v = sim.decode(pkts[0]).values
            # LFS axes: X = x, Y = -z, Z = altitude (fixed point 1/65536 m)
            assert v["pos_x"] == pytest.approx(state.x, abs=2e-5)
            assert v["pos_y"] == pytest.approx(-state.z, abs=2e-5)
            assert v["pos_z"] == pytest.approx(state.y, abs=2e-5)
            speed = math.hypot(v["vel_x"], v["vel_y"])
            assert speed == pytest.approx(state.speed_mps, rel=1e-5, abs=1e-6)


def test_unknown_protocol(session: tuple[TrackInfo, list]) -> None:
    info, _ = session
    with pytest.raises(ValueError, match="unknown protocol"):
        make_encoder("iracing", info)  # a game with no UDP telemetry


@pytest.mark.parametrize("protocol", ["forza", "f1", "outgauge", "outsim"])
def test_same_seed_same_bytes(session: tuple[TrackInfo, list], protocol: str) -> None:
    info, states = session
    a = [p for _, pkts in encode_all(protocol, info, states, seed=4) for p in pkts]
    b = [p for _, pkts in encode_all(protocol, info, states, seed=4) for p in pkts]
    assert a == b and len(a) > 100
    if protocol == "f1":  # the session UID comes from the seed
        c = [p for _, pkts in encode_all(protocol, info, states, seed=5) for p in pkts]
        assert c[0][7:15] != a[0][7:15]


def test_pcars1_strings_packet_at_the_offsets_of_real_captures() -> None:
    """The simulator's Project CARS 1 strings packet, read with plain struct at the offsets real
    captures have: car @3, class @67, track location @131, variation @195, names @259."""
    from wrtfd.simulate.pcars import CLASS_NAME, DRIVER, VEHICLE, Pcars1Encoder

    packet = Pcars1Encoder(TrackInfo("Oval Test", 1000.0, (), 1)).strings()
    assert len(packet) == 1347 and packet[2] & 0x03 == 1

    def text(at: int) -> str:
        return struct.unpack_from("<64s", packet, at)[0].split(b"\0", 1)[0].decode()

    assert (text(3), text(67), text(131), text(195)) == (VEHICLE, CLASS_NAME, "Oval Test", "")
    assert text(259) == DRIVER and all(text(259 + 64 * i) == "" for i in range(1, 16))
    assert struct.unpack_from("<f", packet, 1283)[0] == -1.0
