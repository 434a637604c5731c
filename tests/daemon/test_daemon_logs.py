"""Journal-style lines, one line per event, and rate limiting with an explicit clock."""

from __future__ import annotations

import io
import itertools
import logging
import os
import tempfile

from hypothesis import given
from hypothesis import strategies as st

from wrtfd.daemon.logs import (
    JournalFormatter,
    RateLimiter,
    RateLimitFilter,
    TextFormatter,
    configure_logging,
    under_journal,
)


def _record(level: int, msg: str) -> logging.LogRecord:
    return logging.LogRecord("wrtfd.app", level, __file__, 1, msg, None, None)


def test_journal_lines_have_priority_prefix_and_no_timestamp() -> None:
    fmt = JournalFormatter()
    assert fmt.format(_record(logging.INFO, "recording")) == "<6>wrtfd.app: recording"
    assert fmt.format(_record(logging.WARNING, "w")) == "<4>wrtfd.app: w"
    assert fmt.format(_record(logging.ERROR, "e")) == "<3>wrtfd.app: e"
    assert fmt.format(_record(logging.DEBUG, "d")) == "<7>wrtfd.app: d"


def test_multiline_messages_become_one_line() -> None:
    line = JournalFormatter().format(_record(logging.ERROR, "a\nb\r\nc"))
    assert "\n" not in line
    assert line == "<3>wrtfd.app: a \\n b \\n c"
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        rec = logging.LogRecord("wrtfd", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    text = TextFormatter().format(rec)
    assert "\n" not in text and "ValueError: boom" in text and " ERROR wrtfd: failed" in text


def test_rate_limiter_counts_suppressed() -> None:
    rl = RateLimiter(10.0)
    assert rl.allow("drop:forza", 0.0) == (True, 0)
    assert rl.allow("drop:forza", 1.0) == (False, 0)
    assert rl.allow("drop:forza", 9.9) == (False, 0)
    assert rl.allow("drop:f1", 5.0) == (True, 0)  # keys are independent
    assert rl.allow("drop:forza", 10.0) == (True, 2)
    assert rl.allow("drop:forza", 20.0) == (True, 0)


@given(times=st.lists(st.floats(0, 1000, allow_nan=False), max_size=60), interval=st.floats(0.1, 100))
def test_rate_limiter_never_passes_two_within_interval(times: list[float], interval: float) -> None:
    rl = RateLimiter(interval)
    passed: list[float] = []
    suppressed_total = 0
    for t in sorted(times):
        ok, held = rl.allow("k", t)
        suppressed_total += held
        if ok:
            passed.append(t)
    assert all(b - a >= interval for a, b in itertools.pairwise(passed))
    assert len(passed) + suppressed_total <= len(times)


@given(
    times=st.lists(st.floats(0, 1000, allow_nan=False), max_size=80),
    interval=st.floats(0.1, 100),
    burst=st.integers(1, 6),
)
def test_rate_limiter_burst_passes_at_most_burst_in_any_interval(
    times: list[float], interval: float, burst: int
) -> None:
    rl = RateLimiter(interval, burst)
    passed: list[float] = []
    suppressed_total = 0
    ordered = sorted(times)
    for t in ordered:
        ok, held = rl.allow("k", t)
        suppressed_total += held
        if ok:
            passed.append(t)
    # any burst + 1 passed events span at least one interval
    assert all(passed[i + burst] - passed[i] >= interval for i in range(len(passed) - burst))
    # the first burst events always pass; nothing held back is forgotten
    assert passed[:burst] == ordered[:burst]
    assert len(passed) + suppressed_total + sum(rl.take_suppressed().values()) == len(times)
    assert rl.take_suppressed() == {}


def test_rate_limiter_burst_then_one_per_interval() -> None:
    rl = RateLimiter(10.0, burst=3)
    assert [rl.allow("s", t)[0] for t in (0.0, 0.1, 0.2, 0.3, 5.0)] == [True, True, True, False, False]
    assert rl.allow("s", 10.0) == (True, 2)  # the first of the burst is 10 s old
    assert rl.allow("s", 10.05) == (False, 0)
    assert rl.allow("s", 10.1) == (True, 1)
    assert rl.allow("other", 10.1) == (True, 0)
    assert rl.allow("s", 10.15) == (False, 0)
    assert rl.take_suppressed() == {"s": 1}


def test_filter_uses_rate_key_only() -> None:
    now = [0.0]
    flt = RateLimitFilter(5.0, clock=lambda: now[0])
    rec = _record(logging.WARNING, "dropped")
    assert flt.filter(rec)
    keyed = [_record(logging.WARNING, "drop") for _ in range(3)]
    for r in keyed:
        r.rate_key = "x"
    assert [flt.filter(r) for r in keyed] == [True, False, False]
    now[0] = 6.0
    late = _record(logging.WARNING, "drop")
    late.rate_key = "x"
    assert flt.filter(late)
    assert late.getMessage() == "drop (2 similar messages suppressed)"


def test_configure_logging_auto_detects_journal_stream() -> None:
    with tempfile.TemporaryFile("w+") as f:
        st_ = os.fstat(f.fileno())
        env = {"JOURNAL_STREAM": f"{st_.st_dev}:{st_.st_ino}"}
        assert under_journal(f, env)
        log = configure_logging(stream=f, env=env)
        log.info("hello %s", "journal")
        f.flush()
        f.seek(0)
        assert f.read() == "<6>wrtfd: hello journal\n"
    buf = io.StringIO()
    assert not under_journal(buf, {"JOURNAL_STREAM": "1:2"})
    log = configure_logging(stream=buf, env={}, level="warning")
    log.info("hidden")
    log.warning("shown")
    out = buf.getvalue()
    assert "hidden" not in out and out.endswith(" WARNING wrtfd: shown\n")
