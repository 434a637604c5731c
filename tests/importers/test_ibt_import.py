"""iRacing .ibt import: what the file holds, read here independently from the SDK header layout
(``irsdk_header`` at 0, ``irsdk_diskSubHeader`` at 112, 144-byte variable headers)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wrtfd.cli.main import main
from wrtfd.errors import ImportFormatError
from wrtfd.format import Reader
from wrtfd.ibt.reader import IbtFile
from wrtfd.importers.ibt import import_ibt

TYPES = {0: "B", 1: "?", 2: "i", 3: "I", 4: "f", 5: "d"}


def sdk_layout(raw: bytes) -> tuple[dict[str, int], dict[str, tuple[int, int, int, str]]]:
    """Header fields and name -> (type, offset, count, unit), by the SDK's byte offsets."""
    ver, _status, rate, _upd, info_len, info_off, nvars, var_off, _nbuf, buf_len = struct.unpack_from(
        "<10i", raw, 0
    )
    (_tick, buf_off) = struct.unpack_from("<ii", raw, 48)
    records = struct.unpack_from("<i", raw, 112 + 28)[0]
    header = {
        "ver": ver, "rate": rate, "nvars": nvars, "buf_len": buf_len, "buf_off": buf_off,
        "records": records, "info_off": info_off, "info_len": info_len,
    }  # fmt: skip
    variables = {}
    for i in range(nvars):
        at = var_off + 144 * i
        vtype, offset, count = struct.unpack_from("<3i", raw, at)
        name = raw[at + 16 : at + 48].split(b"\0")[0].decode()
        unit = raw[at + 112 : at + 144].split(b"\0")[0].decode()
        variables[name] = (vtype, offset, count, unit)
    return header, variables


def value(raw: bytes, header: dict[str, int], var: tuple[int, int, int, str], row: int) -> object:
    vtype, offset, count, _unit = var
    return struct.unpack_from(
        "<" + TYPES[vtype] * count, raw, header["buf_off"] + row * header["buf_len"] + offset
    )


