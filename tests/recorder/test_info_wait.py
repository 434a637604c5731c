"""A new session's header waits (``info_wait_s``, session time) for the track a source promises
(``SourceSpec.awaits_info``): a game that names its track in a message of its own (ACC's track
data, Project CARS' race definition) gets it into the header, the file name and ``Track`` whatever
the order; the frames held meanwhile are all written, the same bytes as without the wait."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tests.recorder.conftest import GAME_DEF, START_US, game_stream, text
from wrtfd.decoders.base import Sample
from wrtfd.format import Reader
from wrtfd.recorder import RecorderPolicy, SourceSpec, replay


def late_track(n: int, at: int | None) -> list[Sample]:
    """``n`` samples of a game that sends no info with its first samples and names the track
    (with its car and session type) in sample ``at`` (None: never)."""
    samples = game_stream(n, track=None)
    if at is not None:
        samples[at] = dataclasses.replace(
            samples[at], session_info={"track": "Monza", "car": "A8 LMS", "session_type": "race"}
        )
    return samples


def record(
    tmp: Path, samples: list[Sample], *, awaits: tuple[str, ...] = ("track",), wait_s: float = 3.0
) -> Path:
    policy = RecorderPolicy(output_dir=tmp, info_wait_s=wait_s, session_idle_s=5.0)
    spec = SourceSpec("game", GAME_DEF, awaits_info=awaits)
    (path,) = replay(samples, [spec], policy, start_timestamp_us=START_US)
    return path


def frames_and_header(path: Path) -> tuple[list[object], dict[str, str]]:
    with Reader(path) as r:
        (session,) = r.sessions
        h = session.header
        header = {k: text(h[k]) for k in ("track", "car", "session_type")}
        header["start_reason"] = str(h["start_reason"])
        header["start_timestamp"] = str(int(h["start_timestamp"]))
        frames = r.frames(0)
        # everything but the frame check (its salt covers the metadata, which differs)
        kept = [n for n in frames.dtype.names or () if n != r.metadata["wrtfd.check.field"]]
        return [repr(row) for row in frames[kept].tolist()], header


def test_a_track_sent_after_the_session_began_is_in_its_header_file_name_and_metadata(tmp_path: Path) -> None:
    path = record(tmp_path / "wait", late_track(600, at=90))  # 1.5 s in: the session began at 0.5 s
    frames, header = frames_and_header(path)
    assert (header["track"], header["car"], header["session_type"]) == ("Monza", "A8 LMS", "race")
    assert path.name.endswith("_game_Monza.wrtf")
    with Reader(path) as r:
        assert r.metadata["Track"] == "Monza" and r.metadata["Car"] == "A8 LMS"
    # without the wait (or a source promising nothing) the header is what was known at the start
    for name, wait_s, awaits in (("no_wait", 0.0, ("track",)), ("no_promise", 3.0, ())):
        bare = record(tmp_path / name, late_track(600, at=90), awaits=awaits, wait_s=wait_s)
        bare_frames, bare_header = frames_and_header(bare)
        assert bare_header["track"] == "" and bare.name.endswith("_game_unknown.wrtf")
        # the held frames are all written: ticks, values, stale flags, markers
        assert bare_frames == frames
        assert bare_header["start_timestamp"] == header["start_timestamp"]


def test_the_wait_is_bounded(tmp_path: Path) -> None:
    never, header = frames_and_header(record(tmp_path / "never", late_track(600, at=None)))
    assert header["track"] == "" and len(never) == 600
    # a track later than the wait (5 s in, the wait is 3 s) is not waited for
    late, header = frames_and_header(record(tmp_path / "late", late_track(600, at=300)))
    assert header["track"] == "" and late == never


def test_a_session_shorter_than_the_wait_is_written_at_its_end(tmp_path: Path) -> None:
    frames, header = frames_and_header(record(tmp_path / "short", late_track(60, at=None), wait_s=10.0))
    assert header["track"] == "" and len(frames) == 60
