"""ENOSPC on a real, tiny file system (a tmpfs mounted for the test; root only)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.recorder.conftest import PERIOD_60_NS, START_US, T0_NS, session_section
from wrtfd.decoders.base import Sample
from wrtfd.format import EnumDef, Reader, repair_file, validate_file
from wrtfd.recorder import Recorder, RecorderPolicy, SourceSpec

WIDE_DEF = {
    "version": "1.0",
    "session": session_section(),
    "frame": {
        "description": "f",
        "fields": [
            {"name": "n", "type": "uint32", "description": "sample index"},
            {"name": "v", "type": "float32", "dimensions": 64, "description": "a wide channel"},
        ],
    },
}


@pytest.fixture()
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.decode(errors='replace').strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _feed(rec: Recorder, first: int, last: int) -> None:
    for i in range(first, last):
        rx = T0_NS + round(i * PERIOD_60_NS)
        rec.apply(rec.advance(rx))
        rec.push(Sample("wide", rx, {"n": i, "v": [float(i)] * 64}))


def test_disk_full_closes_cleanly_reports_the_path_and_resumes_when_space_returns(tiny_fs: Path) -> None:
    out = tiny_fs / "rec"
    filler = tiny_fs / "filler"
    free = os.statvfs(tiny_fs).f_bavail * os.statvfs(tiny_fs).f_frsize
    filler.write_bytes(b"\0" * (free - 96 * 1024))  # leave about 96 KiB: ~330 frames of 272 bytes
    rec = Recorder(
        [SourceSpec("wide", WIDE_DEF, use_source_clock=False)],
        RecorderPolicy(output_dir=out, retry_s=0.5, retry_max_s=2.0),
        origin=(T0_NS, START_US),
    )
    _feed(rec, 0, 900)  # 15 s of data: the disk fills after ~5 s
    st = rec.sink.state()
    assert st.failing and st.errors >= 1 and st.frames_lost > 0
    first = rec.paths[0]
    assert st.last_error is not None and "ENOSPC" in st.last_error
    assert f"{first}: No space left on device (ENOSPC)" == rec.sink.error_log[0]  # reported with the path
    assert len(rec.paths) == 1  # retries on a full disk leave no empty junk files
    assert sorted(p.name for p in out.iterdir()) == [first.name]
    with Reader(first) as r:  # what was written before the error is all readable
        n1 = np.concatenate([np.array(r.frames(i)["wide"]["n"]) for i in range(len(r.sessions))])
    assert len(n1) > 200 and np.array_equal(n1, np.arange(len(n1)))
    filler.unlink()  # space returns
    _feed(rec, 900, 1200)
    rec.apply(rec.finish("end"))
    rec.close()
    assert not rec.sink.state().failing and len(rec.paths) == 2
    second = rec.paths[1]
    assert validate_file(second) == []
    with Reader(second) as r:
        assert r.complete
        reasons = r.schema.types["wrtfd__start_reason"]
        assert isinstance(reasons, EnumDef)
        assert reasons.name_of(int(r.sessions[0].header["start_reason"])) == "resume"
        n2 = np.array(r.frames(0)["wide"]["n"])
        assert r.frames(0)["tick"][0] == 0
    assert n2[0] > n1[-1] and n2[-1] == 1199 and np.all(np.diff(n2) == 1)
    # resumed within the backoff (at most retry_max_s = 2 s of frame time after space returned)
    assert n2[0] <= 900 + 2 * 60 + 1
    repair_file(first, durable=False)
    assert validate_file(first) == []
    with Reader(first) as r:
        assert r.complete and sum(s.frame_count for s in r.sessions) == len(n1)
