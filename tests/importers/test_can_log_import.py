"""CAN logs (candump -l, SavvyCAN CSV) with a DBC per bus, against cantools decoding the same frames.

The expected frames are computed here independently of the importer: the log lines parsed with
a regex of the candump format, each frame decoded by cantools, and the held channel values of
each tick (1 kHz, so tick = (t - first sample + 0.5 ms) // 1 ms, the scheduler's grid with the
first sample in the middle of tick 0).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import cast

import cantools
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wrtfd.cli.main import main
from wrtfd.decoders.savvycan import SavvycanColumns, parse_savvycan_row
from wrtfd.errors import DecodeError
from wrtfd.format import Reader

RATE = 1000
LINE = re.compile(r"\((\d+)\.(\d{6})\) (\w+) ([0-9A-F]+)#([0-9A-F]*)")
BODY_DBC = """VERSION ""
NS_ :
BS_:
BU_: Vector__XXX
BO_ 320 BODY_140: 8 Vector__XXX
 SG_ PEDAL : 0|8@1+ (0.5,0) [0|127.5] "%" Vector__XXX
 SG_ REVS : 16|16@1+ (0.25,0) [0|16383.75] "rpm" Vector__XXX
"""

Frame = tuple[str, int, int, bytes]  # bus, time ns, id, data


@pytest.fixture(scope="module")
def subaru(shared_data: Path) -> tuple[Path, Path, list[Frame]]:
    base = shared_data / "can" / "subaru"
    frames = []
    for line in (base / "can_sample.log").read_text().splitlines():
        m = LINE.fullmatch(line.strip())
        assert m, line
        sec, usec, bus, ident, data = m.groups()
        frames.append((bus, int(sec) * 10**9 + int(usec) * 1000, int(ident, 16), bytes.fromhex(data)))
    return base / "can_sample.log", base / "sample_can_spec.dbc", frames


def expected(frames: list[Frame], dbcs: dict[str, Path]) -> tuple[dict[int, dict[str, float]], Counter[str]]:
    """tick -> {"bus.channel": value} after the tick's frames; and the frames counted, by reason."""
    dbs = {bus: _can_db(p) for bus, p in dbs_items(dbcs)}
    state: dict[str, float] = {}
    for bus, db in dbs.items():
        for msg in db.messages:
            for sig in msg.signals:
                state[f"{bus}.{sig.name.lower()}"] = math.nan
    out: dict[int, dict[str, float]] = {}
    drops: Counter[str] = Counter()
    first: int | None = None
    for bus, t, ident, data in frames:
        try:
            msg = dbs[bus].get_message_by_frame_id(ident)
        except KeyError:
            drops[f"{bus}: unmapped_id"] += 1
            continue
        try:
            values = cast("Mapping[str, float]", msg.decode(data, decode_choices=False))
        except cantools.database.DecodeError:
            drops[f"{bus}: wrong_size"] += 1
            continue
        first = t if first is None else first
        for name, value in values.items():
            state[f"{bus}.{name.lower()}"] = float(value)
        out[(t - first + 500_000) // 1_000_000] = dict(state)
    return out, drops


def _can_db(path: Path) -> cantools.database.can.Database:
    db = cantools.database.load_file(str(path))
    assert isinstance(db, cantools.database.can.Database)
    return db


def dbs_items(dbcs: dict[str, Path]) -> list[tuple[str, Path]]:
    return sorted(dbcs.items())


def check_file(path: Path, want: dict[int, dict[str, float]], sources: dict[str, str]) -> int:
    """Every frame of ``path`` equals ``want`` (``sources``: the file's source name per bus)."""
    with Reader(path) as r:
        assert len(r.sessions) == 1
        frames = np.array(r.frames(0))
    ticks = sorted(want)
    assert [int(t) for t in frames["tick"]] == ticks
    compared = 0
    for key in want[ticks[-1]]:
        bus, channel = key.split(".")
        column = np.array([want[t][key] for t in ticks], dtype=np.float32)
        np.testing.assert_array_equal(frames[sources[bus]][channel], column, err_msg=key)  # NaN == NaN
        compared += len(column)
    return compared


def test_subaru_log_equals_cantools(
    subaru: tuple[Path, Path, list[Frame]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log, dbc, frames = subaru
    out = tmp_path / "subaru.wrtf"
    assert main(["import", str(log), "--dbc", str(dbc), "--rate", str(RATE), "-o", str(out)]) == 0
    want, drops = expected(frames, {"can0": dbc})
    assert check_file(out, want, {"can0": "can0"}) > 80_000
    err = capsys.readouterr().err
    for reason, n in drops.items():
        assert f"{reason}: {n}" in err
    assert f"{len(frames)} lines" in err


def two_bus_frames(frames: list[Frame]) -> list[Frame]:
    """The first 20 s of the Subaru bus on can0, and again 3 us later on can1."""
    t_end = frames[0][1] + 20 * 10**9
    out = []
    for _bus, t, ident, data in frames:
        if t > t_end:
            break
        out.append(("can0", t, ident, data))
        out.append(("can1", t + 3000, ident, data))
    return out


def write_candump(path: Path, frames: list[Frame]) -> None:
    path.write_text(
        "".join(
            f"({t // 10**9}.{t % 10**9 // 1000:06d}) {bus} {i:03X}#{d.hex().upper()}\n"
            for bus, t, i, d in frames
        )
    )


def write_savvycan(path: Path, frames: list[Frame]) -> None:
    rows = ["Time Stamp,ID,Extended,Dir,Bus,LEN,D1,D2,D3,D4,D5,D6,D7,D8"]
    for bus, t, ident, data in frames:
        cells = [str(t // 1000), f"0x{ident:08X}", "false", "Rx", bus[-1], str(len(data))]
        cells += [f"{b:02X}" for b in data]
        rows.append(",".join(cells) + ",")
    path.write_text("\r\n".join(rows) + "\r\n")


def test_two_buses_each_with_its_dbc_candump_and_savvycan(
    subaru: tuple[Path, Path, list[Frame]], tmp_path: Path
) -> None:
    _log, dbc, frames = subaru
    body = tmp_path / "body.dbc"
    body.write_text(BODY_DBC)
    two = two_bus_frames(frames)
    want, _drops = expected(two, {"can0": dbc, "can1": body})
    assert {k.split(".")[1] for k in want[max(want)] if k.startswith("can1.")} == {"pedal", "revs"}

    candump = tmp_path / "two.log"
    write_candump(candump, two)
    savvy = tmp_path / "two.csv"
    write_savvycan(savvy, two)
    dbc_args = ["--dbc", f"bus0={dbc}", "--dbc", f"bus1={body}", "--rate", str(RATE)]
    out_candump, out_savvy = tmp_path / "a.wrtf", tmp_path / "b.wrtf"
    assert main(["import", str(candump), "-o", str(out_candump), *dbc_args]) == 0
    assert main(["import", str(savvy), "-o", str(out_savvy), *dbc_args]) == 0
    assert check_file(out_candump, want, {"can0": "can0", "can1": "can1"}) > 40_000
    assert check_file(out_savvy, want, {"can0": "bus0", "can1": "bus1"}) > 40_000


def test_bus_without_dbc_and_missing_dbc_option(
    subaru: tuple[Path, Path, list[Frame]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _log, dbc, frames = subaru
    log = tmp_path / "two.log"
    two = two_bus_frames(frames[:2000])
    write_candump(log, two)
    assert main(["import", str(log), "-o", str(tmp_path / "x.wrtf")]) == 2
    assert "needs --dbc" in capsys.readouterr().err
    assert main(["import", str(log), "-o", str(tmp_path / "y.wrtf"), "--dbc", f"can0={dbc}"]) == 0
    err = capsys.readouterr().err
    assert f"can1: no_dbc: {sum(1 for f in two if f[0] == 'can1')}" in err


def test_garbage_lines_are_counted(
    subaru: tuple[Path, Path, list[Frame]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log, dbc, _frames = subaru
    lines = log.read_bytes().splitlines(keepends=True)[:500]
    lines[10:10] = [
        b"garbage here\n",
        b"(1631416514.7) can0 FFFFFFFFF#00\n",
        b"(1631416514.717133) can0 123##100\n",
    ]
    bad = tmp_path / "bad.log"
    bad.write_bytes(b"".join(lines))
    assert (
        main(["import", str(bad), "--format", "candump", "--dbc", str(dbc), "-o", str(tmp_path / "b.wrtf")])
        == 0
    )
    err = capsys.readouterr().err
    assert "malformed: 2" in err and "unsupported_fd: 1" in err


SAVVY_COLUMNS = SavvycanColumns.from_header(b"Time Stamp,ID,Extended,Dir,Bus,LEN,D1,D2,D3,D4,D5,D6,D7,D8")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.binary(max_size=120)
    | st.lists(st.text("0123456789abcdefxABCDEF-truefals ", max_size=12), max_size=16).map(
        lambda c: ",".join(c).encode()
    )
)
def test_fuzz_savvycan_rows(line: bytes) -> None:
    try:
        bus, frame = parse_savvycan_row(line, SAVVY_COLUMNS)
    except DecodeError as exc:
        assert exc.reason in {"too_long", "malformed", "bad_id", "bad_dlc"}
        return
    assert 0 <= bus <= 255 and len(frame.data) <= 8
    assert frame.arbitration_id <= (0x1FFFFFFF if frame.is_extended else 0x7FF)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.binary(max_size=60), max_size=20))
def test_fuzz_can_log_import_counts_every_line(tmp_path: Path, garbage: list[bytes]) -> None:
    """Good lines mixed with garbage: the import succeeds, and lines read = kept + counted."""
    body = tmp_path / "body.dbc"
    body.write_text(BODY_DBC)
    good = [
        f"(1700000000.{i:06d}) can0 140#{i % 256:02X}00{i % 200:02X}0000000000\n".encode() for i in range(20)
    ]
    lines = [g for pair in zip(good, [*garbage, *[b""] * 20], strict=False) for g in pair if g.strip(b"\r\n")]
    log = tmp_path / "f.log"
    log.write_bytes(b"".join(ln if ln.endswith(b"\n") else ln + b"\n" for ln in lines))
    out = tmp_path / "f.wrtf"
    from wrtfd.importers.can_log import import_can_log

    report = import_can_log(log, out, fmt="candump", dbc=[str(body)], force=True)
    assert report.samples == 20
    assert report.read == report.samples + sum(report.dropped.values())


def test_a_line_without_end_is_not_held(subaru: tuple[Path, Path, list[Frame]], tmp_path: Path) -> None:
    """A hostile log: a 5 MB line with no newline between good lines is counted, never held."""
    log, dbc, _frames = subaru
    good = log.read_bytes().splitlines(keepends=True)[:200]
    bad = tmp_path / "long.log"
    bad.write_bytes(
        b"".join(good[:100]) + b"(1631416514.7) can0 " + b"A" * 5_000_000 + b"\n" + b"".join(good[100:])
    )
    from wrtfd.importers.can_log import import_can_log

    report = import_can_log(bad, tmp_path / "l.wrtf", fmt="candump", dbc=[str(dbc)])
    assert report.dropped["too_long"] == 1
    assert report.read == 201
