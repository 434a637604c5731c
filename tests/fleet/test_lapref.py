"""The team's best lap as the reference (wrtfd.fleet.lapref): the lap file cut from a recording
(checked against the recording's bytes on disk), the object names, the pick, the best-lap state,
the local cache, and a put and a fetch through a real nats-server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.fleet.nats_server import TOKEN, NatsServer
from wrtfd.fleet.client import connect
from wrtfd.fleet.config import ConnectOptions
from wrtfd.fleet.lapref import (
    BestLapUploader,
    LapCutError,
    LapNotOnDiskError,
    ReferenceFollower,
    RefTarget,
    cut_lap,
    pick_record,
    ref_object_name,
)
from wrtfd.format import Reader
from wrtfd.tracks import LanePath, load_track
from wrtfd.tracks.delta import PredictiveDelta, Reference, parse_fleet_reference

OVAL = Path(__file__).resolve().parents[2] / "config" / "tracks" / "oval.trk"


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float]:
    """Three simulated laps of the oval recorded with lap channels (the recorder's own files)."""
    from wrtfd.simulate import Simulation, TrackInfo, make_encoder
    from wrtfd.simulate.record import record_simulation
    from wrtfd.tracks import timing_sectors
    from wrtfd.tracks.lapchannels import lap_channels_for

    track = load_track(OVAL)
    path = LanePath(track)
    sectors = timing_sectors(track, path)
    info = TrackInfo(track.name, path.length_m, sectors, 3)
    out = tmp_path_factory.mktemp("lapref")
    files = record_simulation(
        Simulation(path, laps=3, rate_hz=60.0, seed=7, sectors_m=sectors),
        make_encoder("forza", info),
        out / "rec",
        protocol="forza",
        derived=[lap_channels_for(track, source="forza", protocol="forza")],
    )
    return files[0], path.length_m


def _lap_ticks(path: Path, lap: int) -> tuple[int, int, int]:
    """(session, first tick, last tick) of lap ``lap``, from the lap channel in the file."""
    with Reader(path) as r:
        for si in range(len(r.sessions)):
            f = r.frames(si)
            on = f["tick"][f["laps"]["lap_number"] == lap]
            if len(on):
                return si, int(on[0]), int(on[-1])
    raise AssertionError(f"no lap {lap}")


def _record(path: Path, lap: int, time_s: float, **kw: Any) -> dict[str, Any]:
    si, first, last = _lap_ticks(path, lap)
    rec = {
        "id": f"{lap:024x}",
        "rig": "rig-a",
        "driver": "Ada",
        "car": "GT3",
        "track": "Small oval track",
        "lap": lap,
        "time_s": time_s,
        "sectors_s": [],
        "valid": None,
        "file": path.name,
        "session": si,
        "first_tick": first,
        "last_tick": last,
    }
    rec.update(kw)
    return rec


def test_the_cut_lap_holds_the_recordings_frames_byte_for_byte(
    recording: tuple[Path, float], tmp_path: Path
) -> None:
    source, length = recording
    si, first, last = _lap_ticks(source, 2)
    dest = tmp_path / "lap.wrtf"
    meta = {"Track": "Small oval track", "Car": "GT3", "wrtfd.lap.record": '{"lap": 2}'}
    n = cut_lap(source, si, first, last, dest, metadata=meta, lap=2)
    assert n == last - first + 1 + 2  # the lap and the frame either side of it
    with Reader(source) as r:
        src = r.sessions[si]
        size = r.schema.frame_dtype.itemsize
        ticks = r.frames(si)["tick"]
        lo = int(np.flatnonzero(ticks == first)[0]) - 1
        want_header = bytes(r._buf[src.offset : src.frames_offset])  # magic + session header
    raw = source.read_bytes()
    want = raw[src.frames_offset + lo * size : src.frames_offset + (lo + n) * size]
    with Reader(dest) as c:
        assert c.complete and len(c.sessions) == 1
        got_session = c.sessions[0]
        got = dest.read_bytes()[got_session.frames_offset : got_session.frames_offset + n * size]
        assert got_session.frame_count == n
        assert got == want  # every byte of every frame, padding and the check column included
        assert bytes(c._buf[got_session.offset : got_session.frames_offset]) == want_header
        assert c.metadata["Track"] == "Small oval track" and c.metadata["Car"] == "GT3"
        assert json.loads(c.metadata["wrtfd.lap.record"]) == {"lap": 2}
        assert not any(k.startswith("wrtfd.check") for k in c.metadata)
        assert c.check is None
    # the same lap as a reference, from the cut and from the whole recording
    whole = Reference.from_file(source, 2, length_m=length)
    cut = Reference.from_file(dest, length_m=length, track_name="Small oval track")
    assert cut.number == 2 and cut.lap_time_s == whole.lap_time_s and cut.times_s == whole.times_s


def test_a_lap_whose_next_frame_is_not_written_yet_is_not_cut(
    recording: tuple[Path, float], tmp_path: Path
) -> None:
    source, _ = recording
    with Reader(source) as r:
        last_session = len(r.sessions) - 1
        final = int(r.frames(last_session)["tick"][-1])
    with pytest.raises(LapNotOnDiskError, match="not on disk yet"):
        cut_lap(source, last_session, final - 100, final, tmp_path / "x.wrtf")
    with pytest.raises(LapNotOnDiskError, match="no session 9"):
        cut_lap(source, 9, 0, 10, tmp_path / "x.wrtf")
    si, first, last = _lap_ticks(source, 2)
    with pytest.raises(LapCutError, match="not lap 3"):  # the record says another lap than the frames
        cut_lap(source, si, first, last, tmp_path / "x.wrtf", lap=3)
    with pytest.raises(LapCutError, match="not lap 2"):  # a tick range one frame short of the lap
        cut_lap(source, si, first, last - 1, tmp_path / "x.wrtf", lap=2)
    with Reader(source) as r:
        start = int(r.frames(si)["tick"][0])
    with pytest.raises(LapCutError, match="began before session"):  # no frame before it
        cut_lap(source, si, start - 5, start + 10, tmp_path / "x.wrtf")
    assert not (tmp_path / "x.wrtf").exists()


def test_object_names_and_the_pick() -> None:
    def rec(rid: str, driver: str | None, car: str, track: str, t: object, **kw: object) -> dict[str, Any]:
        return {"id": rid, "rig": f"rig-{rid[0]}", "driver": driver, "car": car, "track": track,
                "time_s": t, "sectors_s": [], **kw}  # fmt: skip

    recs = [
        rec("a1", "Ada", "GT3", "Oval", 31.0),
        rec("b1", "Bob", "GT3", "Oval", 30.5),
        rec("b2", "Bob", "GT4", "oval", 29.0),
        rec("c1", "Cy", "GT3", "Oval", 20.0, valid=False),
        rec("d1", None, "GT3", "Oval", "fast"),
    ]
    assert pick_record(recs, track="Oval", car="GT3")["id"] == "b1"  # type: ignore[index]
    assert pick_record(recs, track="OVAL", car="gt3", driver="ada")["id"] == "a1"  # type: ignore[index]
    assert pick_record(recs, track="Oval", car=None)["id"] == "b2"  # type: ignore[index]  # any car
    assert pick_record(recs, track="Oval", car="GT3", driver="Nobody") is None
    assert pick_record(recs, track=None, car="GT3") is None
    assert ref_object_name(recs[0]) == "Oval/GT3/Ada/rig-a.a1.wrtf"
    hostile = {"id": "../../x", "rig": "r/1", "track": "../etc", "car": None, "driver": None}
    name = ref_object_name(hostile)
    assert name == "__etc/-/(r_1)/r_1.____x.wrtf"
    assert ".." not in name


def test_parse_fleet_reference() -> None:
    assert parse_fleet_reference("fleet:best") is True
    assert parse_fleet_reference(" fleet:driver=Ada Lovelace ") == "Ada Lovelace"
    assert parse_fleet_reference("laps.wrtf:3") is None
    for bad in ("fleet:", "fleet:worst", "fleet:driver="):
        with pytest.raises(ValueError, match="fleet:best or fleet:driver=NAME"):
            parse_fleet_reference(bad)


def test_the_best_lap_state_only_takes_a_better_lap_and_survives_a_restart(tmp_path: Path) -> None:
    state = tmp_path / ".fleet" / "best_laps.json"
    up = BestLapUploader(tmp_path, state)
    base = {"rig": "rig-a", "driver": "Ada", "car": "GT3", "track": "Oval", "file": "f.wrtf", "session": 0}
    assert up.consider({**base, "id": "1", "time_s": 31.0})
    assert not up.consider({**base, "id": "2", "time_s": 31.5})  # slower
    assert not up.consider({**base, "id": "3", "time_s": 30.0, "valid": False})  # invalid
    assert not up.consider({**base, "id": "4", "time_s": 30.0, "track": None})  # no track
    assert up.consider({**base, "id": "5", "time_s": 31.2, "car": "GT4"})  # another car: its own best
    again = BestLapUploader(tmp_path, state)  # a restart before anything was put
    assert again.pending()
    assert sorted(v["record"]["id"] for v in again.best.values()) == ["1", "5"]
    assert not again.consider({**base, "id": "6", "time_s": 31.0})  # equal is not better
    assert again.consider({**base, "id": "7", "time_s": 30.9})


async def test_a_lap_that_cannot_be_cut_is_not_a_best_to_beat(tmp_path: Path) -> None:
    up = BestLapUploader(tmp_path, tmp_path / ".fleet" / "best_laps.json")
    base = {"rig": "rig-a", "track": "Oval", "session": 0, "first_tick": 1, "last_tick": 9, "lap": 1}
    assert up.consider({**base, "id": "1", "time_s": 31.0, "file": "../../etc/passwd", "car": "GT3"})
    assert up.consider({**base, "id": "2", "time_s": 30.0, "file": "gone.wrtf"})
    assert await up.put_pending(None) == 0  # both refused before any NATS call
    errors = sorted(str(v.get("error")) for v in up.best.values() if v["state"] == "failed")
    assert errors[0].startswith("../../etc/passwd: not a file of the recording directory")
    assert "gone.wrtf: not there" in errors[1]
    assert up.failed == 2
    assert up.consider({**base, "id": "3", "time_s": 30.5, "file": "gone.wrtf"})  # slower, yet put


async def until(cond: Callable[[], object], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def _target(offers: list[Reference], length: float, **kw: Any) -> RefTarget:
    args: dict[str, Any] = {
        "source": "forza",
        "group": "main",
        "spec": "fleet:best",
        "driver": None,
        "track": "Small oval track",
        "car": "GT3",
        "length_m": length,
        "offer": offers.append,
    }
    args.update(kw)
    return RefTarget(**args)


async def test_put_fetch_cache_and_offline_restart(
    recording: tuple[Path, float], tmp_path: Path, nats_server: NatsServer
) -> None:
    source, length = recording
    whole2 = Reference.from_file(source, 2, length_m=length)
    whole3 = Reference.from_file(source, 3, length_m=length)
    rec2 = _record(source, 2, whole2.lap_time_s)
    rec3 = _record(source, 3, whole3.lap_time_s)
    slow, fast = sorted([rec2, rec3], key=lambda r: r["time_s"], reverse=True)
    nc = await connect(ConnectOptions(servers=(nats_server.url,), token=TOKEN), name="t")
    js = nc.jetstream(timeout=10.0)
    try:
        from wrtfd.fleet.laps import LapForwarder

        # rig A: its records to the laps bucket, and its best lap as a lap file
        laps = tmp_path / "laps.jsonl"
        laps.write_text(json.dumps(slow) + "\n")
        up = BestLapUploader(source.parent, tmp_path / "a" / "best_laps.json")
        fwd = LapForwarder(laps, tmp_path / "a" / "laps.offset", rig="rig-a", on_sent=up.consider)
        await fwd.ensure_bucket(js)
        assert await fwd.forward(js) == 1
        assert await up.put_pending(js) == 1
        store = await js.object_store("wrtfd-best-laps")
        names = [o.name for o in await store.list()]
        assert names == [ref_object_name(slow)]

        # rig B (its follower watching the laps bucket): picks it, fetches it into its cache, offers it
        offers: list[Reference] = []
        cache = tmp_path / "b" / "refs"
        follow = ReferenceFollower([_target(offers, length)], cache, laps_bucket="wrtfd-laps", poll_s=0.2)
        task = asyncio.create_task(follow.run(lambda: js, lambda: True, asyncio.Event(), lambda: nc))
        try:
            await until(lambda: len(offers) == 1, "the first reference offered")
            assert offers[0].lap_time_s == pytest.approx(slow["time_s"], abs=1e-9)
            assert offers[0].times_s == (whole2 if slow is rec2 else whole3).times_s
            assert offers[0].origin == f"fleet Ada on rig-a lap {slow['lap']}"

            # rig A improves: the record first (its lap file is not there yet), then the file
            with laps.open("a") as f:
                f.write(json.dumps(fast) + "\n")
            assert await fwd.forward(js) == 1
            await until(lambda: follow.targets[0].wanted["id"] == fast["id"], "the new record seen")  # type: ignore[index]
            await asyncio.sleep(0.5)  # a few retries of the fetch, the object not put yet
            assert len(offers) == 1 and "not in bucket" in str(follow.targets[0].error)
            assert await up.put_pending(js) == 1
            assert [o.name for o in await store.list() if not o.deleted] == [ref_object_name(fast)]
            await until(lambda: len(offers) == 2, "the new best offered")
            assert offers[-1].lap_time_s == pytest.approx(fast["time_s"], abs=1e-9)
            snap = follow.snapshot()[0]
            assert snap["state"] == "fetched" and snap["rig"] == "rig-a" and snap["lap"] == fast["lap"]
            # a slower lap of another rig changes nothing
            await js.publish(
                "$KV.wrtfd-laps.rig-c.x", json.dumps({**slow, "id": "c", "rig": "rig-c"}).encode()
            )
            await asyncio.sleep(0.5)
            assert len(offers) == 2 and len(follow.records) == 3
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        assert [p.name for p in cache.glob("*.wrtf")] == [f"{fast['id']}.wrtf"]  # the older one pruned

        # a rig following its own best takes the lap file it just put, without fetching it
        own: list[Reference] = []
        mine = ReferenceFollower(
            [_target(own, length)],
            tmp_path / "own",
            laps_bucket="x",
            bucket="nothing",
            local_lap=up.local_lap,
        )
        mine.targets[0].wanted = fast
        assert await mine._settle(js) == 1
        assert own[0].lap_time_s == pytest.approx(fast["time_s"], abs=1e-9)
        mine.targets[0].wanted = slow  # not its last put: fetched, from a bucket not there
        assert await mine._settle(js) == 0 and "no bucket 'nothing'" in str(mine.targets[0].error)
    finally:
        await nc.close()
    nats_server.stop()

    # a restart with no server: the cached reference is offered again
    later: list[Reference] = []
    offline = ReferenceFollower([_target(later, length)], cache, laps_bucket="wrtfd-laps")
    assert offline.load_cached() == 1
    assert later[0].lap_time_s == pytest.approx(fast["time_s"], abs=1e-9)
    assert offline.snapshot()[0]["state"] == "cached"
    # another car or another track has nothing cached; a car not known yet takes the last one
    none: list[Reference] = []
    assert ReferenceFollower([_target(none, length, car="GT4")], cache, laps_bucket="x").load_cached() == 0
    assert (
        ReferenceFollower([_target(none, length, track="Other")], cache, laps_bucket="x").load_cached() == 0
    )
    assert ReferenceFollower([_target(none, length, car=None)], cache, laps_bucket="x").load_cached() == 1
    assert len(none) == 1 and none[0].lap_time_s == later[0].lap_time_s


def test_an_offered_reference_is_taken_at_the_next_lap_start() -> None:
    d = PredictiveDelta(length_m=100.0)
    d.update(1, 0.0, 0.0)
    d.update(1, 100.0, 10.0)
    d.complete(1, 10.0)  # the session's best: 10 s
    ref = Reference.from_samples([50.0], [4.0], lap_time_s=8.0, length_m=100.0, number=3, origin="fleet")
    d.update(2, 0.0, 0.0)
    d.update(2, 50.0, 5.0)
    d.offer(ref)
    d.update(2, 60.0, 6.0)  # lap 2 is still driven against the session's best
    assert d.delta_s == pytest.approx(6.0 - 6.0) and d.reference is not ref
    assert d.complete(2, 10.0) == pytest.approx(0.0)
    d.update(3, 0.0, 0.0)  # lap 3 against the offered one
    assert d.reference is ref
    d.update(3, 50.0, 5.0)
    assert d.delta_s == pytest.approx(1.0)
    assert d.complete(3, 7.0) == pytest.approx(-1.0)
    assert d.reference is ref  # a faster session lap does not replace it
    d.reset()
    assert d.reference is ref and math.isnan(d.delta_s)
