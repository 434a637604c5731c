"""Recorder + real format library: sessions, headers/footers, rotation, names, determinism."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.recorder.conftest import GAME_DEF, GPS_DEF, PERIOD_60_NS, START_US, T0_NS, game_stream, text
from wrtfd.decoders.base import Sample
from wrtfd.errors import ConfigError
from wrtfd.format import EnumDef, Reader, validate_file
from wrtfd.recorder import (
    RecorderPolicy,
    SourceSpec,
    compose_definition,
    render_name,
    replay,
    sanitize_component,
)

GAME = SourceSpec("game", GAME_DEF, use_source_clock=False)
GPS = SourceSpec("gps", GPS_DEF, drives_frames=False, stale_after_s=1.0)


def _gps(n_game_ticks: int) -> list[Sample]:
    return [
        Sample("gps", T0_NS + round(k * PERIOD_60_NS) + 2_000_000, {"lat_deg": 45.0 + k, "fix": 3})
        for k in range(0, n_game_ticks, 6)
    ]


def _all_frames(paths: list[Path]) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    for p in paths:
        with Reader(p) as r:
            out.extend(np.array(r.frames(i)) for i in range(len(r.sessions)))
    return out


def test_replay_writes_a_valid_self_describing_file_and_is_deterministic(tmp_path: Path) -> None:
    samples = sorted(game_stream(900, jitter_ns=4_000_000) + _gps(900), key=lambda s: s.rx_ns)
    runs = []
    for k in range(2):
        d = tmp_path / f"run{k}"
        paths = replay(
            samples,
            [GAME, GPS],
            RecorderPolicy(output_dir=d),
            start_timestamp_us=START_US,
            metadata={"Driver": "Test"},
        )
        assert len(paths) == 1 and paths[0].parent == d
        runs.append(paths[0])
    assert runs[0].read_bytes() == runs[1].read_bytes()
    assert runs[0].name == "20231114_221319_game_Monza.wrtf"  # tick 0 starts 8.3 ms before 22:13:20
    assert validate_file(runs[0]) == []
    with Reader(runs[0]) as r:
        assert r.complete and r.rate_hz == 60
        assert r.start_timestamp_us == r.sessions[0].header["start_timestamp"]  # the file opens with tick 0
        assert r.metadata["Driver"] == "Test" and r.metadata["Track"] == "Monza"
        (s,) = r.sessions
        assert s.frame_count == 900 and s.dropped_ticks == 0 and s.first_tick == 0 and s.last_tick == 899
        f = r.frames(0)
        assert np.array_equal(f["game"]["n"], np.arange(900))
        assert f["gps"]["fix"][0] == 3 and f["gps"]["lat_deg"][899] == 45.0 + 894
        h = s.header
        assert text(h["track"]) == "Monza" and text(h["car"]) == "A8 LMS"
        assert text(h["session_type"]) == "practice"
        # tick 0 starts half a period before the first sample (it sits mid-tick): N9 time base
        assert h["start_timestamp"] == START_US + (-8_333_333) // 1000
        assert s.footer is not None
        assert s.footer["frames"] == 900 and s.footer["dropped_ticks"] == 0
        assert s.footer["duration_s"] == pytest.approx(15.0)
        assert s.footer["sources"]["game"]["samples"] == 900 and s.footer["sources"]["gps"]["samples"] == 150
        times = r.frame_times_us(0)
        assert times[1] - times[0] == pytest.approx(1e6 / 60, abs=1)


def test_idle_gap_and_session_id_change_give_sessions_with_their_own_headers(out_dir: Path) -> None:
    first = game_stream(600, new_session_at=300)  # the game says: new session at sample 300
    second = game_stream(120, start=600 + 60 * 20, track="Imola")  # 20 s of silence (idle: 5 s)
    paths = replay(
        first + second,
        [GAME],
        RecorderPolicy(output_dir=out_dir, session_idle_s=5.0),
        start_timestamp_us=START_US,
    )
    (path,) = paths
    with Reader(path) as r:
        assert [s.frame_count for s in r.sessions] == [300, 300, 120]
        assert [text(s.header["track"]) for s in r.sessions] == ["Monza", "Spa", "Imola"]
        reasons = r.schema.types["wrtfd__start_reason"]
        assert isinstance(reasons, EnumDef)
        started = [reasons.name_of(int(s.header["start_reason"])) for s in r.sessions]
        assert started == ["first", "new_session", "idle"]
        ends = r.schema.types["wrtfd__end_reason"]
        assert isinstance(ends, EnumDef)
        ended = [ends.name_of(int(s.footer["end_reason"])) for s in r.sessions]  # type: ignore[index]
        assert ended == ["new_session", "idle", "end"]
        starts = [int(s.header["start_timestamp"]) for s in r.sessions]
        assert (starts[1] - starts[0]) == pytest.approx(300 * 1e6 / 60, abs=2)
        assert (starts[2] - starts[0]) / 1e6 == pytest.approx((600 + 1200) / 60, abs=0.02)
        for i in range(3):
            assert r.frames(i)["tick"][0] == 0  # ticks restart at 0 per session (N9)
        assert r.frames(1)["game"]["n"][0] == 300 and r.frames(2)["game"]["n"][0] == 1800


@pytest.mark.parametrize("rotate_bytes", [8192, 20_000])
def test_rotation_by_size_keeps_every_frame_and_exact_times(out_dir: Path, rotate_bytes: int) -> None:
    samples = game_stream(3000, jitter_ns=3_000_000)
    paths = replay(
        samples,
        [GAME],
        RecorderPolicy(output_dir=out_dir, rotate_bytes=rotate_bytes),
        start_timestamp_us=START_US,
    )
    assert len(paths) > 3
    times: list[np.ndarray] = []
    values: list[np.ndarray] = []
    for p in paths:
        assert p.stat().st_size <= rotate_bytes
        assert validate_file(p) == []
        with Reader(p) as r:
            assert r.complete and len(r.sessions) == 1
            assert r.frames(0)["tick"][0] == 0
            times.append(r.frame_times_us(0))
            values.append(np.array(r.frames(0)["game"]["n"]))
    allv = np.concatenate(values)
    assert np.array_equal(allv, np.arange(3000))
    allt = np.concatenate(times)
    assert np.all(np.abs(np.diff(allt) - 1e6 / 60) <= 1)  # continuous across files
    assert len({p.name for p in paths}) == len(paths)


def test_rotation_by_session_count_and_duration(out_dir: Path) -> None:
    samples = game_stream(600, new_session_at=200) + game_stream(100, start=600 + 60 * 30, track="Imola")
    policy = RecorderPolicy(output_dir=out_dir, rotate_sessions=1)
    paths = replay(samples, [GAME], policy, start_timestamp_us=START_US)
    assert len(paths) == 3
    paths2 = replay(
        game_stream(1200),
        [GAME],
        RecorderPolicy(output_dir=out_dir / "d", rotate_s=5.0),
        start_timestamp_us=START_US,
    )
    assert [sum(len(f) for f in _all_frames([p])) for p in paths2] == [300, 300, 300, 300]


HOSTILE = [
    "../../etc/passwd",
    "Spa/Francorchamps",
    "..",
    "a\x00b\x1b[31mred",
    "C:\\Windows\\x",
    "x" * 500,
    "Nürburgring Nordschleife",
    "",
    "  ",
    "$(rm -rf ~)",
    "名古屋サーキット" * 10,
    "bad\ud800surrogate",
]


@pytest.mark.parametrize("track", HOSTILE)
def test_hostile_track_names_give_safe_file_names(out_dir: Path, track: str) -> None:
    samples = game_stream(60, track=track)
    (path,) = replay(samples, [GAME], RecorderPolicy(output_dir=out_dir), start_timestamp_us=START_US)
    assert path.parent == out_dir and path.exists()
    name = path.name
    assert "/" not in name and "\\" not in name and ".." not in name
    assert all(ch.isprintable() for ch in name) and len(name.encode()) <= 255
    assert name.endswith(".wrtf")
    with Reader(path) as r:  # the header keeps the (bounded) text
        assert len(bytes(np.asarray(r.sessions[0].header["track"]))) == 64


@settings(max_examples=200)
@given(value=st.text(max_size=300))
def test_sanitized_components_never_escape_the_directory(value: str) -> None:
    part = sanitize_component(value)
    assert part and "/" not in part and "\\" not in part and ".." not in part
    assert all(ch.isprintable() and not ch.isspace() for ch in part)
    assert len(part.encode()) <= 48
    name = render_name(
        "{date}_{source}_{track}_{car}.wrtf",
        start_us=START_US,
        fields={"source": value, "track": value, "car": value},
    )
    assert name.endswith(".wrtf") and len(name.encode()) <= 205 and "/" not in name and ".." not in name


def test_bad_templates_and_names_are_config_errors(out_dir: Path) -> None:
    with pytest.raises(ConfigError, match="unknown placeholder"):
        RecorderPolicy(output_dir=out_dir, file_template="{nope}.wrtf").check()
    with pytest.raises(ConfigError, match="without directories"):
        RecorderPolicy(output_dir=out_dir, file_template="../{track}.wrtf").check()
    with pytest.raises(ConfigError, match="twice"):
        compose_definition([("game", GAME_DEF), ("game", GAME_DEF)])
    with pytest.raises(ConfigError, match="reserved"):
        compose_definition([("stale", GAME_DEF)])
    with pytest.raises(ConfigError, match="name"):
        compose_definition([("../x", GAME_DEF)])


def test_source_types_are_prefixed_so_sources_never_collide() -> None:
    d = compose_definition([("gps", GPS_DEF), ("gps2", GPS_DEF)])
    assert "gps__fix_mode" in d["types"] and "gps2__fix_mode" in d["types"]
    fields = d["types"]["gps__frame"]["fields"]
    assert [f["type"] for f in fields] == ["float64", "gps__fix_mode"]


class LapCounter:
    """A toy derived-channel plug-in: counts frames and keeps the top speed."""

    name = "laps"

    def __init__(self) -> None:
        self.definition: dict[str, Any] = {
            "fields": [
                {"name": "frame_no", "type": "uint32", "description": "frames so far"},
                {"name": "time_s", "type": "float64", "description": "session time"},
            ]
        }
        self.footer_fields = {"top_speed": "float32", "frames_seen": "uint32"}
        self.n = 0
        self.top = 0.0
        self.sessions = 0

    def start_session(self) -> None:
        self.n = 0
        self.top = 0.0
        self.sessions += 1

    def compute(self, row: np.void, time_s: float) -> None:
        self.n += 1
        self.top = max(self.top, float(row["game"]["speed"]))
        row["laps"]["frame_no"] = self.n
        row["laps"]["time_s"] = time_s

    def summary(self) -> dict[str, Any]:
        return {"top_speed": self.top, "frames_seen": self.n}


def test_derived_channels_plug_in_writes_fields_and_footer_summary(out_dir: Path) -> None:
    plug = LapCounter()
    samples = game_stream(400, new_session_at=250)
    (path,) = replay(
        samples, [GAME], RecorderPolicy(output_dir=out_dir), start_timestamp_us=START_US, derived=[plug]
    )
    assert plug.sessions == 2
    with Reader(path) as r:
        f0, f1 = r.frames(0), r.frames(1)
        assert np.array_equal(f0["laps"]["frame_no"], np.arange(1, 251))
        assert np.array_equal(f1["laps"]["frame_no"], np.arange(1, 151))
        assert f1["laps"]["time_s"][60] == pytest.approx(1.0)
        assert r.sessions[0].footer is not None and r.sessions[1].footer is not None
        assert r.sessions[0].footer["laps"]["frames_seen"] == 250
        assert r.sessions[0].footer["laps"]["top_speed"] == 249.0
        assert r.sessions[1].footer["laps"]["frames_seen"] == 150


def test_template_placeholders(out_dir: Path) -> None:
    name = render_name("{datetime}-{seq}-{car}.wrtf", start_us=START_US, fields={"car": "Ferrari 488/GT3"})
    assert name == "20231114T221320Z-0000-Ferrari-488-GT3.wrtf"
    assert sanitize_component("ab..cd") == "ab.cd"
    assert sanitize_component("\x00\x01") == "unknown"
    with pytest.raises(ConfigError, match="half a tick"):
        replay(game_stream(10), [GAME], RecorderPolicy(output_dir=out_dir), start_timestamp_us=1000)


def test_size_limit_holds_with_several_sessions_per_file(out_dir: Path) -> None:
    samples = game_stream(400, new_session_at=100) + game_stream(400, start=400 + 60 * 10, new_session_at=700)
    policy = RecorderPolicy(output_dir=out_dir, rotate_bytes=16_384, session_idle_s=2.0)
    paths = replay(samples, [GAME], policy, start_timestamp_us=START_US)
    sessions = 0
    frames = 0
    for p in paths:
        assert p.stat().st_size <= 16_384
        with Reader(p) as r:
            assert r.complete
            sessions += len(r.sessions)
            frames += sum(s.frame_count for s in r.sessions)
    assert frames == 800 and sessions >= 4
