"""Every registered protocol's descriptor (``wrtfd/protocols``) has each part, or says why not.

A game added without one of them (its definition, content test, position channels, MoTeC names,
simulator, its row in the docs) fails here, so adding a game is one descriptor module plus the
code it names, and nothing else to remember (CONTRIBUTING.md, "Adding a game").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from wrtfd.exporters.motec_names import protocol_of
from wrtfd.format import Schema
from wrtfd.protocols import (
    SCHEMA_DIR,
    Absent,
    MotecChannels,
    PositionFields,
    ProtocolInfo,
    Simulator,
    all_protocols,
    load,
    sniffers,
)
from wrtfd.simulate import Simulation, TrackInfo, make_encoder
from wrtfd.simulate.sender import with_last
from wrtfd.tracks import LanePath, load_track, timing_sectors
from wrtfd.tracks.analysis import find_position_fields

REPO = Path(__file__).resolve().parent.parent
PROTOCOLS = all_protocols()
NAMES = sorted(PROTOCOLS)


def shipped_definition(info: ProtocolInfo) -> dict[str, Any] | None:
    if isinstance(info.schema_file, Absent):
        return None
    data = yaml.safe_load((SCHEMA_DIR / info.schema_file).read_text())
    assert isinstance(data, dict)
    return data


def frame_dtype(info: ProtocolInfo) -> np.dtype[Any]:
    definition = shipped_definition(info)
    assert definition is not None
    return Schema.from_dict(definition).frame_dtype


def simulated_datagrams(name: str, seconds: float = 3.0) -> list[bytes]:
    track = load_track(REPO / "config" / "tracks" / "road.trk")
    path = LanePath(track)
    sectors = timing_sectors(track, path)
    sim = Simulation(path, laps=1, rate_hz=60.0, seed=7, sectors_m=sectors)
    encoder = make_encoder(name, TrackInfo(track.name, path.length_m, sectors, 1))
    out: list[bytes] = []
    for i, (state, last) in enumerate(with_last(sim.states())):
        if state.t_s > seconds:
            break
        out.extend(encoder.encode(state, first=i == 0, last=last))
    return out


def absent_says_why(part: object) -> bool:
    return isinstance(part, Absent) and len(part.reason) > 10


def test_the_table_is_the_shipped_games() -> None:
    """Every module of the package is read, and every shipped definition has its protocol."""
    modules = {p.stem for p in (REPO / "wrtfd" / "protocols").glob("[!_]*.py")}
    assert modules == {"acc", "assetto_corsa", "codemasters", "f1", "forza", "gt7", "lfs"} | {
        "pcars",
        "serial",
        "struct",
        "wrc",
    }
    files = {info.schema_file for info in PROTOCOLS.values() if isinstance(info.schema_file, str)}
    assert files == {p.name for p in SCHEMA_DIR.glob("*.wrtf.yaml")}


@pytest.mark.parametrize("name", NAMES)
def test_decoder_and_definition(name: str) -> None:
    info = PROTOCOLS[name]
    cls = load(info.decoder)
    assert callable(getattr(cls, "decode", None)), info.decoder
    assert info.transport in ("udp", "serial")
    if isinstance(info.schema_file, str):
        fields = frame_dtype(info).names or ()
        assert len(fields) > 5
        if name not in ("slcan", "struct"):  # built without options: its definition is the file's
            decoder = cls()
            assert [f["name"] for f in decoder.definition["frame"]["fields"]] == [
                f["name"]
                for f in shipped_definition(info)["frame"]["fields"]  # type: ignore[index]
            ]
    else:
        assert absent_says_why(info.schema_file)


@pytest.mark.parametrize("name", NAMES)
def test_content_test(name: str) -> None:
    """A UDP game has a content test that takes its own datagrams and no other game's (each
    game's simulated datagrams, every game's test), or says why it cannot have one."""
    info = PROTOCOLS[name]
    if not isinstance(info.sniff, str):
        assert absent_says_why(info.sniff)
        return
    assert info.transport == "udp"
    looks_like = load(info.sniff)
    assert not looks_like(b"") and not looks_like(b"\x00" * 7)
    if isinstance(info.simulator, Simulator):
        datagrams = simulated_datagrams(name)
        assert datagrams and all(looks_like(d) for d in datagrams)
        others = [n for n, test in sniffers("udp").items() if n != name and all(map(test, datagrams))]
        assert not others, f"{name}'s datagrams also pass the content test of {others}"


@pytest.mark.parametrize("name", NAMES)
def test_position_channels(name: str) -> None:
    info = PROTOCOLS[name]
    if not isinstance(info.position, PositionFields):
        assert absent_says_why(info.position)
        return
    dtype = frame_dtype(info)
    for field in (info.position.x, info.position.z):
        assert dtype[field].shape == () and dtype[field].kind in "fiu", field
    if info.position.active is not None:
        assert dtype[info.position.active].shape == ()
    # a recording of this definition is read back with this protocol's position (a Codemasters
    # file has OutSim's pos_y too; a GT7 file Forza's position_x/z, but GT7's on_track)
    assert find_position_fields(dtype) == (None, info.position)


@pytest.mark.parametrize("name", NAMES)
def test_motec_names(name: str) -> None:
    """Each named field is the definition's; the definition is recognised as this protocol."""
    info = PROTOCOLS[name]
    if not isinstance(info.motec, MotecChannels):
        assert absent_says_why(info.motec)
        return
    dtype = frame_dtype(info)
    fields = dtype.names or ()
    leaves = set(fields) | {f"{f}_{i}" for f in fields for i in range(int(np.prod(dtype[f].shape)))}
    assert set(info.motec.names) <= leaves, set(info.motec.names) - leaves
    assert {"Ground Speed", "GPS Latitude", "Gear", "Throttle Pos"} & {
        m.name for m in info.motec.names.values()
    }
    assert protocol_of(fields) == name


@pytest.mark.parametrize("name", NAMES)
def test_simulator(name: str) -> None:
    """The simulator's datagrams are decoded by the protocol's own decoder."""
    info = PROTOCOLS[name]
    if not isinstance(info.simulator, Simulator):
        assert absent_says_why(info.simulator)
        return
    decoder = load(info.decoder)()
    decoded = [d for d in map(decoder.decode, simulated_datagrams(name, 2.0)) if d is not None]
    assert len(decoded) > 60


@pytest.mark.parametrize("name", NAMES)
def test_listed_in_the_docs(name: str) -> None:
    """docs/daemon.md's source keys name every protocol (its games table names the UDP ones)."""
    text = (REPO / "docs" / "daemon.md").read_text()
    (row,) = [line for line in text.splitlines() if line.startswith("| `protocol` |")]
    assert f"`{name}`" in row
    info = PROTOCOLS[name]
    if info.transport == "udp" and info.default_port is not None:
        games = text.split("| Game | wrtfd protocol |", 1)[1].split("\n\n", 1)[0]
        assert f"`{name}`" in games


@pytest.mark.parametrize("name", [n for n in NAMES if PROTOCOLS[n].lap_facts is not None])
def test_lap_facts_name_scalar_numbers_of_the_frame(name: str) -> None:
    facts = PROTOCOLS[name].lap_facts
    assert facts is not None
    dtype = frame_dtype(PROTOCOLS[name])
    named = [facts.invalid] if facts.invalid else []
    named += list(facts.conditions.values())
    assert named
    for field in named:
        assert field in (dtype.names or ()), field
        assert dtype[field].shape == () and dtype[field].kind in "fiub", field
    assert bool(facts.weather) is ("weather" in facts.conditions)
