"""MCAP export in ROS 2 CDR: every message decoded by mcap-ros2-support (a real ros2msg/CDR
decoder, not ours) and every value compared with the WRTF frame it came from."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.exporters.conftest import OVAL, simulated
from tests.format.samples import write_car_file
from wrtfd.cli.main import main
from wrtfd.exporters.cdr import cdr_layout, ros2_name
from wrtfd.exporters.channels import source_of
from wrtfd.format import Reader
from wrtfd.format.columns import export_leaves
from wrtfd.format.reader import ticks_to_time_us
from wrtfd.format.schema import leaf_column
from wrtfd.simulate import ENCODERS
from wrtfd.tracks.lapchannels import POSITION_FIELDS

mcap_reader = pytest.importorskip("mcap.reader")
ros2_decoder = pytest.importorskip("mcap_ros2.decoder")


def decoded(path: Path) -> dict[str, list[tuple[int, Any]]]:
    """{topic: [(log_time, decoded message)]} (CDR topics decoded by mcap-ros2-support)."""
    out: dict[str, list[tuple[int, Any]]] = {}
    with path.open("rb") as f:
        reader = mcap_reader.make_reader(f, decoder_factories=[ros2_decoder.DecoderFactory()])
        for schema, channel, message in reader.iter_messages():
            if channel.message_encoding != "cdr":
                out.setdefault(channel.topic, []).append((message.log_time, None))
                continue
            assert schema is not None and schema.encoding == "ros2msg"
        for _schema, channel, message, msg in reader.iter_decoded_messages(topics=["/frames"]):
            out.setdefault(channel.topic, []).append((message.log_time, msg))
    return out


def assert_frames_equal(path: Path, src: Path) -> int:
    """Every leaf of every frame equals the decoded message's field; returns values compared."""
    msgs = decoded(path)["/frames"]
    compared = 0
    with Reader(src) as r:
        leaves = export_leaves(r.schema)
        # the field names as the export makes them (folded to ROS 2 names, in frame order)
        names: dict[int, tuple[str | None, str]] = {}
        taken: dict[str | None, set[str]] = {}
        top: set[str] = {"session", "tick"}
        source_fields: dict[str, str] = {}
        for i, lf in enumerate(leaves):
            src_name = source_of(r.schema, lf)
            if src_name is not None and src_name not in source_fields:
                source_fields[src_name] = ros2_name(src_name, top)
            scope = taken.setdefault(src_name, set() if src_name is not None else top)
            local = "_".join(str(p) for p in lf.path[1 if src_name is not None else 0 :])
            names[i] = (source_fields.get(src_name) if src_name else None, ros2_name(local, scope))
        k = 0
        for s in r.sessions:
            frames = np.array(r.frames(s.index))
            t_ns = ticks_to_time_us(frames["tick"], s.time_base_us, r.rate_hz) * 1000
            mine = msgs[k : k + len(frames)]
            k += len(frames)
            assert [t for t, _ in mine] == t_ns.tolist()
            assert [m.tick for _, m in mine] == frames["tick"].tolist()
            assert {m.session for _, m in mine} == {s.index}
            for i, lf in enumerate(leaves):
                col = leaf_column(frames, lf.path)
                holder, field = names[i]
                got = [getattr(getattr(m, holder) if holder else m, field) for _, m in mine]
                if lf.kind == "text":
                    want = [bytes(row).rstrip(b"\0").decode("utf-8", "replace") for row in col]
                    assert [g.rstrip("\0") for g in got] == want, lf.path
                elif lf.kind in ("float32", "float64"):
                    a = np.array(got, dtype=col.dtype)
                    assert np.array_equal(a, col, equal_nan=True), lf.path
                else:
                    assert [int(g) for g in got] == col.astype(np.int64).tolist(), lf.path
                compared += len(col)
        assert k == len(msgs)
    return compared


@pytest.mark.parametrize("protocol", sorted(ENCODERS))
def test_every_simulated_protocol_decodes_to_its_frames(
    protocol: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    laps = protocol in POSITION_FIELDS  # lap channels where the protocol has positions
    # a lap of the oval: every frame decoded in pure Python is what this costs (pcars2's frame has
    # over a thousand fields), and a lap of the road course adds frames, not kinds of field
    src = simulated(tmp_path_factory.mktemp(protocol), protocol, OVAL, laps=1, channels=laps)
    out = src.with_suffix(".mcap")
    assert main(["export", str(src), "-o", str(out)]) == 0
    assert assert_frames_equal(out, src) > 1000


def test_nan_enum_text_bool_and_top_level_fields(tmp_path: Path) -> None:
    src = tmp_path / "car.wrtf"
    write_car_file(src)
    out = tmp_path / "car.mcap"
    assert main(["export", str(src), "-o", str(out)]) == 0
    assert assert_frames_equal(out, src) > 10
    msgs = [m for _, m in decoded(out)["/frames"]]
    assert math.isnan(msgs[1].speed) and msgs[0].driver.rstrip("\0") == "Ayrton"
    assert [m.on_track for m in msgs[:5]] == [True, False, True, False, True]


def test_gps_fixes_and_logs_stay_json(gps_drive: Path, tmp_path: Path) -> None:
    out = tmp_path / "gps.mcap"
    assert main(["export", str(gps_drive), "-o", str(out)]) == 0
    topics = decoded(out)
    assert set(topics) == {"/frames", "/gps/fix", "/wrtfd/log"}
    with Reader(gps_drive) as r:
        lat = r.frames(0)["gps"]["lat_deg"]
        assert len(topics["/gps/fix"]) == int((np.isfinite(lat) & (lat != 0)).sum())
    assert_frames_equal(out, gps_drive)


def test_schema_names_are_ros2_names() -> None:
    taken: set[str] = set()
    assert [ros2_name(n, taken) for n in ("Engine_Speed", "tire__temp_", "2x", "a-b c", "engine_speed")] == [
        "engine_speed",
        "tire_temp",
        "f_2x",
        "a_b_c",
        "engine_speed_2",
    ]


def test_layout_offsets_follow_cdr_alignment(forza_road: Path) -> None:
    """Each field sits at a multiple of its own size from the end of the 4-byte header."""
    with Reader(forza_road) as r:
        layout = cdr_layout(r.schema)
    fields = layout.dtype.fields
    assert fields is not None
    for name, (dt, offset, *_) in fields.items():
        if name == "#header" or dt.kind == "S":
            continue
        assert (offset - 4) % dt.itemsize == 0, name
    assert layout.schema_text.startswith(b"# wrtfd frame")
    assert b"MSG: wrtfd/Forza" in layout.schema_text and b"MSG: wrtfd/Laps" in layout.schema_text
