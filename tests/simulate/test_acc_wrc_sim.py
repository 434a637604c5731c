"""The ACC broadcasting server and the WRC stage encoder of the simulator: the protocol's answers
(the password check, requests, unregistration), update intervals, AI cars and events; WRC packets
of the structure's size. Decoded by wrtfd's own decoders (written independently from the same
protocol notes), they give back the simulated values."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tests.decoders import acc_messages as m
from wrtfd.decoders.acc import AccDecoder, decode_registration, encode_register, encode_request
from wrtfd.decoders.wrc import WrcDecoder
from wrtfd.simulate import Simulation, TrackInfo, make_encoder
from wrtfd.simulate.acc import WRONG_PASSWORD, AccBroadcastServer
from wrtfd.simulate.sender import with_last
from wrtfd.tracks import LanePath, load_track, timing_sectors

SHIPPED = Path(__file__).resolve().parents[2] / "config" / "tracks"


@pytest.fixture(scope="module")
def session() -> tuple[TrackInfo, Simulation, list]:
    track = load_track(SHIPPED / "oval.trk")
    path = LanePath(track)
    sectors = timing_sectors(track, path)
    sim = Simulation(path, laps=2, rate_hz=60.0, seed=4, sectors_m=sectors)
    states = list(sim.states())
    return TrackInfo(track.name, path.length_m, sectors, 2), sim, states


def test_registration_password_and_requests(session: tuple[TrackInfo, Simulation, list]) -> None:
    info, _sim, _states = session
    server = AccBroadcastServer(info, password="pw", command_password="cmd")
    a, b = ("10.0.0.1", 1), ("10.0.0.2", 2)
    (refused,) = server.handle(encode_register("x", "nope", 100), a)
    r = decode_registration(refused)
    assert (r.success, r.connection_id, r.error) == (False, -1, WRONG_PASSWORD) and not server.clients
    (old,) = server.handle(b"\x01\x03" + encode_register("x", "pw", 100)[2:], a)  # protocol 3
    assert not decode_registration(old).success and "Protocol version 3" in decode_registration(old).error
    assert server.refused == 2
    ok = decode_registration(server.handle(encode_register("x", "pw", 100), a)[0])
    assert ok.success and ok.read_only and ok.connection_id == 1  # no command password: read-only
    ok_b = decode_registration(server.handle(encode_register("y", "pw", 250, "cmd"), b)[0])
    assert ok_b.success and not ok_b.read_only and ok_b.connection_id == 2
    replies = server.handle(encode_request(10, 1), a)
    assert replies[0] == m.entry_list([7, 12, 3, 25], conn=1)
    assert [x[0] for x in replies[1:]] == [6, 6, 6, 6]
    (track,) = server.handle(encode_request(11, 1), a)
    assert track[0] == 5 and b"Small oval track" in track
    assert server.handle(encode_request(10, 2), a) == []  # not a's connection
    assert server.handle(b"\x0a\x01", a) == [] and server.handle(b"", a) == []
    assert server.bad_requests == 3
    assert server.handle(encode_request(9, 1), a) == [] and list(server.clients) == [b]


def test_track_data_answered_after_the_delay(session: tuple[TrackInfo, Simulation, list]) -> None:
    """A slow game: track data comes ``track_data_delay_s`` (simulated) after the registration,
    by :meth:`tick`, once however often it was asked for; other requests are answered at once."""
    info, _sim, states = session
    server = AccBroadcastServer(info, password="pw", track_data_delay_s=1.0)
    a = ("10.0.0.1", 1)
    assert decode_registration(server.handle(encode_register("x", "pw", 100), a)[0]).success
    assert server.handle(encode_request(11, 1), a) == [] and server.handle(encode_request(11, 1), a) == []
    assert server.handle(encode_request(10, 1), a)[0] == m.entry_list([7, 12, 3, 25], conn=1)
    answered = []
    for s in states[:90]:
        answered += [(s.t_s, d) for d, to in server.tick(s) if d[0] == 5 and to == a]
    assert len(answered) == 1
    t, track = answered[0]
    assert 1.0 <= t < 1.0 + 2 / 60 and b"Small oval track" in track
    assert server.handle(encode_request(11, 1), a)[0] == track  # after the delay: at once


def test_updates_follow_each_clients_interval(session: tuple[TrackInfo, Simulation, list]) -> None:
    info, _sim, states = session
    server = AccBroadcastServer(info, ai_cars=2)
    server.handle(encode_register("fast", "", 100), "fast")
    server.handle(encode_register("slow", "", 500), "slow")
    sent: dict[str, list[bytes]] = {"fast": [], "slow": []}
    for state in states[:600]:  # 10 s
        for data, addr in server.tick(state):
            sent[addr].append(data)
    realtime = {k: sum(1 for d in v if d[0] == 2) for k, v in sent.items()}
    assert 99 <= realtime["fast"] <= 101 and 19 <= realtime["slow"] <= 21
    assert sum(1 for d in sent["fast"] if d[0] == 3) == 3 * realtime["fast"]  # every car, every update


def test_a_whole_session_decodes_to_the_simulated_laps(session: tuple[TrackInfo, Simulation, list]) -> None:
    info, sim, states = session
    enc = make_encoder("acc", info)
    dec = AccDecoder()
    values: dict[str, object] = {}
    for i, (state, last) in enumerate(with_last(states)):
        for data in enc.encode(state, first=i == 0, last=last):
            d = dec.decode(data)
            if d is not None:
                values.update(d.values)
    laps = sim.laps
    assert len(laps) == 2
    assert values["laps"] == 2 and values["position"] == 1
    assert abs(values["last_lap_ms"] - round(laps[1].time_s * 1000)) <= 1  # type: ignore[operator]
    best = min(laps, key=lambda lap: lap.time_s)
    assert abs(values["best_lap_ms"] - round(best.time_s * 1000)) <= 1  # type: ignore[operator]
    assert abs(values["last_split1_ms"] - round(laps[1].sector_times_s[0] * 1000)) <= 1  # type: ignore[operator]
    assert values["all_car_index"][:4] == (7, 12, 3, 25)  # type: ignore[index]
    assert values["all_position"][:4] == (1, 2, 3, 4)  # type: ignore[index]
    ai_laps = values["all_last_lap_ms"][1:4]  # type: ignore[index]
    assert all(a > values["last_lap_ms"] for a in ai_laps if a)
    counts = values["event_counts"]
    assert counts[1] == 1 and counts[2] == 1 and counts[5] >= 2 and counts[6] >= 1  # type: ignore[index]
    assert values["session_phase"] == 6 and values["track_length_m"] == round(info.length_m)


def test_wrc_packets_have_the_structure_size_and_decode_to_the_state(
    session: tuple[TrackInfo, Simulation, list],
) -> None:
    info, _sim, states = session
    enc = make_encoder("wrc", info)
    dec = WrcDecoder()
    progress = []
    for i, (state, last) in enumerate(with_last(states)):
        packets = enc.encode(state, first=i == 0, last=last)
        if not state.racing:
            assert packets == []
            continue
        (packet,) = packets
        assert len(packet) == dec.size
        d = dec.decode(packet)
        assert d is not None
        v = d.values
        assert v["vehicle_speed"] == pytest.approx(state.speed_mps, rel=1e-6, abs=1e-6)
        assert v["vehicle_position_x"] == pytest.approx(state.x, abs=1e-3)
        assert v["vehicle_position_z"] == pytest.approx(state.z, abs=1e-3)
        assert v["vehicle_gear_index"] == state.gear
        assert d.source_time_ns == pytest.approx((100.0 + state.t_s) * 1e9, abs=2e4)
        progress.append(v["stage_progress"])
        assert struct.unpack_from("<4s", packet)[0] == b"SIMU"
    assert progress[0] == 0.0 and progress[-1] == 1.0
    assert progress == sorted(progress)
