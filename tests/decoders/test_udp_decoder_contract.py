"""Every UDP game decoder: registered, a valid WRTF definition, values inside it, and
hostile input (random, truncated, bit-flipped) only ever raises DecodeError with a reason."""

from __future__ import annotations

import random
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.decoders import acc_messages
from tests.decoders.f1_capture import records
from tests.decoders.gt7_capture import captures as gt7_captures
from wrtfd.decoders.registry import all_protocols, make_decoder
from wrtfd.errors import DecodeError
from wrtfd.format.schema import Schema
from wrtfd.simulate import Simulation, TrackInfo, make_encoder
from wrtfd.tracks import LanePath, load_track, timing_sectors

REPO = Path(__file__).resolve().parents[2]

STRUCT_OPTIONS: dict[str, Any] = {
    "fields": [{"name": "t", "type": "uint32"}, {"name": "x", "type": "float32", "count": 3}],
    "magic_hex": "abcd",
    "magic_offset": 16,
    "time_field": "t",
}
PROTOCOLS: dict[str, dict[str, Any]] = {
    "forza": {},
    "f1": {},
    "outgauge": {},
    "outsim": {},
    "outsim2": {"opts": "1ff"},
    "assetto_corsa": {},
    "codemasters": {},
    "struct": STRUCT_OPTIONS,
    "acc": {},
    "wrc": {},
    "gt7": {},
    "pcars2": {},
    "pcars": {},
}
REASONS = {"wrong_size", "unknown_format", "unknown_packet_id", "bad_magic", "bad_header", "other_version"}
#: Two protocol versions of one game on the game's one port (the built-in default picks one).
SHARED_PORTS = {"pcars"}


def test_registry_lists_every_protocol() -> None:
    found = all_protocols()
    for name in PROTOCOLS:
        assert name in found, name
        assert found[name].transport == "udp"
    ports = [
        found[n].default_port
        for n in PROTOCOLS
        if found[n].default_port is not None and n not in SHARED_PORTS
    ]
    assert len(ports) == len(set(ports)), "default ports must not collide"
    assert found["codemasters"].default_port != found["f1"].default_port
    assert found["pcars"].default_port == found["pcars2"].default_port == 5606


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_definition_is_valid_and_documented(name: str) -> None:
    dec = make_decoder(name, **PROTOCOLS[name])
    schema = Schema.from_dict(dec.definition)
    assert schema.frame_dtype.itemsize > 8
    for field in dec.definition["frame"]["fields"]:
        assert field.get("description"), f"{name}.{field['name']} has no description"


def _assert_fits(dtype: np.dtype[Any], values: Mapping[str, object]) -> None:
    """Every value converts to its frame field's type, as the recorder will convert it."""
    for key, value in values.items():
        field = dtype[key]
        if isinstance(value, str):
            assert field.base == np.uint8 and len(value.encode("utf-8")) <= field.shape[0], key
            continue
        np.array(value, dtype=field.base)  # raises OverflowError for an out-of-range integer


@cache
def _corpus(shared_data: Path) -> dict[str, list[bytes]]:
    """Every protocol's good datagrams (read and simulated once: each protocol's case takes its own)."""
    forza = (shared_data / "udp" / "forza_fm2023" / "fm2023_dash_331B_x1793.bin").read_bytes()
    ac = (shared_data / "udp" / "assetto_corsa" / "AssettoCorsa_monza_A8LMS.raw").read_bytes()
    dirt = (shared_data / "udp" / "dirt_rally" / "DirtRallye.bin.raw").read_bytes()
    f1 = [raw for year in range(2018, 2026) for _n, raw, _p in records(shared_data, year)]
    return {
        "forza": [forza[i : i + 331] for i in range(0, 331 * 50, 331)],
        "f1": f1,
        "assetto_corsa": [ac[i : i + 328] for i in range(0, 328 * 50, 328)],
        "codemasters": [dirt[i : i + 264] for i in range(0, 264 * 50, 264)],
        "outgauge": [bytes(92), bytes(96)],
        "outsim": [bytes(64), bytes(68)],
        "outsim2": [b"LFST" + bytes(276)],
        "struct": [bytes(16) + b"\xab\xcd"],
        "acc": acc_messages.session_stream(),
        "wrc": [bytes(275), b"SESU" + bytes(271)],
        "gt7": [c.packets[0] for c in gt7_captures(shared_data)[:10]] + simulated("gt7", 40),
        "pcars2": simulated("pcars2", 200),
        "pcars": simulated("pcars", 90),
    }