def test_valid_ibt(shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = shared_data / "ibt" / "valid_test_file.ibt"
    raw = path.read_bytes()
    header, variables = sdk_layout(raw)
    out = tmp_path / "ibt.wrtf"
    assert main(["import", str(path), "-o", str(out)]) == 0
    with Reader(out) as r:
        assert r.rate_hz == header["rate"] == 60
        assert len(r.sessions) == 1
        frames = np.array(r.frames(0))
        meta = dict(r.metadata)
    block = frames["iracing"]
    assert len(block.dtype.names or ()) == header["nvars"] == 276
    assert len(frames) == header["records"] == 390
    assert list(frames["tick"]) == list(range(390))  # one row per tick, none dropped
    for name in ("SessionTime", "SessionTick", "Lat", "Lon", "Speed", "RPM", "Gear", "FuelLevel", "Throttle",
                 "Brake", "LapDist", "SteeringWheelTorque_ST", "CFSRrideHeight"):  # fmt: skip
        var = variables[name]
        for row in (0, 1, 200, 389):
            want = value(raw, header, var, row)
            got = block[name][row]
            np.testing.assert_array_equal(
                np.ravel(got), np.array(want, dtype=block.dtype[name].base), err_msg=f"{name}[{row}]"
            )
    assert float(block["Lat"][0]) == 47.21992210488274
    assert meta["Track"] == "Red Bull Ring"
    assert meta["Car"] == "Mercedes-AMG W13 E Performance"
    assert meta["Driver"]
    yaml_text = (
        raw[header["info_off"] : header["info_off"] + header["info_len"]].split(b"\0")[0].decode("latin-1")
    )
    assert meta["wrtfd.ibt.session_info"] == yaml_text
    assert list(frames["laps"]["lap_number"][[0, -1]]) == [9, 9]  # the file's Lap
    np.testing.assert_array_equal(frames["laps"]["lap_distance"], block["LapDist"])
    assert "390 rows -> 390 samples" in capsys.readouterr().err


def test_the_import_opens_in_the_lap_and_export_commands(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The import's lap channels have no ``sector``: laps, compare and the .ld/.mcap exports
    raised ``no field of name sector`` with a traceback on every .ibt recording."""
    out = tmp_path / "ibt.wrtf"
    assert main(["import", str(shared_data / "ibt" / "valid_test_file.ibt"), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["laps", str(out)]) == 0
    assert "session 0: 0 complete lap(s)" in capsys.readouterr().out  # the file is part of lap 9
    for suffix in (".ld", ".mcap"):
        assert main(["export", str(out), "-o", str(tmp_path / f"x{suffix}")]) == 0
        assert ": 390 frames," in capsys.readouterr().err
    assert main(["compare", str(out), str(out), "-o", str(tmp_path / "c.png")]) == 2
    assert capsys.readouterr().err.splitlines() == [f"wrtfd: error: {out}: no session has a completed lap"]


def test_units_and_descriptions(shared_data: Path, tmp_path: Path) -> None:
    path = shared_data / "ibt" / "valid_test_file.ibt"
    _header, variables = sdk_layout(path.read_bytes())
    out = tmp_path / "u.wrtf"
    import_ibt(path, out)
    import yaml

    with Reader(out) as r:
        definition = yaml.safe_load(r.metadata["wrtf.schema"])
    # the source's channels are a struct type of the recording's definition
    (struct_type,) = [
        t for t in definition["types"].values() if "SessionTime" in {f["name"] for f in t.get("fields", [])}
    ]
    fields = {f["name"]: f for f in struct_type["fields"]}
    assert fields["Speed"].get("unit") == variables["Speed"][3] == "m/s"
    assert fields["RPM"].get("unit") == "revs/min"
    assert fields["SteeringWheelTorque_ST"]["dimensions"] == 6


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("invalid_test_file.ibt", "header version 1635021600"),
        ("empty_test_file.ibt", "empty file"),
        ("live_test_file.ibt", "live shared memory"),
    ],
)
def test_bad_ibt_files(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, message: str
) -> None:
    out = tmp_path / "x.wrtf"
    assert main(["import", str(shared_data / "ibt" / name), "--format", "ibt", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("wrtfd: error:") and message in err[0]
    assert not out.exists()
    # detection without --format: the same one line, never a traceback
    assert main(["import", str(shared_data / "ibt" / name), "-o", str(out)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    edits=st.lists(st.tuples(st.integers(0, 40_000), st.binary(min_size=1, max_size=8)), max_size=6),
    cut=st.integers(0, 471_844),
)
def test_fuzz_ibt(shared_data: Path, tmp_path: Path, edits: list[tuple[int, bytes]], cut: int) -> None:
    """The real file with its header and variable table edited, or cut anywhere: only
    ImportFormatError, and whatever opens reads rows within the file."""
    raw = bytearray((shared_data / "ibt" / "valid_test_file.ibt").read_bytes())
    for at, data in edits:
        raw[at : at + len(data)] = data
    path = tmp_path / "f.ibt"
    path.write_bytes(bytes(raw[: len(raw) - cut % len(raw)]))
    try:
        with IbtFile(path) as ibt:
            rows = ibt.rows()
            assert len(rows) == ibt.row_count
            assert ibt.header.buf_offset + ibt.row_count * ibt.header.buf_len <= ibt.size
            if len(rows):
                rows[-1].tolist()
    except ImportFormatError:
        pass


def test_hostile_session_yaml_is_a_note() -> None:
    from wrtfd.importers.ibt import _session_metadata

    notes: list[str] = []
    assert _session_metadata("[" * 100_000, notes) == {}
    assert _session_metadata("a: [unclosed", notes) == {}
    assert len(notes) == 2 and all("not valid YAML" in n for n in notes)
    good = (
        "WeekendInfo:\n TrackDisplayName: Monza\nDriverInfo:\n DriverCarIdx: 1\n Drivers:\n"
        " - CarIdx: 0\n   CarScreenName: X\n - CarIdx: 1\n   CarScreenName: Y\n   UserName: Me\n"
    )
    assert _session_metadata(good, notes) == {"Track": "Monza", "Car": "Y", "Driver": "Me"}
