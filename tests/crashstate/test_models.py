"""The crash-state builders and the judge's arithmetic, on synthetic histories."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.crashstate.campaign import fsync_wait_s
from tests.crashstate.check import CRASH_BOUND_S, POWER_CUT_BOUND_S, SETTLE_S, Feed, dump_frames, loss_s
from tests.crashstate.models import MODELS, PAGE, SECTOR, VANISHED, build_content, states_at
from tests.crashstate.replay import DaemonFile, FileHistory, FrameTruth, SessionTruth, text_digest
from tests.crashstate.synthetic import history

HEAD = bytes(range(256)) * 8  # 2048 bytes
LATER = [bytes([i + 1]) * n for i, n in enumerate((700, 1300, 5000))]
OLDER = b"\xee" * 20000


def _h() -> FileHistory:
    return history(("w", HEAD), ("fsync",), ("dirsync",), *(("w", d) for d in LATER))


def test_model_a_keeps_everything_written() -> None:
    h = _h()
    assert build_content(h, 6, "a", random.Random(0), OLDER)[0] == HEAD + LATER[0] + LATER[1]
    assert build_content(h, 99, "a", random.Random(0), OLDER)[0] == HEAD + b"".join(LATER)


def test_model_b_is_a_prefix_torn_on_a_sector_boundary() -> None:
    h = _h()
    full = HEAD + b"".join(LATER)
    seen_lengths = set()
    for seed in range(200):
        content, _ = build_content(h, 99, "b", random.Random(seed), OLDER)
        assert full.startswith(content) and len(content) >= len(HEAD)
        ends = {len(HEAD) + sum(map(len, LATER[:i])) for i in range(4)}
        assert len(content) in ends or len(content) % SECTOR == 0
        seen_lengths.add(len(content))
    assert len(seen_lengths) > 6  # whole writes and torn ones


def test_models_c_to_f_fill_past_the_durable_size() -> None:
    h = _h()
    size = len(HEAD) + sum(map(len, LATER))
    c, _ = build_content(h, 99, "c", random.Random(1), OLDER)
    assert c == HEAD + bytes(size - len(HEAD))
    e, _ = build_content(h, 99, "e", random.Random(1), OLDER)
    assert e[: len(HEAD)] == HEAD and len(e) == size and e[len(HEAD) :] != bytes(size - len(HEAD))
    f, _ = build_content(h, 99, "f", random.Random(1), OLDER)
    assert f == HEAD + OLDER[len(HEAD) : size]
    f_short, _ = build_content(h, 99, "f", random.Random(1), OLDER[:3000])
    assert f_short == HEAD + OLDER[len(HEAD) : 3000] + bytes(size - 3000)


def test_model_d_keeps_whole_pages_or_zeros() -> None:
    h = _h()
    full = HEAD + b"".join(LATER)
    kinds = set()
    for seed in range(40):
        d, _ = build_content(h, 99, "d", random.Random(seed), OLDER)
        assert len(d) == len(full) and d[: len(HEAD)] == HEAD
        for p in range(0, len(full), PAGE):
            page, want = d[p : p + PAGE], full[p : p + PAGE]
            tail = want[max(0, len(HEAD) - p) :]
            assert page == want or page[len(want) - len(tail) :] == bytes(len(tail))
            kinds.add(page == want)
    assert kinds == {True, False}


def test_nothing_fsynced_means_empty_zeros_or_garbage() -> None:
    h = history(("w", HEAD), ("w", LATER[0]))
    assert build_content(h, 99, "b", random.Random(3), OLDER)[0] in {
        b"",
        HEAD,
        HEAD + LATER[0],
        *(HEAD[:n] for n in range(SECTOR, len(HEAD), SECTOR)),
        *((HEAD + LATER[0])[:n] for n in range(len(HEAD) + 512 - len(HEAD) % 512, len(HEAD) + 700, SECTOR)),
    }
    assert build_content(h, 99, "c", random.Random(3), OLDER)[0] == bytes(len(HEAD) + 700)
    assert build_content(h, 99, "f", random.Random(3), OLDER)[0] == OLDER[: len(HEAD) + 700]


def test_a_new_file_may_vanish_until_its_directory_is_fsynced() -> None:
    h = history(("w", HEAD), ("fsync",), ("dirsync",), ("w", LATER[0]))
    models = {k: {s.model for s in states_at("t", h, k, random.Random(0), OLDER)} for k in range(1, 6)}
    assert models[1] == models[2] == models[3] == {*MODELS, VANISHED}  # before the directory fsync
    assert models[4] == models[5] == set(MODELS)
    g = history(("w", HEAD), ("sync",))
    assert VANISHED not in {s.model for s in states_at("t", g, 3, random.Random(0), OLDER)}
    assert states_at("t", h, 0, random.Random(0), OLDER) == []  # not created yet


def test_state_time_is_when_the_file_next_changes() -> None:
    h = _h()  # ops at t = 0 (create), 1 (write), 2 (fsync), 3 (dirsync), 4, 5, 6 (writes)
    assert {s.time_s for s in states_at("t", h, 2, random.Random(0), OLDER)} == {2.0}
    assert {s.time_s for s in states_at("t", h, 7, random.Random(0), OLDER)} == {h.end_s}


@settings(max_examples=80, deadline=None)
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("w"), st.binary(min_size=1, max_size=3000)),
            st.tuples(st.just("fsync")),
            st.tuples(st.just("dirsync")),
        ),
        max_size=12,
    ),
    seed=st.integers(0, 2**32),
)
def test_every_model_keeps_what_was_fsynced(steps: list[tuple], seed: int) -> None:
    h = history(*steps)
    for k in range(1, len(h.ops) + 2):
        durable, _ = h.synced(k)
        written = h.content(k)
        assert written.startswith(durable)
        for m in MODELS:
            content, _ = build_content(h, k, m, random.Random(seed), OLDER)
            assert content.startswith(durable), (k, m)
            assert len(content) == len(written) or (m == "b" and written.startswith(content))


# -- the judge's arithmetic -------------------------------------------------------------------------


def _daemon(times_s: list[float]) -> DaemonFile:
    frames = {i: FrameTruth(0, i, 0, b"", round(t * 1e6), 0, None) for i, t in enumerate(times_s)}
    session = SessionTruth(0, 0, b"", "{}", 0, frames, {i: text_digest("{}") for i in frames})
    return DaemonFile(None, 60, 0, [session], None)  # type: ignore[arg-type]


def test_loss_is_the_newest_data_sent_minus_the_newest_frame_kept() -> None:
    sends = tuple(10 + i / 60 for i in range(120))  # 10.0 .. 11.98
    feed = Feed((sends, tuple(20 + i / 60 for i in range(60))), session_starts=(10.0, 20.0))
    daemon = _daemon([*sends, *(20 + i / 60 for i in range(60))])
    kept = [f for f in daemon.frames() if f.time_us <= 11.0e6]
    assert loss_s(feed, daemon, kept, 11.5) == pytest.approx(0.5, abs=0.02)
    assert loss_s(feed, daemon, kept, 15.0) == pytest.approx(0.98, abs=0.02)  # the drive ended
    assert loss_s(feed, daemon, kept, 20.5) == pytest.approx(0.98, abs=0.02)  # and the next is lost whole
    assert loss_s(feed, daemon, daemon.frames(), 30.0) == pytest.approx(0.0, abs=0.02)
    assert loss_s(feed, daemon, [], 10.3) == pytest.approx(0.3, abs=0.02)
    assert feed.bound_s("a", 13.0) == CRASH_BOUND_S
    assert feed.bound_s("c", 13.0) == POWER_CUT_BOUND_S
    assert feed.bound_s("c", 20.5) == POWER_CUT_BOUND_S + SETTLE_S


def test_dump_frames_reads_the_dump_format() -> None:
    text = (
        '{"kind":"session","session":0,"header":{"b":1,"a":2},"footer":null,"frames":2,"last_tick":3}\n'
        '{"kind":"frame","session":0,"tick":1,"time_us":5,"data":{"x":1.5,"y":"nan"}}\n'
        '{"kind":"frame", "session":0,"tick":3,"time_us":6,"data":{"x":2}}\n'
    )
    frames = dump_frames(text)
    assert [(f.header_key, f.tick, f.data) for f in frames] == [
        ('{"a":2,"b":1}', 1, text_digest('{"x":1.5,"y":"nan"}')),
        ('{"a":2,"b":1}', 3, text_digest('{"x":2}')),
    ]


def test_fsync_wait_is_the_longest_written_data_waited() -> None:
    h = history(("w", b"a"), ("fsync",), ("w", b"b"), ("w", b"c"), ("fsync",), ("w", b"d"))
    assert fsync_wait_s([h]) == 2.0  # written at t=3, fsynced at t=5; the last write never was
    assert fsync_wait_s([history(("w", b"a"))]) == 0.0
