"""The lap book: one JSON line per completed lap beside the recordings, with its file and session."""

from __future__ import annotations

import json
from pathlib import Path

from wrtfd import __version__
from wrtfd.daemon.laprecords import LapBook, record_id
from wrtfd.recorder.observe import FileOpened, LapCompleted

START_US = 1_795_000_000_000_000


def lap(
    n: int, start_s: float, end_s: float, session_us: int = START_US, pit: str | None = None
) -> LapCompleted:
    return LapCompleted(
        group="main",
        lap=n,
        time_s=end_s - start_s,
        sectors_s=(1.0, 2.0, end_s - start_s - 3.0),
        start_s=start_s,
        end_s=end_s,
        first_tick=round(start_s * 60),
        last_tick=round(end_s * 60) - 1,
        session_start_us=session_us,
        wall_us=session_us + round(end_s * 1e6),
        info=(("car", "GT3"), ("driver", "Ada"), ("track", "Oval")),
        pit=pit,
    )


def test_records_name_the_file_and_session_and_a_torn_line_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / "laps.jsonl").write_bytes(b'{"torn by a power cut')
    book = LapBook(tmp_path, rig="rig-1", fsync_interval_s=0.05)
    book.start()
    book.notify(FileOpened("main", str(tmp_path / "a.wrtf"), START_US))
    book.notify(lap(1, 10.0, 40.5))
    book.notify(lap(1, 5.0, 35.0, session_us=START_US + 100_000_000))  # the file's second session
    book.notify(FileOpened("main", str(tmp_path / "b.wrtf"), START_US + 200_000_000))
    book.notify(lap(2, 35.0, 66.0, session_us=START_US + 200_000_000, pit="in"))  # into the pit lane
    # rotated in the middle of that session (rotate_s): its next lap is in c.wrtf's session 0
    book.notify(FileOpened("main", str(tmp_path / "c.wrtf"), START_US + 260_000_000, "rotate"))
    book.notify(lap(3, 66.0, 97.0, session_us=START_US + 200_000_000))
    book.close()
    lines = (tmp_path / "laps.jsonl").read_bytes().split(b"\n")
    assert lines[0] == b'{"torn by a power cut' and lines[-1] == b""
    records = [json.loads(x) for x in lines[1:-1]]
    assert [(r["file"], r["session"], r["lap"]) for r in records] == [
        ("a.wrtf", 0, 1),
        ("a.wrtf", 1, 1),
        ("b.wrtf", 0, 2),
        ("c.wrtf", 0, 3),
    ]
    first = records[0]
    assert first == {
        "v": 1,
        "id": record_id("rig-1", "main", START_US, 1, 40.5),
        "rig": "rig-1",
        "group": "main",
        "driver": "Ada",
        "car": "GT3",
        "track": "Oval",
        "session_type": None,
        "lap": 1,
        "time_s": 30.5,
        "sectors_s": [1.0, 2.0, 27.5],
        "valid": None,
        "pit": None,
        "conditions": None,
        "file": "a.wrtf",
        "session": 0,
        "session_start_us": START_US,
        "start_s": 10.0,
        "end_s": 40.5,
        "first_tick": 600,
        "last_tick": 2429,
        "wall_us": START_US + 40_500_000,
        "wrtfd": __version__,
    }
    assert [r["pit"] for r in records] == [None, None, "in", None]
    assert len({r["id"] for r in records}) == 4
    assert book.records == 4 and book.errors == 0
