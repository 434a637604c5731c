"""The upload queue on disk: entries survive, bad ones are set aside, the scan finds what is due."""

from __future__ import annotations

import os
import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from wrtfd.fleet.queue import MAX_ENTRY_BYTES, UploadQueue, object_name


def test_entries_survive_a_reopen_in_queue_order(tmp_path: Path) -> None:
    q = UploadQueue(tmp_path / "q")
    assert q.open() == []
    b = q.add(tmp_path / "b.wrtf", object_name="rig/b.wrtf", group="main", frames=10, complete=True, now_us=2)
    a = q.add(tmp_path / "a.wrtf", object_name="rig/a.wrtf", now_us=1)
    b = q.update(b, nuid="N1", size=100, mtime_ns=5, chunk_bytes=4096, attempts=2, last_error="x")
    again = UploadQueue(tmp_path / "q").open()
    assert again == [a, b]
    assert again[1].nuid == "N1" and again[1].complete is True and again[1].frames == 10
    # no temporary file is left behind by the atomic rewrites
    assert sorted(p.name for p in (tmp_path / "q" / "pending").iterdir()) == sorted(
        [f"{a.id}.json", f"{b.id}.json"]
    )


def test_done_logs_the_upload_and_drops_the_entry(tmp_path: Path) -> None:
    q = UploadQueue(tmp_path / "q")
    q.open()
    e = q.add(tmp_path / "a.wrtf", object_name="rig/a.wrtf")
    q.done(e, size=10, mtime_ns=123, sha256="ab" * 32)
    q2 = UploadQueue(tmp_path / "q")
    assert q2.open() == []
    assert q2.is_uploaded(str(tmp_path / "a.wrtf"), 10, 123)
    assert not q2.is_uploaded(str(tmp_path / "a.wrtf"), 11, 123)  # a changed file is uploaded again


def test_unreadable_entries_are_moved_aside_and_counted(tmp_path: Path) -> None:
    q = UploadQueue(tmp_path / "q")
    q.open()
    good = q.add(tmp_path / "a.wrtf", object_name="rig/a.wrtf")
    pending = tmp_path / "q" / "pending"
    (pending / "garbage.json").write_bytes(b"\x00\xff not json")
    (pending / "huge.json").write_bytes(b" " * (MAX_ENTRY_BYTES + 10))
    (pending / "wrongtype.json").write_text(
        '{"id": "wrongtype", "path": "p", "object": "o", "queued_us": "x"}'
    )
    (pending / "renamed.json").write_text(good.to_json().decode())  # id does not match the name
    q2 = UploadQueue(tmp_path / "q")
    assert q2.open() == [good]
    assert q2.bad_entries == 4
    assert sorted(p.name for p in (tmp_path / "q" / "bad").iterdir()) == [
        "garbage.json",
        "huge.json",
        "renamed.json",
        "wrongtype.json",
    ]


def test_a_torn_last_log_line_only_costs_that_upload_again(tmp_path: Path) -> None:
    q = UploadQueue(tmp_path / "q")
    q.open()
    e = q.add(tmp_path / "a.wrtf", object_name="rig/a.wrtf")
    q.done(e, size=1, mtime_ns=1, sha256="00")
    with open(tmp_path / "q" / "uploaded.jsonl", "ab") as f:
        f.write(b'{"path": "/x", "size": 3, "mtime')  # power cut in the middle of a line
    q2 = UploadQueue(tmp_path / "q")
    q2.open()
    assert q2.is_uploaded(str(tmp_path / "a.wrtf"), 1, 1)
    assert not q2.is_uploaded("/x", 3, 0)


def test_scan_finds_finished_files_not_open_not_queued_not_uploaded(tmp_path: Path) -> None:
    out = tmp_path / "rec"
    (out / "sub").mkdir(parents=True)
    q = UploadQueue(out / ".fleet")
    q.open()
    names = ["old.wrtf", "open.wrtf", "queued.wrtf", "done.wrtf", "new.wrtf", "sub/deep.wrtf", "notes.txt"]
    for name in names:
        (out / name).write_bytes(b"x" * 10)
    start_ns = 2_000_000_000 * 10**9
    for name in names:
        os.utime(out / name, ns=(start_ns - 10**10, start_ns - 10**10))
    os.utime(out / "new.wrtf", ns=(start_ns + 1, start_ns + 1))  # written since the start: maybe open
    done = q.add(out / "done.wrtf", object_name="r/done.wrtf")
    st = (out / "done.wrtf").stat()
    q.done(done, size=st.st_size, mtime_ns=st.st_mtime_ns, sha256="00")
    (out / ".fleet" / "stray.wrtf").write_bytes(b"y")  # never inside the queue's own directory
    found = q.scan(
        out, before_ns=start_ns, exclude={str(out / "open.wrtf")}, pending=[str(out / "queued.wrtf")]
    )
    assert found == [out / "old.wrtf", out / "sub" / "deep.wrtf"]


@given(st.text(min_size=1, max_size=80))
def test_object_names_are_always_valid_keys_under_the_rig(name: str) -> None:
    obj = object_name("rig-1", name)
    assert obj.startswith("rig-1/")
    assert re.fullmatch(r"[-/_=.a-zA-Z0-9]+", obj)
    assert ".." not in obj.split("/")
    assert "" not in obj.split("/")


def test_object_names_keep_plain_names_and_tell_mangled_ones_apart() -> None:
    assert object_name("r", "2026_forza_road.wrtf") == "r/2026_forza_road.wrtf"
    assert object_name("r", "sub/x.wrtf") == "r/sub/x.wrtf"
    a, b = object_name("r", "Nürburgring.wrtf"), object_name("r", "Nurburgring+.wrtf")
    assert a != b and a.endswith(".wrtf") and b.endswith(".wrtf")