def simulated(protocol: str, every: int) -> list[bytes]:
    """Packets of a simulated lap of the oval (every variant / packet type), one tick in ``every``."""
    track = load_track(REPO / "config" / "tracks" / "oval.trk")
    path = LanePath(track)
    sectors = timing_sectors(track, path)
    sim = Simulation(path, laps=1, rate_hz=60.0, seed=3, sectors_m=sectors)
    info = TrackInfo(track.name, path.length_m, sectors, 1)
    encoders = [make_encoder(protocol, info, gt7_variant=v) for v in ("A", "B", "~", "C")]
    out: list[bytes] = []
    for i, state in enumerate(sim.states()):
        for enc in encoders if protocol == "gt7" else encoders[:1]:
            packets = enc.encode(state, first=i == 0, last=False)
            if i % every == 0 or len(packets) > 2:  # every packet of the ticks that send many kinds
                out.extend(packets)
    return out


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_values_are_schema_fields_and_mutations_only_raise_decode_error(shared_data: Path, name: str) -> None:
    dec = make_decoder(name, **PROTOCOLS[name])
    fields = {f["name"] for f in dec.definition["frame"]["fields"]}
    dtype = Schema.from_dict(dec.definition).frame_dtype
    rng = random.Random(1234)
    good = _corpus(shared_data)[name]
    decoded = dropped = 0
    for packet in good:
        out = dec.decode(packet)
        if out is not None:
            assert set(out.values) <= fields
        mutants = [packet[:cut] for cut in range(0, len(packet), max(1, len(packet) // 40))]
        for _ in range(20):
            flipped = bytearray(packet)
            for _ in range(rng.randint(1, 8)):
                flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
            mutants.append(bytes(flipped))
        mutants.append(packet + b"\x00")
        offsets = [*range(min(len(packet), 64) - 3), *range(64, min(len(packet), 512) - 3, 4)]
        for off in offsets:  # inf / NaN wherever a float may sit (headers unaligned: F1)
            for poison in (b"\x00\x00\x80\x7f", b"\x00\x00\xc0\x7f"):
                mutants.append(packet[:off] + poison + packet[off + 4 :])
        for data in mutants:
            try:
                result = dec.decode(data)
            except DecodeError as e:
                assert e.reason in REASONS, e.reason
                dropped += 1
            else:
                decoded += 1
                if result is not None:
                    assert set(result.values) <= fields
                    _assert_fits(dtype, result.values)
    assert dropped > 0 and decoded > 0


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(sorted(PROTOCOLS)), data=st.binary(max_size=2048))
def test_random_datagrams_only_raise_decode_error(name: str, data: bytes) -> None:
    dec = make_decoder(name, **PROTOCOLS[name])
    try:
        dec.decode(data)
    except DecodeError as e:
        assert e.reason in REASONS


def test_tuple_layout_slices_reorders_and_refuses_bad_names() -> None:
    from wrtfd.decoders._common import TupleLayout

    layout = TupleLayout([("a", 1), (None, 2), ("w", 4), ("b", 1)], reorder={"w": (2, 3, 0, 1)})
    assert layout.width == 8 and layout.names == ("a", "w", "b")
    assert layout.build(tuple(range(8))) == {"a": 0, "w": (5, 6, 3, 4), "b": 7}
    shifted = TupleLayout([("x", 2)], base=3)
    assert shifted.build(tuple(range(6))) == {"x": (3, 4)}
    with pytest.raises(ValueError):
        TupleLayout([("not a name", 1)])
    with pytest.raises(ValueError):
        TupleLayout([("w", 4)], reorder={"w": (0, 0, 1, 2)})


def test_presized_tuple_layout_fills_a_template_in_a_fixed_key_order() -> None:
    from wrtfd.decoders._common import TupleLayout

    spec = [("a", 1), (None, 2), ("w", 4), ("b", 1)]
    display = TupleLayout(spec, reorder={"w": (2, 3, 0, 1)})
    presized = TupleLayout(spec, reorder={"w": (2, 3, 0, 1)}, extra=["gear", "flag"])
    t = tuple(range(10, 18))
    built = presized.build(t)
    # the layout's channels as the display form gives them, then the extra keys (None until set)
    assert list(built.items()) == [*display.build(t).items(), ("gear", None), ("flag", None)]
    assert list(presized.template) == ["a", "w", "b", "gear", "flag"]
    assert set(presized.template.values()) == {None}  # the template itself is never filled
    other = {**presized.template, "flag": True}
    assert presized.build(t, other) == {"a": 10, "w": (15, 16, 13, 14), "b": 17, "gear": None, "flag": True}
    assert other["a"] is None  # copied, not filled in place
    built["gear"] = 3
    assert list(built) == ["a", "w", "b", "gear", "flag"]  # setting an extra key keeps the order
    with pytest.raises(ValueError):  # the presized form takes exactly its tuple
        presized.build((*t, 0))
    with pytest.raises(ValueError):
        TupleLayout(spec, base=1, extra=[])
    with pytest.raises(ValueError):
        TupleLayout(spec, extra=["a"])  # an extra key that is a channel already


def test_recent_texts_decode_like_cstr_and_stay_bounded() -> None:
    from wrtfd.decoders._common import RecentTexts, cstr

    texts = RecentTexts(limit=4)
    raws = [b"Soft\x00xx", b"Soft\x00yy", b"Hard", b"\xe9t\xe9\x00", b"", b"Wet\x00", b"Medium\x00"]
    for raw in raws + raws:
        assert texts[raw] == cstr(raw)
        assert len(texts) <= 4
    assert texts[b"Soft\x00xx"] is texts[b"Soft\x00xx"]  # a hit is the remembered string
